"""Positions ended by a delisting, under the backtest's rule
(:mod:`forecaster.portfolio.backtest`; which stocks are delisted:
:mod:`forecaster.data.market.delisting`).

From the signal day a stock's delisting is known (a ``退`` name: its delisting period; or its
last day) it is not bought, and a position in it is sold at the next execution (subject to
its limits and T+1, retried daily); what is still held at the close of its last trading day is
sold at that close when the stock trades that day and the close is above limit-down. What that
sale leaves (T+1 on shares bought that morning, a suspended last bar, limit-down) depends on how
the bars stop (:func:`valued_at_last_close`):

* after a ``退`` delisting period: written down to zero (the shares move to the delisted-shares
  board, nearly worthless and hard to sell);
* without one (a merger: shareholders of an absorbed company are paid in the acquirer's shares;
  or a long suspension): valued at the last close, a cash-equivalent exit (:data:`VALUED_LAST`),
  when that close is above limit-down; a stop that neither a ``退`` name nor an instruments end
  confirms (suspended or delisted, :data:`~forecaster.data.market.delisting.QUIET_REASON`) is
  valued there whatever the close, never written down;
* otherwise (an instruments end after a last close at limit-down) written down to zero.

A short position is covered at its last close (the long-short book is a paper portfolio).
:class:`Exits` records each such exit: the shares, the price, what it brought after fees
(``value``), what the shares cost with fees (``cost``, average cost) and the loss
(``cost - value``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.market.delisting import (
    DELISTED_BEFORE_EXIT,
    KNOWN_ON_SIGNAL_DAY,
    QUIET_DAYS,
    describe,
)

EXIT_COLUMNS = ("date", "code", "how", "shares", "price", "value", "cost", "loss")
SOLD_IN_PERIOD = "sold in the delisting period"
SOLD_LAST = "sold at the last close"
WRITTEN_OFF = "written down to zero"
VALUED_LAST = "stopped without a 退 period (merger or long suspension): valued at its last close"
COVERED = "short covered at the last close"
REASON = "delisting"  # the reason on the trade rows of these sells


def valued_at_last_close(panel) -> np.ndarray:
    """``[stocks]`` whether shares of a stopped stock left unsold at its last close are valued at
    that close (a cash-equivalent exit) rather than written down to zero (module docstring).
    ``panel``: the backtest's view (``last``, ``in_period``, ``quiet``, ``close_val``, ``down``)."""
    rows = np.maximum(panel.last, 0)
    cols = np.arange(len(panel.last))
    close, down = panel.close_val[rows, cols], panel.down[rows, cols]
    with np.errstate(invalid="ignore"):
        above = close > np.nan_to_num(down, nan=0.0)
    return (panel.last >= 0) & ~panel.in_period & (panel.quiet | above)


class Exits:
    """Records the exits of one simulation (a no-op where no stock of ``panel`` delists).

    ``panel``: the backtest's view (``codes``, ``known``, ``last``, ``has_bar``,
    ``suspended``, ``close``, ``close_val``, ``down``, ``in_period``, ``quiet``)."""

    def __init__(self, panel):
        self.panel = panel
        self.active = bool(panel.known.any())
        self.valued = valued_at_last_close(panel) if self.active else None
        self.rows: list[tuple] = []
        self._n, self._shares, self._cost = 0, None, None

    def before(self, broker) -> None:
        """Call before a day's trades: what is held and what it cost."""
        if self.active:
            self._n, self._shares, self._cost = len(broker.trades), broker.shares.copy(), broker.cost.copy()

    def after(self, broker, exclude: np.ndarray) -> None:
        """Call after them: the sells of stocks excluded for a known delisting (``exclude``
        ``[stocks]``) are exits, their trade rows marked ``"delisting"``."""
        if not self.active or not exclude.any():
            return
        where = {c: i for i, c in enumerate(broker.codes)}
        for k in range(self._n, len(broker.trades)):
            row = list(broker.trades[k])
            i = where[row[2]]
            if not exclude[i] or row[3] != "sell" or row[5] <= 0 or self._shares[i] <= 0:
                continue
            if not row[13]:
                row[13] = REASON
                broker.trades[k] = tuple(row)
            self._record(row, self._cost[i] * row[5] / self._shares[i], SOLD_IN_PERIOD)

    def close_out(self, broker, j: int, date, signal_date=None) -> None:
        """At day ``j``'s close: the positions in stocks whose last bar is day ``j``; their trade
        rows carry ``signal_date`` (default ``date``)."""
        if not self.active:
            return
        p = self.panel
        for i in np.flatnonzero((p.last == j) & (broker.shares != 0)):
            held = int(broker.shares[i])
            if held < 0:  # a short: covered at the last close
                price = float(p.close_val[j, i])
                broker.cash -= -held * price
                broker.shares[i] = 0
                self.rows.append((date, p.codes[i], COVERED, held, price, held * price, np.nan, np.nan))
                continue
            cost = float(broker.cost[i])
            traded = bool(p.has_bar[j, i] and not p.suspended[j, i])
            n = len(broker.trades)
            broker.order(date, i, -held, float(p.close[j, i]), limit_down=float(p.down[j, i]),
                         suspended=not traded, signal_date=date if signal_date is None else signal_date,
                         note=REASON)
            sold = held - int(broker.shares[i])
            if sold > 0:
                self._record(broker.trades[n], cost * sold / held, SOLD_LAST)
            left = int(broker.shares[i])
            if left > 0:
                cost_left = broker.write_off(i)
                if self.valued[i]:  # paid as at its last close (no fees: no sale takes place)
                    price = float(p.close_val[j, i])
                    broker.cash += left * price
                    self.rows.append((date, p.codes[i], VALUED_LAST, left, price, left * price, cost_left,
                                      cost_left - left * price))
                else:
                    self.rows.append((date, p.codes[i], WRITTEN_OFF, left, 0.0, 0.0, cost_left, cost_left))

    def _record(self, row, cost: float, how: str) -> None:
        date, _, code, _, _, shares, price, value, commission, stamp, transfer = row[:11]
        net = value - commission - stamp - transfer
        self.rows.append((date, code, how, int(shares), float(price), float(net), float(cost),
                          float(cost - net)))

    def frame(self) -> pd.DataFrame:
        """The exits, columns :data:`EXIT_COLUMNS`."""
        frame = pd.DataFrame(self.rows, columns=list(EXIT_COLUMNS))
        frame["date"] = pd.to_datetime(frame["date"])
        return frame


