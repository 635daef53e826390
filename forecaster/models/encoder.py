"""The encoder's sizes, declared once for both Transformers of the package: the single-stock
network (:mod:`forecaster.models.stock.network`) and the panel network
(:mod:`forecaster.models.panel.network`) extend :class:`EncoderSizes` with what is their own
(inputs, outputs, window, positions), and both turn it into the core's ``StackConfig``."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from seq2seq.core import StackConfig


@dataclass(kw_only=True)
class EncoderSizes:
    """Width, heads, depth, feed-forward size, dropout and norm placement of the encoder stack
    (validated by the core's ``StackConfig``)."""

    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 64
    dropout: float = 0.1
    norm_first: bool = True

    def stack_config(self, *, causal: bool, rotary: bool, max_len: int, n_layers: int | None = None,
                     attention_dropout: float = 0.0) -> StackConfig:
        return StackConfig(
            d_model=self.d_model, n_heads=self.n_heads, d_ff=self.d_ff,
            n_layers=n_layers or self.n_layers, dropout=self.dropout,
            attention_dropout=attention_dropout, norm_first=self.norm_first, causal=causal,
            rotary=rotary, max_len=max_len,
        )

    def to_dict(self) -> dict:
        """Everything needed to rebuild the network (stored in checkpoints)."""
        return asdict(self)
