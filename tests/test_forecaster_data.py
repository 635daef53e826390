"""Loading: every export format gives the same canonical frame; bad input gets clear errors;
real files parse with the right counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data import DataError, SyntheticConfig, load_csv, load_dir, synthetic_prices
from forecaster.data.synthetic.daily import default_series_path
from forecaster.features.series import UnadjustedReturnsWarning, log_returns, make_features, mask_suspended

N = 25


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    return synthetic_prices(SyntheticConfig(n_days=N, seed=3))


def write_formats(bars: pd.DataFrame, folder) -> dict[str, object]:
    paths = {}
    b = bars.copy()
    b["code"] = "sh.600000"  # every format below spells this listed code its own way
    # baostock: shuffled columns and a pandas index column.
    cols = list(b.columns)
    rng = np.random.default_rng(0)
    rng.shuffle(cols)
    paths["baostock"] = folder / "baostock.csv"
    b[cols].to_csv(paths["baostock"], index=True)
    # tushare: newest first, YYYYMMDD dates, volume in lots, amount in thousands.
    t = pd.DataFrame({
        "ts_code": "600000.SH", "trade_date": b["date"].str.replace("-", ""), "open": b["open"],
        "high": b["high"], "low": b["low"], "close": b["close"], "pre_close": b["preclose"],
        "change": b["close"] - b["preclose"], "pct_chg": b["pctChg"], "vol": b["volume"] / 100,
        "amount": b["amount"] / 1000,
    }).iloc[::-1]
    paths["tushare"] = folder / "tushare.csv"
    t.to_csv(paths["tushare"], index=False)
    # akshare: Chinese headers, GBK-encoded.
    a = pd.DataFrame({
        "日期": b["date"], "股票代码": "600000", "开盘": b["open"], "收盘": b["close"],
        "最高": b["high"], "最低": b["low"], "成交量": b["volume"] / 100, "成交额": b["amount"],
        "涨跌幅": b["pctChg"], "换手率": b["turn"],
    })
    paths["akshare"] = folder / "akshare.csv"
    a.to_csv(paths["akshare"], index=False, encoding="gbk")
    # Yahoo-style, UTF-8 with BOM.
    y = pd.DataFrame({
        "Date": b["date"], "Open": b["open"], "High": b["high"], "Low": b["low"],
        "Close": b["close"], "Adj Close": b["close"], "Volume": b["volume"],
    })
    paths["yahoo"] = folder / "yahoo.csv"
    y.to_csv(paths["yahoo"], index=False, encoding="utf-8-sig")
    return paths


def test_every_format_gives_the_same_frame(bars, tmp_path):
    paths = write_formats(bars, tmp_path)
    frames = {}
    for name, path in paths.items():
        frame, report = load_csv(path)
        assert report.format == name
        assert report.rows_kept == N
        frames[name] = frame
    assert load_csv(paths["akshare"])[1].encoding == "gbk"
    assert load_csv(paths["tushare"])[1].reordered_rows == N - (N % 2)  # reversed order sorted
    ref = frames["baostock"]
    assert ref.index.name == "date" and ref.index.is_monotonic_increasing
    assert ref.index[0] == pd.Timestamp(bars["date"].iloc[0])
    for name, frame in frames.items():
        pd.testing.assert_index_equal(frame.index, ref.index)
        for col in ("open", "high", "low", "close", "volume"):
            np.testing.assert_allclose(frame[col], ref[col], rtol=1e-9, err_msg=f"{name}.{col}")
        assert frame["code"].iloc[0] == ("sh.600000" if name != "yahoo" else "yahoo")
    np.testing.assert_allclose(frames["tushare"]["amount"], ref["amount"], rtol=1e-9)
    np.testing.assert_allclose(frames["tushare"]["preclose"], ref["preclose"])
    # Returns: preclose where present, adjusted closes for Yahoo (first day unknown).
    r_ref = log_returns(ref)
    np.testing.assert_allclose(log_returns(frames["tushare"]), r_ref)
    np.testing.assert_allclose(log_returns(frames["yahoo"])[1:], r_ref[1:], atol=1e-12)
    with pytest.warns(UnadjustedReturnsWarning, match="consecutive closes"):
        r_ak = log_returns(frames["akshare"])
    assert np.isnan(r_ak.iloc[0])


def _write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_text(text, encoding=encoding)
    return path


HEADER = "date,code,open,high,low,close,preclose,volume,tradestatus\n"
ROW = "2023-01-0{d},sh.600000,10,10.5,9.8,{c},10,1000,1\n"


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("empty.csv", "", r"empty\.csv: the file is empty"),
        ("header_only.csv", HEADER, "header but no data rows"),
        ("no_close.csv", "date,code,open,high,low\n2024-01-02,sh.600000,1,1,1\n",
         r"no_close\.csv: baostock export without the required column\(s\) \['close'\]"),
        ("yahoo_no_close.csv", "Date,Open,High,Low,Volume\n2024-01-02,1,1,1,5\n",
         r"yahoo export without the required column\(s\) \['Close'\]"),
        ("other.csv", "day,price\n2024-01-02,1\n", r"other\.csv: unrecognised header \['day', 'price'\]"),
        ("dup.csv", HEADER + ROW.format(d=2, c=10) + ROW.format(d=3, c=11) + ROW.format(d=3, c=12),
         r"duplicate date 2023-01-03 on lines \[3, 4\]"),
        ("neg.csv", HEADER + ROW.format(d=2, c=10) + ROW.format(d=3, c=-11),
         r"neg\.csv: line 3, column 'close': expected a positive price, got -11 "),
        ("text.csv", HEADER + ROW.format(d=2, c=10) + ROW.format(d=3, c="abc"),
         r"text\.csv: line 3, column 'close': expected a number, got 'abc'"),
        ("baddate.csv", HEADER + ROW.format(d=2, c=10) + "2024-13-45,sh.600000,1,1,1,1,1,1,1\n",
         r"line 3, column 'date': expected a date"),
        ("missing.csv", HEADER + ROW.format(d=2, c=10) + ROW.format(d=3, c=""),
         r"line 3, column 'close': expected a price"),
        ("one.csv", HEADER + ROW.format(d=2, c=10), "1 usable row"),
    ],
)
def test_bad_input_gets_a_clear_error(tmp_path, name, text, message):
    path = _write(tmp_path, name, text)
    with pytest.raises(DataError, match=message):
        load_csv(path)


def test_unsorted_dates_are_sorted_and_counted(tmp_path):
    path = _write(tmp_path, "unsorted.csv",
                  HEADER + ROW.format(d=4, c=12) + ROW.format(d=2, c=10) + ROW.format(d=3, c=11))
    frame, report = load_csv(path)
    assert list(frame["close"]) == [10, 11, 12]
    assert report.reordered_rows == 3


def test_drop_option_counts_what_it_drops(tmp_path):
    text = (HEADER + ROW.format(d=2, c=10) + ROW.format(d=3, c=-1) + ROW.format(d=4, c="x")
            + ROW.format(d=5, c=11) + ROW.format(d=5, c=12) + ROW.format(d=6, c=13))
    frame, report = load_csv(_write(tmp_path, "mixed.csv", text), on_bad="drop")
    assert list(frame["close"]) == [10, 11, 13]
    assert report.dropped == {"unparseable numbers": 1, "non-positive prices": 1, "duplicate dates": 1}
    assert report.rows_read == 6 and report.rows_kept == 3


def test_real_files_with_suspensions_and_st(ashare_dir):
    # Expected counts come from reading the raw CSVs with the csv module (tradestatus == 0).
    expected = {"sz.000792": (1273, 312, 389), "sh.601211": (1273, 19, 0),
                "sz.000408": (1273, 7, 247), "sh.600584": (1273, 5, 0)}
    for code, (rows, suspended, st) in expected.items():
        frame, report = load_csv(ashare_dir / f"{code}.csv")
        assert (report.rows_kept, report.suspended_days, report.st_days) == (rows, suspended, st)
        assert frame["suspended"].sum() == suspended
        assert report.format == "baostock" and frame["code"].iloc[0] == code
        susp = frame[frame["suspended"]]
        assert (susp["close"] == susp["preclose"]).all()  # suspended: no price change
        r = log_returns(frame)
        assert r.notna().all() and (r[frame["suspended"]] == 0).all()
        target = mask_suspended(r, frame)  # what models train on and are scored against
        assert target.isna().sum() == suspended and target[~frame["suspended"]].equals(r[~frame["suspended"]])


def test_real_panel_loads(ashare_dir):
    frames, reports = load_dir(ashare_dir)
    assert len(frames) == 60
    assert min(len(f) for f in frames.values()) == 401  # sh.603296 lists late
    assert frames["sh.688981"]["code"].iloc[0] == "sh.688981"
    assert all(r.dropped == {} for r in reports.values())


def test_features_are_causal_and_zero_on_suspended_days(ashare_dir):
    frame, _ = load_csv(ashare_dir / "sh.600584.csv")
    names = ("log_return", "range", "gap", "volume_change", "turnover_change")
    full = make_features(frame, names)
    assert full.iloc[1:].notna().all().all()
    assert (full.loc[frame["suspended"], ["volume_change", "turnover_change"]] == 0).all().all()
    cut = frame.index[600]
    changed = frame.copy()
    changed.loc[changed.index > cut, ["close", "open", "high", "low", "volume"]] *= 1.7
    part = make_features(changed, names)
    pd.testing.assert_frame_equal(part.loc[:cut], full.loc[:cut])


def test_embedded_series_matches_its_generator():
    path = default_series_path()
    frame, report = load_csv(path)
    assert report.rows_kept == SyntheticConfig().n_days and report.suspended_days > 0
    regenerated = synthetic_prices()
    np.testing.assert_allclose(frame["close"].to_numpy(), regenerated["close"].to_numpy(), atol=1e-9)
    up = np.floor(frame["preclose"] * 1.1 * 100 + 1e-6) / 100
    assert (frame["close"] <= up + 1e-9).all()  # the 10% limit holds


def test_load_dir_cache_gives_the_same_frames_and_notices_changes(tmp_path, caplog):
    import logging
    import os

    from forecaster.data import load_dir, write_synthetic_panel

    folder = tmp_path / "panel"
    write_synthetic_panel(folder, n_stocks=5, n_days=120, seed=3)
    plain, plain_reports = load_dir(folder)
    built, _ = load_dir(folder, cache=True)
    assert (folder / ".forecaster_cache" / "panel.parquet").is_file()
    cached, cached_reports = load_dir(folder, cache=True)
    assert list(cached) == list(plain) and cached_reports == plain_reports
    for code in plain:
        pd.testing.assert_frame_equal(cached[code], plain[code], check_freq=False)
    # A changed file (new row values, same name) invalidates the cache.
    first = sorted(folder.glob("*.csv"))[0]
    text = first.read_text().splitlines(keepends=True)
    first.write_text("".join(text[:-1]))
    os.utime(first, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns + 10**9))
    with caplog.at_level(logging.INFO, logger="forecaster.data.daily.cache"):
        again, _ = load_dir(folder, cache=True)
    assert "out of date" in caplog.text
    code = str(plain[sorted(plain)[0]]["code"].iloc[0])
    assert len(again[code]) == len(plain[code]) - 1
    # An added file too.
    (folder / "extra.csv").write_text((folder / first.name).read_text().replace(code, "syn.999999"))
    assert "syn.999999" in load_dir(folder, cache=True)[0]
