"""Dropout that is cheap on CPU.

torch's CPU dropout draws one 32-bit random number per element, and on a 2-core machine that
costs more than the matmuls around it (a ``[700, 800]`` feed-forward activation: ~5 ms for the
mask against ~1.3 ms for the matmul that made it). Here every 64-bit draw of torch's generator
gives four 16-bit uniforms. The drop probability is rounded to a multiple
of 1/65536 and kept values are scaled by the exact inverse of the keep probability, so the
expected output equals the input. Other devices use :func:`torch.nn.functional.dropout` (CUDA's
generator is already fast). Masks come from torch's default generator, so
``torch.manual_seed`` makes them reproducible.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_LEVELS = 1 << 16  # 16-bit uniforms


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Zero each element with probability ``p`` (rounded to a multiple of 1/65536 on CPU)
    and scale the rest so the expectation is unchanged; the identity unless ``training``."""
    if not training or p == 0.0:
        return x
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    threshold = round(p * _LEVELS)
    if x.device.type != "cpu" or threshold >= _LEVELS:
        return F.dropout(x, p, training=True)
    if threshold == 0:
        return x
    n = x.numel()
    # All 64 bits random (the plain random_() leaves the sign bit 0); one value of 2^64 is left
    # out, a bias far below anything measurable.
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), 2**63 - 1)
    uniforms = words.view(torch.int16)[:n].view(x.shape)  # in [-2^15, 2^15)
    # Comparing straight into x's dtype is ~4x faster than a bool mask (and its conversion).
    keep = torch.ge(uniforms, threshold - _LEVELS // 2, out=torch.empty_like(x))
    return x * keep.mul_(_LEVELS / (_LEVELS - threshold))


class Dropout(nn.Module):
    """Module form of :func:`dropout`; ``[any shape]`` -> same shape."""

    def __init__(self, p: float = 0.1):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
