"""Data that is wrong is named, never read silently (issue 49): a damaged Qlib folder names
its file and line, a binary file is said not to be text, help texts are plain, and errors name
what the user typed."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import DataError, synthetic_panel, write_qlib
from forecaster.data.qlib.reader import read_qlib


@pytest.fixture
def qlib_folder(tmp_path):
    return write_qlib(synthetic_panel(n_stocks=3, n_days=60, seed=1), tmp_path / "q")


def test_a_bad_calendar_line_is_named(qlib_folder):
    path = qlib_folder / "calendars" / "day.txt"
    lines = path.read_text().splitlines()
    lines[7] = "2020-02-31"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"calendars/day.txt: line 8: '2020-02-31' is not a date"):
        read_qlib(qlib_folder)
    lines[7], lines[8] = lines[8], lines[6]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"line 9: \S+ does not come after"):
        read_qlib(qlib_folder)


def test_a_truncated_feature_file_is_damaged_not_days_without_a_bar(qlib_folder):
    close = next((qlib_folder / "features").iterdir()) / "close.day.bin"
    data = close.read_bytes()
    close.write_bytes(data[:-40])  # ten values short: the stock would seem to stop trading
    with pytest.raises(DataError, match=r"close.day.bin: damaged Qlib feature file: \d+ values .* cut short"):
        read_qlib(qlib_folder)
    close.write_bytes(data[:-2])  # cut mid-value
    with pytest.raises(DataError, match=r"close.day.bin: damaged Qlib feature file \(\d+ bytes"):
        read_qlib(qlib_folder)


def test_help_texts_are_plain_text():
    """No Sphinx roles or double backquotes in any command's --help."""
    from seq2seq.cli import main as seq2seq_main

    runner = CliRunner()
    for group in (main, seq2seq_main):
        for name in [None, *group.commands]:
            res = runner.invoke(group, [*([name] if name else []), "--help"])
            assert res.exit_code == 0, (name, res.output)
            for marker in (":meth:", ":mod:", ":func:", ":class:", ":data:", ":attr:", "``"):
                assert marker not in res.output, (name, marker)


@pytest.mark.parametrize(("args", "message"), [
    (["--epochs", "0"], "Error: --epochs must be a positive integer, got 0"),
    (["--top-k", "-1"], "Error: --top-k must be None or a positive integer, got -1"),
    (["--synthetic-stocks", "6", "--synthetic-days", "300", "--horizon", "250"],
     "--horizon 250 (the purge gap between a cut-off and its first forecast) leave no day to forecast"),
])
def test_errors_name_the_option_typed(tmp_path, args, message):
    res = CliRunner().invoke(main, ["backtest", "--out", str(tmp_path / "o"), *args])
    assert res.exit_code == 1 and message in res.output, res.output
    assert "max_epochs" not in res.output and "[model]" not in res.output
    assert not (tmp_path / "o").exists()


def test_an_experiment_files_missing_data_path_names_section_and_key(tmp_path):
    exp = tmp_path / "x.toml"
    exp.write_text('[data]\npath = "../nowhere/ashare"\n')
    res = CliRunner().invoke(main, ["run", str(exp), "--out", str(tmp_path / "o")])
    assert res.exit_code == 1, res.output
    assert f"{exp}: [data] path = '../nowhere/ashare': no such file or folder" in res.output


def test_a_short_return_window_on_a_short_slice_is_missing_not_an_error():
    """return_60d on a fold slice of 40 days is NaN for every day (it failed the fold with a
    broadcast error before)."""
    from forecaster.data.panel import Panel
    from forecaster.features.factors import feature

    panel = Panel.from_frames(synthetic_panel(n_stocks=4, n_days=40, seed=2))
    long, short = feature(panel, "return_60d", cache=False), feature(panel, "return_5d", cache=False)
    assert long.shape == short.shape == (40, 4)
    assert np.isnan(long).all() and np.isfinite(short[10:]).any()


def test_a_short_minute_file_names_min_stock_days(tmp_path):
    """28 days of real 60-minute bars (4 a day): the run stops naming --min-stock-days, the cause
    (it said "no model produced any forecast", the option only in a warning)."""
    import pandas as pd
    from conftest import shared_path

    bars = pd.read_csv(shared_path("minute", "baostock_60min", "sz.300015.csv"), dtype=str)
    short = tmp_path / "sz.300015.csv"
    bars[bars["date"].isin(bars["date"].unique()[:28])].to_csv(short, index=False)
    res = CliRunner().invoke(main, ["backtest", str(short), "--out", str(tmp_path / "o"), "--epochs", "1",
                                    "--no-baselines"])
    assert res.exit_code == 1, res.output
    assert "--min-stock-days 120" in res.output and "lower --min-stock-days" in res.output, res.output


@pytest.mark.parametrize(("name", "code"), [
    ("XSHG_5min_600977.csv", "sh.600977"), ("600977.XSHG.csv", "sh.600977"),
    ("XSHE-000001-1min.csv", "sz.000001"), ("SZ#000665#5min.csv", "sz.000665"), ("yahoo.csv", None),
])
def test_minute_file_names_with_an_exchanges_mic_name_their_stock(name, code):
    from forecaster.data.sources import code_in_name

    assert code_in_name(name) == code


