"""The broker of the A-share backtest: one order at a time, under the exchange's rules (buys
in each board's lots: 100 shares, STAR at least 200 then steps of 1; T+1, no buy at limit-up, no
sell at limit-down, nothing on suspended stocks or without a bar), with costs; every order
recorded as a trade row. Also the performance figures of an equity curve.
:func:`forecaster.portfolio.backtest.run_backtest` drives a broker day by day; a broker can be
driven by hand too.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecaster.metrics import TRADING_DAYS
from forecaster.metrics.returns import MIN_ANNUAL_DAYS
from forecaster.portfolio.rules import CostModel, buy_lots, valid_buy

TRADE_COLUMNS = [
    "date", "signal_date", "code", "side", "requested", "shares", "price", "value", "commission",
    "stamp_duty", "transfer_fee", "slippage_cost", "status", "reason",
]
FEE_COLUMNS = ("commission", "stamp_duty", "transfer_fee", "slippage_cost")


class Broker:
    """Cash, integer share positions and same-day purchases for a fixed list of stocks.

    :func:`run_backtest` drives one; it is public so that single orders (e.g. two on one day,
    to see T+1 bite) can be checked by hand. Every order appends a row to ``trades``.

    Args:
        codes: the stocks, addressed by position in :meth:`order`.
        capital: starting cash.
        costs: the cost model.
        lot_size: the main board's lot; buys follow each board's rule (:func:`buy_lots`).
        allow_short: let sells take positions below zero.
    """

    def __init__(self, codes, capital: float, costs: CostModel | None = None, lot_size: int = 100,
                 allow_short: bool = False):
        self.codes = list(codes)
        self.cash = float(capital)
        self.costs = costs if costs is not None else CostModel()
        self.lot = int(lot_size)
        self.min_buy, self.buy_step = buy_lots(self.codes, self.lot)  # [stocks] by board
        self.allow_short = allow_short
        self.shares = np.zeros(len(self.codes), dtype=np.int64)
        self.bought_today = np.zeros(len(self.codes), dtype=np.int64)
        # what the long shares held cost, fees included (average cost: a sale takes its share)
        self.cost = np.zeros(len(self.codes))
        self.trades: list[tuple] = []

    def new_day(self) -> None:
        """Start a trading day: yesterday's purchases become sellable (T+1)."""
        self.bought_today[:] = 0

    def _record(self, date, signal_date, i, side, requested, shares, price, fees, slippage, status, reason):
        value = shares * price
        self.trades.append((date, signal_date, self.codes[i], side, int(requested), int(shares), price, value,
                            fees["commission"], fees["stamp_duty"], fees["transfer_fee"], slippage, status,
                            reason))

    def reject(self, date, i: int, side: str, requested: int, price: float, reason: str,
               signal_date=None) -> str:
        """Record a wanted trade that cannot be placed at all (status ``"blocked"``)."""
        date = pd.Timestamp(date)
        signal_date = date if signal_date is None else pd.Timestamp(signal_date)
        return self._block(date, signal_date, i, side, requested, price, reason)

    def _block(self, date, signal_date, i, side, requested, price, reason) -> str:
        self._record(date, signal_date, i, side, requested, 0, price, _NO_FEES, 0.0, "blocked", reason)
        return "blocked"

    def _buy_cost(self, shares: int, fill: float, date) -> float:
        value = shares * fill
        fees = self.costs.fees("buy", value, date)
        return value + fees["commission"] + fees["transfer_fee"]

    def write_off(self, i: int) -> float:
        """Write the position in stock ``i`` down to zero (a delisting that left nothing to sell
        at): no cash comes in; returns what the shares cost."""
        cost = float(self.cost[i])
        self.shares[i] = 0
        self.cost[i] = 0.0
        return cost

    def order(self, date, i: int, shares: int, price: float, *, limit_up: float = math.inf,
              limit_down: float = 0.0, suspended: bool = False, signal_date=None, note: str = "") -> str:
        """Trade ``shares`` (> 0 buy, < 0 sell) of stock ``i`` at ``price`` on ``date``.

        Buys are floored to whole lots and cut to what the cash pays for; sells are limited to
        the shares held before today (T+1) and, without ``allow_short``, to the position.
        Fills are at the slippage price, capped at the limit prices. ``note``: the reason
        recorded on a fill that falls short of nothing (``"delisting"``).

        Returns:
            the trade's status: ``"filled"``, ``"partial"`` or ``"blocked"``.
        """
        date = pd.Timestamp(date)
        signal_date = date if signal_date is None else pd.Timestamp(signal_date)
        side = "buy" if shares > 0 else "sell"
        requested = abs(int(shares))
        if requested == 0:
            raise ValueError("an order needs a non-zero number of shares")
        if not np.isfinite(price) or price <= 0:
            return self._block(date, signal_date, i, side, requested, float("nan"), "no_data")
        if suspended:
            return self._block(date, signal_date, i, side, requested, price, "suspended")
        if side == "buy":
            if price >= limit_up - 1e-9:
                return self._block(date, signal_date, i, side, requested, price, "limit_up")
            qty = int(valid_buy(requested, self.min_buy[i], self.buy_step[i]))
            if qty == 0:
                return self._block(date, signal_date, i, side, requested, price, "lot_size")
            fill = min(self.costs.fill_price("buy", price), limit_up)
            reason = ""
            if self._buy_cost(qty, fill, date) > self.cash:
                reason = "cash"
                c = self.costs
                per_share = fill * (1 + c.commission_rate + c.transfer_fee_rate)
                affordable = int(max(self.cash, 0.0) // per_share)
                qty = int(valid_buy(min(qty, affordable), self.min_buy[i], self.buy_step[i]))
                while qty > 0 and self._buy_cost(qty, fill, date) > self.cash:
                    # the commission minimum can make the estimate one step short
                    qty = int(valid_buy(qty - 1, self.min_buy[i], self.buy_step[i]))
                if qty == 0:
                    return self._block(date, signal_date, i, side, requested, price, "cash")
        else:
            if price <= limit_down + 1e-9:
                return self._block(date, signal_date, i, side, requested, price, "limit_down")
            held, new = int(self.shares[i]), int(self.bought_today[i])
            wanted = requested if self.allow_short else min(requested, max(held, 0))
            if wanted == 0:
                return self._block(date, signal_date, i, side, requested, price, "no_position")
            # T+1: only shares held before today may be sold; a short sale needs no such shares.
            sellable = held - new if (new > 0 or not self.allow_short) else wanted
            qty = min(wanted, max(sellable, 0))
            reason = "t_plus_1" if qty < wanted else ""
            if qty == 0:
                return self._block(date, signal_date, i, side, requested, price, reason)
            fill = max(self.costs.fill_price("sell", price), limit_down)
        value = qty * fill
        fees = self.costs.fees(side, value, date)
        paid = fees["commission"] + fees["stamp_duty"] + fees["transfer_fee"]
        held = int(self.shares[i])
        if side == "buy":
            self.cash -= value + paid
            self.shares[i] += qty
            self.bought_today[i] += qty
            if held >= 0:
                self.cost[i] += value + paid
        else:
            self.cash += value - paid
            self.shares[i] -= qty
            if held > 0:
                self.cost[i] *= max(held - qty, 0) / held
        status = "filled" if qty == requested else "partial"
        self._record(date, signal_date, i, side, requested, qty, fill, fees, qty * abs(fill - price), status,
                     reason or note)
        return status

    def trades_frame(self) -> pd.DataFrame:
        """The trades so far as a DataFrame with columns :data:`TRADE_COLUMNS`."""
        return _trades_frame(self.trades)


_NO_FEES = {"commission": 0.0, "stamp_duty": 0.0, "transfer_fee": 0.0}


def _trades_frame(rows: list[tuple]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=TRADE_COLUMNS)
    for col in ("requested", "shares"):
        frame[col] = frame[col].astype(np.int64)
    for col in ("price", "value", *FEE_COLUMNS):
        frame[col] = frame[col].astype(float)
    for col in ("date", "signal_date"):
        frame[col] = pd.to_datetime(frame[col])
    return frame


def performance_metrics(equity: pd.Series, trades: pd.DataFrame | None = None,
                        capital: float | None = None) -> dict:
    """Summary statistics of an equity curve ``[date]`` (252 trading days a year, rf = 0).

    Args:
        equity: values at each close.
        trades: optional trades (columns :data:`TRADE_COLUMNS`) for turnover, costs and counts;
            without them those entries are ``NaN``.
        capital: the value before the first day; default ``equity.iloc[0]`` (then the first
            day has no return).

    Returns:
        ``total_return``; ``annual_return`` (geometric); ``annual_volatility`` (daily std,
        ddof=1, * sqrt(252)); ``sharpe`` (mean / std * sqrt(252)); ``sortino`` (mean / downside
        deviation * sqrt(252), downside deviation = sqrt(mean(min(r, 0)^2))); ``max_drawdown``
        as a positive fraction of the running peak; ``calmar`` (annual_return / max_drawdown);
        ``turnover`` (traded value / mean equity / years); ``costs_paid`` (fees + slippage);
        ``n_trades`` (filled or partial), ``n_blocked``, ``final_equity``, ``n_days``. Below
        :data:`~forecaster.metrics.returns.MIN_ANNUAL_DAYS` days the annual figures
        (return, volatility, Sharpe, Sortino, Calmar, turnover) are NaN.
    """
    eq = np.asarray(equity, dtype=float)
    values = eq if capital is None else np.concatenate([[float(capital)], eq])
    nan = float("nan")
    r = values[1:] / values[:-1] - 1.0 if len(values) > 1 else np.array([])
    n = len(r)
    years = n / TRADING_DAYS
    total = values[-1] / values[0] - 1.0 if len(values) else nan
    if n < MIN_ANNUAL_DAYS:  # not annualised (total_return, drawdown and counts still are)
        annual = nan
    elif total <= -1.0:
        annual = -1.0
    else:
        annual = (1.0 + total) ** (1.0 / years) - 1.0
    std = float(np.std(r, ddof=1)) if n > 1 else nan
    mean = float(np.mean(r)) if n else nan
    downside = float(np.sqrt(np.mean(np.minimum(r, 0.0) ** 2))) if n else nan
    peak = np.maximum.accumulate(values) if len(values) else values
    max_dd = float(np.max(1.0 - values / peak)) if len(values) else nan
    metrics = {
        "total_return": float(total),
        "annual_return": float(annual),
        "annual_volatility": float(std * math.sqrt(TRADING_DAYS)) if n >= MIN_ANNUAL_DAYS else nan,
        "sharpe": mean / std * math.sqrt(TRADING_DAYS) if std > 0 and n >= MIN_ANNUAL_DAYS else nan,
        "sortino": (mean / downside * math.sqrt(TRADING_DAYS) if downside > 0 and n >= MIN_ANNUAL_DAYS
                    else nan),
        "max_drawdown": max_dd,
        "calmar": float(annual / max_dd) if max_dd > 0 else nan,
        "turnover": nan,
        "costs_paid": nan,
        "n_trades": nan,
        "n_blocked": nan,
        "final_equity": float(values[-1]) if len(values) else nan,
        "n_days": n,
    }
    if trades is not None:
        done = trades["status"] != "blocked"
        traded = float(trades.loc[done, "value"].abs().sum())
        metrics["turnover"] = traded / float(np.mean(eq)) / years if n >= MIN_ANNUAL_DAYS and len(eq) else nan
        metrics["costs_paid"] = float(trades.loc[done, list(FEE_COLUMNS)].to_numpy().sum())
        metrics["n_trades"] = int(done.sum())
        metrics["n_blocked"] = int((~done).sum())
    return metrics
