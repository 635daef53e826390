"""Qlib's binary folders: written in Qlib's documented format and read back into the same
frames; a report's predictions exported as Qlib's prediction frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.app.experiment import DataConfig
from forecaster.app.pipeline import load_data
from forecaster.data import DataError, Panel, load_qlib, qlib_frames, synthetic_panel, write_qlib
from forecaster.data.qlib.conventions import qlib_code
from forecaster.data.qlib.writer import qlib_predictions
from forecaster.reporting.report import write_predictions


@pytest.fixture
def frames():
    f = synthetic_panel(n_stocks=4, n_days=120, seed=1)
    codes = sorted(f)
    late = f[codes[1]].iloc[30:].copy()  # listed later: its files start at calendar index 30
    exdate = late.index[10]
    late.loc[exdate, "preclose"] = round(late["close"].shift(1)[exdate] * 0.8, 2)  # a 10-for-8 ex-date
    f[codes[1]] = late
    f[codes[2]] = f[codes[2]].drop(f[codes[2]].index[50:53])  # three days without a bar
    return f


def test_written_folder_is_qlibs_format(frames, tmp_path):
    folder = write_qlib(frames, tmp_path / "qlib")
    calendar = (folder / "calendars" / "day.txt").read_text().split()
    assert calendar[0] == str(min(f.index[0] for f in frames.values()).date())
    lines = (folder / "instruments" / "all.txt").read_text().splitlines()
    code = sorted(frames)[1]
    name = qlib_code(code)
    assert f"{name}\t{frames[code].index[0].date()}\t{frames[code].index[-1].date()}" in lines
    raw = np.fromfile(folder / "features" / name.lower() / "close.day.bin", dtype="<f4")
    assert raw[0] == calendar.index(str(frames[code].index[0].date()))  # start index, then values
    factor = np.fromfile(folder / "features" / name.lower() / "factor.day.bin", dtype="<f4")[1:]
    assert factor[0] == 1.0 and factor[-1] == pytest.approx(1.25, rel=1e-3)  # adjusted across the ex-date


def test_round_trip_gives_the_same_frames(frames, tmp_path):
    back = qlib_frames(write_qlib(frames, tmp_path / "qlib"))
    assert list(back) == sorted(frames)
    for code, frame in frames.items():
        got = back[code]
        assert got.index.equals(frame.index), code  # days without a bar stay without one
        for col in ("open", "high", "low", "close", "preclose"):
            np.testing.assert_allclose(got[col], frame[col], rtol=0, atol=5e-4, err_msg=f"{code} {col}")
        np.testing.assert_allclose(got["volume"], frame["volume"], rtol=1e-6)
        assert (got["suspended"].to_numpy() == frame["suspended"].to_numpy()).all()
    panel, expected = load_qlib(tmp_path / "qlib"), Panel.from_frames(frames)
    assert list(panel.codes) == list(expected.codes) and panel.dates.equals(expected.dates)
    np.testing.assert_allclose(panel["close"], expected["close"], atol=5e-4)
    np.testing.assert_array_equal(panel.listed, expected.listed)
    np.testing.assert_array_equal(panel.suspended, expected.suspended)
    loaded = load_data(DataConfig(path=str(tmp_path / "qlib")))  # the CLI's DATA may be a Qlib folder
    assert "Qlib data folder" in loaded.summary and sorted(loaded.frames) == sorted(frames)


def test_bad_qlib_folders_name_the_file(frames, tmp_path):
    folder = write_qlib(frames, tmp_path / "qlib")
    code = qlib_code(sorted(frames)[0]).lower()
    (folder / "features" / code / "close.day.bin").unlink()
    with pytest.raises(DataError, match=r"close\.day\.bin: missing"):
        qlib_frames(folder)
    with pytest.raises(DataError, match="not a Qlib data folder"):
        qlib_frames(tmp_path)
    with pytest.raises(DataError, match=r"csi300\.txt: no such instruments file"):
        qlib_frames(folder, "csi300")


def test_export_qlib_writes_the_prediction_frame(tmp_path):
    dates = pd.to_datetime(["2024-01-03", "2024-01-02", "2024-01-03", "2024-01-02"])
    pred = pd.DataFrame({"code": ["sz.000001", "sh.600000", "sh.600000", "sz.000001"],
                         "model": "transformer", "fold": 0, "forecast": [0.3, 0.1, -0.2, 0.4],
                         "actual": 0.0}, index=pd.Index(dates, name="date"))
    other = pred.assign(model="gbm", forecast=9.0)
    write_predictions(pd.concat([pred, other]), tmp_path, "csv")
    res = CliRunner().invoke(main, ["export-qlib", str(tmp_path), "--dates", "target"])
    assert res.exit_code == 0, res.output
    got = pd.read_pickle(tmp_path / "qlib_pred.pkl")
    assert got.index.names == ["datetime", "instrument"] and list(got.columns) == ["score"]
    assert got.index.is_monotonic_increasing
    assert got.loc[(pd.Timestamp("2024-01-03"), "SH600000"), "score"] == -0.2
    assert got.loc[(pd.Timestamp("2024-01-02"), "SZ000001"), "score"] == 0.4 and len(got) == 4
    with pytest.raises(ValueError, match="no predictions of model 'lstm'"):
        qlib_predictions(pd.concat([pred, other]).reset_index(), "lstm")
    # by signal day: each row dated the trading day before its own (2024-01-01 a fold's signal start)
    signal = qlib_predictions(pred.reset_index(), signal_starts=["2024-01-01"])
    assert signal.loc[(pd.Timestamp("2024-01-02"), "SH600000"), "score"] == -0.2
    assert signal.loc[(pd.Timestamp("2024-01-01"), "SZ000001"), "score"] == 0.4
