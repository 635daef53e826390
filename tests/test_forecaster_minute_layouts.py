"""Minute bars in the layouts users hold them (each written here as a few days' extract in the
exporter's own layout), read as the same bars: baostock, akshare (时间 and Sina's ``day``),
efinance, 通达信 (GBK, title line, tab header, footer, ``时间`` as HHMM), one date-time column
by any of its names with or without a code column, and date plus time as HH:MM[:SS] or HHMM;
bars stamped at their start re-stamped, 1-minute files' opening-auction bar merged, the bar
length stated and a change of it an error naming the line; index and ETF codes as given."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data import DataError, load_csv, synthetic_intraday, write_minute_csv


@pytest.fixture(scope="module")
def bars():
    return synthetic_intraday(n_stocks=1, n_days=3, seed=3)["syn.000001"]


def _columns(frame: pd.DataFrame) -> dict:
    return {c: frame[c].to_numpy() for c in ("open", "high", "low", "close", "volume", "amount")}


def write_layout(frame: pd.DataFrame, path, layout: str, lots: bool = False) -> None:
    """``frame``'s bars as ``layout`` writes them (volume in lots with ``lots``)."""
    stamps = pd.DatetimeIndex(frame.index)
    c = _columns(frame)
    volume = (c["volume"] / 100).round().astype(int) if lots else c["volume"].astype(int)
    ohlc = {k: c[k] for k in ("open", "high", "low", "close")}
    if layout == "tdx":
        rows = [f"{s:%Y-%m-%d},{s:%H%M},{o:.4f},{h:.4f},{lo:.4f},{cl:.4f},{v},{a:.2f}"
                for s, o, h, lo, cl, v, a in zip(stamps, c["open"], c["high"], c["low"], c["close"], volume,
                                                 c["amount"], strict=True)]
        names = ("日期", "时间", "开盘", "最高", "最低", "收盘", "成交量", "成交额")
        header = "\t".join(f"    {n}" for n in names)
        text = "\n".join(["000001 平安银行 5分钟线 不复权", header, *rows, "数据来源:通达信"]) + "\n"
        path.write_bytes(text.encode("gbk"))
        return
    if layout == "efinance":
        out = pd.DataFrame({"股票名称": "平安银行", "股票代码": "000001",
                            "日期": stamps.strftime("%Y-%m-%d %H:%M"),
                            "开盘": c["open"], "收盘": c["close"],
                            "最高": c["high"], "最低": c["low"],
                            "成交量": volume, "成交额": c["amount"], "振幅": 0.1,
                            "涨跌幅": 0.0, "涨跌额": 0.0, "换手率": 0.01})
    elif layout == "sina":  # akshare stock_zh_a_minute
        out = pd.DataFrame({"day": stamps.strftime("%Y-%m-%d %H:%M:%S"), **ohlc, "volume": volume})
    elif layout.startswith("stamp:"):  # one date-time column, named as given, and a code column
        name, _, code = layout[6:].partition("+")
        out = pd.DataFrame({name: stamps.strftime("%Y-%m-%d %H:%M:%S"), **ohlc, "volume": volume,
                            "amount": c["amount"]})
        if code:
            out.insert(0, code, "sz.000001")
    elif layout in ("date+hh:mm:ss", "date+hhmm", "date+hh:mm"):
        clock = {"date+hh:mm:ss": "%H:%M:%S", "date+hhmm": "%H%M", "date+hh:mm": "%H:%M"}[layout]
        out = pd.DataFrame({"date": stamps.strftime("%Y-%m-%d"), "time": stamps.strftime(clock), **ohlc,
                            "volume": volume, "amount": c["amount"]})
    else:
        raise ValueError(layout)
    out.to_csv(path, index=False)


LAYOUTS = [("tdx", "tdx_minute"), ("efinance", "efinance_minute"), ("sina", "minute_day"),
           ("stamp:timestamps", "minute_timestamps"), ("stamp:datetime+symbol", "minute_datetime"),
           ("stamp:dt", "minute_dt"), ("stamp:time+code", "minute_time"), ("stamp:date", "minute_date"),
           ("date+hh:mm:ss", "date_time_minute"), ("date+hhmm", "date_time_minute"),
           ("date+hh:mm", "date_time_minute")]


@pytest.mark.parametrize(("layout", "name"), LAYOUTS, ids=[layout for layout, _ in LAYOUTS])
def test_each_layout_loads_as_the_same_bars(bars, tmp_path, layout, name):
    lots = layout == "efinance"  # efinance gives lots, the others shares
    path = tmp_path / ("SZ#000001#5min.csv" if layout == "tdx" else "sz.000001.csv")
    write_layout(bars, path, layout, lots=lots)
    frame, report = load_csv(path)
    assert report.format == name and report.bar_minutes == 5 and report.trading_days == 3
    assert frame.index.name == "time" and len(frame) == 3 * 48 and frame["code"].iloc[0] == "sz.000001"
    assert frame.index[0] == pd.Timestamp("2024-01-02 09:35") and report.stamped == "close"
    np.testing.assert_allclose(frame["close"], bars["close"], rtol=1e-4)
    # volume in shares whatever the file's unit; lots said so when the amount shows them
    np.testing.assert_allclose(frame["volume"], bars["volume"], rtol=1e-6)
    summary = report.summary()
    assert "5-minute bars (48 a day, stamped at their close) over 3 trading days" in summary
    unit = ("lots of 100 shares, converted to shares" if lots
            else "shares (not checked: no amount column" if layout == "sina" else "shares (amount")
    assert f"volume in {unit}" in summary, summary
    if layout == "tdx":
        assert report.encoding == "gbk" and report.adjustment == "unadjusted"


