"""Attention masks.

The one convention of this toolkit, used by every module that takes a mask:

    **True means "may attend", False means "blocked".**

This is the convention of :func:`torch.nn.functional.scaled_dot_product_attention` (and the
opposite of ``torch.nn.MultiheadAttention``'s boolean ``attn_mask``). Masks are boolean tensors
broadcastable to ``[batch, heads, query_len, key_len]``; combine them with ``&``.
"""

from __future__ import annotations

import torch


def causal_mask(length: int, device: torch.device | str | None = None, offset: int = 0) -> torch.Tensor:
    """Lower-triangular mask: query ``i`` may attend to keys ``0..i``.

    Args:
        length: number of query positions.
        device: device of the returned tensor.
        offset: number of earlier positions already held in a key/value cache; the keys are
            then ``offset + length`` long and query ``i`` sits at absolute position
            ``offset + i``.

    Returns:
        bool ``[length, offset + length]``, True where attention is allowed.
    """
    if length < 0 or offset < 0:
        raise ValueError(f"causal_mask needs length >= 0 and offset >= 0, got {length}, {offset}")
    q = torch.arange(length, device=device).unsqueeze(1) + offset
    k = torch.arange(offset + length, device=device).unsqueeze(0)
    return k <= q


def local_causal_mask(length: int, window: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Sliding-window causal mask: query ``i`` may attend to keys ``i - window + 1 .. i``.

    A causal stack of ``n`` such layers sees ``n * (window - 1) + 1`` positions back, so
    every position of a long sequence is computed once instead of once per window.

    Returns:
        bool ``[length, length]``, True where attention is allowed.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    q = torch.arange(length, device=device).unsqueeze(1)
    k = torch.arange(length, device=device).unsqueeze(0)
    return (k <= q) & (k > q - window)


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Mask out padded keys.

    Args:
        tokens: integer ids ``[batch, length]``.
        pad_id: the padding id.

    Returns:
        bool ``[batch, 1, 1, length]``, True for real tokens (keys that may be attended to).
    """
    if tokens.dim() != 2:
        raise ValueError(f"padding_mask expects token ids [batch, length], got shape {tuple(tokens.shape)}")
    return (tokens != pad_id)[:, None, None, :]


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of the given masks (``None`` entries are ignored); ``None`` if all are."""
    out = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else out & m
    return out
