"""A command that is refused or fails touches nothing: a finished report keeps every byte, a
refused predict writes no list, no command writes over its own inputs; a run whose Transformer
never forecast exits non-zero and says why first; predict refuses a signal day it cannot trust."""

from __future__ import annotations

import hashlib
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import write_synthetic_panel

QUICK = ["--epochs", "1", "--n-seeds", "1", "--window", "8", "--d-model", "16", "--heads", "2",
         "--layers", "1", "--train-days", "150", "--retrain-every", "60", "--jobs", "1", "--no-baselines",
         "--no-seed-recipe"]
SYN = ["--synthetic-stocks", "12", "--synthetic-days", "300"]


def _digests(folder) -> dict:
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("trust") / "rep"
    res = _invoke("backtest", "--out", out, *SYN, *QUICK)
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("args, message", [
    (["--synthetic-seed", "9", "--top-k", "3", "--resume"], "the data differ"),
    (["--window", "-1", "--resume"], "window must be a positive integer"),
    (["--window", "-1", "--overwrite"], "window must be a positive integer"),
    (["--device", "gpu", "--overwrite"], "unknown device 'gpu'"),
    (["--device", "cuda:7", "--overwrite"], "device"),
    (["--train-days", "400", "--overwrite"], "no fold fits"),
])
def test_a_refused_run_leaves_a_finished_report_as_it_was(report, tmp_path, args, message):
    before = _digests(report)
    res = _invoke("backtest", "--out", report, *SYN, *QUICK, *args)
    assert res.exit_code == 1 and message in res.output, res.output
    assert res.output.count("Error:") == 1 and "Traceback" not in res.output
    assert _digests(report) == before


def test_no_command_writes_over_its_inputs(report, tmp_path):
    # `run` of a report's own experiment file into that report, overwriting it
    before = _digests(report)
    res = _invoke("run", report / "experiment.toml", "--out", report, "--overwrite")
    assert res.exit_code == 1 and "would write over or inside the input" in res.output, res.output
    assert _digests(report) == before
    # a report written into the data folder (whose CSVs --overwrite would otherwise delete)
    data = tmp_path / "data"
    write_synthetic_panel(data, n_stocks=6, n_days=200, seed=1)
    files = _digests(data)
    for out in (data, data / "rep"):
        res = _invoke("backtest", data, "--out", out, "--overwrite", *QUICK)
        assert res.exit_code == 1 and "would write over or inside the input" in res.output, res.output
    res = _invoke("train", data, "--out", data, "--overwrite", *QUICK[:2])
    assert res.exit_code == 1 and "would write over or inside the input" in res.output
    assert _digests(data) == files


def test_a_run_without_any_transformer_forecast_fails_and_says_why_first(tmp_path):
    out = tmp_path / "rep"  # a window longer than any fold's history: skipped on every fold
    res = _invoke("backtest", "--out", out, *SYN, *QUICK[:-2], "--window", "290", "--margin-days", "600")
    assert res.exit_code == 1 and "the transformer produced no forecast on any fold" in res.output
    html = (out / "report.html").read_text()
    first = html.index("NO FORECAST from transformer")
    assert "too little data" in html[first:first + 400]
    assert first < html.index("daily rank IC")  # the first thing the verdict says


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict")
    data = root / "data"
    write_synthetic_panel(data, n_stocks=8, n_days=260, seed=2)
    res = _invoke("train", data, "--out", root / "run", *QUICK[:8])
    assert res.exit_code == 0, res.output
    return root


def _variant(root, name, edit):
    folder = root / name
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(root / "data", folder)
    for i, path in enumerate(sorted(folder.glob("*.csv"))):
        frame = pd.read_csv(path, dtype=str)
        edit(i, frame).to_csv(path, index=False)
    return folder


def test_predict_refuses_a_signal_day_it_cannot_trust(run):
    def future(i, frame):
        if i:
            return frame
        row = frame.iloc[[-1]].copy()
        row["date"] = "2052-04-07"
        return pd.concat([frame, row])

    cases = {
        "early": (lambda i, f: f.iloc[:-40], "before the model's training end"),
        "future": (future, "line 262, column 'date': expected a date up to today"),
        "ragged": (lambda i, f: f if i < 2 else f.iloc[:-1], "the files end on different days"),
    }
    for name, (edit, message) in cases.items():
        folder = _variant(run, name, edit)
        res = _invoke("predict", "--run", run / "run", folder, "--out", run / f"{name}.csv",
                      "--capital", "1e6")
        assert res.exit_code == 1 and message in res.output, (name, res.output)
        assert not (run / f"{name}.csv").exists() and not (run / "orders.csv").exists()


def test_a_failing_predict_writes_nothing(run, tmp_path):
    bad = tmp_path / "h.csv"
    bad.write_text("code,shares\nsz.999999,100\n")
    out = tmp_path / "list.csv"
    res = _invoke("predict", "--run", run / "run", run / "data", "--out", out, "--holdings", bad,
                  "--capital", "1e6")
    assert res.exit_code == 1 and "is not a stock of the data" in res.output
    assert list(tmp_path.iterdir()) == [bad]
    res = _invoke("predict", "--run", run / "run", "--device", "gpu")
    assert res.exit_code != 0 and "--device" in res.output and "checkpoint" not in res.output
    res = _invoke("predict", "--run", run / "run", "--out", out, "--capital", "1e6")
    assert res.exit_code == 0, res.output
    table, orders = pd.read_csv(out), pd.read_csv(tmp_path / "orders.csv")
    assert table["signal_date"].nunique() == 1 and (orders["signal_date"] == table["signal_date"][0]).all()


def test_a_stock_without_a_features_columns_is_named_in_the_list(run, tmp_path):
    folder = _variant(run, "lacking", lambda i, f: f.drop(columns=["turn", "amount"]) if i == 0 else f)
    out = tmp_path / "list.csv"
    res = _invoke("predict", "--run", run / "run", folder, "--out", out)
    assert res.exit_code == 0, res.output
    assert "lacks columns amount, turn that the others have" in res.output
    table = pd.read_csv(out, keep_default_na=False).set_index("code")
    first = sorted(table.index)[0]
    assert "log_turnover" in table.loc[first, "missing_features"].split(",")
    assert (table.drop(index=first)["missing_features"] == "").all()


def test_a_refused_run_leaves_no_folder_behind(tmp_path):
    for command in (["backtest", *SYN], ["train"]):
        res = _invoke(*command, "--out", tmp_path / "new" / "rep", "--device", "gpu")
        assert res.exit_code == 1 and "unknown device 'gpu'" in res.output, res.output
        assert not (tmp_path / "new").exists()
