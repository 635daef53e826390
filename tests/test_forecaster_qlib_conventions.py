"""Community Qlib folders (issue 43): ``$change`` in percent, ``$volume`` not divided by
``$factor`` and upper-case feature folders are detected from the data and read right, a
``$change`` that is neither stops naming the field, and a Qlib folder's load is cached."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data import DataError, synthetic_panel, write_qlib
from forecaster.data.qlib import qlib_code, read_qlib


@pytest.fixture
def frames():
    """Four synthetic stocks, three with a 10-for-10 bonus issue (prices halve, share volume
    doubles): the splits the volume check needs."""
    f = synthetic_panel(n_stocks=4, n_days=90, seed=4)
    for code in sorted(f)[:3]:
        frame = f[code].copy()
        day = frame.index[40]
        after = frame.index >= day
        for col in ("open", "high", "low", "close", "preclose"):
            frame.loc[after, col] = (frame.loc[after, col] / 2).round(3)
        frame.loc[day, "preclose"] = frame["close"].shift(1)[day] / 2 * 1.0
        frame.loc[after, "volume"] *= 2
        f[code] = frame
    return f


def _bin(folder, code, field):
    return folder / "features" / qlib_code(code).lower() / f"{field}.day.bin"


def _rewrite(path, transform):
    raw = np.fromfile(path, dtype="<f4")
    raw[1:] = transform(raw[1:].astype(float))
    raw.astype("<f4").tofile(path)


def _same(got: dict, frames: dict) -> None:
    for code, frame in frames.items():
        np.testing.assert_allclose(got[code]["preclose"], frame["preclose"], atol=2e-3, err_msg=code)
        np.testing.assert_allclose(got[code]["volume"], frame["volume"], rtol=1e-5, err_msg=code)


def test_qlibs_own_conventions_read_without_notes(frames, tmp_path):
    load = read_qlib(write_qlib(frames, tmp_path / "q"))
    _same(load.frames, frames)
    assert not any("percent" in n or "not divided" in n for n in load.notes)


def test_change_in_percent_is_detected_and_converted(frames, tmp_path):
    folder = write_qlib(frames, tmp_path / "q")
    for code in frames:
        _rewrite(_bin(folder, code, "change"), lambda v: v * 100)
    load = read_qlib(folder)
    _same(load.frames, frames)  # preclose from $change / 100
    assert "$change in percent in 4 stock(s): divided by 100" in load.notes


def test_volume_not_divided_by_the_factor_is_detected(frames, tmp_path):
    folder = write_qlib(frames, tmp_path / "q")
    for code in frames:
        factor = np.fromfile(_bin(folder, code, "factor"), dtype="<f4")[1:].astype(float)
        _rewrite(_bin(folder, code, "volume"), lambda v, f=factor: v * f)  # share volume
    load = read_qlib(folder)
    _same(load.frames, frames)
    assert any("$volume not divided by $factor (checked on 3 splits" in n for n in load.notes)


def test_upper_case_feature_folders_are_read(frames, tmp_path):
    folder = write_qlib(frames, tmp_path / "q")
    for path in (folder / "features").iterdir():
        path.rename(path.with_name(path.name.upper()))
    load = read_qlib(folder)
    _same(load.frames, frames)
    assert "4 feature folder(s) in upper case (e.g. features/SH600000): read as such" in load.notes


def test_a_change_that_matches_neither_convention_stops_naming_the_field(frames, tmp_path):
    folder = write_qlib(frames, tmp_path / "q")
    code = sorted(frames)[1]
    _rewrite(_bin(folder, code, "change"), lambda v: v * 7)
    with pytest.raises(DataError, match=r"change.day.bin: \$change does not match consecutive adjusted"):
        read_qlib(folder)


def test_a_qlib_folders_load_is_cached(frames, tmp_path, monkeypatch):
    folder = write_qlib(frames, tmp_path / "q")
    first = read_qlib(folder, cache=True)
    again = read_qlib(folder, cache=True)
    assert not first.cached and again.cached and (folder / ".forecaster_cache" / "panel.parquet").is_file()
    for code in frames:
        pd.testing.assert_frame_equal(again.frames[code], first.frames[code], check_freq=False)
    _rewrite(_bin(folder, sorted(frames)[0], "close"), lambda v: v * 1.0001)  # a changed file: rebuilt
    assert not read_qlib(folder, cache=True).cached
