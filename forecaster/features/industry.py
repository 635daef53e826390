"""Industry-relative features: a stock compared with its industry that day, and the industry's
own move. They read the Panel field :data:`INDUSTRY_FIELD` (each day's industry group of each
stock, set where the run has an industries file:
:func:`~forecaster.portfolio.industry_groups.attach_industries`), so they are used only when
named (``--features industry`` or one of its columns); an industry's mean of day ``t`` reads
the values of day ``t`` only, over the stocks that trade that day.
"""

from __future__ import annotations

import numpy as np

from forecaster.data.daily.industries import INDUSTRY_FIELD

# name -> (days of history, what it is, the feature it compares)
INDUSTRY_FEATURES: dict[str, tuple[int, str, str]] = {
    "industry_rel_return_1d": (1, "log(close / preclose) less its industry's mean that day", "ret_1d"),
    "industry_rel_return_20d": (20, "20-day log return less its industry's mean", "return_20d"),
    "industry_rel_volume_surprise": (21, "volume surprise less its industry's mean", "volume_surprise"),
    "industry_return_1d": (1, "its industry's mean log(close / preclose) that day", "ret_1d"),
    "industry_return_20d": (20, "its industry's mean 20-day log return", "return_20d"),
}


def industry_means(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """``[days, stocks]``: each stock's group mean of ``values`` ``[days, stocks]`` that day
    (over the group's finite values; NaN for a stock without a group or a group without one)."""
    values = np.asarray(values, dtype=float)
    ok = np.isfinite(groups)
    label = np.where(ok, groups, 0).astype(np.int64)
    n_groups = int(label.max()) + 1 if ok.any() else 1
    cell = np.arange(len(values))[:, None] * n_groups + label
    seen = ok & np.isfinite(values)
    total = np.bincount(cell[seen], weights=values[seen], minlength=values.shape[0] * n_groups)
    count = np.bincount(cell[seen], minlength=values.shape[0] * n_groups)
    mean = np.full(total.shape, np.nan)
    np.divide(total, count, out=mean, where=count > 0)
    return np.where(ok, mean[cell], np.nan)


def industry_feature(name: str, base: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Feature ``name`` of :data:`INDUSTRY_FEATURES` from its ``base`` feature ``[days,
    stocks]`` and the stocks' ``groups`` (:data:`INDUSTRY_FIELD`)."""
    means = industry_means(base, groups)
    relative = name.startswith("industry_rel_")
    return base - means if relative else np.where(np.isfinite(base), means, np.nan)


__all__ = ["INDUSTRY_FEATURES", "INDUSTRY_FIELD", "industry_feature",
           "industry_means"]
