"""An estimated total-return index: a price index plus its members' dividends.

SH000300 and its kind are price indices: a member's cash dividend lowers them on its ex-date,
while the stocks' returns here (``close / preclose``) include it. Judged against the price
index, a book is credited with the dividends as alpha. The estimate adds back, each day, the
members' dividends at the benchmark weights:

    total_return[t] = index_return[t] + sum_i w[t, i] * dividend[t, i]

A stock's dividend return is read off the data's own adjustment: the adjusted return
``close / preclose - 1`` minus the unadjusted ``close / previous close - 1``, where
``preclose`` is the exchange's ex-rights previous close (baostock's, or a Qlib folder's
adjusted close over ``$factor``). A share issue (送股 / 转增, ``1 + k`` shares for one, ``k`` a
multiple of :data:`BONUS_STEP`) is not a dividend: on an ex-date the largest such ``k`` with
``gap x (1 + k) <= 1`` (``gap = preclose / previous close``) is undone first and only the rest
is cash (a cash dividend above 1/11 of the price, very rare, would be read as a 10-for-1
bonus and a small dividend). A remainder above :data:`MAX_CASH` of the price (a rights issue)
and a preclose above the previous close are no dividend: counted and said. Without a
``preclose`` the data say nothing of dividends: the estimate is unavailable (None and a note),
never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.data.panel import Panel

BONUS_STEP = 0.1  # share issues come as 1, 2, ... new shares per 10
MAX_BONUS = 5.0
MIN_GAP = 1e-4  # a gap smaller than this is the price's rounding, not an ex-date
TOLERANCE = 5e-4  # of gap x (1 + k) above 1 still read as a pure share issue
MAX_CASH = 0.15  # a cash part above this share of the price is not a dividend (a rights issue)


@dataclass
class Dividends:
    """``returns``: ``[days, stocks]`` each stock-day's dividend return (0 off ex-dates, NaN
    without a bar), None when the data cannot tell; ``notes``: what was read and what not."""

    returns: np.ndarray | None
    notes: list[str] = field(default_factory=list)
    ex_dates: int = 0


def dividend_returns(panel: Panel) -> Dividends:
    """The panel's dividend returns (module docstring), computed once per panel."""
    return panel.derived(("dividend_returns",), lambda: _dividends(panel))


def _dividends(panel: Panel) -> Dividends:
    pre = panel.fields.get("preclose")
    if pre is None:
        return Dividends(None, ["the data carry no preclose (the ex-rights previous close): dividends cannot "
                                "be told from prices, no total-return estimate"])
    close = panel.fields["close"]
    previous = pd.DataFrame(close).ffill().shift(1).to_numpy()  # the stock's last close before the day
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = pre / previous
    ok = panel.listed & np.isfinite(gap) & (gap > 0) & np.isfinite(close)
    ex = ok & (gap < 1 - MIN_GAP)
    above = int((ok & (gap > 1 + MIN_GAP)).sum())
    g = np.where(ex, gap, 1.0)
    k = np.clip(np.floor(((1 + TOLERANCE) / g - 1) / BONUS_STEP + 1e-9) * BONUS_STEP, 0.0, MAX_BONUS)
    cash = np.where(ex, 1 - g * (1 + k), 0.0)
    rights = ex & (cash > MAX_CASH)
    with np.errstate(invalid="ignore", divide="ignore"):
        div = close / pre - close * (1 + k) / previous  # adjusted minus unadjusted, share issue undone
    div = np.where(ex & ~rights, np.clip(div, 0.0, None), 0.0)
    div = np.where(panel.listed, div, np.nan)
    n_ex = int(ex.sum())
    if n_ex == 0:
        return Dividends(None, ["close and preclose never differ across a day: the prices look adjusted "
                                "already (or hold no ex-date), so dividends cannot be told: no total-return "
                                "estimate"])
    bonus = int((ex & (k > 0)).sum())
    n_rights = int(rights.sum())
    notes = [f"dividends from the data's adjustment (adjusted minus unadjusted return) on "
             f"{n_ex - n_rights:,} ex-date(s)"
             + (f", {bonus:,} with a share issue undone first" if bonus else "")]
    if n_rights or above:
        notes.append(f"{n_rights:,} ex-date(s) whose gap a dividend of at most {MAX_CASH:.0%} of the "
                     f"price cannot explain (rights issues) and {above:,} day(s) with a preclose above the "
                     "previous close: no dividend counted on them")
    return Dividends(div, notes, n_ex)


def weighted_dividends(panel: Panel, weights: np.ndarray) -> np.ndarray | None:
    """``[days]`` the dividends of the members held at ``weights`` (``[days, stocks]``, row
    ``t`` held over day ``t``), or None when the data cannot tell them."""
    d = dividend_returns(panel).returns
    return None if d is None else np.nansum(weights * d, axis=1)


def total_return_index(index_returns: pd.Series, panel: Panel, weights: np.ndarray
                       ) -> tuple[pd.Series | None, list[str]]:
    """``(returns, notes)``: the estimated total-return index's daily returns on
    ``index_returns``' days (dates of ``panel``): the price index's plus the members' dividends
    at ``weights``; None (and why, in the notes) when the data cannot tell the dividends."""
    dividends = dividend_returns(panel)
    if dividends.returns is None:
        return None, list(dividends.notes)
    per_day = pd.Series(np.nansum(weights * dividends.returns, axis=1), index=panel.dates)
    added = per_day.reindex(index_returns.index)
    off = int(added.isna().sum())
    notes = list(dividends.notes)
    if off:
        notes.append(f"{off} day(s) of the index off the data's calendar: no dividend added on them")
    return (index_returns + added.fillna(0.0)).rename("total_return"), notes
