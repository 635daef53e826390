"""Bad input on the command line ends in one clear line, never a traceback; output folders
are never silently overwritten or mixed; files are written with the usual mode."""

from __future__ import annotations

import json
import os
import stat

import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.app.outputs import OutputError, check_output
from forecaster.data import write_synthetic_panel


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("syn")
    write_synthetic_panel(path, n_stocks=6, n_days=200, seed=0)
    return path


def _bad(tmp_path, folder):
    """``(arguments, what the one line must say)`` of invocations people get wrong."""
    not_dir = tmp_path / "file.txt"
    not_dir.write_text("x")
    used = tmp_path / "used"
    used.mkdir()
    (used / "stock_metrics.csv").write_text("a\n")
    csv = next(folder.glob("*.csv"))
    corrupt = tmp_path / "run_bad"
    corrupt.mkdir()
    (corrupt / "model.pt").write_bytes(b"garbage")
    (corrupt / "run.json").write_text(json.dumps({"kind": "panel", "data": str(folder)}))
    return [
        (["train", "--out", str(tmp_path / "r"), "--end", "2025-13-45"], "--end must be a date YYYY-MM-DD"),
        (
            [
                "backtest",
                str(folder),
                "--out",
                str(tmp_path / "b1"),
                "--start",
                "2019-05-01",
                "--end",
                "2019-01-01",
            ],
            "--start (2019-05-01) is after --end (2019-01-01)",  # the options typed
        ),
        (
            ["backtest", str(folder), "--out", str(tmp_path / "b2"), "--start", "2031-01-01"],
            "start 2031-01-01 is after the data's last day",
        ),
        (
            ["train", str(folder), "--out", str(tmp_path / "r2"), "--end", "1990-01-01"],
            "--end 1990-01-01 is before the data's first day",
        ),
        (["backtest", str(folder), "--out", str(not_dir / "sub")], "cannot write there"),
        (["train", str(folder), "--out", str(not_dir)], "is a file"),
        (["backtest", str(folder), "--out", str(used)], "already holds files"),
        (
            ["backtest", str(folder), "--out", str(tmp_path / "b3"), "--epoch-stock-days", "-5"],
            "Error: --epoch-stock-days must be None or a positive integer, got -5",
        ),
        (
            ["backtest", str(folder), "--out", str(tmp_path / "b4"), "--stocks-per-batch", "many"],
            "'many' is not a valid integer",
        ),
        (["backtest", str(folder), "--out", str(tmp_path / "b5"), "--top-k", "0"], "Error: --top-k must be"),
        (["backtest", str(csv), "--out", str(tmp_path / "b6"), "--label", "bogus"], "--label must be one of"),
        (["predict", "--run", str(corrupt)], "cannot read checkpoint"),
        (["predict", "--run", str(tmp_path)], "not a run folder"),
        (["run", str(not_dir), "--out", str(tmp_path / "b7")], "not valid TOML"),
    ]


def test_bad_invocations_end_in_one_clear_line(tmp_path, folder):
    for args, expected in _bad(tmp_path, folder):
        res = CliRunner().invoke(main, args)
        assert res.exit_code != 0, args
        assert "Traceback" not in res.output and not isinstance(
            res.exception, (TypeError, KeyError, AttributeError)
        ), args
        errors = [line for line in res.output.splitlines() if line.startswith("Error")]
        assert len(errors) == 1 and expected in errors[0], (args, res.output)


def test_output_folder_refused_overwritten_or_resumed(tmp_path):
    import seq2seq.core
    from seq2seq.core import MANIFEST, atomic_write
    from seq2seq.core.outputs import release_lock

    # One rule for both commands: the forecaster's names are seq2seq.core's.
    assert (check_output, OutputError) == (seq2seq.core.check_output, seq2seq.core.OutputError)
    out = tmp_path / "report"
    assert check_output(out).claim() == out and out.is_dir()  # new: created, with its manifest
    for name in ("stock_metrics.csv", "folds/fold_000.pkl"):  # what a run writes is listed as written
        with atomic_write(out / name) as f:
            f.write(b"old\n")
    with pytest.raises(OutputError, match="already holds an earlier run .*stock_metrics.csv.*--overwrite"):
        check_output(out)
    checked = check_output(out, overwrite=True)
    assert (out / "stock_metrics.csv").exists()  # nothing removed before the work starts
    checked.claim()
    release_lock(out)  # (a command releases the folder it claimed when it ends)
    assert [p.name for p in out.iterdir()] == [MANIFEST]  # the earlier run's files (and folds/) gone
    with atomic_write(out / "fold_metrics.csv") as f:
        f.write(b"x")
    assert check_output(out, resume=True).claim() == out and (out / "fold_metrics.csv").exists()
    # A file no run wrote, whatever its name, and a run's file changed since: never removed.
    (out / "notes.docx").write_text("mine")
    (out / "prices.csv").write_text("mine")
    with pytest.raises(OutputError, match=r"holds 2 file\(s\) no run of this tool wrote: notes.docx, "
                                          r"prices.csv\. --overwrite removes only"):
        check_output(out, overwrite=True)
    (out / "notes.docx").unlink()
    (out / "prices.csv").unlink()
    (out / "fold_metrics.csv").write_text("edited by hand")
    with pytest.raises(OutputError, match=r"1 changed since a run wrote them: fold_metrics.csv"):
        check_output(out, overwrite=True)
    with pytest.raises(OutputError, match="contradict"):
        check_output(out, overwrite=True, resume=True)


