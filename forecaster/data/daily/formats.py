"""The daily CSV layouts people export A-share bars in, and how each maps to the canonical frame.

Canonical frame: a ``DatetimeIndex`` named ``date`` and lower snake-case columns
``open, high, low, close`` (required) plus, where the source has them, ``preclose``
(previous close adjusted for ex-rights), ``adj_close``, ``volume`` (shares), ``amount`` (CNY),
``turnover`` (percent), ``trade_status``, ``is_st``, ``pct_chg``, ``code``, valuation fields,
the float and total market value (``float_mv``, ``total_mv``, CNY) and ``delisting`` (1 on a
day of the delisting period, read off a ``退`` in the day's name).
Minute exports (``intraday=True``, :mod:`forecaster.data.minute.formats`) give a *bar frame*
instead: a ``DatetimeIndex`` named ``time`` (each bar's closing stamp) and the session columns
of :mod:`forecaster.data.minute.session`.

:class:`CsvFormat` is what a layout says; the layouts here are baostock's, tushare's,
akshare's, Yahoo's, lower-case OHLCV files', 通达信 (TDX)'s and the '邢不行' (xbx, its
column names Chinese or English) daily exports. Which layout a file is in is decided in one
place, :mod:`forecaster.data.sources` (its :data:`~forecaster.data.sources.FORMATS` registry
lists every layout, daily and minute, in the order they are tried).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

REQUIRED = ("open", "high", "low", "close")
PRICE_COLUMNS = ("open", "high", "low", "close", "preclose", "adj_close")


@dataclass(frozen=True)
class CsvFormat:
    """How one exporter names and scales its columns.

    Attributes:
        name: format name reported to the user.
        columns: source column -> canonical column.
        date_column: source column holding the trading date.
        date_format: ``strftime`` pattern of that column.
        scale: canonical column -> multiplier into canonical units (lots -> shares, ...).
        markers: source columns whose presence identifies the format.
        intraday: minute bars (the date column holds timestamps; the frame is indexed by
            ``time``).
        probe: ``(column, pattern)`` the first row's value must match as well (a daily
            baostock export may carry a ``time`` column holding the date).
        time_column: a separate time-of-day column (source name) whose value follows the
            date column's, separated by a space, before ``date_format`` parses both.
        name_column: a column (source name) holding the stock's name as of each day, whose
            prefixes and marks carry its status (:func:`~forecaster.data.market.delisting.name_status`:
            ``ST``/``*ST`` -> ``is_st``, ``退`` -> ``delisting``); ``""``: none.

    ``date_format`` may list alternatives separated by ``|``; the first that parses a file's
    first row is used for all its rows (:meth:`formats`).
    """

    name: str
    columns: dict[str, str]
    date_column: str
    date_format: str
    markers: tuple[str, ...]
    scale: dict[str, float] = field(default_factory=dict)
    intraday: bool = False
    probe: tuple[str, str] | None = None
    time_column: str = ""
    name_column: str = ""

    @property
    def formats(self) -> tuple[str, ...]:
        """The alternatives of ``date_format``."""
        return tuple(self.date_format.split("|"))

    @property
    def key(self) -> str:
        """The canonical name of the column the rows are keyed by (``date`` or ``time``)."""
        return "time" if self.intraday else "date"

    def source(self, canonical: str) -> str:
        """The name this format gives a canonical column (``turnover`` -> baostock's ``turn``);
        the canonical name where the format has none."""
        return next((src for src, dst in self.columns.items() if dst == canonical), canonical)

    def matches(self, header: set[str], first: dict | None = None) -> bool:
        if not all(m in header for m in self.markers):
            return False
        if self.probe is None or first is None:
            return True
        column, pattern = self.probe
        return bool(re.fullmatch(pattern, str(first.get(column, "")).strip()))


BAOSTOCK = CsvFormat(
    name="baostock",
    columns={
        "date": "date", "code": "code", "open": "open", "high": "high", "low": "low",
        "close": "close", "preclose": "preclose", "volume": "volume", "amount": "amount",
        "adjustflag": "adjust_flag", "turn": "turnover", "tradestatus": "trade_status",
        "pctChg": "pct_chg", "isST": "is_st", "peTTM": "pe_ttm", "pbMRQ": "pb_mrq",
        "psTTM": "ps_ttm", "pcfNcfTTM": "pcf_ncf_ttm",
    },
    date_column="date",
    date_format="%Y-%m-%d",
    markers=("date", "code"),
)


TUSHARE = CsvFormat(
    name="tushare",
    columns={
        "ts_code": "code", "trade_date": "date", "open": "open", "high": "high", "low": "low",
        "close": "close", "pre_close": "preclose", "change": "change", "pct_chg": "pct_chg",
        "vol": "volume", "amount": "amount",
    },
    date_column="trade_date",
    date_format="%Y%m%d",
    markers=("ts_code", "trade_date"),
    # tushare's daily(): vol in lots of 100 shares, amount in thousands of CNY.
    scale={"volume": 100.0, "amount": 1000.0},
)

AKSHARE = CsvFormat(
    name="akshare",
    columns={
        "日期": "date", "股票代码": "code", "开盘": "open", "收盘": "close", "最高": "high",
        "最低": "low", "成交量": "volume", "成交额": "amount", "振幅": "amplitude",
        "涨跌幅": "pct_chg", "涨跌额": "change", "换手率": "turnover",
    },
    date_column="日期",
    date_format="%Y-%m-%d",
    markers=("日期",),
    # akshare's stock_zh_a_hist: volume in lots of 100 shares.
    scale={"volume": 100.0},
)

YAHOO = CsvFormat(
    name="yahoo",
    columns={
        "Date": "date", "Open": "open", "High": "high", "Low": "low", "Close": "close",
        "Adj Close": "adj_close", "Volume": "volume",
    },
    date_column="Date",
    date_format="%Y-%m-%d",
    markers=("Date",),
)

# Lower-case OHLCV files from other tools (e.g. pandas' to_csv of a yfinance frame, lowered).
OHLCV = CsvFormat(
    name="ohlcv",
    columns={**BAOSTOCK.columns, "adj_close": "adj_close", "adj close": "adj_close"},
    date_column="date",
    date_format="%Y-%m-%d",
    markers=("date",),
)

# 通达信 (TDX) exports, read after their title line and footer (forecaster.data.minute.formats);
# volume in shares as TDX writes it for stocks (checked against the amount).
TDX_COLUMNS = {"开盘": "open", "最高": "high", "最低": "low", "收盘": "close", "成交量": "volume",
               "成交额": "amount"}
TDX = CsvFormat(name="tdx", columns={"日期": "date", **TDX_COLUMNS}, date_column="日期",
                date_format="%Y-%m-%d|%Y/%m/%d", markers=("日期", "开盘"))

# The '邢不行' (xbx) layout: a title line (数据由邢不行整理) above the header, read as TDX's title is
# (forecaster.data.minute.formats.prepare_text); code like sh600000, the name as of each day
# (its ST / *ST / 退 marks become is_st and delisting), unadjusted prices with the ex-rights
# 前收盘价, volume in shares, amount, float and total market value in CNY; suspended days have no
# row. Turnover (percent, as baostock's turn) is volume x close / float market value
# (forecaster.data.daily.loading).
XBX = CsvFormat(
    name="xbx",
    columns={"股票代码": "code", "交易日期": "date", "开盘价": "open", "最高价": "high", "最低价": "low",
             "收盘价": "close", "前收盘价": "preclose", "成交量": "volume", "成交额": "amount",
             "流通市值": "float_mv", "总市值": "total_mv"},
    date_column="交易日期",
    date_format="%Y-%m-%d|%Y/%m/%d|%Y%m%d",
    markers=("交易日期", "收盘价"),
    name_column="股票名称",
)

# The '邢不行' layout with English column names (code,name,date,open,...,float_mv,total_mv), title
# line or not: baostock's columns and the market values, the name's marks as in XBX.
XBX_EN = CsvFormat(
    name="xbx_en",
    columns={**BAOSTOCK.columns, "pre_close": "preclose", "float_mv": "float_mv", "total_mv": "total_mv"},
    date_column="date",
    date_format=XBX.date_format,
    markers=("date", "code", "float_mv"),
    name_column="name",
)