def test_intraday_bars_that_match_no_stock_stop_the_run():
    """--intraday whose files match no daily stock: an error naming both sides (it ran on with
    no intraday feature at all, exit 0)."""
    from forecaster.data import synthetic_intraday
    from forecaster.data.minute.features import attach_intraday

    frames = synthetic_panel(n_stocks=2, n_days=30, seed=1)
    bars = {"sh.600977": next(iter(synthetic_intraday(n_stocks=1, n_days=5, seed=1).values()))}
    with pytest.raises(ValueError, match=r"no minute-bar file matched a stock of the daily data: 1 bar "
                                         r"file\(s\) read as sh.600977; daily stocks syn"):
        attach_intraday(frames, bars)


def test_a_binary_file_is_said_not_to_be_text(tmp_path):
    """A workbook or any binary file saved as .csv: one short line, not kilobytes of decoded bytes."""
    from forecaster.data import load_csv

    path = tmp_path / "sh.600000.csv"
    path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 25)
    with pytest.raises(DataError, match=r"sh.600000.csv: not a text file \(a zip archive") as info:
        load_csv(path)
    assert len(str(info.value)) < 300


def _folder(tmp_path, edit=None):
    from forecaster.data import write_synthetic_panel

    folder = tmp_path / "d"
    write_synthetic_panel(folder, n_stocks=6, n_days=80, seed=3)
    if edit:
        path = sorted(folder.glob("*.csv"))[0]
        lines = path.read_text().splitlines()
        path.write_text("\n".join(edit(lines)) + "\n")
    return folder


@pytest.mark.parametrize(("day", "message"), [
    ("2052-04-08", r"line 82, column 'date': expected a date up to today"),
    ("SATURDAY", r"line 82, column 'date': expected a trading day \(Monday to Friday"),
])
def test_a_day_that_cannot_exist_is_an_error_or_a_counted_drop(tmp_path, day, message):
    """A row dated in 2052 or on a Saturday: an error naming file and line on every entry point
    (backtest reported "2024-01-12 to 2052-04-08" and traded on it; a Saturday added a trading
    day to every stock); with --on-bad drop, dropped and counted."""
    import pandas as pd

    from forecaster.data import load_dir

    def add(lines):
        last = lines[-1].split(",")
        when = pd.Timestamp(last[0])
        last[0] = (str((when + pd.offsets.Week(weekday=5)).date()) if day == "SATURDAY" else day)
        return [*lines, ",".join(last)]

    folder = _folder(tmp_path, add)
    with pytest.raises(DataError, match=message):
        load_dir(folder)
    loaded = load_dir(folder, on_bad="drop")
    assert sum(sum(r.dropped.values()) for r in loaded.reports.values()) == 1
    assert "1 bad rows dropped" in loaded.summary()
    for command in (["backtest", str(folder), "--out", str(tmp_path / "o")], ["train", str(folder), "--out",
                                                                                 str(tmp_path / "o")]):
        res = CliRunner().invoke(main, command)
        assert res.exit_code == 1 and "line 82" in res.output, res.output
        assert not (tmp_path / "o").exists()


def test_a_day_only_one_file_has_is_named(tmp_path):
    """A weekday that one file holds and five others spanning it lack (a phantom trading day)."""

    from forecaster.data import load_dir

    folder = _folder(tmp_path)
    for path in sorted(folder.glob("*.csv"))[1:]:  # the other five files lack the 42nd row's day
        lines = path.read_text().splitlines()
        path.write_text("\n".join(lines[:42] + lines[43:]) + "\n")
    path = sorted(folder.glob("*.csv"))[0]
    with pytest.raises(DataError, match=rf"{path.name}: line 43: \S+ is a day no other file of the folder "
                                        "has"):
        load_dir(folder)
    loaded = load_dir(folder, on_bad="drop")
    assert sum(r.dropped.get("days no other file has", 0) for r in loaded.reports.values()) == 1


def test_a_forward_adjusted_file_among_unadjusted_ones_is_named(tmp_path):
    """A file whose old prices are forward-adjusted (scaled down before an ex-rights day) and
    that has no adjustflag column: its amounts no longer fit its prices, and the load names it
    (the Transformer's IC moved from 0.0549 to 0.0687 on such a folder without a word)."""
    import pandas as pd
    from conftest import shared_path

    from forecaster.data import load_dir

    folder = tmp_path / "d"
    folder.mkdir()
    for i, path in enumerate(sorted(shared_path("ashare").glob("*.csv"))[:6]):
        frame = pd.read_csv(path, dtype=str)
        if i == 0:
            frame = frame.drop(columns=["adjustflag"])
            old = pd.to_datetime(frame["date"]) < "2022-06-01"
            for col in ("open", "high", "low", "close", "preclose"):
                frame.loc[old, col] = (frame.loc[old, col].astype(float) * 0.8).round(2).astype(str)
            named = path.name
        frame.to_csv(folder / path.name, index=False)
    loaded = load_dir(folder)
    flagged = [p for p, flag in loaded.flagged() if flag.kind == "level"]
    assert [p.rsplit("/", 1)[-1] for p in flagged] == [named]
    assert named[:-4] in " ".join(loaded.summary().split())
