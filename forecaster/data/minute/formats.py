"""The minute-bar CSV layouts, and the text around a TDX export's rows.

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
  (:func:`prepare_text` reads the title and footer);
- one date-time column named ``datetime``, ``timestamps``, ``timestamp``, ``time``, ``dt``,
  ``date``, ``trade_time`` or ``day`` with ``open,high,low,close`` (``volume``/``vol``,
  ``amount``/``money``; ``symbol``/``code``/``ts_code`` optional): Kronos, backtrader,
  vn.py, jqdata and tushare users' files (``2024-11-25 09:35:00,11.33,...``);
- ``date`` plus ``time`` as ``HH:MM[:SS]`` or ``HHMM`` (``2024-01-02,09:35:00,...``).

Volume units of minute files are checked against ``amount / (volume x price)``
(:mod:`forecaster.data.minute.bars`); ``scale`` gives the unit assumed without an amount.
Which layout a file is in is decided in :mod:`forecaster.data.sources`.

TDX exports open with a title line (``000665 湖北广电 5分钟线 不复权``: code, name, bar length,
adjustment), put a tab-separated header over comma-separated rows and end with a footer
(``数据来源:通达信``). :func:`prepare_text` turns such a file into a plain CSV whose rows keep
their line numbers in the file (the header's line is returned), and reads the adjustment off
the title.
"""

from __future__ import annotations

from dataclasses import dataclass

from forecaster.data.daily.formats import TDX_COLUMNS, CsvFormat

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

# A value holding a date and a time of day (2024-01-02 09:35[:00], 2024/01/02T09:35, 20240102093500).
DATETIME = r"\d{4}[-/]?\d{2}[-/]?\d{2}[ T]?\d{1,2}:?\d{2}(:?\d{2})?(\.\d+)?"
STAMP_FORMATS = ("%Y-%m-%d %H:%M:%S|%Y-%m-%d %H:%M|%Y/%m/%d %H:%M:%S|%Y/%m/%d %H:%M|%Y-%m-%dT%H:%M:%S|"
                 "%Y%m%d%H%M%S|%Y%m%d %H:%M:%S|%Y-%m-%d %H:%M:%S.%f")
# A time of day: 09:35, 09:35:00, 0935 (TDX), 935.
CLOCK = r"\d{1,2}:\d{2}(:\d{2})?|\d{3,4}"
DATE_CLOCK_FORMATS = ("%Y-%m-%d %H:%M:%S|%Y-%m-%d %H:%M|%Y-%m-%d %H%M|%Y/%m/%d %H:%M:%S|%Y/%m/%d %H:%M|"
                      "%Y/%m/%d %H%M|%Y%m%d %H:%M:%S|%Y%m%d %H:%M|%Y%m%d %H%M")

# 通达信 (TDX) minute exports, read after their title line and footer (:func:`prepare_text`);
# volume in shares as TDX writes it for stocks (checked against the amount).
TDX_MINUTE = CsvFormat(name="tdx_minute", columns={"日期": "time", "时间": "_clock", **TDX_COLUMNS},
                       date_column="日期", date_format=DATE_CLOCK_FORMATS, markers=("日期", "时间", "开盘"),
                       intraday=True, probe=("时间", CLOCK), time_column="时间")

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


# TDX's title names the adjustment of the prices it exports.
TDX_ADJUSTMENTS = {"不复权": "unadjusted", "前复权": "forward-adjusted", "后复权": "backward-adjusted"}
FOOTER_MARK = "数据来源"


@dataclass(frozen=True)
class Prepared:
    """A file's text ready for ``pandas.read_csv``.

    Attributes:
        text: the CSV text (a TDX file without its title line and footer, the header and rows
            comma-separated).
        header_line: the header's line in the file (1-based; 2 under a TDX title line).
        tdx: the file is a TDX export; title: its title line; adjustment: what the title says
            of the prices (``"unadjusted"``...), ``""`` where it says nothing.
        footer: the footer line dropped (``""`` without one).
    """

    text: str
    header_line: int = 1
    tdx: bool = False
    title: str = ""
    adjustment: str = ""
    footer: str = ""


def _lines_at_start(text: str, n: int) -> list[str]:
    out, start = [], 0
    for _ in range(n):
        end = text.find("\n", start)
        out.append(text[start:] if end < 0 else text[start:end])
        if end < 0:
            break
        start = end + 1
    return [line.rstrip("\r") for line in out]


def prepare_text(text: str) -> Prepared:
    """The text of a TDX export as a plain CSV (see the module docstring); any other text as
    it is. Only the first three lines and the last are looked at unless the file is TDX's."""
    head = _lines_at_start(text, 3)
    if len(head) < 3:
        return Prepared(text)
    title, header, row = head
    delimited = ("," in header or "\t" in header) and ("," in row or "\t" in row)
    if "," in title or "\t" in title or not title.strip() or not delimited:
        return Prepared(text)
    lines = text.splitlines()
    footer = ""
    while lines and not lines[-1].strip():
        lines.pop()
    if lines and FOOTER_MARK in lines[-1] and "," not in lines[-1]:
        footer = lines.pop().strip()
    names = [name.strip() for name in header.replace("\t", ",").split(",")]
    rows = lines[2:]
    if "," not in row:  # tab-separated rows too
        rows = [",".join(cell.strip() for cell in line.split("\t")) for line in rows]
    adjustment = next((v for k, v in TDX_ADJUSTMENTS.items() if k in title), "")
    body = "\n".join([",".join(n for n in names if n), *rows]) + "\n"
    return Prepared(body, header_line=2, tdx=True, title=title.strip(), adjustment=adjustment, footer=footer)
