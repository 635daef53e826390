"""Statistics of forecasts of one stock's minute bars that a forecast without skill cannot win.

Within a day, every later bar is scored against a price path the earlier bars share, so a
correlation of a day's bars with each other rewards any forecast that leans against the
recent move: on random-walk bars "minus the previous level" scores a mean daily rank IC of
about +0.5 at 4 bars a day and +0.22 at 48, and "minus the last return" +0.3 at 4 bars
(:func:`within_day_ic`, kept for that null test and never reported). Demeaning the next-bar
return within the day changes nothing (a correlation demeans already), so the daily IC
against the demeaned return is as biased and is not reported either.

Reported instead (``tests/test_forecaster_bar_metrics.py`` scores "minus the previous level",
"minus the last return" and noise on generated random-walk bars: about zero on each, while a
planted per-bar signal is recovered):

* pooled over every bar: the IC and rank IC (:func:`~forecaster.metrics.summarise`'s
  ``pearson_ic`` and ``rank_ic``);
* by bar of the day (:func:`bar_positions`): for each bar position (its closing time), the IC
  and rank IC of the forecast against the outcome across days, and (:func:`position_summary`)
  their mean over the day's positions.

A forecast of a price *level* (the seed recipe's) keeps the small-sample bias of a persistent
regressor in these statistics too (a random walk's level against its next step), of the size
of a few standard errors rather than tenths (docs/history.md, "A price level on random-walk bars"):
:func:`ic_t` gives a pooled IC's t-statistic to judge it by.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from forecaster.metrics.hac import corr

POSITION_COLUMNS = ("model", "bar_close", "n_days", "ic", "rank_ic")
SUMMARY_COLUMNS = ("model", "position_ic", "position_rank_ic", "n_positions")


def _scored(pred: pd.DataFrame) -> pd.DataFrame:
    stamps = pd.DatetimeIndex(pred["date"] if "date" in pred.columns else pred.index)
    out = pd.DataFrame({"model": pred["model"].to_numpy(), "forecast": pred["forecast"].to_numpy(float),
                        "actual": pred["actual"].to_numpy(float), "day": stamps.normalize(),
                        "bar_close": stamps.strftime("%H:%M")})
    return out[np.isfinite(out["forecast"]) & np.isfinite(out["actual"])]


def _pair_ic(f: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if len(f) < 3:
        return math.nan, math.nan
    return corr(f, y), corr(stats.rankdata(f), stats.rankdata(y))


def bar_positions(pred: pd.DataFrame) -> pd.DataFrame:
    """For each model and bar of the day (its closing time, ``bar_close``): the IC and rank IC
    of ``forecast`` against ``actual`` across the days (``n_days`` scored), one row each
    (columns :data:`POSITION_COLUMNS`). ``pred``: long predictions with ``date`` (bar stamps,
    a column or the index), ``model``, ``forecast``, ``actual``; NaN pairs are left out."""
    rows = []
    for (model, close), g in _scored(pred).groupby(["model", "bar_close"], sort=True):
        ic, rank = _pair_ic(g["forecast"].to_numpy(), g["actual"].to_numpy())
        rows.append({"model": model, "bar_close": close, "n_days": len(g), "ic": ic, "rank_ic": rank})
    return pd.DataFrame(rows, columns=list(POSITION_COLUMNS))


def position_summary(positions: pd.DataFrame) -> pd.DataFrame:
    """Per model, the mean over bar positions of :func:`bar_positions`' IC and rank IC
    (positions without one left out; columns :data:`SUMMARY_COLUMNS`)."""
    if not len(positions):
        return pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    g = positions.groupby("model", sort=True)
    return pd.DataFrame({"position_ic": g["ic"].mean(), "position_rank_ic": g["rank_ic"].mean(),
                         "n_positions": g["ic"].count()}).reset_index()[list(SUMMARY_COLUMNS)]


def within_day_ic(pred: pd.DataFrame, method: str = "spearman", demean: bool = False) -> pd.Series:
    """Per model, the mean over days of the correlation of the day's forecasts with its
    outcomes (``demean``: the outcome minus the day's mean outcome). Biased for forecasts that
    lean against the recent move (the module docstring): kept for the null test that shows it,
    never reported."""
    scored = _scored(pred)
    if demean:
        scored["actual"] = scored["actual"] - scored.groupby(["model", "day"])["actual"].transform("mean")
    out = {}
    for model, g in scored.groupby("model", sort=True):
        daily = []
        for _, d in g.groupby("day", sort=False):
            f, y = d["forecast"].to_numpy(), d["actual"].to_numpy()
            if len(f) >= 3:
                daily.append(_pair_ic(f, y)[1 if method == "spearman" else 0])
        daily = [ic for ic in daily if np.isfinite(ic)]  # a day of constant forecasts has none
        out[model] = float(np.mean(daily)) if daily else math.nan
    return pd.Series(out, name="within_day_ic")
