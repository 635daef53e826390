"""The CSV layouts people export A-share bars in, and how each maps to the canonical frame.

Canonical frame: a ``DatetimeIndex`` named ``date`` and lower snake-case columns
``open, high, low, close`` (required) plus, where the source has them, ``preclose``
(previous close adjusted for ex-rights), ``adj_close``, ``volume`` (shares), ``amount`` (CNY),
``turnover`` (percent), ``trade_status``, ``is_st``, ``pct_chg``, ``code`` and valuation fields.
Minute exports (``intraday=True``) give a *bar frame* instead: a ``DatetimeIndex`` named
``time`` (each bar's closing stamp) and the session columns of
:mod:`forecaster.data.intraday`.

Minute layouts, each detected from its header and first row (examples are real exports):

- baostock (``query_history_k_data_plus``, frequency 5/15/30/60):
  ``date,time,code,open,...`` with ``time`` = ``20230103103000000`` (the bar's close);
- akshare ``stock_zh_a_hist_min_em``: ``时间,开盘,收盘,最高,最低,成交量,成交额,...``
  (``2024-01-02 09:35:00``); akshare ``stock_zh_a_minute`` (Sina):
  ``day,open,high,low,close,volume`` (``2024-01-02 09:35:00``);
- efinance ``get_quote_history(klt=5)``: ``股票名称,股票代码,日期,开盘,收盘,...`` with
  ``日期`` = ``2023-01-03 09:35``;
- 通达信 (TDX) exports: GBK, a title line (``000665 湖北广电 5分钟线 不复权``), a tab-separated
  header (``日期 时间 开盘 最高 最低 收盘 成交量 成交额``), comma- or tab-separated rows with
  ``时间`` as ``HHMM`` (``2022-03-03,0935,7.30,...``) and a footer ``数据来源:通达信``
  (:mod:`forecaster.data.minute_formats` reads the title and footer);
- one date-time column named ``datetime``, ``timestamps``, ``timestamp``, ``time``, ``dt``,
  ``date``, ``trade_time`` or ``day`` with ``open,high,low,close`` (``volume``/``vol``,
  ``amount``/``money``; ``symbol``/``code``/``ts_code`` optional): Kronos, backtrader,
  vn.py, jqdata and tushare users' files (``2024-11-25 09:35:00,11.33,...``);
- ``date`` plus ``time`` as ``HH:MM[:SS]`` or ``HHMM`` (``2024-01-02,09:35:00,...``).

Volume units of minute files are checked against ``amount / (volume x price)``
(:mod:`forecaster.data.minute_bars`); ``scale`` gives the unit assumed without an amount.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


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

# baostock's 5/15/30/60-minute bars (query_history_k_data_plus, frequency "5" ...): ``time``
# is the bar's closing stamp as YYYYMMDDHHMMSSsss, ``date`` the same day again.
BAOSTOCK_MINUTE = CsvFormat(
    name="baostock_minute",
    columns={
        "time": "time", "code": "code", "open": "open", "high": "high", "low": "low",
        "close": "close", "volume": "volume", "amount": "amount", "adjustflag": "adjust_flag",
    },
    date_column="time",
    date_format="%Y%m%d%H%M%S%f",
    markers=("date", "time", "code"),
    intraday=True,
    probe=("time", r"\d{14,17}"),
)

# akshare's stock_zh_a_hist_min_em: 1-minute bars carry 均价 (average price), 5-60-minute bars
# 涨跌幅/涨跌额/振幅/换手率; volume in lots of 100 shares either way.
AKSHARE_MINUTE = CsvFormat(
    name="akshare_minute",
    columns={
        "时间": "time", "开盘": "open", "收盘": "close", "最高": "high", "最低": "low",
        "成交量": "volume", "成交额": "amount", "均价": "avg_price", "涨跌幅": "pct_chg",
        "涨跌额": "change", "振幅": "amplitude", "换手率": "turnover", "股票代码": "code",
    },
    date_column="时间",
    date_format="%Y-%m-%d %H:%M:%S|%Y-%m-%d %H:%M",
    markers=("时间",),
    scale={"volume": 100.0},
    intraday=True,
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

# A value holding a date and a time of day (2024-01-02 09:35[:00], 2024/01/02T09:35, 20240102093500).
DATETIME = r"\d{4}[-/]?\d{2}[-/]?\d{2}[ T]?\d{1,2}:?\d{2}(:?\d{2})?(\.\d+)?"
STAMP_FORMATS = ("%Y-%m-%d %H:%M:%S|%Y-%m-%d %H:%M|%Y/%m/%d %H:%M:%S|%Y/%m/%d %H:%M|%Y-%m-%dT%H:%M:%S|"
                 "%Y%m%d%H%M%S|%Y%m%d %H:%M:%S|%Y-%m-%d %H:%M:%S.%f")
# A time of day: 09:35, 09:35:00, 0935 (TDX), 935.
CLOCK = r"\d{1,2}:\d{2}(:\d{2})?|\d{3,4}"
DATE_CLOCK_FORMATS = ("%Y-%m-%d %H:%M:%S|%Y-%m-%d %H:%M|%Y-%m-%d %H%M|%Y/%m/%d %H:%M:%S|%Y/%m/%d %H:%M|"
                      "%Y/%m/%d %H%M|%Y%m%d %H:%M:%S|%Y%m%d %H:%M|%Y%m%d %H%M")

# 通达信 (TDX) exports, read after their title line and footer (forecaster.data.minute_formats);
# volume in shares as TDX writes it for stocks (checked against the amount).
_TDX_COLUMNS = {"开盘": "open", "最高": "high", "最低": "low", "收盘": "close", "成交量": "volume",
                "成交额": "amount"}
TDX_MINUTE = CsvFormat(name="tdx_minute", columns={"日期": "time", "时间": "_clock", **_TDX_COLUMNS},
                       date_column="日期", date_format=DATE_CLOCK_FORMATS, markers=("日期", "时间", "开盘"),
                       intraday=True, probe=("时间", CLOCK), time_column="时间")
TDX = CsvFormat(name="tdx", columns={"日期": "date", **_TDX_COLUMNS}, date_column="日期",
                date_format="%Y-%m-%d|%Y/%m/%d", markers=("日期", "开盘"))

# efinance's get_quote_history(code, klt=1/5/15/30/60): volume in lots as Eastmoney serves it.
EFINANCE_MINUTE = CsvFormat(
    name="efinance_minute",
    columns={"股票代码": "code", "日期": "time", "开盘": "open", "收盘": "close", "最高": "high",
             "最低": "low", "成交量": "volume", "成交额": "amount", "振幅": "amplitude",
             "涨跌幅": "pct_chg", "涨跌额": "change", "换手率": "turnover"},
    date_column="日期", date_format=STAMP_FORMATS, markers=("股票代码", "日期"), scale={"volume": 100.0},
    intraday=True, probe=("日期", DATETIME))

_PRICE_NAMES = {"open": "open", "high": "high", "low": "low", "close": "close", "volume": "volume",
                "vol": "volume", "amount": "amount", "money": "amount", "symbol": "code", "code": "code",
                "ts_code": "code", "adjustflag": "adjust_flag"}
# ``date`` plus ``time`` as a time of day.
DATE_CLOCK_MINUTE = CsvFormat(name="date_time_minute",
                              columns={"date": "time", "time": "_clock", **_PRICE_NAMES},
                              date_column="date", date_format=DATE_CLOCK_FORMATS,
                              markers=("date", "time", "open", "close"), intraday=True,
                              probe=("time", CLOCK), time_column="time")
# One date-time column: each name it goes by is a format of its own (named ``minute_<name>``).
STAMP_NAMES = ("datetime", "timestamps", "timestamp", "time", "dt", "date", "trade_time", "day")
STAMP_MINUTE = tuple(
    CsvFormat(name=f"minute_{name}", columns={name: "time", **_PRICE_NAMES}, date_column=name,
              date_format=STAMP_FORMATS, markers=(name, "open", "close"), intraday=True,
              probe=(name, DATETIME))
    for name in STAMP_NAMES)
MINUTE_FORMATS = (BAOSTOCK_MINUTE, TDX_MINUTE, EFINANCE_MINUTE, AKSHARE_MINUTE, DATE_CLOCK_MINUTE,
                  *STAMP_MINUTE)

# Minute formats first: a baostock minute export has the daily export's markers too, and a
# date-time column looks like a date column by name.
FORMATS: tuple[CsvFormat, ...] = (*MINUTE_FORMATS, TUSHARE, AKSHARE, YAHOO, BAOSTOCK, OHLCV)

FORMATS_BY_NAME = {f.name: f for f in (*FORMATS, TDX)}

REQUIRED = ("open", "high", "low", "close")
PRICE_COLUMNS = ("open", "high", "low", "close", "preclose", "adj_close")


def detect_format(header: list[str], path: str, first: dict | None = None, tdx: bool = False) -> CsvFormat:
    """Pick the format whose marker columns are all in ``header`` (and whose probe matches the
    ``first`` data row, where given); ``tdx``: the file is a TDX export (title line, footer)."""
    names = set(header)
    for fmt in (TDX_MINUTE, TDX) if tdx else FORMATS:
        if fmt.matches(names, first):
            return fmt
    daily = "; ".join(f"{f.name}: {', '.join(f.markers)}" for f in FORMATS if not f.intraday)
    raise ValueError(
        f"{path}: unrecognised header {header!r}; expected the columns of one of these exports "
        f"(daily: {daily}; minute bars: baostock's date,time,code (time like 20230103103000000), "
        "akshare's 时间, efinance's 股票代码,日期 (a date and time), TDX's 日期,时间 (HHMM), date plus "
        "time (HH:MM[:SS] or HHMM), or one date-time column named "
        f"{'/'.join(STAMP_NAMES)}, each with open,high,low,close)"
    )


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


# Suffixes of data files, longest first: ``sz.000001.csv.gz`` is the stock ``sz.000001``.
DATA_SUFFIXES = (".csv.gz", ".csv")
# File names that are a stock code: sz.300001, sz300001, 300001.SZ or a bare 300001.
_CODE_NAME = re.compile(r"(?:(?:sh|sz|bj)\.?\d{6}|\d{6}\.(?:sh|sz|bj)|\d{6})", re.IGNORECASE)
# ... or a code and what the file holds: TDX's SZ#000665#5min, 300708_5min, sh600000-1min.
_TDX_NAME = re.compile(r"(sh|sz|bj)#(\d{6})#.*", re.IGNORECASE)
_CODE_AND_MORE = re.compile(r"((?:sh|sz|bj)\.?\d{6}|\d{6}\.(?:sh|sz|bj)|\d{6})[_#-].*", re.IGNORECASE)


def data_stem(name: str) -> str:
    """A data file's name without ``.csv`` / ``.csv.gz`` (any other name unchanged but for
    ``Path.stem``'s last suffix): ``sz.000001.csv.gz`` -> ``sz.000001``."""
    lower = name.lower()
    for suffix in DATA_SUFFIXES:
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name.rsplit(".", 1)[0] if "." in name else name


def code_in_name(name: str) -> str | None:
    """The stock code a data file's name says, or ``None`` when the name is not a code.

    ``sz.300001.csv(.gz)``, ``sz300001.csv`` and ``300001.SZ.csv`` give ``sz.300001``
    (:func:`canonical_code`); a bare ``300001.csv`` gives ``300001`` (no exchange: the name
    does not say which); ``yahoo.csv`` or ``syn.000001.csv`` give ``None``. A code followed by
    what the file holds names that code too: TDX's ``SZ#000665#5min.csv`` gives ``sz.000665``,
    ``300708_5min.csv`` gives ``300708``.
    """
    stem = data_stem(name)
    tdx = _TDX_NAME.fullmatch(stem)
    if tdx:
        return f"{tdx.group(1).lower()}.{tdx.group(2)}"
    if not _CODE_NAME.fullmatch(stem):
        more = _CODE_AND_MORE.fullmatch(stem)
        if not more:
            return None
        stem = more.group(1)
    return stem if stem.isdigit() else canonical_code(stem)
