"""Position-wise feed-forward block."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import LayerConfig
from .dropout import Dropout


class FeedForward(nn.Module):
    """``linear2(dropout(act(linear1(x))))``: ``[batch, seq, d_model]`` -> same shape.

    Parameter names (``linear1``, ``linear2``) match :class:`torch.nn.TransformerEncoderLayer`.
    """

    def __init__(self, config: LayerConfig):
        super().__init__()
        self.linear1 = nn.Linear(config.d_model, config.d_ff, bias=config.bias)
        self.linear2 = nn.Linear(config.d_ff, config.d_model, bias=config.bias)
        self.dropout = Dropout(config.dropout)
        self.activation = F.gelu if config.activation == "gelu" else F.relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
