"""Choose the beam size and length penalty on validation data, not on the test set.

    .venv/bin/python scripts/sweep_decoding.py CKPT [CKPT...] --src val.de.gz --ref val.en.gz \
        --beams 1,4,5,8 --length-penalties 0.6,1.0,1.4 [--threads 2]

Prints one line per checkpoint and setting::

    decode ckpt=best.pt beam=5 lp=1.0 bleu=... chrf=... seconds=...

and, last, the setting with the highest BLEU (``# best ...``). Checkpoints can be compared the
same way (best / averaged / EMA weights of one run). ``A.pt+B.pt+C.pt`` is one ensemble of
checkpoints that share their tokenizers (``seq2seq evaluate -c A.pt -c B.pt -c C.pt``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from seq2seq.checkpoint import load_ensemble
from seq2seq.decoding import DecodeConfig, translate_texts
from seq2seq.evaluation import score
from seq2seq.text import read_lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoints", nargs="+", help="checkpoint paths; A.pt+B.pt is an ensemble")
    p.add_argument("--src", required=True, type=Path)
    p.add_argument("--ref", required=True, type=Path)
    p.add_argument("--beams", default="1,5")
    p.add_argument("--length-penalties", default="1.0")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sources, refs = read_lines(args.src, allow_blank=True), read_lines(args.ref, allow_blank=True)
    if len(sources) != len(refs):
        raise SystemExit(f"{args.src} has {len(sources)} lines but {args.ref} has {len(refs)}")
    best = None
    for spec in args.checkpoints:
        paths = [Path(x) for x in spec.split("+")]
        loaded = load_ensemble(paths)
        models, name = [m.model for m in loaded], "+".join(path.name for path in paths)
        for beam in (int(b) for b in args.beams.split(",")):
            # The length penalty only ranks beam hypotheses: greedy decoding ignores it.
            penalties = [1.0] if beam == 1 else [float(x) for x in args.length_penalties.split(",")]
            for lp in penalties:
                start = time.perf_counter()
                hyps = translate_texts(models, loaded[0].src_tokenizer, loaded[0].tgt_tokenizer, sources,
                                       DecodeConfig(beam_size=beam, length_penalty=lp))
                seconds = time.perf_counter() - start
                s = score(hyps, refs)
                print(f"decode ckpt={name} beam={beam} lp={lp:g} bleu={s.bleu:.2f} chrf={s.chrf:.2f} "
                      f"seconds={seconds:.0f}", flush=True)
                if best is None or s.bleu > best[0]:
                    best = (s.bleu, spec, beam, lp)
    assert best is not None
    print(f"# best: {best[1]} beam {best[2]} length penalty {best[3]:g} (validation BLEU {best[0]:.2f})")


if __name__ == "__main__":
    main()
