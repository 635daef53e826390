"""Encoder and decoder layers and stacks.

As in x-transformers, there is one layer and one stack: a decoder layer is an encoder layer
with a cross-attention block, and a stack differs only by its ``causal`` flag and whether its
layers attend to a memory. The forecaster uses the encoder stack with ``causal=True``.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from .attention import KVCache, MultiHeadAttention
from .config import LayerConfig, StackConfig
from .dropout import Dropout
from .feedforward import FeedForward
from .masks import causal_mask, combine_masks, local_causal_mask
from .positions import RotaryEmbedding


class LayerCache:
    """Key/value caches of one layer: growing self-attention, static cross-attention."""

    def __init__(self, cross_attention: bool):
        self.self_attn = KVCache()
        self.cross_attn = KVCache(static=True) if cross_attention else None

    def reorder(self, index: torch.Tensor) -> None:
        self.self_attn.reorder(index)
        if self.cross_attn is not None:
            self.cross_attn.reorder(index)


class StackCache:
    """The caches of every layer of a stack, for incremental decoding."""

    def __init__(self, n_layers: int, cross_attention: bool):
        self.layers = [LayerCache(cross_attention) for _ in range(n_layers)]

    def __len__(self) -> int:
        """Number of positions already decoded."""
        return len(self.layers[0].self_attn)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep batch rows ``index`` ``[new_batch]`` (beam search reordering)."""
        for layer in self.layers:
            layer.reorder(index)


class _TransformerLayer(nn.Module):
    """Self-attention, optional cross-attention, feed-forward; residuals with pre- or post-norm."""

    def __init__(
        self, config: LayerConfig, cross_attention: bool, rotary: RotaryEmbedding | None = None
    ):
        super().__init__()
        self.config = config
        c = config
        self.norm_first = c.norm_first
        self.self_attn = MultiHeadAttention(c.d_model, c.n_heads, c.attn_dropout, c.bias, rotary)
        self.norm1 = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps, bias=c.bias)
        self.dropout1 = Dropout(c.dropout)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(c.d_model, c.n_heads, c.attn_dropout, c.bias)
            self.norm_cross = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps, bias=c.bias)
            self.dropout_cross = Dropout(c.dropout)
        else:
            self.cross_attn = None
        self.ff = FeedForward(c)
        self.norm2 = nn.LayerNorm(c.d_model, eps=c.layer_norm_eps, bias=c.bias)
        self.dropout2 = Dropout(c.dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        memory: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        cache: LayerCache | None = None,
        need_weights: bool = False,
        last_only: bool = False,
        last: int | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor] | None]:
        """
        Args:
            x: ``[batch, seq, d_model]``.
            mask: self-attention mask, bool broadcastable to ``[batch, heads, seq, keys]``.
            memory: encoder output ``[batch, src_len, d_model]`` (decoder layers).
            memory_mask: bool broadcastable to ``[batch, heads, seq, src_len]``.
            cache: this layer's :class:`LayerCache` for incremental decoding.
            need_weights: also return ``{"self": w, "cross": w}`` per-head weights.
            last_only: compute the output of the last position only (it still attends to
                every position): what a forecast from the end of a window needs.
            last: compute the outputs of the last ``last`` positions only (``last_only`` is
                ``last=1``).

        Returns:
            ``(x [batch, seq or 1, d_model], weights or None)``.
        """
        weights: dict[str, torch.Tensor] = {}
        last = 1 if last_only else last
        if last is not None and mask is not None and mask.size(-2) > 1:
            mask = mask[..., -last:, :]

        def self_block(h: torch.Tensor) -> torch.Tensor:
            query = h[:, -last:] if last else h
            out, w = self.self_attn(
                query, h, h, mask, need_weights, None if cache is None else cache.self_attn
            )
            weights["self"] = w
            return self.dropout1(out)

        def cross_block(h: torch.Tensor) -> torch.Tensor:
            out, w = self.cross_attn(
                h, memory, memory, memory_mask, need_weights,
                None if cache is None else cache.cross_attn,
            )
            weights["cross"] = w
            return self.dropout_cross(out)

        def ff_block(h: torch.Tensor) -> torch.Tensor:
            return self.dropout2(self.ff(h))

        residual = x[:, -last:] if last else x
        if self.norm_first:
            x = residual + self_block(self.norm1(x))
            if self.cross_attn is not None:
                x = x + cross_block(self.norm_cross(x))
            x = x + ff_block(self.norm2(x))
        else:
            x = self.norm1(residual + self_block(x))
            if self.cross_attn is not None:
                x = self.norm_cross(x + cross_block(x))
            x = self.norm2(x + ff_block(x))
        return x, (weights if need_weights else None)


class EncoderLayer(_TransformerLayer):
    """Self-attention + feed-forward. Parameter names follow
    :class:`torch.nn.TransformerEncoderLayer` (``norm1``, ``norm2``, ``ff.linear1``...)."""

    def __init__(self, config: LayerConfig | None = None, rotary: RotaryEmbedding | None = None,
                 **kwargs):
        super().__init__(config or LayerConfig(**kwargs), cross_attention=False, rotary=rotary)


