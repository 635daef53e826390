"""Minute bars: baostock and akshare exports load as bar frames, their errors name the line,
daily features come from each day's own bars (known values; the future cannot reach them),
a planted daily signal hidden in the bars is recovered through --intraday, and a bar-level
walk-forward refits by trading day and recovers a planted intraday pattern."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import write_daily_and_bars

from forecaster.app.cli import main
from forecaster.data import (
    DataError,
    Panel,
    attach_intraday,
    daily_bars,
    daily_features,
    load_csv,
    synthetic_intraday,
    write_minute_csv,
)
from forecaster.data.minute.session import add_session_columns, session_minutes
from forecaster.evaluation.walkforward import WalkForwardConfig, make_folds, walk_forward
from forecaster.metrics import daily_ic, ic_summary
from forecaster.models.panel.baselines import FeatureRegressor


@pytest.fixture(scope="module")
def bars():
    return synthetic_intraday(n_stocks=3, n_days=20, bar_ic=0.2, seed=1)


def test_baostock_and_akshare_minute_exports_load_as_the_same_bars(bars, tmp_path):
    frame = bars["syn.000001"]
    write_minute_csv(frame, tmp_path / "b.csv", "baostock")
    write_minute_csv(frame, tmp_path / "a.csv", "akshare")
    b, rb = load_csv(tmp_path / "b.csv")
    a, ra = load_csv(tmp_path / "a.csv", code="syn.000001")
    assert (rb.format, ra.format) == ("baostock_minute", "akshare_minute")
    assert rb.bar_minutes == ra.bar_minutes == 5 and rb.trading_days == 20
    assert "5-minute bars (48 a day, stamped at their close) over 20 trading days" in rb.summary()
    assert "volume in shares" in rb.summary() and "volume in lots of 100 shares, converted" in ra.summary()
    for got in (a, b):
        assert got.index.name == "time" and len(got) == 20 * 48
        np.testing.assert_allclose(got["close"], frame["close"])
        np.testing.assert_allclose(got["volume"], frame["volume"])  # akshare's lots x 100
        # 48 bars a day, 09:35 .. 15:00; the first carries the overnight move
        assert got["bar"].max() == 47 and got["first_bar"].sum() == 20
        assert got.index[0] == pd.Timestamp("2024-01-02 09:35") and got.index[47].hour == 15
        assert got["first_bar"].iloc[48] and got["time_of_day"].iloc[23] == 0.5  # 11:30
        np.testing.assert_allclose(got["preclose"].iloc[1:], got["close"].iloc[:-1])


def test_session_minutes_skip_the_lunch_break():
    stamps = pd.DatetimeIndex(
        [
            "2024-01-02 09:30",
            "2024-01-02 11:30",
            "2024-01-02 13:05",
            "2024-01-02 15:00",
            "2024-01-02 12:00",
            "2024-01-02 15:05",
        ]
    )
    assert session_minutes(stamps).tolist() == [0, 120, 125, 240, -1, -1]


def test_bad_minute_rows_name_the_line(bars, tmp_path):
    path = tmp_path / "sz.000001.csv"
    frame = bars["syn.000001"].iloc[:96].copy()
    frame["code"] = "sz.000001"
    write_minute_csv(frame, path)
    lines = path.read_text().splitlines()
    dup = lines[:5] + [lines[4]] + lines[5:]  # the bar of 09:50 twice
    path.write_text("\n".join(dup) + "\n")
    with pytest.raises(
        DataError, match=r"duplicate time 2024-01-02 09:50:00 on lines \[5, 6\].*one row per bar"
    ):
        load_csv(path)
    lunch = lines[:3] + [lines[3].replace("094500000", "120000000")] + lines[4:]
    path.write_text("\n".join(lunch) + "\n")
    with pytest.raises(DataError, match=r"line 4.*'time'.*within 09:30-11:30 or 13:00-15:00"):
        load_csv(path)
    kept, report = load_csv(path, on_bad="drop")
    assert len(kept) == 95 and report.dropped == {"bars outside the session": 1}


def test_a_panel_of_minute_bars_is_refused_with_the_way_out(bars):
    with pytest.raises(ValueError, match="minute bars, but a panel is daily.*--intraday DIR"):
        Panel.from_frames(bars)


def _bars_of(rows):
    """A bar frame from ``(stamp, open, close, volume, amount)`` rows (60-minute bars)."""
    frame = pd.DataFrame(rows, columns=["time", "open", "close", "volume", "amount"]).set_index("time")
    frame.index = pd.DatetimeIndex(frame.index, name="time")
    frame["high"], frame["low"] = frame[["open", "close"]].max(axis=1), frame[["open", "close"]].min(axis=1)
    return add_session_columns(frame)


def test_daily_features_known_values():
    day = "2024-01-02 "
    rows = [(day + t, o, c, v, v * (o + c) / 2) for t, o, c, v in [
        ("10:00", 10.0, 10.2, 300), ("10:30", 10.2, 10.1, 100), ("11:00", 10.1, 10.0, 100),
        ("11:30", 10.0, 10.0, 100), ("13:30", 10.0, 10.1, 100), ("14:00", 10.1, 10.2, 100),
        ("14:30", 10.2, 10.1, 100), ("15:00", 10.1, 10.4, 400)]]
    frame = _bars_of(rows)  # 30-minute bars
    f = daily_features(frame).iloc[0]
    closes = np.array([r[2] for r in rows])
    r = np.r_[np.log(10.2 / 10.0), np.log(closes[1:] / closes[:-1])]  # the first bar's from its open
    assert f["intraday_vol"] == pytest.approx(np.sqrt((r**2).sum()))
    assert f["last30_return"] == pytest.approx(np.log(10.4 / 10.1))  # against the 14:30 close
    vwap = sum(row[4] for row in rows) / 1300
    assert f["vwap_deviation"] == pytest.approx(np.log(10.4 / vwap))
    # the first and last 30 minutes, in minutes: here one bar each
    assert (f["open_volume_share"], f["close_volume_share"]) == (pytest.approx(3 / 13), pytest.approx(4 / 13))
    daily = daily_bars(frame).iloc[0]
    assert (daily["open"], daily["close"], daily["high"], daily["low"], daily["volume"]) == (
        10.0, 10.4, 10.4, 10.0, 1300)
    # 60-minute bars do not close at 10:00 or 14:30: those features are missing, not 60-minute ones
    hourly = _bars_of([(day + "10:30", 10.0, 10.2, 400, 4060), (day + "11:30", 10.2, 10.0, 100, 1010),
                       (day + "14:00", 10.0, 10.1, 100, 1005), (day + "15:00", 10.1, 10.4, 400, 4120)])
    g = daily_features(hourly).iloc[0]
    assert np.isnan([g["last30_return"], g["open_volume_share"], g["close_volume_share"]]).all()
    hr = np.log([10.2 / 10.0, 10.0 / 10.2, 10.1 / 10.0, 10.4 / 10.1])  # the first hour counts too
    assert g["intraday_vol"] == pytest.approx(np.sqrt((hr**2).sum()))


def test_daily_features_see_their_own_day_only(bars):
    frame = bars["syn.000002"]
    later = frame.copy()
    after = later["day"] > later["day"].unique()[9]
    later.loc[after, ["open", "close", "volume", "amount"]] *= 1.5
    later = add_session_columns(
        later.drop(columns=["day", "bar", "first_bar", "time_of_day", "preclose", "suspended"])
    )
    a, b = daily_features(frame), daily_features(later)
    pd.testing.assert_frame_equal(a.iloc[:10], b.iloc[:10])
    assert not a.iloc[11:].equals(b.iloc[11:])


def test_a_daily_signal_hidden_in_the_bars_is_recovered_through_the_intraday_features():
    bars = synthetic_intraday(n_stocks=40, n_days=260, bar_ic=0.0, signal_ic=0.3, seed=4)
    daily = {c: daily_bars(f) for c, f in bars.items()}
    joined, line = attach_intraday(daily, bars)
    assert "for 40 of 40 stocks (bar files matched: syn.000001, " in line
    assert "); 0 of 10400 trading stock-days without bars" in line
    config = WalkForwardConfig(train_days=160, retrain_every=50, n_jobs=1, progress=False, min_stock_days=100)
    ics = {}
    for name, frames in (("daily", daily), ("intraday", joined)):
        pred = walk_forward(frames, {"ridge": FeatureRegressor("ridge")}, config).predictions
        scores = pred.pivot_table(index="date", columns="code", values="forecast")
        actual = pred.pivot_table(index="date", columns="code", values="actual")
        ics[name] = ic_summary(daily_ic(scores, actual, method="spearman"))["mean_ic"]
    # last30 sees the signal through noise of the same size (corr ~0.7): ~0.2 of the planted 0.3
    assert ics["intraday"] > 0.12 and ics["intraday"] > ics["daily"] + 0.08, ics


def test_bar_folds_cut_at_a_days_close(bars):
    calendar = pd.DatetimeIndex(bars["syn.000001"].index)
    folds = make_folds(calendar, WalkForwardConfig(train_days=10, retrain_every=4))
    assert len(folds) == 3
    first = folds[0]
    assert first.cut == pd.Timestamp("2024-01-15 15:00") and len(first.test_days) == 4 * 48
    assert first.test_days[0] == pd.Timestamp("2024-01-16 09:35")


def test_backtest_of_a_minute_file_forecasts_bars_and_recovers_the_pattern(tmp_path, one_thread):
    frame = synthetic_intraday(n_stocks=1, n_days=40, bar_ic=0.3, seed=7)["syn.000001"]
    frame["code"] = "sz.000001"
    write_minute_csv(frame, tmp_path / "sz.000001.csv")
    out = tmp_path / "report"
    res = CliRunner().invoke(
        main,
        [
            "backtest",
            str(tmp_path / "sz.000001.csv"),
            "--out",
            str(out),
            "--train-days",
            "20",
            "--retrain-every",
            "10",
            "--epochs",
            "3",
            "--window",
            "24",
            "--d-model",
            "16",
            "--no-seed-recipe",
            "--jobs",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    notes = " ".join(metrics["notes"])
    assert "No trading backtest: A-share T+1" in notes and "5-minute bars (48 a day)" in notes
    assert "session rule: bars stamped at their close" in notes and "0 suspended bar(s)" in notes
    assert not (out / "trades.csv").exists() and metrics["backtest"] == {}
    assert not (out / "bar_day_metrics.csv").exists() and (out / "bar_position_ic.png").is_file()
    positions = pd.read_csv(out / "bar_position_metrics.csv")
    transformer = positions[positions["model"] == "transformer"].set_index("bar_close")
    overall = {r["model"]: r for r in metrics["overall"]}
    # planted AR(1) 0.3 on bars 2.. of a day (the first two of 48 are unpredictable)
    assert overall["transformer"]["pearson_ic"] > 0.18 and overall["ar5"]["pearson_ic"] > 0.18
    assert len(transformer) == 48 and transformer["n_days"].max() == 20
    assert metrics["bars_by_position"]["mean"]["transformer"]["position_rank_ic"] > 0.15
    assert pd.Timestamp(pd.read_csv(out / "predictions.csv")["date"].iloc[0]).hour > 0


def test_a_daily_export_with_a_time_column_stays_daily(tmp_path):
    # baostock daily exports may carry `time` holding the date (../shared/data/ashare does)
    path = tmp_path / "sh.600000.csv"
    path.write_text(
        "date,code,open,high,low,close,preclose,volume,time\n"
        "2024-01-02,sh.600000,7.0,7.1,6.9,7.05,7.0,100,2024-01-02\n"
        "2024-01-03,sh.600000,7.05,7.2,7.0,7.1,7.05,100,2024-01-03\n"
    )
    frame, report = load_csv(path)
    assert report.format == "baostock" and frame.index.name == "date" and report.bar_minutes == 0


def test_train_and_predict_with_intraday_features(tmp_path, one_thread):
    write_daily_and_bars(tmp_path, n_stocks=8, n_days=160)
    run = tmp_path / "run"
    args = ["--epochs", "1", "--window", "8", "--d-model", "16", "--heads", "2", "--layers", "1"]
    res = CliRunner().invoke(
        main,
        ["train", str(tmp_path / "daily"), "--intraday", str(tmp_path / "bars"), "--out", str(run), *args],
    )
    assert res.exit_code == 0, res.output
    info = json.loads((run / "run.json").read_text())
    assert info["intraday"] == str((tmp_path / "bars").resolve())
    # predict reads the minute bars the run was trained with
    res = CliRunner().invoke(main, ["predict", "--run", str(run)])
    assert res.exit_code == 0, res.output
    assert len(pd.read_csv(run / "next_day.csv")) == 8
    # without them the intraday features cannot be computed: an error, not zeros
    info["intraday"] = ""
    (run / "run.json").write_text(json.dumps(info))
    res = CliRunner().invoke(main, ["predict", "--run", str(run)])
    assert res.exit_code == 1 and "last30_return" in res.output and "--intraday DIR" in res.output


def test_train_and_predict_one_stocks_bars(tmp_path, one_thread):
    frame = synthetic_intraday(n_stocks=1, n_days=30, seed=2)["syn.000001"].assign(code="sz.000001")
    write_minute_csv(frame, tmp_path / "sz.000001.csv")
    run = tmp_path / "run"
    res = CliRunner().invoke(
        main,
        ["train", str(tmp_path / "sz.000001.csv"), "--out", str(run), "--epochs", "1", "--end", "2024-02-01"],
    )
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["predict", "--run", str(run)])
    assert res.exit_code == 0, res.output
    # counted in bars and trading days, not in days of bars
    assert "next bar after 2024-02-12 15:00:00" in res.output and "bars): MSE" in res.output
    # the model's training end (2024-01-29) to the signal day: 10 trading days, not 480 bars
    assert "2024-01-29; signal day 2024-02-12; 10 trading days between" in res.output, res.output


def test_an_experiment_files_intraday_folder_is_read_from_its_folder(tmp_path):
    from forecaster.app.experiment import read_toml

    for folder in ("daily", "bars"):  # beside the file (a missing one is an error naming the key)
        (tmp_path / "exp" / folder).mkdir(parents=True)
    path = tmp_path / "exp" / "e.toml"
    path.write_text('[data]\npath = "daily"\nintraday = "bars"\n')
    data = read_toml(path)["data"]
    assert data["intraday"] == str((tmp_path / "exp" / "bars").resolve())
    assert data["path"] == str((tmp_path / "exp" / "daily").resolve())


def test_minute_bars_beside_a_qlib_folder_are_attached_as_beside_a_folder_of_files(tmp_path):
    """``--intraday`` with a Qlib data folder as DATA reads the bars and says so (it was once
    ignored there, silently): the same intraday features as beside the daily files."""
    from forecaster.app.experiment import DataConfig
    from forecaster.app.pipeline import load_data
    from forecaster.data import load_dir, write_qlib

    daily, minute = write_daily_and_bars(tmp_path, n_stocks=3, n_days=30)
    write_qlib(load_dir(daily).frames, tmp_path / "qlib")
    files = load_data(DataConfig(path=str(daily), intraday=str(minute)))
    qlib = load_data(DataConfig(path=str(tmp_path / "qlib"), intraday=str(minute)))
    assert "intraday features from" in qlib.summary and str(minute) in qlib.summary
    for code, frame in files.frames.items():
        got = qlib.frames[code]
        for name in ("last30_return", "intraday_vol"):
            np.testing.assert_allclose(got[name].to_numpy(), frame[name].to_numpy(), rtol=1e-9, atol=1e-12)
