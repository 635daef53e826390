"""Issue 57: files a whole-market folder of real exports holds on an ordinary day: a stock that
listed yesterday (one row), a '邢不行' file with English column names under its title line,
rows from before the exchanges' daily limits began, and a binary file named .csv; and
``predict`` / ``plot`` taking ``--on-bad`` as ``backtest`` / ``train`` do."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import DataError, load_csv, load_dir, write_synthetic_panel
from forecaster.data.market.exchange import LIMITS_BEGIN, limit_matrix, price_limit
from forecaster.data.panel import Panel

TINY = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1", "--n-seeds", "1"]
NEW = "syn.000009"
TOO_NEW = f"1 stock(s) too new to score (fewer than 2 usable rows), left out: {NEW} (1 usable row)"


def _market(tmp_path, n_days=120):
    """Six stocks and one listed on the last day (a file of one row)."""
    folder = tmp_path / "market"
    write_synthetic_panel(folder, n_stocks=6, n_days=n_days, seed=4)
    lines = (folder / "syn.000001.csv").read_text().splitlines()
    (folder / f"{NEW}.csv").write_text(lines[0] + "\n" + lines[-1].replace("syn.000001", NEW) + "\n")
    return folder


def test_a_folder_leaves_out_a_new_listing_counted_and_named(tmp_path):
    folder = _market(tmp_path)
    (folder / "syn.000010.csv").write_text("date,code,open,high,low,close\n")  # listed, no bar yet
    loaded = load_dir(folder, cache=True)
    assert sorted(loaded.frames) == [f"syn.00000{i}" for i in range(1, 7)] == sorted(loaded.reports)
    assert sorted(loaded.too_new) == [NEW, "syn.000010"]
    assert loaded.too_new[NEW].rows_kept == 1 and loaded.too_new["syn.000010"].rows_kept == 0
    # a header without rows is named as that, not as a new listing
    assert ("1 stock(s) too new to score (fewer than 2 usable rows), left out: syn.000009 (1 usable row); "
            "1 file(s) with a header and no data rows, left out: syn.000010.csv") in loaded.summary()
    again = load_dir(folder, cache=True)  # the cache keeps them out and named alike
    assert again.from_cache and sorted(again.frames) == sorted(loaded.frames)
    assert sorted(again.too_new) == [NEW, "syn.000010"] and "1 stock(s) too new" in again.summary()
    # a folder of nothing but new listings has nothing to run on
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / NEW).with_suffix(".csv").write_text((folder / f"{NEW}.csv").read_text())
    with pytest.raises(DataError, match=r"lone: no file has 2 or more usable rows; 1 stock\(s\) too new"):
        load_dir(lone)
    # one file alone, of one row: still refused, with the reason
    with pytest.raises(DataError, match=r"syn.000009.csv: 1 usable row\(s\); at least 2 trading days"):
        load_csv(folder / f"{NEW}.csv")


def test_backtest_train_predict_run_on_a_listing_day(tmp_path):
    folder = _market(tmp_path, n_days=200)
    runner = CliRunner()
    res = runner.invoke(main, ["backtest", str(folder), "--out", str(tmp_path / "report"), *TINY,
                               "--train-days", "150", "--retrain-every", "100", "--jobs", "1",
                               "--no-seed-recipe"])
    assert res.exit_code == 0, res.output
    assert TOO_NEW in res.output
    run = tmp_path / "run"
    res = runner.invoke(main, ["train", str(folder), "--out", str(run), *TINY])
    assert res.exit_code == 0, res.output
    assert TOO_NEW in res.output and "trained the panel Transformer on 6 stocks" in res.output
    for extra in ([], ["--on-bad", "drop"]):
        res = runner.invoke(main, ["predict", "--run", str(run), "--overwrite", *extra])
        assert res.exit_code == 0, res.output
        assert TOO_NEW in res.output and "6 stocks ranked" in res.output
    assert NEW not in set(pd.read_csv(run / "next_day.csv")["code"])


def test_predict_and_plot_take_on_bad(tmp_path):
    folder = tmp_path / "d"
    write_synthetic_panel(folder, n_stocks=5, n_days=100, seed=6)
    run = tmp_path / "run"
    runner = CliRunner()
    assert runner.invoke(main, ["train", str(folder), "--out", str(run), *TINY]).exit_code == 0
    rows = sum(len(f.read_text().splitlines()) - 1 for f in folder.glob("*.csv"))
    path = folder / "syn.000002.csv"
    lines = path.read_text().splitlines()
    cells = lines[4].split(",")
    cells[2] = "-" + cells[2]  # a negative open on line 5
    path.write_text("\n".join([*lines[:4], ",".join(cells), *lines[5:]]) + "\n")
    res = runner.invoke(main, ["predict", "--run", str(run)])
    assert res.exit_code != 0 and "line 5, column 'open': expected a positive price" in res.output
    assert "--on-bad drop" in res.output  # the advice ...
    res = runner.invoke(main, ["predict", "--run", str(run), "--on-bad", "drop"])  # ... works
    assert res.exit_code == 0, res.output
    assert f"5 stocks, {rows - 1} rows" in res.output and "1 bad rows dropped (on_bad='drop')" in res.output
    res = runner.invoke(main, ["plot", "--run", str(run), "--on-bad", "drop"])
    assert res.exit_code == 0, res.output
    assert "1 bad rows dropped" in res.output and (run / "next_day.png").is_file()
    res = runner.invoke(main, ["predict", "--run", str(run), "--on-bad", "skip"])
    assert res.exit_code != 0 and "Error: --on-bad must be 'raise' or 'drop', got 'skip'" in res.output


# The shape of ../shared/data/xbx/sz000001.csv, its header in English (as some copies have it).
XBX_TITLE = "数据由邢不行整理"
XBX_EN_HEADER = "code,name,date,open,high,low,close,preclose,volume,amount,float_mv,total_mv"
XBX_ROWS = [
    "sz000001,深发展Ａ,2007-06-18,30.1,31.0,29.8,30.5,30.0,41000000.0,1240000000.0,50000000000.0,60000000000.0",
    "sz000001,ST深发展,2007-06-19,30.6,31.2,30.2,31.0,30.5,40000000.0,1230000000.0,50800000000.0,60900000000.0",
    "sz000001,ST深发展,2007-06-20,31.0,31.5,30.8,31.2,31.0,39000000.0,1210000000.0,51100000000.0,61300000000.0",
]


def test_an_xbx_file_with_an_english_header_under_its_title_loads(tmp_path):
    titled, plain = tmp_path / "sz000001.csv", tmp_path / "plain" / "sz000001.csv"
    titled.write_text("\n".join([XBX_TITLE, XBX_EN_HEADER, *XBX_ROWS]) + "\n", encoding="utf-8")
    plain.parent.mkdir()
    plain.write_text("\n".join([XBX_EN_HEADER, *XBX_ROWS]) + "\n", encoding="utf-8")
    frame, report = load_csv(titled)
    assert report.format == "xbx_en" and report.rows_kept == 3 and report.st_days == 2
    assert (frame["code"] == "sz.000001").all() and frame["is_st"].tolist() == [0, 1, 1]
    assert frame["float_mv"].iloc[-1] == 51100000000.0 and frame["preclose"].iloc[1] == 30.5
    assert frame["turnover"].iloc[0] == pytest.approx(100 * 41000000.0 * 30.5 / 50000000000.0)
    other, _ = load_csv(plain)  # the same file without the title line: the same frame
    pd.testing.assert_frame_equal(frame, other)


def _limit_file(path, rise: float):
    """Flat at 10 from 1996-12-02, up by ``rise`` on 1996-12-13 (a Friday) and again on
    1996-12-17 (the Tuesday after limits began)."""
    path.parent.mkdir(exist_ok=True)
    days = pd.bdate_range("1996-12-02", "1996-12-17")
    close = np.where(days >= "1996-12-13", 10.0 * (1 + rise), 10.0)
    close[-1] = round(close[-2] * (1 + rise), 2)
    pd.DataFrame({"date": days.strftime("%Y-%m-%d"), "code": "sz.000001", "open": close, "high": close,
                  "low": close, "close": close, "preclose": np.r_[10.0, close[:-1]], "volume": 1000.0}
                 ).to_csv(path, index=False)
    return path


def test_no_limit_before_the_exchanges_began_them(tmp_path):
    """Limits began on 1996-12-16: a 30 % jump the Friday before is no flag, the Tuesday after is."""
    _, report = load_csv(_limit_file(tmp_path / "sz.000001.csv", 0.3))
    assert [(f.kind, f.date, f.rows) for f in report.flags] == [("jump", "1996-12-17", 1)]
    assert price_limit("sz.000001", "1996-12-13") == np.inf and price_limit("sz.000001", LIMITS_BEGIN) == 0.1
    up, down = limit_matrix(["sz.000001"], pd.DatetimeIndex(["1996-12-13", "1996-12-16"]),
                            np.array([[10.0], [10.0]]), np.zeros((2, 1)))
    assert up.ravel().tolist() == [np.inf, 11.0] and down.ravel().tolist() == [0.0, 9.0]
    # the backtest's limit arrays: a 10 % rise before 1996-12-16 is at no limit, after it at limit-up
    loaded, _ = load_csv(_limit_file(tmp_path / "ten" / "sz.000001.csv", 0.1))
    panel = Panel.from_frames({"sz.000001": loaded})
    at = pd.Series(panel.at_limit_up("close")[:, 0], index=panel.dates)
    assert not at[:"1996-12-13"].any() and at["1996-12-17"]


def test_a_binary_file_that_decodes_as_gbk_is_said_not_to_be_text(tmp_path):
    blob = tmp_path / "sz.000001.csv"
    blob.write_bytes(b"\xc5\xc5" * 3300)  # 6.6 KB that GBK reads as 排排排...
    with pytest.raises(DataError, match=r"sz.000001.csv: not a text file \(binary data: no line break in "
                                        r"its first 2048 bytes\); expected a CSV") as info:
        load_csv(blob)
    said = str(info.value).replace(str(blob), "")  # the temporary path's length is not the message's
    assert len(said) < 200 and "排" not in said
    blob.write_bytes(b"\xc5\xc5" * 5000 + b"\n\x00\x00")  # NULs past the first 8 KB
    with pytest.raises(DataError, match=r"not a text file \(binary data: a NUL byte at byte 10001\)"):
        load_csv(blob)
    # in a folder, the same one line names the file
    folder = tmp_path / "f"
    write_synthetic_panel(folder, n_stocks=2, n_days=20, seed=1)
    (folder / "sz.000001.csv").write_bytes(b"\xc5\xc5" * 3300)
    with pytest.raises(DataError, match=r"f/sz.000001.csv: not a text file \(binary data"):
        load_dir(folder)