def test_tdx_errors_name_the_line_in_the_file(bars, tmp_path):
    path = tmp_path / "SZ#000001#5min.csv"
    write_layout(bars, path, "tdx")
    lines = path.read_bytes().decode("gbk").splitlines()
    lines[5] = lines[5].replace(lines[5].split(",")[5], "abc")  # the 4th bar's close (title, header first)
    path.write_bytes(("\n".join(lines) + "\n").encode("gbk"))
    with pytest.raises(DataError, match=r"line 6, column 'close': expected a number, got 'abc'.*"
                                        r"--on-bad drop"):
        load_csv(path)


def _stamped_at_start(frame: pd.DataFrame, minutes: int) -> pd.DataFrame:
    """The bars stamped at their start (09:30 .. 11:25, 13:00 .. 14:55 for 5 minutes)."""
    stamps = pd.DatetimeIndex(frame.index)
    start = stamps - pd.Timedelta(minutes=minutes)
    start = start.where(~((start.hour == 12) & (start.minute == 60 - minutes) | (start.hour == 12)),
                        start + pd.Timedelta(minutes=90))
    return frame.set_axis(start)


def test_bars_stamped_at_their_start_are_re_stamped(bars, tmp_path):
    path = tmp_path / "sz.000001.csv"
    write_layout(_stamped_at_start(bars, 5), path, "stamp:datetime")
    assert "2024-01-02 09:30:00" in path.read_text() and "15:00:00" not in path.read_text()
    frame, report = load_csv(path)
    assert report.stamped == "start" and "re-stamped to their close" in report.summary()
    pd.testing.assert_index_equal(frame.index, pd.DatetimeIndex(bars.index, name="time"))
    np.testing.assert_allclose(frame["close"], bars["close"], rtol=1e-4)


def test_one_minute_bars_with_the_opening_auction(tmp_path):
    one = synthetic_intraday(n_stocks=1, n_days=2, bar_minutes=1, seed=5)["syn.000001"]
    day = pd.DatetimeIndex(one.index).normalize().unique()
    auction = pd.DataFrame({"open": 10.0, "high": 10.0, "low": 10.0, "close": 10.0, "volume": 5000.0,
                            "amount": 50000.0}, index=day + pd.Timedelta("09:30:00"))
    raw = pd.concat([one[list(auction.columns)], auction]).sort_index()
    path = tmp_path / "sz.000001.csv"
    write_layout(raw.assign(code="sz.000001"), path, "stamp:datetime")
    frame, report = load_csv(path)
    assert report.bar_minutes == 1 and report.auction_bars == 2 and len(frame) == 2 * 240
    assert "2 opening-auction bar(s) merged into the day's first bar" in report.summary()
    first = frame.iloc[0]
    assert frame.index[0] == pd.Timestamp("2024-01-02 09:31") and first["open"] == 10.0
    assert first["volume"] == one["volume"].iloc[0] + 5000
    assert first["close"] == pytest.approx(one["close"].iloc[0])
    # the same bars stamped at their start (09:30 .. 14:59): re-stamped, nothing merged
    write_layout(_stamped_at_start(one, 1), path, "stamp:datetime")
    frame, report = load_csv(path)
    assert report.stamped == "start" and report.auction_bars == 0 and len(frame) == 480


def test_a_bar_length_that_changes_is_an_error_naming_the_line(bars, tmp_path):
    hourly = synthetic_intraday(n_stocks=1, n_days=3, bar_minutes=60, seed=3)["syn.000001"]
    later = hourly.set_axis(pd.DatetimeIndex(hourly.index) + pd.Timedelta(days=7))
    path = tmp_path / "sz.000001.csv"
    write_layout(pd.concat([bars, later]), path, "stamp:datetime")  # 5-minute bars, then 60-minute bars
    with pytest.raises(DataError, match=r"line 147, column 'datetime': a bar closing at 2024-01-09 11:30:00 "
                                        r"\(60 minutes after the previous bar\) where the file's bars are "
                                        r"5-minute bars.*one bar length per file"):
        load_csv(path)
    five = bars.iloc[:6].set_axis(pd.DatetimeIndex(bars.index[:6]) + pd.Timedelta(days=7))
    write_layout(pd.concat([hourly, five]), path, "stamp:datetime")  # a 5-minute bar off the 60-minute grid
    with pytest.raises(DataError, match=r"line 14, column 'datetime': a bar closing at 2024-01-09 09:35:00 "
                                        r"\(the day's first bar\) where the file's bars are 60-minute bars"):
        load_csv(path)


@pytest.mark.parametrize(("name", "code"), [("sh.000300.csv", "sh.000300"), ("sh.510300.csv", "sh.510300"),
                                            ("sz.159915.csv", "sz.159915")])
def test_index_and_etf_bars_load_with_their_codes_as_given(bars, tmp_path, name, code):
    frame = bars.assign(code=code)
    write_minute_csv(frame, tmp_path / name)
    loaded, report = load_csv(tmp_path / name)
    assert loaded["code"].iloc[0] == code and report.bar_minutes == 5
    assert ("is an index, which has no price limit" in report.summary()) == (code == "sh.000300")
