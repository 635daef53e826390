"""Feature processors fitted on the training segment only (Qlib's ``RobustZScoreNorm`` and
``CSRankNorm``), with state that saves and loads.

A processor sees ``[days, stocks, features]`` arrays. ``fit(X, dates, up_to=cut)`` learns
from rows dated up to ``cut`` only: the leakage rule lives here, once. Statistics are pooled
over all stocks, never per stock: per-stock scaling would erase the cross-sectional levels
(volatility, turnover, valuation) that carry the signal.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from forecaster.features.factors import cs_rank

NORMS = ("robust", "rank")


class RobustZScore:
    """``clip((x - median) / (1.4826 * MAD), -clip, clip)`` per feature, pooled over stocks
    and training days; missing values become 0 (the pooled median). ``fit`` reads ``X``
    ``[D, N, F]`` or a :class:`~forecaster.features.store.FeatureView`; ``transform`` is
    elementwise, so any window of the features processes alike on its own."""

    kind = "robust"
    elementwise = True

    def __init__(self, clip: float = 3.0, max_rows: int = 500_000, seed: int = 0):
        if clip <= 0:
            raise ValueError(f"clip must be positive, got {clip}")
        self.clip = clip
        self.max_rows = max_rows
        self.seed = seed

    def fit(self, X: np.ndarray, dates: pd.DatetimeIndex, up_to=None) -> RobustZScore:
        rows = len(dates) if up_to is None else int(dates.searchsorted(pd.Timestamp(up_to), side="right"))
        n = rows * X.shape[1]
        pick = None
        if n > self.max_rows:  # a deterministic sample is plenty for a median
            pick = np.sort(np.random.default_rng(self.seed).choice(n, self.max_rows, replace=False))
        if hasattr(X, "flat_rows"):  # a feature store's view: read in one pass, never whole
            flat = X.flat_rows(rows, pick)
        else:
            flat = X[:rows].reshape(-1, X.shape[-1])
            flat = flat if pick is None else flat[pick]
        # One feature at a time: the statistics' temporaries are a column's, not the sample's
        # (a second set of inputs such as Alpha158 makes the sample 158 columns wide).
        median, mad, std = (np.empty(flat.shape[1], np.float32) for _ in range(3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN features
            for j in range(flat.shape[1]):
                column = flat[:, j]
                median[j] = np.nanmedian(column)
                mad[j] = np.nanmedian(np.abs(column - median[j])) * 1.4826
                std[j] = np.nanstd(column)
        # A feature that is mostly constant (MAD 0) falls back to its standard deviation.
        scale = np.where(mad > 1e-12, mad, np.where(std > 1e-12, std, 1.0))
        self.center_ = np.nan_to_num(median).astype(np.float32)
        self.scale_ = scale.astype(np.float32)
        return self

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``X [..., F]`` processed into ``out`` (float32; may be ``X`` itself)."""
        out = np.empty(X.shape, np.float32) if out is None else out
        np.subtract(X, self.center_, out=out)
        out /= self.scale_
        np.clip(out, -self.clip, self.clip, out=out)
        return np.nan_to_num(out, copy=False, nan=0.0)

    def state(self) -> dict:
        return {"kind": self.kind, "clip": self.clip, "center": self.center_.tolist(),
                "scale": self.scale_.tolist()}


class CrossSectionalRank:
    """Each day's values ranked across stocks, mapped to ``[-1, 1]``; missing values 0.
    Stateless: a day's ranks use that day only."""

    kind = "rank"
    elementwise = False  # a day's ranks need every stock of that day

    def fit(self, X: np.ndarray, dates: pd.DatetimeIndex, up_to=None) -> CrossSectionalRank:
        return self

    def transform(self, X: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``X [D, N, F]`` processed into ``out`` (float32; may be ``X`` itself)."""
        out = np.empty(X.shape, dtype=np.float32) if out is None else out
        for f in range(X.shape[-1]):  # a loop over features; ranks are vectorised over days
            out[..., f] = np.nan_to_num(2.0 * cs_rank(X[..., f]) - 1.0, nan=0.0)
        return out

    def state(self) -> dict:
        return {"kind": self.kind}


def make_processor(kind: str, **kwargs):
    if kind == "robust":
        return RobustZScore(**kwargs)
    if kind == "rank":
        return CrossSectionalRank()
    raise ValueError(f"normalisation must be one of {NORMS}, got {kind!r}")


def processor_from_state(state: dict):
    """Rebuild a fitted processor from :meth:`state`."""
    if state["kind"] == "rank":
        return CrossSectionalRank()
    proc = RobustZScore(clip=state["clip"])
    proc.center_ = np.asarray(state["center"], dtype=np.float32)
    proc.scale_ = np.asarray(state["scale"], dtype=np.float32)
    return proc
