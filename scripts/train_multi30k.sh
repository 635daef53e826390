#!/usr/bin/env bash
# Multi30k German->English recipe for an idle 2-core CPU: about 58 minutes of wall time in all.
#
#   scripts/train_multi30k.sh [OUT_DIR] > runs/multi30k.log 2>&1    (OUT_DIR default runs/multi30k)
#
# Trains a joint-BPE, shared-embedding 3+3-layer Transformer for at most MAX_MINUTES of training
# (the epoch in progress is cut short at the limit; the learning rate decays linearly to zero
# at that limit), keeps an exponential moving average of the
# weights (decay 0.998) and averages the last 5 epoch checkpoints, keeps whichever of best.pt /
# averaged.pt / ema0.998.pt has the highest validation BLEU, then scores test_2016_flickr with
# beam 5 (beam size and length penalty chosen on the validation set: scripts/sweep_decoding.py).
# Data: ../shared/data/multi30k (never copied here).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/multi30k}
shift || true  # the remaining arguments go to `seq2seq train` (ablations: --dropout 0.2 ...)
DATA=${DATA:-../shared/data/multi30k}
MAX_MINUTES=${MAX_MINUTES:-57}
PY=${PY:-.venv/bin/python}
# Two torch threads on an idle machine (~1.7x faster than one). On a machine shared with other
# work use THREADS=1: two OpenMP threads then stall on each other (measured 7x slower).
THREADS=${THREADS:-2}
mkdir -p "$OUT"
start=$(date +%s)

$PY -m seq2seq.cli train \
  --train-src "$DATA/train.de.gz" --train-tgt "$DATA/train.en.gz" \
  --val-src "$DATA/val.de.gz" --val-tgt "$DATA/val.en.gz" \
  --out-dir "$OUT" --tokenizer bpe --vocab-size 6000 --joint-vocab --share-embeddings \
  --d-model 256 --heads 8 --ff 512 --encoder-layers 3 --decoder-layers 3 --dropout 0.1 \
  --attention-dropout 0 --epochs 100 --max-minutes "$MAX_MINUTES" --max-tokens 2000 --lr 2e-3 \
  --warmup 300 --lr-schedule linear --label-smoothing 0.1 --clip-norm 1.0 --average-last 5 --ema 0.998 \
  --val-bleu-sentences 500 \
  --seed 1 --threads "$THREADS" --device auto "$@"

# Keep the checkpoint with the highest (greedy, 500-sentence) validation BLEU.
CKPT=$($PY - "$OUT" <<'PYEOF'
import sys
from pathlib import Path
from seq2seq.checkpoint import load_checkpoint
out = Path(sys.argv[1])
best = ("best.pt", -1.0)
for path in [out / "best.pt", out / "averaged.pt", *sorted(out.glob("ema*.pt"))]:
    name = path.name
    if path.is_file():
        bleu = load_checkpoint(out / name)["meta"].get("record", {}).get("val_bleu", -1.0)
        print(f"{name}: validation BLEU {bleu:.2f}", file=sys.stderr)
        if bleu > best[1]:
            best = (name, bleu)
print(out / best[0])
PYEOF
)
echo "chosen checkpoint: $CKPT"

$PY -m seq2seq.cli evaluate -c "$CKPT" --src "$DATA/test_2016_flickr.de.gz" \
  --ref "$DATA/test_2016_flickr.en.gz" --beam 5 --length-penalty 1.0 --threads "$THREADS" \
  -o "$OUT/test_2016_flickr.hyp.en" --json "$OUT/test_scores.json"
echo "total wall time: $(( ($(date +%s) - start) / 60 )) min $(( ($(date +%s) - start) % 60 )) s"
