"""Statistics of a strategy's daily returns, for the report's tear sheet: returns before
costs, the growth relative to a benchmark and its drawdown, the worst drawdowns with their
dates, returns by month and year, the information ratio and tracking error, and the paired
test of two strategies' daily returns.

Computed here rather than with empyrical or quantstats (docs/results.md says why); where
both define a statistic the definitions agree (``tests/test_forecaster_returns.py`` checks
them against empyrical when it is installed). 252 trading days a year, no risk-free rate, as
:func:`forecaster.portfolio.broker.performance_metrics`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecaster.metrics.cross_section import TRADING_DAYS
from forecaster.metrics.hac import hac_mean_test

# Fewer days than this are not annualised (a return, volatility, Sharpe, tracking error or
# information ratio "a year" from one day's move reads as -934 %/yr): NaN, with this reason.
MIN_ANNUAL_DAYS = 20
TOO_FEW_DAYS = f"fewer than {MIN_ANNUAL_DAYS} days: not annualised"

DRAWDOWN_COLUMNS = ("start", "trough", "recovery", "depth", "days_to_trough", "days_to_recover")


def gross_returns(returns: pd.Series, equity: pd.Series, costs: pd.Series) -> pd.Series:
    """Daily returns before costs: each day's return (``returns``, of the equity curve
    ``equity``) plus the costs paid that day (``costs``: ``[date]`` fees and slippage in money,
    missing days 0) over the value the day started from (``equity / (1 + returns)``). The
    positions are those the strategy held after costs, so the saving is not reinvested: the
    gap between the two curves is the costs' drag, not another strategy."""
    r = returns.astype(float)
    start = equity.astype(float).reindex(r.index) / (1.0 + r)
    paid = costs.groupby(level=0).sum().reindex(r.index).fillna(0.0).astype(float)
    return r + paid / start


def growth(returns: pd.Series) -> pd.Series:
    """The growth of 1 invested: the cumulative product of ``1 + returns``."""
    return (1.0 + returns.astype(float).fillna(0.0)).cumprod()


def relative_growth(returns: pd.Series, benchmark: pd.Series) -> pd.Series:
    """The strategy's growth over the benchmark's (``growth(r) / growth(b)``, on the days both
    have): 1.10 means the strategy is 10 % ahead of what the benchmark made of the same money.
    Its drawdown (:func:`drawdown`) is the excess return's drawdown."""
    r, b = returns.align(benchmark, join="inner")
    return growth(r) / growth(b)


def drawdown(curve: pd.Series) -> pd.Series:
    """The fall from the running peak of a growth (or equity) curve: ``curve / cummax - 1``,
    zero at each new high, negative below it."""
    c = curve.astype(float)
    return c / c.cummax() - 1.0


def drawdown_periods(curve: pd.Series, n: int = 5, tol: float = 1e-9) -> pd.DataFrame:
    """The ``n`` deepest drawdowns of a growth (or equity) curve, deepest first.

    A drawdown runs from a peak (``start``: the last day at the high) to the lowest close
    before the curve regains that high (``trough``) and to the first day at or above it
    (``recovery``; NaT when the curve has not recovered by its last day). ``depth`` is the
    fall at the trough as a negative fraction; ``days_to_trough`` and ``days_to_recover``
    count trading days (rows) from the start (the latter NaN when not recovered). A fall of
    less than ``tol`` (relative) is rounding, not a drawdown.

    Returns:
        One row per drawdown, columns :data:`DRAWDOWN_COLUMNS`; empty for a curve that never
        falls.
    """
    c = curve.astype(float).dropna()
    rows = []
    if len(c):
        values = c.to_numpy()
        peak = np.maximum.accumulate(values)
        under = values < peak * (1.0 - tol)  # a fall of rounding noise is no drawdown
        i = 0
        while i < len(values):
            if not under[i]:
                i += 1
                continue
            start = i - 1  # the last day at the high
            j = i
            while j < len(values) and under[j]:
                j += 1
            trough = i + int(np.argmin(values[i:j]))
            recovered = j < len(values)
            rows.append({"start": c.index[start], "trough": c.index[trough],
                         "recovery": c.index[j] if recovered else pd.NaT,
                         "depth": float(values[trough] / peak[trough] - 1.0),
                         "days_to_trough": trough - start,
                         "days_to_recover": float(j - start) if recovered else math.nan})
            i = j
    table = pd.DataFrame(rows, columns=list(DRAWDOWN_COLUMNS))
    if len(table):
        table = table.sort_values("depth", kind="stable").head(n).reset_index(drop=True)
    return table


