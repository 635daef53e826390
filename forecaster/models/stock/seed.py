"""The recipe this toolkit started from, kept as a baseline so users can see why it only
looked good.

Kept on purpose: window 7; the scalar input *broadcast* to ``d_model`` by adding the positional
table (no projection); the cumulative log price as the target, so a forecast that copies
yesterday's level already tracks the price curve; ``torch.nn.TransformerEncoder``
(sequence-first) with the default 2048-wide feed-forward; batches stacked from Python lists;
prediction one window at a time.
Fixed, because a baseline must not leak: the scaler is fit on the training rows only (the
seed fit the test part separately).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import MinMaxScaler
from torch import nn

from forecaster.checks import NotEnoughData
from seq2seq.core import sinusoidal_table

log = logging.getLogger(__name__)


class _SeedNet(nn.Module):
    """Sequence-first: ``[window, batch, 1]`` -> ``[window, batch, 1]``."""

    def __init__(self, d_model: int, n_heads: int, n_layers: int, dropout: float, max_len: int):
        super().__init__()
        self.register_buffer("pe", sinusoidal_table(max_len, d_model).unsqueeze(1), persistent=False)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dropout=dropout)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.decoder = nn.Linear(d_model, 1)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        src = src + self.pe[: src.size(0)]  # (T, B, 1) + (T, 1, C): the broadcast, not a projection
        return self.decoder(self.encoder(src, mask))


class SeedRecipe(BaseEstimator):
    """Forecast next-day log returns the seed's way: predict tomorrow's cumulative log price,
    then read the return off as ``predicted level - today's level`` (log closes).

    ``predict(frame)`` returns a Series indexed by the forecast day, like
    :class:`forecaster.CausalTransformerForecaster`; the level forecasts are in ``levels_``.
    """

    def __init__(self, window=7, d_model=200, n_heads=10, n_layers=2, dropout=0.1, batch_size=100,
                 lr=5e-4, max_epochs=10, lr_gamma=0.95, grad_clip=0.7, random_state=None):
        self.window = window
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.dropout = dropout
        self.batch_size = batch_size
        self.lr = lr
        self.max_epochs = max_epochs
        self.lr_gamma = lr_gamma
        self.grad_clip = grad_clip
        self.random_state = random_state

    @staticmethod
    def _levels(frame: pd.DataFrame) -> pd.Series:
        # The log close: the seed's cumulative log price, anchored so that any slice of the
        # history gives the same level on the same day.
        return np.log(frame["close"])

    def _sequences(self, values: np.ndarray) -> list[tuple[torch.Tensor, torch.Tensor]]:
        # One (input, label) pair per window, kept in a Python list as the seed did.
        w = self.window
        return [
            (torch.tensor(values[i : i + w], dtype=torch.float32),
             torch.tensor(values[i + 1 : i + w + 1], dtype=torch.float32))
            for i in range(len(values) - w)
        ]

    def _get_batch(self, pairs, i):
        chunk = pairs[i : i + self.batch_size]
        inputs = torch.stack([p[0] for p in chunk]).T.unsqueeze(-1)  # (T, B, 1)
        targets = torch.stack([p[1] for p in chunk]).T.unsqueeze(-1)
        return inputs, targets

    def fit(self, frame: pd.DataFrame) -> SeedRecipe:
        if self.window < 1 or self.max_epochs < 1:
            raise ValueError("window and max_epochs must be positive")
        seed = 0 if self.random_state is None else int(self.random_state)
        levels = self._levels(frame).to_numpy()
        if len(levels) <= self.window + 1:
            raise NotEnoughData(f"{len(levels)} days are too few for window={self.window}")
        self.scaler_ = MinMaxScaler(feature_range=(-1, 1)).fit(levels[:, None])
        scaled = self.scaler_.transform(levels[:, None])[:, 0]
        pairs = self._sequences(scaled)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.net_ = _SeedNet(self.d_model, self.n_heads, self.n_layers, self.dropout,
                                 max(self.window, 64))
            opt = torch.optim.AdamW(self.net_.parameters(), lr=self.lr)
            sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=self.lr_gamma)
            self.history_ = []
            for epoch in range(self.max_epochs):
                self.net_.train()
                total = 0.0
                for i in range(0, len(pairs), self.batch_size):
                    data, targets = self._get_batch(pairs, i)
                    loss = nn.functional.mse_loss(self.net_(data), targets)
                    opt.zero_grad()
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(self.net_.parameters(), self.grad_clip)
                    opt.step()
                    total += loss.item() * data.size(1)
                sched.step()
                self.history_.append({"epoch": epoch + 1, "train_loss": total / len(pairs)})
        self.n_windows_ = len(pairs)
        return self

    @torch.no_grad()
    def predict(self, frame: pd.DataFrame) -> pd.Series:
        if not hasattr(self, "net_"):
            raise NotFittedError("SeedRecipe is not fitted yet; call fit(frame) first")
        levels = self._levels(frame)
        scaled = self.scaler_.transform(levels.to_numpy()[:, None])[:, 0]
        self.net_.eval()
        preds = []
        for t in range(self.window - 1, len(scaled) - 1):  # one window at a time, as the seed did
            window = torch.tensor(scaled[t - self.window + 1 : t + 1], dtype=torch.float32)
            preds.append(self.net_(window[:, None, None])[-1, 0, 0].item())
        level_pred = self.scaler_.inverse_transform(np.asarray(preds)[:, None])[:, 0]
        index = levels.index[self.window :]
        self.levels_ = pd.Series(level_pred, index=index, name="level_forecast")
        forecast = level_pred - levels.to_numpy()[self.window - 1 : -1]
        return pd.Series(forecast, index=index, name="forecast")

