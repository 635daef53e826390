"""The encoder-decoder :class:`Transformer` for translation, built from :mod:`seq2seq.core`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from .core import (
    Decoder,
    Dropout,
    Encoder,
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    StackCache,
    StackConfig,
    padding_mask,
)
from .core.config import POSITIONALS
from .tokenization import PAD_ID


@dataclass
class TransformerConfig:
    """Hyper-parameters of :class:`Transformer`.

    Attributes:
        src_vocab_size, tgt_vocab_size: vocabulary sizes (ids ``0..size-1``; 0 is ``<pad>``).
        d_model, n_heads, d_ff, dropout, attention_dropout, activation, norm_first: as in
            :class:`StackConfig` (``attention_dropout=None`` means ``dropout``).
        encoder_layers, decoder_layers: depth of each stack.
        positional: ``"sinusoidal"``, ``"learned"`` (added to embeddings) or ``"rotary"``
            (rotary embeddings inside self-attention).
        max_len: longest sequence (in tokens, specials included) the positions cover.
        tie_embeddings: the output projection reuses the decoder input embedding matrix.
        share_embeddings: source and target use one embedding matrix (needs one vocabulary).
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 256
    n_heads: int = 8
    d_ff: int = 1024
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    attention_dropout: float | None = None
    activation: str = "relu"
    norm_first: bool = True
    positional: str = "sinusoidal"
    max_len: int = 256
    tie_embeddings: bool = True
    share_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "encoder_layers", "decoder_layers", "max_len"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.src_vocab_size <= PAD_ID or self.tgt_vocab_size <= PAD_ID:
            raise ValueError("vocabularies must include <pad>")
        if self.positional not in POSITIONALS:
            raise ValueError(f"positional must be one of {POSITIONALS}, got {self.positional!r}")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs one joint vocabulary, got source {self.src_vocab_size} "
                f"and target {self.tgt_vocab_size} entries (train a joint tokenizer)"
            )
        if self.positional == "sinusoidal" and self.d_model % 2 != 0:
            raise ValueError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        self.stack_config(1)  # validates d_model, n_heads, d_ff, dropout, activation

    def stack_config(self, n_layers: int) -> StackConfig:
        return StackConfig(
            d_model=self.d_model, n_heads=self.n_heads, d_ff=self.d_ff, dropout=self.dropout,
            attention_dropout=self.attention_dropout, activation=self.activation,
            norm_first=self.norm_first, n_layers=n_layers,
            rotary=self.positional == "rotary", max_len=self.max_len,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TransformerConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown TransformerConfig fields {unknown}")
        return cls(**data)


class Transformer(nn.Module):
    """Encoder-decoder Transformer (Vaswani et al.) on the shared core.

    Embeddings are scaled by ``sqrt(d_model)``; all matrices get Xavier-uniform initialisation.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab_size, c.d_model, padding_idx=PAD_ID)
        self.tgt_embed = (
            self.src_embed if c.share_embeddings
            else nn.Embedding(c.tgt_vocab_size, c.d_model, padding_idx=PAD_ID)
        )
        self.src_pos = self._positions()
        self.tgt_pos = self._positions()
        self.encoder = Encoder(c.stack_config(c.encoder_layers))
        self.decoder = Decoder(c.stack_config(c.decoder_layers))
        self.output = nn.Linear(c.d_model, c.tgt_vocab_size, bias=False)
        self.embed_scale = math.sqrt(c.d_model)
        self._reset_parameters()
        if c.tie_embeddings:
            self.output.weight = self.tgt_embed.weight

    def _positions(self) -> nn.Module:
        c = self.config
        if c.positional == "sinusoidal":
            return SinusoidalPositionalEncoding(c.d_model, c.max_len, c.dropout)
        if c.positional == "learned":
            return LearnedPositionalEncoding(c.d_model, c.max_len, c.dropout)
        return _DropoutOnly(c.dropout)  # rotary: positions are applied inside attention

    def _reset_parameters(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)
        with torch.no_grad():  # <pad> embeds to zero (and its gradient is zero)
            self.src_embed.weight[PAD_ID].zero_()
            self.tgt_embed.weight[PAD_ID].zero_()

    def num_parameters(self) -> int:
        """Trainable parameters, counting tied/shared matrices once."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``src`` ids ``[batch, src_len]`` -> ``(memory [batch, src_len, d_model],
        src_mask [batch, 1, 1, src_len])``."""
        mask = padding_mask(src, PAD_ID)
        x = self.src_pos(self.src_embed(src) * self.embed_scale)
        return self.encoder(x, mask), mask

    def _embed_target(self, tgt: torch.Tensor, offset: int) -> torch.Tensor:
        return self.tgt_pos(self.tgt_embed(tgt) * self.embed_scale, offset)

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               cache: StackCache | None = None) -> torch.Tensor:
        """Next-token logits.

        Args:
            tgt_in: decoder input ids ``[batch, tgt_len]`` (with a cache: only the new
                positions, normally ``tgt_len == 1``).
            memory: ``[batch, src_len, d_model]`` from :meth:`encode`.
            src_mask: ``[batch, 1, 1, src_len]`` from :meth:`encode`.
            cache: from ``self.decoder.new_cache()``; positions continue at ``len(cache)``.

        Returns:
            logits ``[batch, tgt_len, tgt_vocab_size]``.
        """
        return self.output(self.decode_hidden(tgt_in, memory, src_mask, cache))

    def decode_hidden(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                      cache: StackCache | None = None) -> torch.Tensor:
        """As :meth:`decode` but stops before the vocabulary projection:
        ``[batch, tgt_len, d_model]``."""
        offset = 0 if cache is None else len(cache)
        return self.decoder(self._embed_target(tgt_in, offset), memory, memory_mask=src_mask, cache=cache)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher-forced logits: ``src [batch, src_len]``, ``tgt_in [batch, tgt_len]`` ->
        ``[batch, tgt_len, tgt_vocab_size]``."""
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask)

    @torch.no_grad()
    def attention(self, src: torch.Tensor, tgt_in: torch.Tensor) -> dict[str, list[torch.Tensor]]:
        """Attention probabilities of a teacher-forced pass.

        Returns:
            ``{"encoder": [per layer [batch, heads, src_len, src_len]],
            "decoder_self": [per layer [batch, heads, tgt_len, tgt_len]],
            "cross": [per layer [batch, heads, tgt_len, src_len]]}``.
        """
        mask = padding_mask(src, PAD_ID)
        x = self.src_pos(self.src_embed(src) * self.embed_scale)
        memory, enc_w = self.encoder.forward_with_weights(x, mask)
        _, dec_w = self.decoder.forward_with_weights(self._embed_target(tgt_in, 0), memory, memory_mask=mask)
        return {
            "encoder": [w["self"] for w in enc_w],
            "decoder_self": [w["self"] for w in dec_w],
            "cross": [w["cross"] for w in dec_w],
        }


class _DropoutOnly(nn.Module):
    """Stands in for an additive positional encoding when positions are rotary."""

    def __init__(self, dropout: float):
        super().__init__()
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return self.dropout(x)
