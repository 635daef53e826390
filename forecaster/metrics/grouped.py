"""Statistics of many groups of a long frame at once: integer group ids and value arrays in,
one number per group (or per row) out, by sorts and ``np.bincount`` instead of a Python loop
or a pivot per group. A report's per-stock and per-fold tables have thousands of groups over
millions of rows: a pandas ``groupby(...).rank()`` or a ``pivot`` per group took most of its
statistics' time.

Ids are ``0..size-1`` (``size`` groups, some possibly empty); every array is ``[rows]``.
"""

from __future__ import annotations

import numpy as np


def grouped_rank(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Average ranks of ``values`` within each group of ``ids``: 1 for a group's smallest value,
    tied values sharing the mean of their ranks; what ``Series(values).groupby(ids)
    .rank(method="average")`` gives (a test checks it), by two sorts. ``values`` has no NaN.

    Returns:
        ``[rows]`` float ranks, in the rows' order.
    """
    ids, values = np.asarray(ids), np.asarray(values, dtype=float)
    n = len(values)
    if n == 0:
        return np.empty(0)
    # by value, then stably by group: the values stay sorted within each group. A stable sort
    # of 16-bit ids is numpy's radix sort, three times faster than np.lexsort here.
    order = np.argsort(values)
    by_group = ids[order]
    if by_group.max() < 2**16:
        by_group = by_group.astype(np.uint16)
    order = order[np.argsort(by_group, kind="stable")]
    g, v = ids[order], values[order]
    position = np.arange(n)
    new_group = np.r_[True, g[1:] != g[:-1]]
    new_run = new_group | np.r_[True, v[1:] != v[:-1]]  # a run: one group's equal values
    group_first = np.maximum.accumulate(np.where(new_group, position, 0))
    run_first = position[new_run]
    run_last = np.r_[run_first[1:], n] - 1
    # (first + last) / 2 is exact: positions are integers far below 2**52
    run_rank = (run_first + run_last) / 2.0 - group_first[run_first] + 1.0
    ranks = np.empty(n)
    ranks[order] = run_rank[np.cumsum(new_run) - 1]
    return ranks


def grouped_corr(ids: np.ndarray, x: np.ndarray, y: np.ndarray, size: int) -> np.ndarray:
    """Pearson correlation of ``x`` and ``y`` within each group (centred first, as
    :func:`forecaster.metrics.hac.corr`): ``[size]``, unclipped, NaN or inf where a group has
    no variance (callers decide which groups count, then clip to [-1, 1])."""
    n = np.maximum(np.bincount(ids, minlength=size), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        xc = x - (np.bincount(ids, x, size) / n)[ids]
        yc = y - (np.bincount(ids, y, size) / n)[ids]
        return np.bincount(ids, xc * yc, size) / np.sqrt(np.bincount(ids, xc * xc, size) *
                                                         np.bincount(ids, yc * yc, size))


def _constant(ids: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Whether each group's values are all equal (an exact max == min test)."""
    high, low = np.full(size, -np.inf), np.full(size, np.inf)
    np.maximum.at(high, ids, values)
    np.minimum.at(low, ids, values)
    return high == low


def cross_section_ic(ids: np.ndarray, forecast: np.ndarray, actual: np.ndarray, size: int,
                     method: str = "spearman", min_stocks: int = 5) -> np.ndarray:
    """The IC of each cross-section (a group of ``ids``: one day's stocks, of one model and
    fold): :func:`forecaster.metrics.daily_ic`'s number for that day, from long arrays.

    Rows with a NaN forecast or actual are left out first (ranks are over the rest); a group
    with fewer than ``max(min_stocks, 2)`` such rows, a constant forecast or actual (ranks, for
    Spearman) or no finite correlation gets NaN.

    Returns:
        ``[size]`` ICs, NaN where none.
    """
    if method not in ("spearman", "pearson"):
        raise ValueError(f"method must be 'spearman' or 'pearson', got {method!r}")
    forecast, actual = np.asarray(forecast, dtype=float), np.asarray(actual, dtype=float)
    ok = ~np.isnan(forecast) & ~np.isnan(actual)
    ids, x, y = np.asarray(ids)[ok], forecast[ok], actual[ok]
    if method == "spearman":
        x, y = grouped_rank(ids, x), grouped_rank(ids, y)
    ic = grouped_corr(ids, x, y, size)
    scored = ((np.bincount(ids, minlength=size) >= max(int(min_stocks), 2)) & np.isfinite(ic)
              & ~_constant(ids, x, size) & ~_constant(ids, y, size))
    return np.where(scored, np.clip(ic, -1.0, 1.0), np.nan)
