"""Tomorrow's ranked list: what to buy at the next open, and what cannot be bought.

:func:`ranked_list` scores every stock of a panel for the trading day after its last row
with a fitted panel model and says, per stock, whether an order at the next open can be
expected to fill: not when the stock is delisted or in its delisting period (a ``退`` name:
:meth:`~forecaster.data.panel.Panel.delistings`; the backtest buys neither), its bars stopped
long ago without either mark (``suspended or delisted (no bar since ...)``), did not trade on
the last day (suspended or no bar), is under special treatment (ST: 5 % limits, excluded by
most mandates; under the strategy's ``exclude_st``, the one ST rule the orders and the
backtest follow too: :func:`~forecaster.portfolio.strategy.st_no_buy`), closed at limit-up (it
would most likely open there, where buy orders queue unfilled), or is too new for the model's
input window (no score).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.market.calendar import next_trading_day
from forecaster.data.panel import Panel
from forecaster.portfolio.strategy import ST_REASON, StrategyConfig, st_no_buy

COLUMNS = ("signal_date", "trade_date", "code", "score", "rank", "quantile", "buyable", "reason",
           "last_close", "last_date")


def ranked_list(model, panel: Panel, n_quantiles: int = 5, min_history: int | None = None,
                strategy: StrategyConfig | None = None, trade_date=None) -> pd.DataFrame:
    """Every stock of ``panel`` ranked by ``model``'s score for the next trading day.

    Args:
        model: a fitted panel model with ``predict_next(panel) -> Series[code]``.
        panel: the data up to the last day (the signal day).
        n_quantiles: ``quantile`` runs 1 (lowest scores) .. ``n_quantiles`` (highest).
        min_history: bars a stock needs to count as listed long enough (default: the model's
            ``window``).
        strategy: its ``exclude_st`` decides whether ST is a reason not to buy (default: the
            default :class:`~forecaster.portfolio.strategy.StrategyConfig`'s, yes).
        trade_date: the day the list is for (default: the exchange's next trading day after
            the panel's last day, :func:`~forecaster.data.market.calendar.next_trading_day`).

    Returns:
        One row per stock (``COLUMNS``), best score first; stocks without a score come last
        with NaN score, rank and quantile. ``signal_date`` is the panel's last day (the day whose
        close the scores use, the same on every row), ``trade_date`` the trading day whose open
        they are for; ``last_date``/``last_close`` each stock's own last bar.
    """
    scores = model.predict_next(panel).reindex(panel.codes)
    last = panel.n_days - 1
    need = int(min_history or getattr(model, "window", 1))
    history = panel.listed.sum(axis=0)
    reasons = [delisting_reasons(panel)]
    for flag, text in (
            (~panel.listed[last], "no bar on the last day"),
            (panel.suspended[last] & panel.listed[last], "suspended on the last day"),
            (st_no_buy(panel.st[last], strategy or StrategyConfig()), ST_REASON),
            (panel.at_limit_up("close")[last], "closed at limit-up: likely to open there, buys queue"),
            (history < need, f"too new: fewer than {need} days of history"),
            (~np.isfinite(scores.to_numpy()), "no score (missing inputs)")):
        reasons.append(np.where(flag, text, ""))
    reason = ["; ".join(r for r in parts if r) for parts in zip(*reasons, strict=True)]
    rank = scores.rank(ascending=False, method="first")
    n_scored = int(scores.notna().sum())
    quantile = np.floor((n_scored - rank) * n_quantiles / max(n_scored, 1)) + 1
    table = pd.DataFrame({
        "code": panel.codes, "score": scores.to_numpy(), "rank": rank.to_numpy(),
        "quantile": quantile.to_numpy(), "buyable": [not r for r in reason], "reason": reason,
        "last_close": pd.DataFrame(panel["close"]).ffill().to_numpy()[last],
        "last_date": _last_bar_dates(panel), "signal_date": panel.dates[last].date(),
        "trade_date": pd.Timestamp(next_trading_day(panel.dates[last]).date if trade_date is None
                                   else trade_date).date(),
    }, columns=list(COLUMNS))
    table = table.sort_values(["rank", "code"], na_position="last", kind="stable").reset_index(drop=True)
    table["rank"] = table["rank"].astype("Int64")
    table["quantile"] = table["quantile"].astype("Int64")
    return table


def delisting_reasons(panel: Panel) -> np.ndarray:
    """``[stocks]`` why a stock is not to be bought for a delisting on the panel's last day
    (``""`` for the others): ``delisted (last day 2020-05-26: ...)``, ``suspended or delisted
    (no bar since 2015-10-15)`` or ``in its delisting period ('退' name from ...): not bought``."""
    gone = panel.delistings()
    out = np.full(panel.n_stocks, "", dtype=object)
    why = {r.code: r for r in gone.table.itertuples()}
    for i in np.flatnonzero(gone.known[-1]):
        row = why.get(str(panel.codes[i]))
        if row is None:
            continue
        if gone.quiet[i]:
            out[i] = row.reason
            continue
        out[i] = (f"delisted (last day {pd.Timestamp(row.last_day).date()}: {row.reason})" if row.delisted
                  else f"in its delisting period ({row.reason.split(';')[0]}): not bought")
    return out


def _last_bar_dates(panel: Panel) -> list:
    """``[stocks]`` the date of each stock's last bar (``None`` for a stock with none)."""
    seen = panel.listed.any(axis=0)
    last = panel.n_days - 1 - np.argmax(panel.listed[::-1], axis=0)
    return [panel.dates[j].date() if ok else None for j, ok in zip(last, seen, strict=True)]
