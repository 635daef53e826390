"""The private network behind :class:`forecaster.CausalTransformerForecaster`: an input
projection, positions and the core's encoder stack with ``causal=True``, and a head on every
position."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from forecaster.checks import check_choice
from forecaster.models.encoder import EncoderSizes
from seq2seq.core import (
    Encoder,
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    StackConfig,
)
from seq2seq.core.config import POSITIONALS


@dataclass(kw_only=True)
class NetConfig(EncoderSizes):
    """The encoder's sizes plus what is this network's own (stored in checkpoints)."""

    n_features: int
    n_outputs: int
    window: int = 60
    attention_dropout: float = 0.0
    positional: str = "sinusoidal"

    def __post_init__(self) -> None:
        if self.n_features < 1 or self.n_outputs < 1 or self.window < 1:
            raise ValueError("n_features, n_outputs and window must be positive")
        check_choice("positional", self.positional, POSITIONALS)
        self.stack()  # validates the layer sizes

    def stack(self) -> StackConfig:
        return self.stack_config(causal=True, rotary=self.positional == "rotary", max_len=self.window,
                                 attention_dropout=self.attention_dropout)


class CausalTransformerNet(nn.Module):
    """``[batch, window, n_features]`` -> ``[batch, window, n_outputs]``; output ``t`` sees
    inputs ``0..t`` only."""

    def __init__(self, config: NetConfig):
        super().__init__()
        self.config = config
        self.input_proj = nn.Linear(config.n_features, config.d_model)
        if config.positional == "sinusoidal":
            self.positions = SinusoidalPositionalEncoding(config.d_model, config.window)
        elif config.positional == "learned":
            self.positions = LearnedPositionalEncoding(config.d_model, config.window)
        else:  # rotary: applied inside attention by the encoder stack
            self.positions = None
        self.encoder = Encoder(config.stack())
        self.head = nn.Linear(config.d_model, config.n_outputs)

    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        h = self.input_proj(x)  # (B, T, F) -> (B, T, C)
        return h if self.positions is None else self.positions(h)

    def forward(self, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """``[batch, window, n_features]`` -> ``[batch, window, n_outputs]``, or with
        ``last_only`` the forecast from the end of each window ``[batch, 1, n_outputs]``."""
        return self.head(self.encoder(self._embed(x), last_only=last_only))  # (B, T or 1, n_out)

    def forward_with_weights(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Also returns each layer's self-attention ``[batch, heads, window, window]``."""
        h, weights = self.encoder.forward_with_weights(self._embed(x))
        return self.head(h), [w["self"] for w in weights]
