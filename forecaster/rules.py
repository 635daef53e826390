"""A-share trading rules for the backtest: transaction costs, boards and daily price limits.

* :class:`CostModel`: commission with a per-trade minimum, stamp duty on sells (0.1% before
  2023-08-28, 0.05% from that date), transfer fee and slippage. Fees are rounded to the cent
  (half up), as brokers bill them.
* :func:`price_limit`: the daily limit as a fraction of the previous close, by board, date
  and ST status (:func:`limit_matrix` for a whole panel); :func:`limit_prices` turns it into
  the exchange's limit prices (``preclose * (1 +/- limit)`` rounded half up to 0.01).

Listing-day rules (no limit on a new stock's first days) cannot be read off a code and a date;
:func:`limit_matrix` treats a day whose own bar lies outside the band as a day without limits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

SIDES = ("buy", "sell")

CHINEXT_REFORM = pd.Timestamp("2020-08-24")  # ChiNext registration reform: 10% -> 20% limits
# Main-board risk-warning (ST / *ST) stocks moved from 5% to 10% limits on 2025-07-07.
MAIN_BOARD_ST_CHANGE = pd.Timestamp("2025-07-07")


def round_price(x):
    """Round prices (and non-negative fees) half up to 0.01, elementwise for arrays
    (``NaN``/``inf`` pass through); a scalar gives a ``float``.

    Exact for prices with at most four decimals (a two-decimal close times a two-decimal
    factor), where binary rounding error is far below the epsilon used: 10.05 at 10% -> 11.06
    and 9.05, as the exchanges round.
    """
    arr = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(np.isfinite(arr), np.floor(arr * 100.0 + 0.5 + 1e-6) / 100.0, arr)
    return out if out.ndim else float(out)


@dataclass(frozen=True)
class CostModel:
    """A-share transaction costs (rates are fractions of traded value; money in CNY).

    Attributes:
        commission_rate: broker commission, both sides.
        min_commission: minimum commission per trade (order), both sides.
        stamp_duty_before: stamp duty on sells dated before ``stamp_duty_change``.
        stamp_duty_after: stamp duty on sells dated on or after ``stamp_duty_change``.
        stamp_duty_change: the date the stamp duty was halved (2023-08-28).
        transfer_fee_rate: share-transfer fee, both sides.
        slippage_bps: buys fill at ``price * (1 + bps / 1e4)``, sells at ``price * (1 - bps / 1e4)``.
    """

    commission_rate: float = 0.00025
    min_commission: float = 5.0
    stamp_duty_before: float = 0.001
    stamp_duty_after: float = 0.0005
    stamp_duty_change: str | pd.Timestamp = "2023-08-28"
    transfer_fee_rate: float = 0.00001
    slippage_bps: float = 5.0

    def __post_init__(self):
        for name in ("commission_rate", "stamp_duty_before", "stamp_duty_after", "transfer_fee_rate"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and 0.0 <= value < 0.1):
                raise ValueError(f"CostModel.{name} must be a fraction in [0, 0.1), got {value!r}")
        if not (isinstance(self.min_commission, (int, float)) and 0.0 <= self.min_commission < 1e6):
            raise ValueError(f"CostModel.min_commission must be CNY >= 0, got {self.min_commission!r}")
        if not (isinstance(self.slippage_bps, (int, float)) and 0.0 <= self.slippage_bps < 1000):
            raise ValueError(f"CostModel.slippage_bps must be in [0, 1000) bps, got {self.slippage_bps!r}")
        try:
            change = pd.Timestamp(self.stamp_duty_change)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                "CostModel.stamp_duty_change must be a date like '2023-08-28', "
                f"got {self.stamp_duty_change!r}"
            ) from exc
        if change is pd.NaT:
            raise ValueError("CostModel.stamp_duty_change must be a date, got NaT")
        object.__setattr__(self, "_change", change)  # parsed once; the dataclass is frozen

    def stamp_duty_rate(self, date) -> float:
        """The sell-side stamp duty rate in force on ``date``."""
        return self.stamp_duty_before if pd.Timestamp(date) < self._change else self.stamp_duty_after

    def fees(self, side: str, value: float, date) -> dict[str, float]:
        """Fees on one trade of ``value`` CNY (at the fill price) on ``date``.

        Returns:
            ``{"commission", "stamp_duty", "transfer_fee"}`` in CNY, each rounded to the cent;
            the commission is at least ``min_commission`` and stamp duty is charged on sells only.
        """
        if side not in SIDES:
            raise ValueError(f"side must be one of {SIDES}, got {side!r}")
        value = abs(float(value))
        commission = max(round_price(self.commission_rate * value), float(self.min_commission))
        stamp = round_price(self.stamp_duty_rate(date) * value) if side == "sell" else 0.0
        return {"commission": commission, "stamp_duty": stamp,
                "transfer_fee": round_price(self.transfer_fee_rate * value)}

    def fill_price(self, side: str, price: float) -> float:
        """The price after slippage: worse than ``price`` for the trader on either side."""
        s = self.slippage_bps / 1e4
        return price * (1.0 + s) if side == "buy" else price * (1.0 - s)


CORPORATE_ACTIONS = ("shares", "cash")


@dataclass
class MarketRules:
    """The exchange's rules that are settings (price limits by board and date, suspensions
    and T+1 always apply).

    Attributes:
        lot_size: shares per board lot; buys are whole lots.
        corporate_actions: ``"shares"`` (held shares scaled on ex-dates) or ``"cash"`` (the
            ex-date drop credited as cash); see :mod:`forecaster.backtest`.
    """

    lot_size: int = 100
    corporate_actions: str = "shares"

    def __post_init__(self):
        if isinstance(self.lot_size, bool) or not isinstance(self.lot_size, (int, np.integer)) \
                or self.lot_size < 1:
            raise ValueError(f"lot_size must be an integer >= 1, got {self.lot_size!r}")
        if self.corporate_actions not in CORPORATE_ACTIONS:
            raise ValueError(f"corporate_actions must be one of {CORPORATE_ACTIONS}, "
                             f"got {self.corporate_actions!r}")


def is_synthetic(code: str) -> bool:
    """Generated data carries codes ``syn.*`` (``syn.000001``, or ``syn.sz.300001`` to get a
    board's limit rules), which no listed stock has."""
    return str(code).strip().lower().startswith("syn.")


def board(code: str) -> str:
    """``"main"``, ``"chinext"`` (sz.30xxxx), ``"star"`` (sh.688/689xxx) or ``"bse"`` (Beijing).

    Codes that are not canonical ``sh.``/``sz.``/``bj.`` codes count as main board; a synthetic
    code ``syn.<canonical code>`` follows the rules of the board of the code it wraps.
    """
    code = str(code).strip().lower()
    if is_synthetic(code):
        code = code[4:]
    exchange, _, number = code.partition(".")
    if exchange == "sh" and number.startswith(("688", "689")):
        return "star"
    if exchange == "sz" and number.startswith("30"):
        return "chinext"
    if exchange == "bj":
        return "bse"
    return "main"


def _limit_fraction(boards: np.ndarray, dates: pd.DatetimeIndex, st: np.ndarray) -> np.ndarray:
    """The rule itself: limits ``[days x stocks]`` from boards ``[stocks]``, dates ``[days]``
    and ST flags ``[days x stocks]``."""
    after_reform = (dates >= CHINEXT_REFORM)[:, None]
    st_main = np.where((dates < MAIN_BOARD_ST_CHANGE)[:, None], 0.05, 0.10)
    main_rule = np.where(st, st_main, 0.10)  # main board, and ChiNext before the reform
    # STAR, and ChiNext after the reform, are 20% for ST shares too.
    lim = np.where((boards == "star") | ((boards == "chinext") & after_reform), 0.20, main_rule)
    return np.where(boards == "bse", 0.30, lim)


def price_limit(code: str, date, is_st: bool | int = False) -> float:
    """The daily price limit of ``code`` on ``date`` as a fraction of the previous close.

    STAR (sh.688xxx) 0.20; ChiNext (sz.300xxx/301xxx) 0.20 from 2020-08-24 and main-board rules
    before; main board 0.10, ST 0.05 (0.10 from 2025-07-07); Beijing 0.30. New listings' no-limit
    days are not covered here (see :func:`limit_matrix`).
    """
    lim = _limit_fraction(np.array([board(code)]), pd.DatetimeIndex([pd.Timestamp(date)]),
                          np.array([[bool(is_st)]]))
    return float(lim[0, 0])


def limit_prices(preclose: float, limit: float) -> tuple[float, float]:
    """``(limit_up, limit_down)``: ``preclose * (1 +/- limit)`` rounded half up to 0.01."""
    return round_price(preclose * (1.0 + limit)), round_price(preclose * (1.0 - limit))


def limit_matrix(codes, dates: pd.DatetimeIndex, preclose: np.ndarray, is_st: np.ndarray,
                 high: np.ndarray | None = None, low: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Limit-up and limit-down prices ``[days x stocks]`` for a panel.

    Args:
        codes: stock codes ``[stocks]``; dates: ``[days]``.
        preclose, is_st: ``[days x stocks]`` arrays (``NaN`` preclose where there is no bar).
        high, low: optional ``[days x stocks]``; a day whose high or low lies outside its band
            (a new listing's first days, which have no limit) gets ``(inf, 0)``.

    Returns:
        ``(up, down)`` ``[days x stocks]`` float arrays, ``NaN`` where ``preclose`` is ``NaN``.
    """
    dates = pd.DatetimeIndex(dates)
    boards = np.array([board(c) for c in codes])
    lim = _limit_fraction(boards, dates, np.asarray(is_st, dtype=float) == 1)
    up = round_price(preclose * (1.0 + lim))
    down = round_price(preclose * (1.0 - lim))
    if high is not None and low is not None:
        with np.errstate(invalid="ignore"):
            unlimited = (high > up + 1e-6) | (low < down - 1e-6)
        up = np.where(unlimited, np.inf, up)
        down = np.where(unlimited, 0.0, down)
    return up, down
