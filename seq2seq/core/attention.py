"""Scaled dot-product and multi-head attention, with a key/value cache for incremental
decoding. Masks follow :mod:`seq2seq.core.masks`: True means "may attend"."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .positions import RotaryEmbedding


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    need_weights: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """softmax(q k^T / sqrt(d) + mask) v.

    Args:
        q: ``[batch, heads, q_len, head_dim]``.
        k, v: ``[batch, heads, k_len, head_dim]``.
        mask: bool, broadcastable to ``[batch, heads, q_len, k_len]``, True = may attend.
        dropout_p: dropout on the attention probabilities (pass 0.0 in eval mode).
        need_weights: also return the attention probabilities. Without it the fused kernel of
            :func:`torch.nn.functional.scaled_dot_product_attention` runs; with it an explicit
            path that agrees with it numerically.

    Returns:
        ``(output [batch, heads, q_len, head_dim], weights [batch, heads, q_len, k_len] or None)``.
        The weights are taken before dropout.
    """
    if mask is not None and mask.dtype != torch.bool:
        raise TypeError(f"attention masks are boolean (True = may attend), got dtype {mask.dtype}")
    if not need_weights:
        if q.device.type == "cpu" and q.dtype == torch.bfloat16:
            # The CPU's fused kernel runs its backward pass 4.5x slower in bfloat16 than in
            # float32 (measured on AVX-512 BF16), which would undo autocast's gain elsewhere.
            with torch.autocast("cpu", enabled=False):
                out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask,
                                                     dropout_p=dropout_p)
            return out.to(q.dtype), None
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    probs = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return torch.matmul(probs, v), weights


class KVCache:
    """Keys and values of earlier positions for one attention module.

    ``static=False`` (self-attention): each call appends the new positions' keys/values.
    ``static=True`` (cross-attention): keys/values of the memory are computed on the first call
    and reused afterwards. Tensors are ``[batch, heads, length, head_dim]``.
    """

    def __init__(self, static: bool = False):
        self.static = static
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.size(-2)

    @property
    def filled(self) -> bool:
        return self.k is not None

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store new keys/values and return everything cached so far."""
        if self.k is None or self.static:
            # Kept contiguous: the projections arrive as strided views of a packed [batch,
            # length, 2 or 3 * d_model] tensor, and attention over a contiguous cache is
            # faster at every later step (greedy decoding ~2.5% faster, from the cross-attention).
            self.k, self.v = k.contiguous(), v.contiguous()
        else:
            self.k = torch.cat([self.k, k], dim=-2)
            self.v = torch.cat([self.v, v], dim=-2)
        return self.k, self.v

    def reorder(self, index: torch.Tensor) -> None:
        """Select batch rows (beam search): ``index`` is ``[new_batch]`` of old row ids."""
        if self.k is not None:
            self.k = self.k.index_select(0, index)
            self.v = self.v.index_select(0, index)


class MultiHeadAttention(nn.Module):
    """Multi-head attention, batch-first, with the parameter layout of
    :class:`torch.nn.MultiheadAttention` (one ``in_proj`` of shape ``[3*d_model, d_model]``
    and ``out_proj``), so weights copy across directly.

    Args:
        d_model: model width; must be divisible by ``n_heads``.
        n_heads: number of heads.
        dropout: dropout on attention probabilities (training only).
        bias: biases on the projections.
        rotary: a :class:`RotaryEmbedding` applied to queries and keys (self-attention).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        rotary: RotaryEmbedding | None = None,
    ):
        super().__init__()
        if d_model <= 0 or n_heads <= 0:
            raise ValueError(f"d_model and n_heads must be positive, got {d_model}, {n_heads}")
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.dropout = dropout
        if rotary is not None and rotary.head_dim != self.head_dim:
            raise ValueError(f"rotary head_dim {rotary.head_dim} != attention head_dim {self.head_dim}")
        self.rotary = rotary
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        # As torch.nn.MultiheadAttention: Xavier on the packed projection, zero biases.
        nn.init.xavier_uniform_(self.in_proj.weight)
        if self.in_proj.bias is not None:
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape  # (B, T, C) -> (B, H, T, Dh)
        return x.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        cache: KVCache | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """
        Args:
            query: ``[batch, q_len, d_model]``.
            key, value: ``[batch, k_len, d_model]`` (ignored when a static cache is filled).
            mask: bool broadcastable to ``[batch, heads, q_len, k_len_total]``, True = may
                attend, where ``k_len_total`` counts cached keys too.
            need_weights: return per-head attention weights ``[batch, heads, q_len, k_len]``.
            cache: a :class:`KVCache`; the new positions start at ``len(cache)``. A query
                shorter than the new keys stands for their last positions (rotary positions).

        Returns:
            ``(output [batch, q_len, d_model], weights or None)``.
        """
        w, b = self.in_proj.weight, self.in_proj.bias
        d = self.d_model
        offset = len(cache) if cache is not None and not cache.static else 0
        if query is key and key is value:
            # Self-attention: one matmul for q, k and v.
            q, k, v = F.linear(query, w, b).chunk(3, dim=-1)
            q, k, v = self._split(q), self._split(k), self._split(v)
        else:
            q = self._split(F.linear(query, w[:d], None if b is None else b[:d]))
            if cache is not None and cache.static and cache.filled:
                k = v = None
            elif key is value:
                k, v = F.linear(key, w[d:], None if b is None else b[d:]).chunk(2, dim=-1)
                k, v = self._split(k), self._split(v)
            else:
                k = self._split(F.linear(key, w[d : 2 * d], None if b is None else b[d : 2 * d]))
                v = self._split(F.linear(value, w[2 * d :], None if b is None else b[2 * d :]))
        if self.rotary is not None:
            # A query shorter than the new keys holds their last positions (``last_only``).
            q = self.rotary(q, offset if k is None else offset + k.size(-2) - q.size(-2))
            if k is not None:
                k = self.rotary(k, offset)
        if cache is not None:
            k, v = (cache.k, cache.v) if k is None else cache.update(k, v)
        out, weights = scaled_dot_product_attention(
            q, k, v, mask, self.dropout if self.training else 0.0, need_weights
        )
        bsz, _, t, _ = out.shape
        out = out.transpose(1, 2).reshape(bsz, t, d)  # (B, H, T, Dh) -> (B, T, C)
        return self.out_proj(out), weights