class DecoderLayer(_TransformerLayer):
    """Causal self-attention + cross-attention to a memory + feed-forward."""

    def __init__(self, config: LayerConfig | None = None, rotary: RotaryEmbedding | None = None,
                 **kwargs):
        super().__init__(config or LayerConfig(**kwargs), cross_attention=True, rotary=rotary)


class _Stack(nn.Module):
    layer_class: type[_TransformerLayer]

    def __init__(self, config: StackConfig | None = None, **kwargs):
        super().__init__()
        self.config = config = config or StackConfig(**kwargs)
        self.rotary = (
            RotaryEmbedding(config.head_dim, max_len=config.max_len) if config.rotary else None
        )
        layer_config = LayerConfig(**{k: getattr(config, k) for k in LayerConfig.__dataclass_fields__})
        self.layers = nn.ModuleList(
            self.layer_class(layer_config, rotary=self.rotary) for _ in range(config.n_layers)
        )
        self.norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, bias=config.bias)
            if config.use_final_norm
            else None
        )

    @property
    def causal(self) -> bool:
        return self.config.causal

    def new_cache(self) -> StackCache:
        """An empty cache for incremental decoding (see ``forward(cache=...)``)."""
        return StackCache(len(self.layers), cross_attention=self.layer_class is DecoderLayer)

    def _run(self, x, mask, memory, memory_mask, cache, need_weights, last_only=False):
        if self.causal:
            offset = 0 if cache is None else len(cache)
            # One new position attending to all cached ones needs no causal mask.
            if not (cache is not None and x.size(1) == 1):
                mask = combine_masks(causal_mask(x.size(1), x.device, offset), mask)
        all_weights = []
        for i, layer in enumerate(self.layers):
            x, w = layer(
                x, mask, memory, memory_mask, None if cache is None else cache.layers[i],
                need_weights, last_only and i == len(self.layers) - 1,
            )
            all_weights.append(w)
        if self.norm is not None:
            x = self.norm(x)
        return x, all_weights


class Encoder(_Stack):
    """A stack of :class:`EncoderLayer`; ``causal=True`` in the config makes it a causal
    (decoder-only style) stack without cross-attention."""

    layer_class = EncoderLayer

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None,
                cache: StackCache | None = None, last_only: bool = False) -> torch.Tensor:
        """``x``: ``[batch, seq, d_model]``; ``mask``: bool broadcastable to
        ``[batch, heads, seq, seq]`` (True = may attend). Returns ``[batch, seq, d_model]``, or
        with ``last_only`` the last position's output ``[batch, 1, d_model]`` (the final layer
        then computes one query per sequence; the result equals ``forward(x)[:, -1:]``)."""
        return self._run(x, mask, None, None, cache, False, last_only)[0]

    def forward_with_weights(self, x, mask=None, cache=None):
        """As ``forward`` but also returns a list (per layer) of ``{"self": [B, H, T, T]}``."""
        return self._run(x, mask, None, None, cache, True)

    def forward_local(self, x: torch.Tensor, window: int, keep: int) -> torch.Tensor:
        """A causal stack in which every layer attends to the last ``window`` positions
        (:func:`local_causal_mask`), returning the last ``keep`` positions
        ``[batch, keep, d_model]``.

        Each layer computes only the positions the layers above it read: the top layer
        ``keep``, each one below ``window - 1`` more. The result equals
        ``forward(x, mask=local_causal_mask(T, window))[:, -keep:]``.
        """
        n = len(self.layers)
        mask = local_causal_mask(x.size(1), window, x.device)
        for i, layer in enumerate(self.layers):
            need = min(x.size(1), keep + (n - 1 - i) * (window - 1))
            x, _ = layer(x, mask, last=need)
            mask = mask[-need:, -need:]  # the next layer's sequence is these positions
        if self.norm is not None:
            x = self.norm(x)
        return x[:, -keep:]


class Decoder(_Stack):
    """A causal stack of :class:`DecoderLayer` attending to an encoder memory."""

    layer_class = DecoderLayer

    def __init__(self, config: StackConfig | None = None, **kwargs):
        # A decoder is causal by definition, whatever the config says.
        super().__init__(replace(config or StackConfig(**kwargs), causal=True))

    def forward(self, x: torch.Tensor, memory: torch.Tensor,
                mask: torch.Tensor | None = None, memory_mask: torch.Tensor | None = None,
                cache: StackCache | None = None) -> torch.Tensor:
        """
        Args:
            x: target embeddings ``[batch, tgt_len, d_model]``; with a cache, only the new
                positions (usually ``tgt_len == 1``).
            memory: encoder output ``[batch, src_len, d_model]``.
            mask: extra self-attention mask (the causal mask is added here).
            memory_mask: bool broadcastable to ``[batch, 1, 1, src_len]``, True for real
                source tokens.
            cache: from :meth:`new_cache`; holds every earlier position's keys/values.

        Returns:
            ``[batch, tgt_len, d_model]``.
        """
        return self._run(x, mask, memory, memory_mask, cache, False)[0]

    def forward_with_weights(self, x, memory, mask=None, memory_mask=None, cache=None):
        """As ``forward`` but also returns per-layer ``{"self": ..., "cross": ...}`` weights."""
        return self._run(x, mask, memory, memory_mask, cache, True)
