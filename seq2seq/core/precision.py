"""Training precision (``seq2seq train --precision fp32|bf16|auto``; the forecaster trains in
float32).

``bf16`` runs the forward pass under :func:`torch.autocast` with bfloat16: matrix products in
bfloat16, weights, optimizer state and loss in float32. Whether that is faster depends on the
hardware (measured: an AVX-512 BF16 CPU ran bfloat16 products 2.2-2.5x faster than float32, an
AVX2 CPU 17x slower), so ``auto`` measures it on the device instead of guessing from its name.
"""

from __future__ import annotations

import contextlib
import logging
import time

import torch

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16", "auto")


def _seconds(fn, repeats: int) -> float:
    fn()  # warm-up: the first call pays for kernel selection
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def bf16_speedup(device: torch.device | str = "cpu", size: int = 512, repeats: int = 5) -> float:
    """float32 time / bfloat16 time of a few ``[4*size, size] @ [size, 2*size]`` products on
    ``device`` (best of ``repeats``); > 1 means bfloat16 is faster."""
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return 0.0
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(4 * size, size, generator=gen).to(device)
    b = torch.randn(size, 2 * size, generator=gen).to(device)

    def timer(x: torch.Tensor, y: torch.Tensor) -> float:
        def run() -> None:
            for _ in range(4):
                x @ y
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        return _seconds(run, repeats)

    try:
        fp32 = timer(a, b)
        bf16 = timer(a.bfloat16(), b.bfloat16())
    except RuntimeError:  # no bfloat16 matmul on this device
        return 0.0
    return fp32 / max(bf16, 1e-12)


def resolve_precision(precision: str, device: torch.device | str = "cpu", min_speedup: float = 1.3) -> str:
    """``"fp32"`` or ``"bf16"``; ``"auto"`` picks bf16 when :func:`bf16_speedup` on ``device`` is at
    least ``min_speedup`` (and logs the measurement)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision != "auto":
        return precision
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        return "fp32"
    speedup = bf16_speedup(device)
    chosen = "bf16" if speedup >= min_speedup else "fp32"
    logger.info("precision auto: bfloat16 matrix products run %.2fx float32's speed on %s -> %s",
                speedup, device, chosen)
    return chosen


def autocast(device: torch.device | str, precision: str) -> contextlib.AbstractContextManager:
    """Context for a training forward pass: bfloat16 autocast for ``"bf16"``, nothing for ``"fp32"``."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision != "bf16":
        raise ValueError(f"resolve the precision first ('fp32' or 'bf16'), got {precision!r}")
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