def period_returns(returns: pd.Series, freq: str) -> pd.Series:
    """Compounded returns per calendar period (``freq``: ``"M"`` month, ``"Y"`` year) of
    daily returns, indexed by the period; a period without days is left out."""
    r = returns.astype(float).dropna()
    if r.empty:
        return pd.Series(dtype=float)
    idx = pd.DatetimeIndex(r.index)
    keys = [idx.year, idx.month] if freq == "M" else [idx.year]
    out = (1.0 + r).groupby(keys).prod() - 1.0
    return out


def monthly_table(returns: pd.Series) -> pd.DataFrame:
    """Compounded returns by year (rows) and month (columns ``1..12``), NaN where the series
    has no day, and the year's own compounded return in column ``"year"``."""
    months = period_returns(returns, "M")
    table = pd.DataFrame(np.nan, index=pd.Index(sorted({y for y, _ in months.index}), name="year"),
                         columns=pd.Index(list(range(1, 13)), dtype=object))
    for (year, month), value in months.items():
        table.loc[year, month] = value
    years = period_returns(returns, "Y")
    table["year"] = years.reindex(table.index).to_numpy() if len(years) else np.nan
    return table


def active_stats(returns: pd.Series, benchmark: pd.Series) -> dict[str, float]:
    """The daily active return ``r - b`` (on the days both have) summarised: ``tracking_error``
    (its std, ddof=1, x sqrt(252)), ``information_ratio`` (its mean / std x sqrt(252); NaN
    when it does not vary beyond rounding of the returns), ``excess_annual_return`` (the
    annual return of ``r`` minus that of ``b``, both geometric) and ``n_days``; every figure
    NaN below :data:`MIN_ANNUAL_DAYS` days."""
    r, b = returns.astype(float).align(benchmark.astype(float), join="inner")
    ok = r.notna() & b.notna()
    r, b = r[ok].to_numpy(), b[ok].to_numpy()
    n = len(r)
    nan = math.nan
    if n < MIN_ANNUAL_DAYS:
        return {"tracking_error": nan, "information_ratio": nan, "excess_annual_return": nan, "n_days": n}
    active = r - b
    std = float(np.std(active, ddof=1)) if n > 1 else nan
    # an active return that is rounding noise of the returns themselves does not vary
    scale = max(float(np.abs(r).max()), float(np.abs(b).max()), 1e-300)
    varies = n > 1 and np.ptp(active) > 1e-9 * scale
    return {"tracking_error": std * math.sqrt(TRADING_DAYS) if n > 1 else nan,
            "information_ratio": float(active.mean() / std * math.sqrt(TRADING_DAYS)) if varies else nan,
            "excess_annual_return": annual_return(r) - annual_return(b),
            "n_days": n}


def annual_return(returns) -> float:
    """Geometric annual return of daily returns (252 a year); -1 once the value is gone; NaN
    for fewer than :data:`MIN_ANNUAL_DAYS` days."""
    r = np.asarray(returns, dtype=float)
    r = r[np.isfinite(r)]
    if len(r) < MIN_ANNUAL_DAYS:
        return math.nan
    total = float(np.prod(1.0 + r))
    return -1.0 if total <= 0 else total ** (TRADING_DAYS / len(r)) - 1.0


def paired_return_test(returns: pd.Series, other: pd.Series, horizon: int = 1) -> dict[str, float]:
    """Did ``returns`` earn more than ``other``? The Newey-West test of the mean of the daily
    difference ``returns - other`` on the days both have (two strategies on the same days
    share the market's moves, so the paired difference is far less noisy than either).

    Returns:
        ``annual_return_diff`` (annual return of ``returns`` minus that of ``other`` over the
        common days), ``annual_return_model`` and ``annual_return_baseline`` (each over the
        common days), ``mean_diff`` (per day), ``t_stat``, ``p_value`` (two-sided),
        ``n_days``; NaN statistics when the difference does not vary or fewer than 3 days.
    """
    r, o = returns.astype(float).align(other.astype(float), join="inner")
    ok = r.notna() & o.notna()
    r, o = r[ok].sort_index(), o[ok].sort_index()
    res = hac_mean_test((r - o).to_numpy(dtype=float), None, horizon)
    mine, theirs = annual_return(r.to_numpy()), annual_return(o.to_numpy())
    return {"annual_return_diff": mine - theirs, "annual_return_model": mine,
            "annual_return_baseline": theirs, "mean_diff": res["mean"], "t_stat": res["t_stat"],
            "p_value": res["p_value"], "n_days": res["n"]}


__all__ = ["DRAWDOWN_COLUMNS", "MIN_ANNUAL_DAYS", "TOO_FEW_DAYS", "active_stats", "annual_return", "drawdown",
           "drawdown_periods",
           "gross_returns", "growth", "monthly_table", "paired_return_test", "period_returns",
           "relative_growth"]
