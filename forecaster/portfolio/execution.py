"""One day's execution in the backtest: the book moved towards target weights under the
exchange's rules (:func:`trade_towards`, which tomorrow's orders run too), and the ex-dates'
corporate actions on the book (:func:`corporate_actions`). :mod:`forecaster.portfolio.backtest`
drives both day by day.
"""

from __future__ import annotations

import math

import numpy as np

from forecaster.portfolio.broker import Broker
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