def test_a_second_backtest_into_the_same_folder_is_refused_then_overwritten(tmp_path, folder):
    out = tmp_path / "rep"
    args = [
        "backtest",
        str(folder),
        "--out",
        str(out),
        "--no-baselines",
        "--epochs",
        "1",
        "--window",
        "5",
        "--d-model",
        "8",
        "--heads",
        "2",
        "--layers",
        "1",
        "--train-days",
        "120",
        "--retrain-every",
        "60",
        "--margin-days",
        "20",
        "--min-stock-days",
        "30",
        "--jobs",
        "1",
    ]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    first = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    for name in ("report.html", "experiment.toml", "metrics.json", "equity.png"):
        mode = stat.S_IMODE((out / name).stat().st_mode)
        umask = os.umask(0)
        os.umask(umask)
        assert mode == 0o666 & ~umask, (name, oct(mode))  # 0644 under the usual umask, like open()
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0 and "already holds an earlier run" in res.output
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == first  # untouched
    # A run's own file that no new run writes goes with --overwrite (never mixed with the new run)
    from seq2seq.core import atomic_write

    with atomic_write(out / "quantile_returns_old.png") as f:
        f.write(b"\x89PNG")
    # A user's files beside the run are never removed, whatever their names: refused, named.
    (out / "holdings.csv").write_text("code,shares\n")
    res = CliRunner().invoke(main, [*args, "--overwrite"])
    assert res.exit_code != 0 and "no run of this tool wrote: holdings.csv" in res.output
    assert (out / "holdings.csv").exists() and (out / "quantile_returns_old.png").exists()
    (out / "holdings.csv").unlink()
    res = CliRunner().invoke(main, [*args, "--overwrite"])
    assert res.exit_code == 0, res.output
    assert not (out / "quantile_returns_old.png").exists()  # not mixed with the earlier run
    assert set(first) <= {p.name for p in out.iterdir()}


def test_cells_not_computed_are_named_with_their_reason():
    import types

    import numpy as np
    import pandas as pd

    from forecaster.app.console import _not_computed_lines

    table = pd.DataFrame({"rank_ic": [0.05, np.nan], "dm_p(transformer vs)": [np.nan, 0.2]},
                         index=pd.Index(["transformer", "zero"], name="model"))
    why = {"zero": {"rank_ic": "constant forecast"}}
    report = types.SimpleNamespace(model="transformer", not_computed=why)
    assert _not_computed_lines(table, report) == [
        "n/c = not computed: transformer dm_p(transformer vs) (the model under test itself)",
        "n/c = not computed: zero rank_ic (constant forecast)",
    ]


def test_options_of_the_other_model_are_named_as_typed(tmp_path, folder):
    """A one-stock file with a panel option, or a panel feature set: one line naming the option
    as typed and where it applies, never an internal key or a garbled sentence."""
    csv = next(folder.glob("*.csv"))
    runner = CliRunner()
    res = runner.invoke(main, ["backtest", str(csv), "--out", str(tmp_path / "a"), "--n-seeds", "2"])
    assert res.exit_code != 0 and not (tmp_path / "a").exists()
    assert "Error: --n-seeds applies to a folder of stocks (the panel model), not to one stock" in res.output
    assert "n_seeds" not in res.output and "Traceback" not in res.output
    res = runner.invoke(main, ["backtest", str(csv), "--out", str(tmp_path / "b"), "--features", "alpha158"])
    assert res.exit_code != 0 and "Traceback" not in res.output
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("Error: --features: ('alpha158',) is not a set of distinct features of one")
    assert "--features from" not in line and "computed across a folder of stocks" in line
    toml = tmp_path / "e.toml"
    toml.write_text(f'[data]\npath = "{csv}"\n[model]\nn_seeds = 2\n')
    res = runner.invoke(main, ["run", str(toml), "--out", str(tmp_path / "c")])
    assert res.exit_code != 0 and "[model] n_seeds applies to a folder of stocks" in res.output