def exit_text(exits: pd.DataFrame) -> str:
    """What a backtest did with its positions in delisting stocks, in words (``""``: none):
    ``sz.300104 2020-06-08: sold in the delisting period (1,200 shares, value 345.00, loss
    1,234.00)``; their total loss."""
    if not len(exits):
        return ""
    parts = [f"{r.code} {pd.Timestamp(r.date).date()}: {r.how} ({abs(int(r.shares)):,} shares, value "
             f"{r.value:,.2f}" + (f", loss {r.loss:,.2f}" if np.isfinite(r.loss) else "") + ")"
             for r in exits.itertuples()]
    return f"{len(exits)} exit(s) by delisting, loss {np.nansum(exits['loss']):,.2f} CNY: " + "; ".join(parts)


def delisting_notes(backtests: dict, model: str, masked: dict | None = None) -> list[str]:
    """The report's lines on delisted stocks (none where no backtested stock delists): which
    were delisted, when and why, the rule, the labels masked for them (``masked``: the label's
    counts by reason, :class:`~forecaster.features.labels.LabelReport`), and what ``model``'s
    backtest (and the others, as a count) did with any position in them."""
    tables = [r.delisted for r in backtests.values() if len(r.delisted)]
    if not tables:
        return []
    named, quiet = describe(tables[0]), describe(tables[0], quiet=True)
    pending = tables[0][~tables[0]["delisted"]]
    lines = []
    known, before = ((masked or {}).get(k, 0) for k in (KNOWN_ON_SIGNAL_DAY, DELISTED_BEFORE_EXIT))
    labels = (f"; {known + before} labels masked ({known} with the delisting known on the signal day, "
              f"{before} delisted before the exit)" if masked else "")
    if named:
        lines.append(f"delisted stocks (not suspended): {named}; the backtests buy none once its delisting "
                     "is known, sell a holding at the next execution, else at its last close; what is left "
                     "is written down to zero after a '退' period, and valued at its last close without one "
                     f"(a merger) when that close is above limit-down{labels}")
    if quiet:
        lines.append(f"suspended or delisted (more than {QUIET_DAYS} trading days without a bar at the "
                     f"data's end, no '退' name, no instruments end): {quiet}; the backtests buy none after "
                     "its last bar and sell a holding at its last close, else value it at that close (never "
                     "written down)"
                     + ("" if named else labels))
    if len(pending):
        lines.append("in their delisting period at the data's end (not bought): "
                     + ", ".join(pending["code"]))
    main = backtests.get(model)
    did = [f"{model}'s backtest: " + (exit_text(main.delisted_exits)
                                       or "held none of them once their delisting was known")] if main else []
    others = {n: r for n, r in backtests.items() if n != model}
    if others:
        n_exits = sum(len(r.delisted_exits) for r in others.values())
        loss = sum(float(np.nansum(r.delisted_exits["loss"])) for r in others.values())
        did.append(f"the other {len(others)} backtests: {n_exits} exit(s) by delisting"
                   + (f", loss {loss:,.2f} CNY in all" if n_exits else ""))
    return lines + ["; ".join(did)] if did else lines
