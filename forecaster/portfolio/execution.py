"""The backtest's execution: one day's book moved towards target weights under the exchange's
rules (:func:`trade_towards`, which tomorrow's orders run too), the ex-dates' corporate actions on
the book (:func:`corporate_actions`), and the day loop that drives both (:func:`simulate`),
asking the policy for its targets from what is held (:mod:`forecaster.portfolio.policy`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecaster.portfolio.broker import Broker
from forecaster.portfolio.delisted import Exits
from forecaster.portfolio.policy import Holding
from forecaster.portfolio.rules import valid_buy
from forecaster.portfolio.strategy import ST_BLOCK


def corporate_actions(broker: Broker, panel, j: int, how: str) -> None:
    """Day ``j``'s ex-dates on the book (``panel``: the backtest's view, its ``ratio``,
    ``payout`` and ``preclose``): held shares scaled by ``ratio`` (whole shares, the fraction
    paid in cash at the preclose), or with ``how="cash"`` the payout credited as cash."""
    held = broker.shares != 0
    if how == "cash":
        broker.cash += float(broker.shares[held] @ panel.payout[j, held])
        return
    hit = held & (panel.ratio[j] != 1.0)
    if not hit.any():
        return
    exact = broker.shares[hit] * panel.ratio[j, hit]
    new = np.trunc(exact + np.sign(exact) * 1e-6).astype(np.int64)  # whole shares, toward zero
    broker.cash += float((exact - new) @ panel.preclose[j, hit])  # the fraction paid in cash
    broker.shares[hit] = new


def trade_towards(broker: Broker, date, w: np.ndarray, price: np.ndarray, value_price: np.ndarray,
                  up: np.ndarray, down: np.ndarray, suspended: np.ndarray, config,
                  resize: bool, tolerance: float, signal_date, no_buy: np.ndarray | None = None) -> None:
    """The backtest's orders of one day: move ``broker``'s book towards weights ``w``
    ``[stocks]`` at ``price`` ``[stocks]`` (``value_price`` values the book; ``up``/``down``
    the day's limit prices, ``suspended`` its suspensions). ``no_buy`` (bool ``[stocks]``, the
    ST rule: :func:`~forecaster.portfolio.strategy.st_no_buy`): no long position is opened or
    added to; such a buy is a blocked row, reason ``"st"``. Tomorrow's orders
    (:mod:`forecaster.portfolio.orders`) run this same function, so they follow the backtest's
    rules exactly."""
    shares = broker.shares
    if not w.any() and not shares.any():
        return
    nav = broker.cash + float(shares @ value_price)
    c = config.costs
    minimum, step = broker.min_buy, broker.buy_step  # each board's buy lots
    # Size with the buy-side cost estimate so that a 100% target is affordable after fees.
    size_price = np.where(np.isfinite(price), price, value_price) * (
        1 + c.slippage_bps / 1e4 + c.commission_rate + c.transfer_fee_rate)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where(size_price > 0, np.abs(w) * nav / size_price, 0.0)
    desired = np.sign(w).astype(np.int64) * valid_buy(np.floor(raw + 1e-9).astype(np.int64), minimum, step)
    keep = (shares != 0) & (np.sign(shares) == np.sign(w))
    if resize and tolerance < math.inf:
        keep &= np.abs(shares * value_price - w * nav) <= tolerance * np.abs(w) * nav
    desired = np.where(keep, shares, desired)
    if no_buy is not None and no_buy.any():  # the ST rule: hold (or cover a short), never add
        wanted = np.asarray(no_buy, dtype=bool) & (w > 0)
        stop = wanted & ((desired > np.maximum(shares, 0)) | (shares <= 0))
        for i in np.flatnonzero(stop):
            want = int(desired[i] - max(shares[i], 0)) if desired[i] > 0 else int(round(raw[i]))
            broker.reject(date, i, "buy", want, float(price[i]), ST_BLOCK, signal_date)
        desired = np.where(stop, np.maximum(shares, 0), desired)
        w = np.where(stop & (shares <= 0), 0.0, w)  # nothing held: no lot_size row besides
    delta = desired - shares
    # every buy order in the board's lots (an odd lot held stays)
    delta = np.where(delta > 0, valid_buy(delta, minimum, step), delta)
    for i in np.flatnonzero((w != 0) & (shares == 0) & (desired == 0) & (size_price > 0)):
        broker.reject(date, i, "buy" if w[i] > 0 else "sell", int(round(raw[i])), float(price[i]), "lot_size",
                      signal_date)  # the target is worth less than one lot
    for i in np.concatenate([np.flatnonzero(delta < 0), np.flatnonzero(delta > 0)]):  # sells first
        broker.order(date, i, int(delta[i]), float(price[i]), limit_up=float(up[i]),
                     limit_down=float(down[i]), suspended=bool(suspended[i]), signal_date=signal_date)


def _trade_day(broker: Broker, panel, config, j: int, w: np.ndarray,
               price: np.ndarray, value_price: np.ndarray, resize: bool, tolerance: float,
               signal_date, no_buy: np.ndarray | None) -> None:
    """Move the book towards weights ``w [stocks]`` at ``price [stocks]`` on day ``j``."""
    trade_towards(broker, panel.dates[j], w, price, value_price, panel.up[j], panel.down[j],
                  panel.suspended[j], config, resize, tolerance, signal_date, no_buy)


def simulate(panel, targets, rebalance: np.ndarray, start: int, end: int, config, tolerance: float,
             allow_short: bool, no_buy: np.ndarray | None = None):
    """The backtest's day loop: days ``start..end`` of ``panel`` (the backtest's view of the
    prices) under ``config`` (:class:`~forecaster.portfolio.backtest.BacktestConfig`).
    ``targets(k, held)``: the target weights ``[stocks]`` in force on calendar row ``k`` (the
    forecast row traded that day) from what is ``held`` at the signal day's close
    (:class:`~forecaster.portfolio.policy.Holding`: after lots, tolerance, blocked trades and
    suspensions; :func:`~forecaster.portfolio.policy.in_force`); ``rebalance`` ``[days]``: the
    days a held position is resized; ``no_buy`` ``[days x stocks]`` by forecast row: stocks not
    bought (the ST rule).

    Returns ``(equity [days], cash [days], positions [days x stocks], trades, delisted exits)``.
    """
    broker = Broker(panel.codes, config.capital, config.costs, config.market.lot_size, allow_short)
    exits = Exits(panel)  # positions ended by a delisting (a no-op without one)
    n_days = end - start + 1
    equity, cash = np.empty(n_days), np.empty(n_days)
    positions = np.zeros((n_days, len(panel.codes)), dtype=np.int64)
    at_open = config.execution == "next_open"
    held = Holding(np.zeros(len(panel.codes)), config.capital)  # at the last close (cash before the first)
    for d, j in enumerate(range(start, end + 1)):
        broker.new_day()
        if d and broker.shares.any():
            corporate_actions(broker, panel, j, config.market.corporate_actions)
        if at_open:  # the signal date: the trading day before, whose close the decision used
            signal = panel.dates[j - 1] if j else pd.NaT  # (none in the data before its first day)
            exits.before(broker)
            _trade_day(broker, panel, config, j, targets(j, held), panel.open[j], panel.open_val[j],
                       rebalance[j], tolerance, signal, None if no_buy is None else no_buy[j])
            exits.after(broker, panel.exclude[j])
            exits.close_out(broker, j, panel.dates[j], signal)  # at the close of a last trading day
        else:  # the signal date: the day itself, whose close the decision used and trades at
            exits.close_out(broker, j, panel.dates[j], panel.dates[j])
            if j < end:  # at the close, for tomorrow's forecast row
                exits.before(broker)
                w = targets(j + 1, holding(broker, panel.close_val[j]))
                _trade_day(broker, panel, config, j, w, panel.close[j], panel.close_val[j], rebalance[j + 1],
                           tolerance, panel.dates[j], None if no_buy is None else no_buy[j + 1])
                exits.after(broker, panel.exclude[j + 1])
        equity[d] = broker.cash + float(broker.shares @ panel.close_val[j])
        cash[d] = broker.cash
        positions[d] = broker.shares
        if at_open:
            held = holding(broker, panel.close_val[j])
    return equity, cash, positions, broker.trades_frame(), exits.frame()


def holding(broker: Broker, close: np.ndarray) -> Holding:
    """What the book holds at ``close`` ``[stocks]``: weights value / NAV (0 without a NAV)."""
    value = broker.shares * close
    nav = broker.cash + float(value.sum())
    return Holding(value / nav if nav > 0 else np.zeros_like(value), nav)
