"""The panel backtest's benchmark: the equal-weight universe, cost-free
(:func:`equal_weight_benchmark`); :mod:`forecaster.portfolio.backtest` describes it."""

from __future__ import annotations

import numpy as np

from forecaster.portfolio.delisted import valued_at_last_close


def equal_weight_benchmark(panel, start: int, end: int, capital: float, next_open: bool) -> np.ndarray:
    """Cost-free equal-weight universe ``[days]`` on the backtest's view of the panel
    (:class:`~forecaster.portfolio.backtest._Panel`), entered when the strategy is
    (``next_open``: at the first day's open, else at its close).

    Rebalanced at each close to equal value in the stocks that traded that day (not
    suspended, not on their first bar) and are members of the universe that day; a suspended
    holding is frozen -- it can be neither sold nor bought -- and earns its return when
    trading resumes; a holding that left the universe, or whose delisting is known (a ``退``
    name, :mod:`forecaster.data.market.delisting`), is sold at the first close it trades; a
    delisted stock still held at its last bar without trading that day is written down to
    zero after a ``退`` period, and otherwise turned into cash at its last close by the
    backtest's rule (:func:`~forecaster.portfolio.delisted.valued_at_last_close`; never
    carried at its last price).
    """
    trades = panel.has_bar & ~panel.suspended
    gone = panel.known
    live = trades & ~panel.first_bar & panel.member & ~gone
    leaving = trades & (~panel.member | gone)
    stop = np.zeros_like(trades)
    rows = panel.last[panel.last >= 0]
    stop[rows, np.flatnonzero(panel.last >= 0)] = True
    stop &= ~trades  # a last bar without trading: nothing to sell at
    valued = valued_at_last_close(panel)
    dead, cashed = stop & ~valued, stop & valued
    with np.errstate(invalid="ignore", divide="ignore"):
        growth = np.where(panel.has_bar, panel.close / panel.preclose, 1.0)
        first_growth = panel.close[start] / panel.open[start]
    growth = np.where(np.isfinite(growth), growth, 1.0)
    values = np.zeros(len(panel.codes))
    cash = float(capital)
    out = np.empty(end - start + 1)
    for d, j in enumerate(range(start, end + 1)):
        if d == 0 and next_open:
            if live[j].any():  # bought at the first open
                values = np.where(live[j], cash / live[j].sum(), 0.0)
                cash = 0.0
            values = values * np.where(live[j] & np.isfinite(first_growth), first_growth, 1.0)
        elif d:
            values = values * growth[j]
        values = np.where(dead[j], 0.0, values)
        if cashed[j].any():  # valued at its last close: cash
            cash += values[cashed[j]].sum()
            values = np.where(cashed[j], 0.0, values)
        if live[j].any():  # rebalance at the close among today's traders; frozen ones keep value
            free = cash + values[live[j]].sum() + values[leaving[j]].sum()
            values = np.where(live[j], free / live[j].sum(), np.where(leaving[j], 0.0, values))
            cash = 0.0
        elif (leaving[j] & gone[j]).any():  # nothing to buy today: a delisting's sale waits as cash
            sold = leaving[j] & gone[j]
            cash += values[sold].sum()
            values = np.where(sold, 0.0, values)
        out[d] = cash + values.sum()
    return out
