"""Forward+backward time of the core encoder layer vs torch.nn.TransformerEncoderLayer.

Both run in this process, alternating, so machine noise hits them alike. Prints
``encoder_layer_fwd_bwd ours_ms=... torch_ms=... ratio=...`` (ratio = ours / torch; target <= 1.10).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn

from seq2seq.core import EncoderLayer, LayerConfig


def time_fwd_bwd(layer: nn.Module, x: torch.Tensor, ours: bool) -> float:
    start = time.perf_counter()
    out = layer(x)[0] if ours else layer(x)
    out.sum().backward()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ff", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = LayerConfig(d_model=args.d_model, n_heads=args.heads, d_ff=args.ff, dropout=0.1)
    ours = EncoderLayer(cfg).train()
    ref = nn.TransformerEncoderLayer(args.d_model, args.heads, args.ff, dropout=0.1,
                                     batch_first=True).train()
    x = torch.randn(args.batch, args.length, args.d_model)
    ours_ms, ref_ms = [], []
    for i in range(args.warmup + args.repeats):
        # Alternate which goes first so neither always enjoys a warm cache.
        pair = [(ours, True, ours_ms), (ref, False, ref_ms)]
        for layer, is_ours, sink in pair if i % 2 == 0 else reversed(pair):
            layer.zero_grad(set_to_none=True)
            ms = time_fwd_bwd(layer, x, is_ours)
            if i >= args.warmup:
                sink.append(ms)
    o, r = statistics.median(ours_ms), statistics.median(ref_ms)
    print(f"# torch {torch.__version__}, threads={torch.get_num_threads()}, "
          f"batch={args.batch} length={args.length} d_model={args.d_model} heads={args.heads} "
          f"ff={args.ff}, median of {args.repeats}")
    print(f"encoder_layer_fwd_bwd ours_ms={o:.2f} torch_ms={r:.2f} ratio={o / r:.3f}")


if __name__ == "__main__":
    main()
