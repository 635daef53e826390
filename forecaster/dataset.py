"""The dataset handler of the panel models (Qlib's handler + dataset, in one small room):
features, their processor, labels and the windows a network reads, for one panel.

Shapes: features ``[days, stocks, features]``; a day batch of windows
``[days, stocks, window, features]``; labels and masks ``[days, stocks]``, rows by signal day.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from .factors import feature_tensor
from .labels import normalise_per_day, tradeable_label
from .panel import Panel


@dataclass
class WindowData:
    """Processed inputs of one panel, ready to be cut into day batches.

    Attributes:
        dates, codes: the panel's calendar ``[D]`` and stocks ``[N]``.
        windows: ``[D, N, F, L]`` view over the zero-padded processed features.
        present: ``[D, N]`` a stock has an input window that day (it has a bar and at least
            ``window`` days since its first bar).
        label: ``[D, N]`` raw tradeable label (NaN where none), or None when not needed.
        target: ``[D, N]`` the per-day normalised label the loss sees.
    """

    dates: pd.DatetimeIndex
    codes: np.ndarray
    windows: torch.Tensor
    present: np.ndarray
    label: np.ndarray | None = None
    target: np.ndarray | None = None

    def batch(self, days: np.ndarray) -> tuple[torch.Tensor, ...]:
        """``(x [B, N, L, F], target [B, N], mask [B, N], present [B, N])`` for signal days."""
        days = np.asarray(days)
        x = self.windows[torch.as_tensor(days)].permute(0, 1, 3, 2)
        present = torch.as_tensor(self.present[days])
        if self.target is None:
            target = torch.zeros(present.shape)
            mask = torch.zeros(present.shape, dtype=torch.bool)
        else:
            y = self.target[days]
            mask = torch.as_tensor(np.isfinite(y)) & present
            target = torch.as_tensor(np.nan_to_num(y), dtype=torch.float32)
        return x.contiguous(), target, mask, present


def input_present(panel: Panel, window: int) -> np.ndarray:
    """``[D, N]``: the stock has a bar on the day and ``window`` days since its first bar."""
    since = np.cumsum(panel.listed, axis=0)
    return panel.listed & (since >= window)


def build_windows(panel: Panel, features: tuple[str, ...], processor, window: int,
                  horizon: int | None = None, execution: str = "next_open",
                  label_norm: str = "rank", drop_tails: float = 0.0) -> WindowData:
    """Features processed by the (fitted) ``processor``, windows, and with ``horizon`` the
    labels."""
    X = processor.transform(feature_tensor(panel, features))
    padded = np.concatenate([np.zeros((window - 1,) + X.shape[1:], dtype=np.float32), X])
    windows = torch.from_numpy(padded).unfold(0, window, 1)  # [D, N, F, L], a view
    data = WindowData(panel.dates, panel.codes, windows, input_present(panel, window))
    if horizon is not None:
        label, _ = tradeable_label(panel, horizon, execution)
        data.label = label
        data.target = normalise_per_day(label, label_norm, drop_tails)
    return data
