"""Positional encodings: sinusoidal and learned (added to embeddings) and rotary (RoPE,
applied to queries and keys inside attention).

All take a position ``offset`` so that incremental decoding with a key/value cache places the
new tokens at their absolute positions.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .dropout import Dropout


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """The table of "Attention Is All You Need":
    ``PE[pos, 2i] = sin(pos / 10000^(2i/d))`` and ``PE[pos, 2i+1] = cos(...)``.

    Returns:
        float32 ``[max_len, d_model]``.
    """
    if d_model % 2 != 0:
        raise ValueError(f"sinusoidal positional encoding needs an even d_model, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * div)
    table[:, 1::2] = torch.cos(position * div)
    return table.float()


def _check_range(name: str, offset: int, length: int, max_len: int) -> None:
    if offset < 0 or offset + length > max_len:
        raise ValueError(
            f"{name}: positions {offset}..{offset + length - 1} exceed max_len={max_len}; "
            "build the encoding with a larger max_len"
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to batch-first inputs ``[batch, seq, d_model]``."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x``: ``[batch, seq, d_model]`` -> same shape, positions ``offset..offset+seq-1``."""
        _check_range("SinusoidalPositionalEncoding", offset, x.size(1), self.max_len)
        return self.dropout(x + self.pe[offset : offset + x.size(1)].to(x.dtype))


class LearnedPositionalEncoding(nn.Module):
    """Adds a trained embedding per absolute position to ``[batch, seq, d_model]``."""

    def __init__(self, d_model: int, max_len: int = 1024, dropout: float = 0.0):
        super().__init__()
        self.d_model = d_model
        self.max_len = max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_range("LearnedPositionalEncoding", offset, x.size(1), self.max_len)
        return self.dropout(x + self.embedding.weight[offset : offset + x.size(1)])


class RotaryEmbedding(nn.Module):
    """Rotary position embedding (Su et al., RoFormer), rotate-half layout.

    Applied to queries and keys ``[batch, heads, seq, head_dim]``; the dot product between a
    rotated query at position m and a rotated key at position n then depends on m - n only.
    """

    def __init__(self, head_dim: int, max_len: int = 4096, base: float = 10000.0):
        super().__init__()
        if head_dim % 2 != 0:
            raise ValueError(f"RotaryEmbedding needs an even head_dim, got {head_dim}")
        self.head_dim = head_dim
        self.max_len = max_len
        self.base = base
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        angles = torch.arange(max_len, dtype=torch.float64)[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)  # (T, Dh)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat([-x2, x1], dim=-1)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``x``: ``[batch, heads, seq, head_dim]`` at positions ``offset..`` -> same shape."""
        seq = x.size(-2)
        _check_range("RotaryEmbedding", offset, seq, self.max_len)
        cos = self.cos[offset : offset + seq].to(x.dtype)
        sin = self.sin[offset : offset + seq].to(x.dtype)
        return x * cos + self._rotate_half(x) * sin
