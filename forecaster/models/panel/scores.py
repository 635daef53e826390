"""A panel model's scores: per-day standardisation, the blend of several sets' scores, and
the ``(date, code)`` Series a forecast is handed on as."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from forecaster.data.panel import Panel


def scores_to_series(scores: np.ndarray, panel: Panel, rows: np.ndarray) -> pd.Series:
    """Scores ``[len(rows), N]`` of signal days ``rows`` as a Series indexed by
    ``(forecast date, code)``, the forecast date being the next trading day; NaN dropped."""
    dates = panel.dates[rows + 1]
    frame = pd.DataFrame(scores, index=pd.DatetimeIndex(dates, name="date"), columns=panel.codes)
    frame.columns.name = "code"
    return frame.stack().dropna().rename("forecast")


def standardise_per_day(scores: np.ndarray) -> np.ndarray:
    """``[D, N]`` minus each day's mean over its standard deviation (NaN kept)."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # days without any score
        mean = np.nanmean(scores, axis=1, keepdims=True)
        sd = np.nanstd(scores, axis=1, keepdims=True)
    return (scores - mean) / np.where(sd > 0, sd, 1.0)


def blend_scores(parts: list[np.ndarray]) -> np.ndarray:
    """The mean of each part's per-day standardised scores ``[D, N]``, over the parts that
    score a stock (NaN where none does)."""
    z = np.stack([standardise_per_day(p) for p in parts])
    count = np.isfinite(z).sum(axis=0)
    return np.where(count > 0, np.nansum(z, axis=0) / np.maximum(count, 1), np.nan)
