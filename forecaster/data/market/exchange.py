"""Facts of the A-share exchanges that the data carry: how codes are written, boards, daily
price limits by board, date and ST status, and the exchange's rounding of prices.

* :func:`canonical_code`: every way a stock code is written (``600000.SH``, ``sh600000``,
  ``600000``) as ``sh.600000``;
* :func:`price_limit`: the daily limit as a fraction of the previous close, by board, date
  (none before 1996-12-16) and ST status (:func:`limit_matrix` for a whole panel);
  :func:`limit_prices` turns it into the exchange's limit prices (``preclose * (1 +/- limit)``
  rounded half up to 0.01).

Listing-day rules (no limit on a new stock's first days) cannot be read off a code and a date;
:func:`limit_matrix` treats a day whose own bar lies outside the band as a day without limits.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# The exchanges' daily price limits began on 1996-12-16; no day before it has one.
LIMITS_BEGIN = pd.Timestamp("1996-12-16")
CHINEXT_REFORM = pd.Timestamp("2020-08-24")  # ChiNext registration reform: 10% -> 20% limits
# Main-board risk-warning (ST / *ST) stocks moved from 5% to 10% limits on 2025-07-07.
MAIN_BOARD_ST_CHANGE = pd.Timestamp("2025-07-07")


def canonical_code(raw: str) -> str:
    """``600000.SH`` / ``sh600000`` / ``600000`` / ``sh.600000`` -> ``sh.600000``."""
    s = str(raw).strip().lower()
    if "." in s:
        a, b = s.split(".", 1)
        if a in ("sh", "sz", "bj"):
            return f"{a}.{b}"
        if b in ("sh", "sz", "bj"):
            return f"{b}.{a}"
    if s[:2] in ("sh", "sz", "bj") and s[2:].isdigit():
        return f"{s[:2]}.{s[2:]}"
    if s.isdigit() and len(s) <= 6:
        s = s.zfill(6)
        exchange = "sh" if s[0] in "569" else "bj" if s[0] in "48" else "sz"
        return f"{exchange}.{s}"
    return str(raw).strip()


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
    lim = np.where(boards == "bse", 0.30, lim)
    return np.where((dates < LIMITS_BEGIN)[:, None], np.inf, lim)


def price_limit(code: str, date, is_st: bool | int = False) -> float:
    """The daily price limit of ``code`` on ``date`` as a fraction of the previous close.

    STAR (sh.688xxx) 0.20; ChiNext (sz.300xxx/301xxx) 0.20 from 2020-08-24 and main-board rules
    before; main board 0.10, ST 0.05 (0.10 from 2025-07-07); Beijing 0.30; ``inf`` (no limit)
    before 1996-12-16, when limits began. New listings' no-limit days are not covered here (see
    :func:`limit_matrix`).
    """
    lim = _limit_fraction(np.array([board(code)]), pd.DatetimeIndex([pd.Timestamp(date)]),
                          np.array([[bool(is_st)]]))
    return float(lim[0, 0])


def limit_prices(preclose: float, limit: float) -> tuple[float, float]:
    """``(limit_up, limit_down)``: ``preclose * (1 +/- limit)`` rounded half up to 0.01 (no
    limit, ``inf``: ``(inf, 0)``)."""
    return round_price(preclose * (1.0 + limit)), max(round_price(preclose * (1.0 - limit)), 0.0)


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
        ``(up, down)`` ``[days x stocks]`` float arrays, ``NaN`` where ``preclose`` is ``NaN``;
        ``(inf, 0)`` on days before 1996-12-16 (:data:`LIMITS_BEGIN`).
    """
    dates = pd.DatetimeIndex(dates)
    boards = np.array([board(c) for c in codes])
    lim = _limit_fraction(boards, dates, np.asarray(is_st, dtype=float) == 1)
    with np.errstate(invalid="ignore"):
        up = round_price(preclose * (1.0 + lim))
        down = np.maximum(round_price(preclose * (1.0 - lim)), 0.0)  # no limit: -inf -> 0
    if high is not None and low is not None:
        with np.errstate(invalid="ignore"):
            unlimited = (high > up + 1e-6) | (low < down - 1e-6)
        up = np.where(unlimited, np.inf, up)
        down = np.where(unlimited, 0.0, down)
    return up, down


def float_market_value(volume, close, turnover):
    """The float market value at the close (CNY) from a day's ``volume`` (shares), ``close`` and
    ``turnover`` (percent of the float shares traded, baostock's ``turn``): close x float shares
    = close x volume x 100 / turnover; NaN where nothing traded (turnover 0 or missing).
    Series in, a Series out."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return 100.0 * volume * close / turnover.where(turnover > 0)
