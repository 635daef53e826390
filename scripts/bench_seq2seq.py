"""Speed of the translation model, each figure against a reference measured in the same run.

Prints one line per figure, ``name ours=... reference=... ratio=...`` (ratio = ours / reference,
higher is better):

- ``train_tokens_per_s``: target tokens/s of a training step (forward, label-smoothed loss,
  backward, AdamW) of :class:`seq2seq.model.Transformer` vs ``torch.nn.Transformer`` with the
  same embeddings, sinusoidal positions and tied output projection (d_model 256, 3+3 layers,
  8 heads, ff 512, batch 128; target >= 1.0).
- ``train_bf16_tokens_per_s``: the same training step of our model under bfloat16 autocast
  (``--precision bf16``) vs float32 (the factor ``--precision auto`` rests on; > 1 only on CPUs
  with native bfloat16 products, AVX-512 BF16 or AMX).
- ``greedy_cache_sentences_per_s``: greedy decoding with the key/value cache vs re-decoding the
  whole prefix every step (batch 32, 20 steps; target >= 3.0).
- ``beam5_sentences_per_s``: beam search (beam 5) with the cache vs without it.

Measurements alternate between ours and the reference so machine noise hits both alike.

``--threads N`` calls ``torch.set_num_threads``, which also turns MKL's dynamic threading off;
CPU attention over many queries then runs ~1.5x slower ([32, 8, 20, 32]: 0.70 vs 0.45 ms at 2
threads), one query (a cached step) is unaffected. The re-decoding references therefore run
slower with ``--threads 2`` than with torch's default 2 threads, and the header says which
setting a run used.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from seq2seq.core import SinusoidalPositionalEncoding, autocast, causal_mask
from seq2seq.decoding import beam_search, greedy_decode
from seq2seq.model import Transformer, TransformerConfig
from seq2seq.tokenization import EOS_ID, PAD_ID
from seq2seq.training import label_smoothed_loss


class TorchTransformer(nn.Module):
    """The reference: ``torch.nn.Transformer`` with our embedding/position/output layout."""

    def __init__(self, vocab: int, d_model: int, heads: int, layers: int, ff: int, dropout: float):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model, padding_idx=PAD_ID)
        self.pos = SinusoidalPositionalEncoding(d_model, 512, dropout)
        self.transformer = nn.Transformer(d_model, heads, layers, layers, ff, dropout, batch_first=True,
                                          norm_first=True)
        self.output = nn.Linear(d_model, vocab, bias=False)
        self.output.weight = self.embed.weight
        self.scale = d_model**0.5

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        src_pad = src == PAD_ID
        tgt_mask = ~causal_mask(tgt_in.size(1), src.device)  # torch: True = blocked
        h = self.transformer(
            self.pos(self.embed(src) * self.scale), self.pos(self.embed(tgt_in) * self.scale),
            tgt_mask=tgt_mask, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )
        return self.output(h)


def _batch(vocab: int, batch: int, src_len: int, tgt_len: int, gen: torch.Generator):
    """Random ids with realistic ragged lengths (padding at the end of shorter rows)."""
    src = torch.randint(4, vocab, (batch, src_len), generator=gen)
    tgt = torch.randint(4, vocab, (batch, tgt_len + 1), generator=gen)
    for i in range(batch):
        cut = int(torch.randint(src_len * 3 // 4, src_len + 1, (1,), generator=gen))
        src[i, cut:] = PAD_ID
        tgt[i, cut:] = PAD_ID
    return src, tgt[:, :-1], tgt[:, 1:]


def bench_training(args) -> tuple[float, float]:
    torch.manual_seed(0)
    cfg = TransformerConfig(args.vocab, args.vocab, d_model=256, n_heads=8, d_ff=512, encoder_layers=3,
                            decoder_layers=3, dropout=0.1, share_embeddings=True)
    ours = Transformer(cfg).train()
    ref = TorchTransformer(args.vocab, 256, 8, 3, 512, 0.1).train()
    n_ours = ours.num_parameters()
    n_ref = sum(p.numel() for p in ref.parameters())
    assert abs(n_ours - n_ref) / n_ref < 0.01, (n_ours, n_ref)
    opts = {id(m): torch.optim.AdamW(m.parameters(), lr=1e-4) for m in (ours, ref)}
    gen = torch.Generator().manual_seed(0)
    src, tgt_in, tgt_out = _batch(args.vocab, 128, args.length, args.length, gen)
    n_tokens = int((tgt_out != PAD_ID).sum())
    times: dict[int, list[float]] = {id(ours): [], id(ref): []}
    for i in range(args.train_warmup + args.train_repeats):
        pair = [ours, ref] if i % 2 == 0 else [ref, ours]
        for model in pair:
            start = time.perf_counter()
            loss, _, n = label_smoothed_loss(model(src, tgt_in), tgt_out, 0.1)
            opts[id(model)].zero_grad(set_to_none=True)
            (loss / n).backward()
            opts[id(model)].step()
            if i >= args.train_warmup:
                times[id(model)].append(time.perf_counter() - start)
    return n_tokens / statistics.median(times[id(ours)]), n_tokens / statistics.median(times[id(ref)])


def bench_precision(args) -> tuple[float, float]:
    """Target tokens/s of our training step under bfloat16 autocast and in float32."""
    torch.manual_seed(0)
    cfg = TransformerConfig(args.vocab, args.vocab, d_model=256, n_heads=8, d_ff=512, encoder_layers=3,
                            decoder_layers=3, dropout=0.1, attention_dropout=0.0, share_embeddings=True)
    model = Transformer(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)
    src, tgt_in, tgt_out = _batch(args.vocab, 128, args.length, args.length, gen)
    n_tokens = int((tgt_out != PAD_ID).sum())
    times: dict[str, list[float]] = {"bf16": [], "fp32": []}
    for i in range(args.train_warmup + args.train_repeats):
        for precision in (("bf16", "fp32") if i % 2 == 0 else ("fp32", "bf16")):
            start = time.perf_counter()
            with autocast("cpu", precision):
                logits = model(src, tgt_in)
            loss, _, n = label_smoothed_loss(logits, tgt_out, 0.1)
            opt.zero_grad(set_to_none=True)
            (loss / n).backward()
            opt.step()
            if i >= args.train_warmup:
                times[precision].append(time.perf_counter() - start)
    return n_tokens / statistics.median(times["bf16"]), n_tokens / statistics.median(times["fp32"])


def _decode_model(args) -> Transformer:
    torch.manual_seed(0)
    cfg = TransformerConfig(args.vocab, args.vocab, d_model=256, n_heads=8, d_ff=512, encoder_layers=3,
                            decoder_layers=3, dropout=0.0, share_embeddings=True)
    model = Transformer(cfg).eval()
    with torch.no_grad():  # no <eos> from the untrained model: every sentence runs all steps
        model.tgt_embed.weight[EOS_ID].zero_()
    return model


def bench_decoding(args, fn, batch: int, repeats: int) -> tuple[float, float]:
    model = _decode_model(args)
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(4, args.vocab, (batch, args.length), generator=gen)
    src[:, -1] = EOS_ID
    times: dict[bool, list[float]] = {True: [], False: []}
    outs = {}
    for i in range(1 + repeats):
        for cached in ((True, False) if i % 2 == 0 else (False, True)):
            start = time.perf_counter()
            outs[cached] = fn(model, src, use_cache=cached)
            if i >= 1:
                times[cached].append(time.perf_counter() - start)
    assert outs[True] == outs[False], "cached and uncached decoding disagree"
    assert all(len(o) == args.steps for o in outs[True]), "expected every sentence to run all steps"
    return batch / statistics.median(times[True]), batch / statistics.median(times[False])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--vocab", type=int, default=6000,
                   help="shared vocabulary size (6000: the joint BPE of scripts/train_multi30k.sh)")
    p.add_argument("--length", type=int, default=20, help="source (and training target) length")
    p.add_argument("--steps", type=int, default=20, help="decoding steps")
    p.add_argument("--train-warmup", type=int, default=2)
    p.add_argument("--train-repeats", type=int, default=6)
    p.add_argument("--decode-repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    how = "set by --threads" if args.threads > 0 else "torch's default"
    print(f"# torch {torch.__version__}, threads={torch.get_num_threads()} ({how}), vocab={args.vocab}, "
          f"length={args.length}, decode steps={args.steps}; medians; ratio = ours / reference")
    ours, ref = bench_training(args)
    print(f"train_tokens_per_s ours={ours:.0f} reference={ref:.0f} ratio={ours / ref:.3f}", flush=True)
    ours, ref = bench_precision(args)
    print(f"train_bf16_tokens_per_s ours={ours:.0f} reference={ref:.0f} ratio={ours / ref:.3f}", flush=True)

    def greedy(model, src, use_cache):
        return greedy_decode(model, src, max_len_ratio=0.0, max_len_extra=args.steps, use_cache=use_cache)

    def beam5(model, src, use_cache):
        return beam_search(model, src, beam_size=5, max_len_ratio=0.0, max_len_extra=args.steps,
                           use_cache=use_cache)

    ours, ref = bench_decoding(args, greedy, 32, args.decode_repeats)
    print(f"greedy_cache_sentences_per_s ours={ours:.1f} reference={ref:.1f} ratio={ours / ref:.3f}",
          flush=True)
    ours, ref = bench_decoding(args, beam5, 32, max(1, args.decode_repeats // 2))
    print(f"beam5_sentences_per_s ours={ours:.1f} reference={ref:.1f} ratio={ours / ref:.3f}", flush=True)


if __name__ == "__main__":
    main()
