"""A-share trading settings of the backtest: transaction costs and the market rules that are
options (board lot, corporate actions).

* :class:`CostModel`: commission with a per-trade minimum, stamp duty on sells (0.1% before
  2023-08-28, 0.05% from that date), transfer fee and slippage. Fees are rounded to the cent
  (half up), as brokers bill them.

The exchange's own facts (boards, price limits) live in :mod:`forecaster.data.exchange`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.checks import ConfigError, check_choice, check_date, check_int
from forecaster.configs import documented, option
from forecaster.data.market.exchange import board, round_price

SIDES = ("buy", "sell")

# A-share stamp duty by date, the one table of it: (in force from, rate on buys, rate on sells),
# fractions of the traded value. Source: the Ministry of Finance and State Administration of
# Taxation's announcements of each change (2001-11-16 0.2 %; 2005-01-24 0.1 %; 2007-05-30 0.3 %;
# 2008-04-24 0.1 %, all both sides; 2008-09-19 0.1 % on sells only; 2023-08-28 halved to 0.05 %
# on sells). From 2008-09-19 the sell rate is the options' stamp_duty_before, and from
# stamp_duty_change (2023-08-28) stamp_duty_after, so a user can set today's rates; days before
# 2001-11-16 take that row's rate.
STAMP_DUTY = (
    (pd.Timestamp("2001-11-16"), 0.002, 0.002),
    (pd.Timestamp("2005-01-24"), 0.001, 0.001),
    (pd.Timestamp("2007-05-30"), 0.003, 0.003),
    (pd.Timestamp("2008-04-24"), 0.001, 0.001),
    (pd.Timestamp("2008-09-19"), 0.0, 0.001),  # sells only: stamp_duty_before from here
)
_STAMP_FROM = pd.DatetimeIndex([row[0] for row in STAMP_DUTY])


@documented
@dataclass(frozen=True)
class CostModel:
    """A-share transaction costs (rates are fractions of traded value; money in CNY)."""

    commission_rate: float = option(0.00025, "broker commission, both sides.")
    min_commission: float = option(5.0, "minimum commission per trade (order), both sides.")
    stamp_duty_before: float = option(0.001,
        "stamp duty on sells from 2008-09-19 (sells only since) to before stamp_duty_change; earlier days "
        "pay the table of rates by date (both sides: 0.2 % from 2001-11-16, 0.1 % from 2005-01-24, 0.3 % "
        "from 2007-05-30, 0.1 % from 2008-04-24).")
    stamp_duty_after: float = option(0.0005, "stamp duty on sells dated on or after stamp_duty_change.")
    stamp_duty_change: pd.Timestamp = option("2023-08-28", "the date the stamp duty was halved (2023-08-28).")
    transfer_fee_rate: float = option(0.00001, "share-transfer fee, both sides.")
    slippage_bps: float = option(5.0,
        "buys fill at price * (1 + bps / 1e4), sells at price * (1 - bps / 1e4).")

    def __post_init__(self):
        for name in ("commission_rate", "stamp_duty_before", "stamp_duty_after", "transfer_fee_rate"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value < 0.1):
                raise ConfigError(f"CostModel.{name} must be a fraction in [0, 0.1), got {value!r}")
        if not (isinstance(self.min_commission, (int, float)) and 0.0 <= self.min_commission < 1e6):
            raise ConfigError(f"CostModel.min_commission must be CNY >= 0, got {self.min_commission!r}")
        if not (isinstance(self.slippage_bps, (int, float)) and 0.0 <= self.slippage_bps < 1000):
            raise ConfigError(f"CostModel.slippage_bps must be in [0, 1000) bps, got {self.slippage_bps!r}")
        change = check_date("CostModel.stamp_duty_change", self.stamp_duty_change)
        object.__setattr__(self, "stamp_duty_change", change)  # parsed once; the dataclass is frozen
        object.__setattr__(self, "_change", change)

    def stamp_duty_rates(self, date) -> tuple[float, float]:
        """``(buy, sell)``: the stamp duty rates in force on ``date`` (:data:`STAMP_DUTY`; from
        2008-09-19 the sell rate is ``stamp_duty_before``, from ``stamp_duty_change``
        ``stamp_duty_after``)."""
        day = pd.Timestamp(date)
        if day >= self._change:
            return 0.0, self.stamp_duty_after
        if day >= STAMP_DUTY[-1][0]:
            return 0.0, self.stamp_duty_before
        _, buy, sell = STAMP_DUTY[max(int(_STAMP_FROM.searchsorted(day, side="right")) - 1, 0)]
        return buy, sell

    def stamp_duty_rate(self, date) -> float:
        """The sell-side stamp duty rate in force on ``date``."""
        return self.stamp_duty_rates(date)[1]

    def fees(self, side: str, value: float, date) -> dict[str, float]:
        """Fees on one trade of ``value`` CNY (at the fill price) on ``date``.

        Returns:
            ``{"commission", "stamp_duty", "transfer_fee"}`` in CNY, each rounded to the cent;
            the commission is at least ``min_commission``; the stamp duty is the side's rate on
            ``date`` (:meth:`stamp_duty_rates`: both sides before 2008-09-19, sells after).
        """
        check_choice("side", side, SIDES)
        value = abs(float(value))
        commission = max(round_price(self.commission_rate * value), float(self.min_commission))
        buy_rate, sell_rate = self.stamp_duty_rates(date)
        stamp = round_price((sell_rate if side == "sell" else buy_rate) * value)
        return {"commission": commission, "stamp_duty": stamp,
                "transfer_fee": round_price(self.transfer_fee_rate * value)}

    def fill_price(self, side: str, price: float) -> float:
        """The price after slippage: worse than ``price`` for the trader on either side."""
        s = self.slippage_bps / 1e4
        return price * (1.0 + s) if side == "buy" else price * (1.0 - s)


CORPORATE_ACTIONS = ("shares", "cash")


@documented
@dataclass
class MarketRules:
    """The exchange's rules that are settings (price limits by board and date, suspensions
    and T+1 always apply).
    """

    lot_size: int = option(100,
        "shares per board lot of the main board and ChiNext; buys are whole lots. STAR (688/689) buys are at "
        "least 200 shares, then any whole number; Beijing's at least 100, then any (the exchanges' rules).")
    corporate_actions: str = option("shares",
        '"shares" (held shares scaled on ex-dates) or "cash" (the ex-date drop credited as cash), so a '
        "dividend or split is neither lost nor a return.")

    def __post_init__(self):
        check_int("lot_size", self.lot_size)
        if self.corporate_actions not in CORPORATE_ACTIONS:
            raise ConfigError(f"corporate_actions must be one of {CORPORATE_ACTIONS}, "
                             f"got {self.corporate_actions!r}")


# Board -> (smallest buy, step above it) in shares, where it differs from the main board's lot:
# the STAR market takes 200 shares then steps of 1, Beijing's exchange 100 then steps of 1.
_BOARD_LOTS = {"star": (200, 1), "bse": (100, 1)}


def buy_lots(codes, lot_size: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """``(minimum, step)`` ``[stocks]``: the smallest buy order each stock's board accepts and
    the step above it (main board and ChiNext: ``lot_size`` and ``lot_size``; see
    :data:`_BOARD_LOTS`)."""
    pairs = [_BOARD_LOTS.get(board(c), (lot_size, lot_size)) for c in codes]
    minimum = np.array([p[0] for p in pairs], dtype=np.int64).reshape(-1)
    step = np.array([p[1] for p in pairs], dtype=np.int64).reshape(-1)
    return minimum, step


def check_capital(capital: float, panel, day: pd.Timestamp, lot_size: int = 100, members=None,
                  option: str = "--capital") -> None:
    """Refuse a book too small to buy anything: ``capital`` below one lot of the cheapest
    stock it could buy after ``day``'s close (listed, trading, a member where ``members``
    ``[days, stocks]`` or the panel's members say), at that close. Such a book would hold cash
    throughout while its figures read as a strategy's."""
    at = int(panel.dates.searchsorted(pd.Timestamp(day), side="right")) - 1
    if at < 0:
        return
    close = np.asarray(panel.fields["close"][at], dtype=float)
    ok = np.isfinite(close) & (close > 0) & np.asarray(panel.listed[at], bool)
    if panel.suspended is not None:
        ok &= ~np.asarray(panel.suspended[at], bool)
    members = getattr(panel, "members", None) if members is None else members
    if members is not None:
        ok &= np.asarray(members[at], bool)
    if not ok.any():
        return
    minimum, _ = buy_lots(panel.codes, lot_size)
    cost = np.where(ok, minimum * close, np.inf)
    i = int(np.argmin(cost))
    if capital < cost[i]:
        raise ConfigError(
            f"{option} {capital:,.0f} buys not one lot of any stock: the cheapest on "
            f"{panel.dates[at].date()}, {panel.codes[i]}, costs {cost[i]:,.0f} CNY for its smallest buy "
            f"({int(minimum[i])} shares at {close[i]:,.2f}); give {option} {int(np.ceil(cost[i] * 1.01)):,} "
            "or more (a book that cannot buy holds cash, and its figures would describe no book)")


def valid_buy(shares, minimum, step):
    """The largest buy at most ``shares`` that the board accepts (elementwise; 0 below the
    minimum): ``minimum + floor((shares - minimum) / step) * step``."""
    shares = np.asarray(shares, dtype=np.int64)
    out = minimum + (shares - minimum) // step * step
    return np.where(shares >= minimum, out, 0)
