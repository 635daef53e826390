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
and a preclose above the previous close are no dividend: counted and said. Prices alone cannot
tell a rights issue whose gap is small from a dividend: every ex-date read as a dividend above
:data:`LARGE` of the price is listed (:attr:`Dividends.large`, ``dividends.csv``). Without a
``preclose`` the data say nothing of dividends: the estimate is unavailable (None and a note),
never 0.

A dividend file (``--dividend-data FILE``, :func:`attach_dividends`) replaces the reading for
the stocks it covers: each ex-date's cash per share before tax over the previous close, and no
dividend on any other day of those stocks (a rights issue's gap is none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.panel import Panel

BONUS_STEP = 0.1  # share issues come as 1, 2, ... new shares per 10
MAX_BONUS = 5.0
MIN_GAP = 1e-4  # a gap smaller than this is the price's rounding, not an ex-date
TOLERANCE = 5e-4  # of gap x (1 + k) above 1 still read as a pure share issue
MAX_CASH = 0.15  # a cash part above this share of the price is not a dividend (a rights issue)
LARGE = 0.05  # a dividend read from prices above this share of the price is listed for a look
DIVIDEND_FILE_KEY = ("dividend_file",)


LARGE_COLUMNS = ("date", "code", "dividend", "gap")  # dividends.csv: a read dividend above LARGE


@dataclass
class Dividends:
    """``returns``: ``[days, stocks]`` each stock-day's dividend return (0 off ex-dates, NaN
    without a bar), None when the data cannot tell; ``notes``: what was read and what not;
    ``large``: the ex-dates read from prices as a dividend above :data:`LARGE` of the price
    (:data:`LARGE_COLUMNS`: ``dividend`` the return, ``gap`` ``1 - preclose / previous close``)."""

    returns: np.ndarray | None
    notes: list[str] = field(default_factory=list)
    ex_dates: int = 0
    large: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(LARGE_COLUMNS)))


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
    filed = panel._cache.get(DIVIDEND_FILE_KEY)
    if filed is not None:  # the exporter's records for the stocks the file covers
        file_div, covered, notes_file = filed
        div = np.where(covered[None, :], np.where(panel.listed, file_div, np.nan), div)
        ex = ex & ~covered[None, :]
    n_ex = int(ex.sum())
    if n_ex == 0 and filed is not None:
        return Dividends(div, list(filed[2]), 0)
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
    big = np.argwhere(ex & ~rights & (np.nan_to_num(div) > LARGE))
    large = pd.DataFrame({"date": panel.dates[big[:, 0]], "code": np.asarray(panel.codes)[big[:, 1]],
                          "dividend": div[big[:, 0], big[:, 1]], "gap": 1 - g[big[:, 0], big[:, 1]]},
                         columns=list(LARGE_COLUMNS))
    if len(large):
        notes.append(f"{len(large):,} ex-date(s) read from prices as a dividend above {LARGE:.0%} of the "
                     "price (a rights issue prices cannot tell from one): listed in dividends.csv; "
                     "--dividend-data FILE reads them from the exporter's records")
    if filed is not None:
        notes = [*filed[2], *notes]
    return Dividends(div, notes, n_ex, large)


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


def attach_dividends(panel: Panel, path: str | Path) -> list[str]:
    """Read ``path`` (:func:`~forecaster.data.daily.dividends.read_dividends`: checked whole,
    one error naming its line) and keep its dividends with ``panel``: for each stock it covers,
    each ex-date's cash per share over the previous close, 0 on its other days (module
    docstring). Returns the notes (what was read, what lay outside the data's days).

    Raises:
        DataError: a bad file, or an ex-date inside the data's days that is no trading day."""
    from forecaster.data.daily.dividends import OPTION, read_dividends
    from forecaster.data.sources import DataError

    table, notes = read_dividends(path, panel.codes)
    close = panel.fields["close"]
    previous = pd.DataFrame(close).ffill().shift(1).to_numpy()
    column = {str(c): j for j, c in enumerate(panel.codes)}
    j = table["code"].map(column).to_numpy()
    days = pd.DatetimeIndex(table["ex_date"])
    inside = (days >= panel.dates[0]) & (days <= panel.dates[-1])
    t = panel.dates.get_indexer(days)
    closed = inside & (t < 0)
    if closed.any():
        i = int(np.flatnonzero(closed)[0])
        raise DataError(f"{OPTION} {path}: line {table['line'].iloc[i]}: ex-date {days[i].date()} of "
                        f"{table['code'].iloc[i]} is no trading day of the data")
    div = np.zeros_like(close)
    use = inside & (t >= 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        div[t[use], j[use]] = table["cash"].to_numpy()[use] / previous[t[use], j[use]]
    covered = np.zeros(panel.n_stocks, dtype=bool)
    covered[j] = True
    with_cash = int((table["cash"].to_numpy()[use] > 0).sum())
    notes = [f"dividends of {int(covered.sum())} stock(s) from {path} ({int(use.sum()):,} ex-date(s) in the "
             f"data's days, {with_cash:,} with cash); other days of those stocks hold none, whatever their "
             "price gap", *notes]
    if (~inside).any():
        notes.append(f"{int((~inside).sum()):,} row(s) of {path} outside the data's days left out")
    panel._cache[DIVIDEND_FILE_KEY] = (np.nan_to_num(div), covered, notes)
    panel._cache.pop(("dividend_returns",), None)
    panel._cache.pop(("price_growth",), None)
    return notes
