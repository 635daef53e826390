"""The private network behind :class:`forecaster.panel_model.PanelTransformer`.

Each stock's window of daily feature vectors goes through the core's causal ``Encoder``; the
last position's output is the stock's embedding for the day. Optionally one non-causal core
``Encoder`` layer attends across the stocks of the same day (masked to the stocks present:
every input is from the signal day or before, so it cannot leak). A linear head scores.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from seq2seq.core import Encoder, LearnedPositionalEncoding, SinusoidalPositionalEncoding, StackConfig
from seq2seq.core.config import POSITIONALS


@dataclass
class PanelNetConfig:
    """Everything needed to rebuild the network (stored in checkpoints)."""

    n_features: int
    window: int = 20
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    d_ff: int = 64
    dropout: float = 0.1
    positional: str = "sinusoidal"
    cross_stock: bool = False
    norm_first: bool = True

    def __post_init__(self) -> None:
        if self.n_features < 1 or self.window < 1:
            raise ValueError("n_features and window must be positive")
        if self.positional not in POSITIONALS:
            raise ValueError(f"positional must be one of {POSITIONALS}, got {self.positional!r}")
        self.stack(causal=True)  # validates the layer sizes

    def stack(self, causal: bool, n_layers: int | None = None) -> StackConfig:
        return StackConfig(
            d_model=self.d_model, n_heads=self.n_heads, d_ff=self.d_ff,
            n_layers=n_layers or self.n_layers, dropout=self.dropout, attention_dropout=0.0,
            norm_first=self.norm_first, causal=causal,
            rotary=causal and self.positional == "rotary", max_len=self.window,
        )

    def to_dict(self) -> dict:
        return asdict(self)


class PanelTransformerNet(nn.Module):
    """``x [days, stocks, window, features]``, ``present [days, stocks]`` -> scores
    ``[days, stocks]`` (0 where not present)."""

    def __init__(self, config: PanelNetConfig):
        super().__init__()
        self.config = config
        self.input_proj = nn.Linear(config.n_features, config.d_model)
        if config.positional == "sinusoidal":
            self.positions = SinusoidalPositionalEncoding(config.d_model, config.window)
        elif config.positional == "learned":
            self.positions = LearnedPositionalEncoding(config.d_model, config.window)
        else:  # rotary: inside attention
            self.positions = None
        self.encoder = Encoder(config.stack(causal=True))
        # x-transformers' idea: across stocks it is the same layer stack, just not causal.
        self.cross = Encoder(config.stack(causal=False, n_layers=1)) if config.cross_stock else None
        self.head = nn.Linear(config.d_model, 1)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """``[n, window, features]`` -> each window's last-position embedding ``[n, d_model]``."""
        h = self.input_proj(x)
        if self.positions is not None:
            h = self.positions(h)
        return self.encoder(h, last_only=True)[:, -1]

    def forward(self, x: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        B, S = present.shape
        h = x.new_zeros(B, S, self.config.d_model)
        h[present] = self.embed(x[present])  # only the stocks present cost compute
        if self.cross is not None:
            h = self.cross(h, mask=present[:, None, None, :])
        return self.head(h).squeeze(-1).masked_fill(~present, 0.0)
