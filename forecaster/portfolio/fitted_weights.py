"""Benchmark weights fitted to the index's own series (``--benchmark-weights fitted``).

An index's published weights are not free, and the float market value (流通市值) is a poor
stand-in for CSI's free-float weights with banded inclusion factors. The weights that best
explain the index's own daily returns are: on each refit day ``t`` (the first trading day of
each month, and any day the member set changes) a constrained least squares regresses the
index's daily changes on the day's members' over the trailing ``window`` days up to ``t-1``'s
close,

    min_b  |R b - r|^2 / n + lambda |b - p|^2   over  b >= 0,  sum(b) = 1,

``b``: the weights at ``t-1``'s close; ``R``: ``[n, m]`` each member's daily change of level
over its level at ``t-1``'s close (``(L[s] - L[s-1]) / L[t-1]``, ``L`` its compounded
``close / preclose``: what ``b`` earns each day held with its shares fixed, as a cap-weighted
index holds them between reviews; ``levels=False``: the plain returns, weights held fixed over
the window); ``r``: ``[n]`` the index's, alike; a day without a bar: a 0 return, as an index
holds a suspended stock at its last price (counted); ``p``: the prior weights (float market
value where the data carry it, else equal); ``lambda = shrink x`` the members' mean ``R``
variance (so ``shrink`` is scale-free). Between refits the weights drift with each stock's
price (``close / preclose``). Row ``t`` uses nothing after ``t-1``'s close: point in time.

On CSI 300 (``scripts/bench_index_weights.py``, docs/results.md) the members at these weights
follow SH000300 at 1.24 % a year out of sample (2017-2022; 1.30 % 2022-2026), against 2.84 %
(4.49 %) at float market value; regressing returns with weights held fixed, 2.2 % (2.1 %).

A member with returns on fewer than :data:`MIN_SHARE` of the window's days keeps its prior
weight (counted); a refit with fewer than :data:`MIN_DAYS` index days, or a solver failure,
takes the prior (counted). Each refit is one non-negative least squares (~300 variables).

The index series travels with the panel: :func:`attach_index_series` (the pipeline, when the
data hold the universe's index), :func:`index_series_of` (the weights and the report).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from forecaster.data.panel import Panel
from forecaster.data.sources import DataError

log = logging.getLogger(__name__)

# Chosen by out-of-sample tracking of SH000300 (docs/results.md, "Benchmark weights fitted to
# the index"; scripts/bench_index_weights.py): round values within noise of the best.
WINDOW = 250
SHRINK = 0.01
MIN_DAYS = 20  # index days a refit needs, else the prior
MIN_SHARE = 0.5  # of the window's days a member needs returns on, else it keeps its prior weight
SUM_WEIGHT = 1e3  # the sum row's weight: met to ~1e-9 on O(1) rows
_KEY = ("universe_index_series",)


@dataclass
class IndexSeries:
    """``code``: the index (``sh.000300``); ``close``: ``[days]`` its close on the panel's
    days (NaN where the series has none); ``members``: ``[days, stocks]`` its members (the
    universe's mask; None: the panel's :attr:`~forecaster.data.panel.Panel.members`)."""

    code: str
    close: np.ndarray
    members: np.ndarray | None = None

    def returns(self) -> np.ndarray:
        """``[days]`` close-to-close returns; NaN on a day without a close or after one."""
        out = np.full(len(self.close), np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[1:] = self.close[1:] / self.close[:-1] - 1.0
        return out


def attach_index_series(panel: Panel, code: str, frame: pd.DataFrame, members: np.ndarray | None = None
                        ) -> IndexSeries:
    """Keep the universe's index ``code`` (its canonical frame, ``close`` by date) and its
    ``members`` (``[days, stocks]``, or None) with ``panel``: the ``fitted`` weights and the
    default source read it."""
    close = frame["close"].reindex(panel.dates).to_numpy(dtype=float)
    series = IndexSeries(str(code), close, members)
    panel._cache[_KEY] = series  # set, not derived: an attach replaces an earlier one
    return series


def index_series_of(panel: Panel) -> IndexSeries | None:
    """The index series :func:`attach_index_series` kept with ``panel``, or None."""
    series = panel._cache.get(_KEY)
    return series if series is not None and np.isfinite(series.close).sum() > 1 else None


def price_ratio(panel: Panel) -> np.ndarray:
    """``[days, stocks]`` ``close / preclose`` (the previous close where the data lack a
    preclose); NaN or inf where a day has no bar."""
    close = panel.fields["close"]
    pre = panel.fields.get("preclose")
    if pre is None:
        pre = np.vstack([np.full((1, close.shape[1]), np.nan), close[:-1]])
    with np.errstate(invalid="ignore", divide="ignore"):
        return close / pre


def index_members(panel: Panel, universe: np.ndarray | None = None) -> np.ndarray:
    """``[days, stocks]`` the stocks an index holds each day: the members of ``universe`` (the
    panel's, if not given) that have had a bar by then, a suspended one included (the index
    holds it at its last price until a review removes it); without a universe, the stocks with
    a bar that day."""
    universe = panel.members if universe is None else universe
    if universe is None:
        return panel.listed
    return universe & np.maximum.accumulate(panel.listed, axis=0)


def stock_returns(panel: Panel) -> np.ndarray:
    """``[days, stocks]`` ``close / preclose - 1`` where a stock has a bar, else NaN."""
    r = price_ratio(panel) - 1.0
    return np.where(panel.listed & np.isfinite(r), r, np.nan)


def refit_days(dates: pd.DatetimeIndex, universe: np.ndarray) -> np.ndarray:
    """``[days]`` bool: the first trading day of each month and any day the member set changes."""
    out = np.zeros(len(dates), dtype=bool)
    if len(dates):
        month = dates.year * 12 + dates.month
        out[1:] = (np.diff(month) != 0) | (universe[1:] != universe[:-1]).any(axis=1)
        out[0] = True
    return out


def solve_simplex_ls(R: np.ndarray, y: np.ndarray, prior: np.ndarray, shrink: float, total: float = 1.0
                     ) -> np.ndarray | None:
    """``[m]`` the ``b >= 0`` with ``sum(b) = total`` minimising ``|R b - y|^2 / n + lambda
    |b - prior|^2`` (``lambda = shrink x mean(diag(R'R / n))``); None when the solver fails.

    One non-negative least squares (Lawson-Hanson, ``scipy.optimize.nnls``) of ``R`` stacked on
    ``sqrt(lambda) I`` and a heavy row for the sum: about 10 ms for 300 members, and as exact as
    an interior-point QP solver (whose tolerances are looser on this scale)."""
    n, m = R.shape
    scale = float(np.sqrt(np.mean(np.sum(R * R, axis=0)) / n)) or 1.0  # to O(1)
    root = np.sqrt(shrink)
    A = np.vstack([R / (np.sqrt(n) * scale), root * np.eye(m), SUM_WEIGHT * np.ones((1, m))])
    b = np.concatenate([y / (np.sqrt(n) * scale), root * prior, [SUM_WEIGHT * total]])
    try:
        x, _ = nnls(A, b, maxiter=50 * m)
    except RuntimeError:  # too many iterations
        return None
    s = x.sum()
    return x * (total / s) if np.isfinite(s) and s > 0 else None


@dataclass
class FitCounts:
    """What a fit could not use, for the notes."""

    refits: int = 0
    prior_refits: int = 0  # too few index days in the window
    failed: int = 0  # the solver failed: the prior
    filled: int = 0  # member-days of windows without a return, taken as 0
    fixed: int = 0  # member-refits held at the prior for too few returns


def fit_weights(returns: np.ndarray, index_returns: np.ndarray, universe: np.ndarray, listed: np.ndarray,
                prior: np.ndarray, growth: np.ndarray, refit: np.ndarray, window: int = WINDOW,
                shrink: float = SHRINK, levels: bool = True) -> tuple[np.ndarray, FitCounts]:
    """``[days, stocks]`` weights fitted to the index (module docstring), row ``t`` held over
    day ``t`` over ``universe[t] & listed[t]`` (``listed``: the stocks the index holds,
    :func:`index_members`), summing to 1 where it has members.

    ``returns``: ``[days, stocks]`` the stocks' (NaN without a bar); ``index_returns``:
    ``[days]``; ``universe``: ``[days, stocks]`` the index's members; ``prior``: ``[days,
    stocks]`` the weights shrunk toward; ``growth``: ``[days, stocks]`` price factors the
    weights drift by (1 without a bar); ``refit``: ``[days]`` the refit days; ``levels``:
    regress changes of level (the weights drifting with prices within the window, as a
    cap-weighted index's do between reviews) rather than returns (weights held fixed)."""
    D, N = returns.shape
    counts = FitCounts()
    out = np.zeros((D, N))
    current = np.zeros(N)
    for t in range(D):
        if refit[t]:
            current = np.zeros(N)
            cols = np.flatnonzero(universe[t])
            if len(cols):
                current[cols] = _fit_one(returns, index_returns, prior[t], cols, t, window, shrink, counts,
                                         levels)
        elif t:
            current = current * growth[t - 1]
        row = np.where(universe[t] & listed[t], current, 0.0)
        total = row.sum()
        if total > 0:
            out[t] = row / total
    return out, counts


def _changes(r: np.ndarray) -> np.ndarray:
    """``[days, k]`` each day's change of level ``(L[s] - L[s-1]) / L[last]`` of the levels
    ``L`` that ``r`` (``[days, k]`` daily returns, the last the day before the refit) compound
    to: a buy-and-hold book's weights at the last close turn these into its daily returns."""
    level = np.cumprod(1.0 + r, axis=0)
    before = np.vstack([np.ones((1, r.shape[1])), level[:-1]])
    return (level - before) / level[-1]


def _fit_one(returns, index_returns, prior_row, cols, t, window, shrink, counts, levels) -> np.ndarray:
    """``[len(cols)]`` the weights fitted on day ``t`` from rows ``t-window .. t-1``."""
    counts.refits += 1
    p = np.nan_to_num(prior_row[cols])
    p = p / p.sum() if p.sum() > 0 else np.full(len(cols), 1.0 / len(cols))
    rows = np.arange(max(t - window, 0), t)
    rows = rows[np.isfinite(index_returns[rows])]
    if len(rows) < MIN_DAYS:
        counts.prior_refits += 1
        return p
    span = np.arange(rows[0], t)  # every day of the window, for the level chains
    R = returns[span][:, cols]
    seen = np.isfinite(R)
    R = np.where(seen, R, 0.0)
    y = np.nan_to_num(index_returns[span])
    if levels:  # each day's change of level over the level at t-1's close: weights drift within the window
        R = _changes(R)
        y = _changes(y[:, None])[:, 0]
    keep = np.isin(span, rows)
    R, y, seen = R[keep], y[keep], seen[keep]
    enough = seen.mean(axis=0) >= MIN_SHARE
    counts.fixed += int((~enough).sum())
    counts.filled += int((~seen[:, enough]).sum())
    y = y - R[:, ~enough] @ p[~enough]  # the fixed members' part taken out
    total = 1.0 - float(p[~enough].sum())
    b = p.copy()
    if enough.any() and total > 0:
        free = p[enough]
        free = free / free.sum() if free.sum() > 0 else np.full(len(free), 1.0 / len(free))
        fitted = solve_simplex_ls(R[:, enough], y, free * total, shrink, total)
        if fitted is None:
            counts.failed += 1
            return p
        b[enough] = fitted
    return b


def fit_to_index(panel: Panel, prior: np.ndarray, prior_name: str, growth: np.ndarray,
                 window: int = WINDOW, shrink: float = SHRINK, levels: bool = True
                 ) -> tuple[np.ndarray, str, None, list[str]]:
    """``(weights, "fitted", None, notes)`` (a
    :class:`~forecaster.portfolio.index_weights.BenchmarkWeights`' fields) of ``panel`` fitted
    to its index series, shrunk toward ``prior`` (``[days, stocks]``, named ``prior_name``),
    drifting by ``growth``; computed once per panel and setting."""
    series = index_series_of(panel)
    if series is None:
        raise DataError("--benchmark-weights fitted: the data hold no series of the universe's index "
                        "(e.g. SH000300 for csi300 in a Qlib folder); use float_mv, equal or a weights file")

    universe = panel.members if panel.members is not None else series.members
    universe = panel.listed if universe is None else universe

    def compute():
        refit = refit_days(panel.dates, universe)
        index_returns = series.returns()
        weights, c = fit_weights(stock_returns(panel), index_returns, universe,
                                 index_members(panel, universe), prior, growth, refit, window, shrink, levels)
        what = "changes of level (weights drifting with prices)" if levels else "returns"
        notes = [f"benchmark weights fitted to {series.code}'s own series: {c.refits} refit(s) (monthly and "
                 f"on each change of members), each a least squares of its daily {what} on the members' "
                 f"over the {window} days before, weights >= 0 summing to 1, shrunk toward {prior_name} "
                 f"weights (shrink {shrink:g}), drifting with prices between refits"]
        missing = int((~np.isfinite(index_returns[1:])).sum())
        if missing:
            notes.append(f"{missing} day(s) without an index return left out of the fits' windows")
        if c.filled:
            notes.append(f"{c.filled:,} member-day(s) of the windows without a bar taken as a 0 return "
                         "(the index holds a suspended stock at its last price)")
        if c.fixed:
            notes.append(f"{c.fixed:,} member-refit(s) with returns on fewer than {MIN_SHARE:.0%} of the "
                         f"window's days held at their {prior_name} weight")
        if c.prior_refits or c.failed:
            notes.append(f"{c.prior_refits} refit(s) with fewer than {MIN_DAYS} index days and {c.failed} "
                         f"the solver failed on took the {prior_name} weights")
        for note in notes[1:]:
            log.info("%s", note)
        return weights, notes

    who = hash(np.packbits(universe).tobytes())  # the members the fit is over: a later mask fits anew
    weights, notes = panel.derived(("fitted_weights", series.code, who, int(window), float(shrink),
                                    bool(levels), prior_name), compute)
    return weights, "fitted", None, list(notes)
