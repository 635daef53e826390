"""Smoke demo of the shared core: a tiny causal encoder learns to continue a sine wave."""

from __future__ import annotations

import math

import torch
from torch import nn

from seq2seq.core import Encoder, SinusoidalPositionalEncoding, StackConfig


def main() -> None:
    torch.manual_seed(0)
    cfg = StackConfig(d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.0, causal=True)
    proj, pos, enc, head = nn.Linear(1, 32), SinusoidalPositionalEncoding(32), Encoder(cfg), nn.Linear(32, 1)
    params = [*proj.parameters(), *enc.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=3e-3)
    t = torch.arange(0, 2000, dtype=torch.float32)
    series = torch.sin(t * 2 * math.pi / 50)
    windows = series.unfold(0, 33, 7)  # (N, 33) zero-copy views
    x, y = windows[:, :-1, None], windows[:, 1:, None]
    for step in range(201):
        pred = head(enc(pos(proj(x))))
        loss = nn.functional.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step:3d}  next-value MSE {loss.item():.5f}")


if __name__ == "__main__":
    main()
