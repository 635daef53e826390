"""The private network behind :class:`forecaster.models.panel.model.PanelTransformer`.

Each stock's sequence of daily feature vectors goes through the core's causal ``Encoder``
with a sliding-window mask: every layer attends to the last ``window`` days, with rotary
(relative) positions, so the output of day ``t`` depends on days ``t - context .. t`` only
(``context = n_layers * (window - 1)``) and each day is computed once however many days a
batch holds. Optionally one non-causal core ``Encoder`` layer then attends across the stocks
of the same day (masked to the stocks present: every input is from that day or before, so it
cannot leak). A linear head scores; with auxiliary horizons it has one output per horizon,
trained together, and the first is the forecast.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from forecaster.models.encoder import EncoderSizes
from seq2seq.core import Encoder, StackConfig

PANEL_POSITIONALS = ("rotary", "none")
MARKET_MODES = ("none", "gate", "input")


@dataclass(kw_only=True)
class PanelNetConfig(EncoderSizes):
    """The encoder's sizes plus what is this network's own (stored in checkpoints)."""

    n_features: int
    window: int = 20
    positional: str = "rotary"
    cross_stock: bool = False
    max_len: int = 1024
    market: str = "none"
    n_market: int = 0  # trailing input columns that are market context (the same for every stock)
    n_outputs: int = 1  # score heads: the forecast's, then auxiliary horizons' (multi-horizon training)

    def __post_init__(self) -> None:
        if self.n_features < 1 or self.window < 1:
            raise ValueError("n_features and window must be positive")
        if self.positional not in PANEL_POSITIONALS:
            # Absolute positions would tie a day's output to where its batch starts.
            raise ValueError(f"positional must be one of {PANEL_POSITIONALS}, got {self.positional!r}")
        if self.market not in MARKET_MODES:
            raise ValueError(f"market must be one of {MARKET_MODES}, got {self.market!r}")
        if self.n_outputs < 1:
            raise ValueError(f"n_outputs must be positive, got {self.n_outputs}")
        if (self.market == "none") != (self.n_market == 0):
            raise ValueError(f"market={self.market!r} with n_market={self.n_market}")
        self.stack(causal=True)  # validates the layer sizes

    @property
    def context(self) -> int:
        """Days before a day that its output depends on."""
        return self.n_layers * (self.window - 1)

    def stack(self, causal: bool, n_layers: int | None = None) -> StackConfig:
        return self.stack_config(causal=causal, rotary=causal and self.positional == "rotary",
                                 max_len=self.max_len, n_layers=n_layers)


class PanelTransformerNet(nn.Module):
    """``x [stocks, context + days, features (+ market)]`` -> scores ``[days, stocks]`` of the last
    ``days`` positions, given ``present [days, stocks]`` (0 where not present)."""

    def __init__(self, config: PanelNetConfig):
        super().__init__()
        self.config = config
        stock_inputs = config.n_features + (config.n_market if config.market == "input" else 0)
        self.input_proj = nn.Linear(stock_inputs, config.d_model)
        # MASTER's market-guided gating: the day's market rescales each stock feature
        # (F * softmax, so a uniform gate is the identity).
        self.gate = nn.Linear(config.n_market, config.n_features) if config.market == "gate" else None
        self.encoder = Encoder(config.stack(causal=True))
        # x-transformers' idea: across stocks it is the same layer stack, just not causal.
        self.cross = Encoder(config.stack(causal=False, n_layers=1)) if config.cross_stock else None
        self.head = nn.Linear(config.d_model, config.n_outputs)

    def embed(self, x: torch.Tensor, days: int) -> torch.Tensor:
        """``[stocks, T, features]`` -> embeddings of the last ``days`` positions
        ``[days, stocks, d_model]``."""
        if x.size(1) > self.config.max_len:
            raise ValueError(f"{x.size(1)} positions exceed max_len={self.config.max_len}; "
                             "use smaller chunks")
        if self.gate is not None:
            stock, market = x[..., : self.config.n_features], x[..., self.config.n_features:]
            x = stock * (self.config.n_features * torch.softmax(self.gate(market), dim=-1))
        h = self.encoder.forward_local(self.input_proj(x), self.config.window, days)  # (S, days, C)
        return h.transpose(0, 1)  # (days, S, C)

    def forward(self, x: torch.Tensor, present: torch.Tensor, all_outputs: bool = False) -> torch.Tensor:
        """Scores ``[days, stocks]`` of the forecast's head, or ``[days, stocks, n_outputs]``
        of every head with ``all_outputs``."""
        h = self.embed(x, present.size(0))
        if self.cross is not None:
            h = self.cross(h, mask=present[:, None, None, :])
        out = self.head(h).masked_fill(~present[..., None], 0.0)
        return out if all_outputs else out[..., 0]
