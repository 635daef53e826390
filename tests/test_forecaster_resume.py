"""Long runs survive interruption; a failing model does not sink a run; every stock is
accounted for; statistics that cannot be computed say so; caveats are only stated where true."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.base import BaseEstimator

from forecaster.app.cli import main
from forecaster.data import synthetic_panel, write_synthetic_panel
from forecaster.evaluation.fold_store import ResumeError
from forecaster.evaluation.scoring import score_run
from forecaster.evaluation.verdict import data_caveats
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.models.panel.baselines import FactorScore

FAST = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1",
        "--train-days", "150", "--retrain-every", "30", "--jobs", "1", "--no-seed-recipe"]


def _cli(folder, out, *extra):
    return [sys.executable, "-m", "forecaster.app.cli", "backtest", str(folder), "--out", str(out),
            *FAST, *extra]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("syn")
    write_synthetic_panel(root, n_stocks=10, n_days=300, signal_ic=0.05, seed=3)
    return root


def _wait_for_folds(proc, folds, n, timeout=240):
    t0 = time.time()
    while len(list(folds.glob("fold_*.json"))) < n:
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert time.time() - t0 < timeout, "no fold finished in time"
        time.sleep(0.05)


def _metrics(out):
    m = json.loads((out / "metrics.json").read_text())
    m.pop("resumed_folds")
    m.pop("timings")  # where this run's time went: the resumed one skipped the finished folds
    m.pop("memory")  # and its memory
    m["walk_forward"].pop("resume")
    assert "resume" not in m["experiment"]["walk_forward"]  # how a run started is not what it computes
    m["experiment"]["run"].pop("resume")  # recorded apart, under how the run was carried out
    return m


def test_killed_run_resumes_to_the_uninterrupted_result(folder, tmp_path):
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cli(folder, killed), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    try:
        _wait_for_folds(proc, killed / "folds", 2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finished = len(list((killed / "folds").glob("fold_*.json")))
    assert 2 <= finished < 5 and not (killed / "metrics.json").exists()

    # Other options than the interrupted run's: refused, naming the difference (in process: no start-up).
    res = CliRunner().invoke(main, [*_cli(folder, killed, "--resume")[3:], "--lr", "0.01"])
    assert res.exit_code != 0 and "configuration differs" in res.output and "lr" in res.output
    assert len(list((killed / "folds").glob("fold_*.json"))) == finished  # nothing lost

    res = subprocess.run(_cli(folder, killed, "--resume"), capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    whole = tmp_path / "whole"
    res = subprocess.run(_cli(folder, whole), capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr

    assert json.loads((killed / "metrics.json").read_text())["resumed_folds"] == finished
    assert (killed / "predictions.csv").read_text() == (whole / "predictions.csv").read_text()
    a, b = _metrics(killed), _metrics(whole)
    assert a == b


def test_ctrl_c_keeps_finished_folds_and_prints_the_resume_command(folder, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(_cli(folder, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for_folds(proc, out / "folds", 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "interrupted" in err and "--resume" in err and str(out) in err
    kept = len(list((out / "folds").glob("fold_*.json")))
    assert kept and f"interrupted: {kept} finished fold(s) kept in {out / 'folds'}" in err


def test_resume_refuses_changed_data(tmp_path):
    frames = synthetic_panel(n_stocks=6, n_days=260, seed=1)
    models = {"low_vol": FactorScore("low_vol_20d")}
    config = WalkForwardConfig(train_days=150, retrain_every=40, min_stock_days=60, n_jobs=1, progress=False)
    walk_forward(frames, models, config, checkpoint_dir=tmp_path)
    changed = dict(frames)
    code = sorted(frames)[-1]
    changed[code] = frames[code].copy()
    changed[code].iloc[-1, changed[code].columns.get_loc("close")] *= 1.01  # the future moved
    resume = WalkForwardConfig(train_days=150, retrain_every=40, min_stock_days=60, n_jobs=1, progress=False,
                               resume=True)
    with pytest.raises(ResumeError, match="the data differ"):
        walk_forward(changed, models, resume, checkpoint_dir=tmp_path)
    # Same data: every fold comes from the store, and the result is the same.
    again = walk_forward(frames, models, resume, checkpoint_dir=tmp_path)
    first = walk_forward(frames, models, config)
    assert again.n_resumed == len(first.folds)
    pd.testing.assert_frame_equal(again.predictions, first.predictions)


class _Flaky(BaseEstimator):
    """A score that raises on chosen folds (recognised by the first training date)."""

    input_kind = "panel"
    is_return_forecast = False

    def __init__(self, fail_after=None):
        self.fail_after = fail_after

    def fit(self, panel):
        if self.fail_after is None or panel.dates[-1] > pd.Timestamp(self.fail_after):
            raise RuntimeError("boom")
        self.fitted_ = True
        return self

    def predict(self, panel):
        return FactorScore("low_vol_20d").fit(panel).predict(panel)


def test_a_failing_model_is_recorded_and_the_run_goes_on():
    frames = synthetic_panel(n_stocks=8, n_days=300, seed=2)
    config = WalkForwardConfig(train_days=150, retrain_every=40, min_stock_days=60, n_jobs=1, progress=False)
    cuts = pd.DatetimeIndex(sorted(set().union(*(f.index for f in frames.values()))))
    models = {"flaky": _Flaky(fail_after=str(cuts[200].date())), "low_vol": FactorScore("low_vol_20d")}
    result = walk_forward(frames, models, config)
    n_folds = len(result.folds)
    failed = {fold for fold, name in result.failed if name == "flaky"}
    assert 0 < len(failed) < n_folds
    assert all("RuntimeError: boom (at test_forecaster_resume.py" in why for why in result.failed.values())
    low_vol = result.predictions[result.predictions["model"] == "low_vol"]
    assert set(low_vol["fold"]) == set(range(n_folds))
    report = score_run(result, frames, models, "flaky")
    assert any("FAILED model runs" in line and "flaky on" in line for line in report.verdict)


def test_cli_exits_nonzero_when_the_model_under_test_failed_everywhere(folder, tmp_path, monkeypatch):
    from forecaster.models.panel.model import PanelTransformer

    def broken(self, panel):
        raise RuntimeError("no GPU today")

    monkeypatch.setattr(PanelTransformer, "fit", broken)
    res = CliRunner().invoke(main, ["backtest", str(folder), "--out", str(tmp_path / "r"), *FAST])
    assert res.exit_code == 1, res.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())  # the report is still written
    assert metrics["failed"] and all("no GPU today" in v for v in metrics["failed"].values())
    assert "low_vol_20d" in metrics["daily_rank_ic"]


class _Raises(BaseEstimator):
    """A score whose ``fit`` raises: ``"bug"`` a plain ValueError (a bad parameter or a bug reads
    the same), ``"thin"`` NotEnoughData; on every fold, or on those whose training rows end
    before ``before``."""

    input_kind = "panel"
    is_return_forecast = False

    def __init__(self, kind="bug", before=None):
        self.kind = kind
        self.before = before

    def fit(self, panel):
        from forecaster.checks import NotEnoughData

        if self.before is None or panel.dates[-1] < pd.Timestamp(self.before):
            if self.kind == "thin":
                raise NotEnoughData(f"too little data: {panel.n_days} days")
            raise ValueError("window must be positive, got -3\n(a second line the summary leaves out)")
        return self

    def predict(self, panel):
        return FactorScore("low_vol_20d").fit(panel).predict(panel)


def test_only_not_enough_data_skips_a_fold_and_any_other_error_is_a_failure():
    """A plain ValueError in ``fit`` is the model's failure on the fold (type, first line, where),
    never a skipped fold; NotEnoughData skips the fold, as too little data always did."""
    frames = synthetic_panel(n_stocks=8, n_days=300, seed=2)
    config = WalkForwardConfig(train_days=150, retrain_every=40, min_stock_days=60, n_jobs=1, progress=False)
    models = {"bug": _Raises("bug"), "thin": _Raises("thin"), "low_vol": FactorScore("low_vol_20d")}
    result = walk_forward(frames, models, config)
    folds = set(range(len(result.folds)))
    assert {fold for fold, name in result.failed if name == "bug"} == folds
    assert {fold for fold, name in result.skipped if name == "thin"} == folds
    assert not [key for key in result.skipped if key[1] == "bug"] + [key for key in result.failed
                                                                      if key[1] == "thin"]
    for why in (why for (fold, name), why in result.failed.items() if name == "bug"):
        assert why.startswith("ValueError: window must be positive, got -3 (at test_forecaster_resume.py:")
        assert "second line" not in why
    assert set(result.predictions["model"]) == {"low_vol"}


def test_the_models_say_too_little_data_as_not_enough_data():
    """Each model's own 'too few rows, days or stocks' is NotEnoughData (what skips a fold)."""
    from forecaster.checks import NotEnoughData
    from forecaster.data.panel import Panel
    from forecaster.models.panel.baselines import FeatureRegressor
    from forecaster.models.panel.model import PanelTransformer
    from forecaster.models.stock.baselines import ARForecast, RidgeForecast
    from forecaster.models.stock.estimator import CausalTransformerForecaster
    from forecaster.models.stock.seed import SeedRecipe

    frames = synthetic_panel(n_stocks=6, n_days=40, seed=1)
    short = Panel.from_frames(frames).slice(end=sorted(set().union(*(f.index for f in frames.values())))[12])
    one = next(iter(frames.values()))
    tiny = dict(d_model=8, n_heads=2, n_layers=1, max_epochs=1)
    fits = [lambda: PanelTransformer(window=8, **tiny).fit(short),
            lambda: FeatureRegressor("gbm").fit(short), lambda: FeatureRegressor("ridge").fit(short),
            lambda: ARForecast().fit(one.iloc[:5]), lambda: RidgeForecast().fit(one.iloc[:30]),
            lambda: CausalTransformerForecaster(window=20, **tiny).fit(one.iloc[:15]),
            lambda: SeedRecipe(window=20).fit(one.iloc[:15])]
    for fit in fits:
        with pytest.raises(NotEnoughData):
            fit()


def test_the_model_under_test_failing_on_one_fold_is_listed_first_and_exits_nonzero(folder, tmp_path,
                                                                                    monkeypatch):
    from forecaster.models.panel.model import PanelTransformer

    real, calls = PanelTransformer.fit, []

    def first_fold_broken(self, panel):
        calls.append(panel.dates[-1])
        if len(calls) == 1:  # fold 0 (--jobs 1: the folds run in order, in this process)
            raise ValueError("bad shape [3, 5]\nsecond line")
        return real(self, panel)

    monkeypatch.setattr(PanelTransformer, "fit", first_fold_broken)
    res = CliRunner().invoke(main, ["backtest", str(folder), "--out", str(tmp_path / "r"), *FAST])
    assert res.exit_code == 1, res.output
    out = res.output
    listed = out.index("FAILED: transformer on fold 0: ValueError: bad shape [3, 5] (at ")
    assert listed < out.index("daily_rank_ic")  # before the summary table
    assert "second line" not in out and "Traceback" not in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("Error: transformer failed on 1 of ") and "(fold 0)" in last
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())  # written before the exit
    assert list(metrics["failed"]) == ["0:transformer"] and not metrics["skipped"].get("0:transformer")
    first = metrics["verdict"][0]  # the report's verdict opens with it too
    assert first.startswith("FAILED model runs") and "transformer on 1 of" in first
    assert set(metrics["daily_rank_ic"]) >= {"transformer", "low_vol_20d"}  # its other folds scored


def test_a_failing_baseline_is_listed_but_leaves_the_exit_status_and_thin_data_is_no_failure(
        folder, tmp_path, monkeypatch):
    from forecaster.checks import NotEnoughData
    from forecaster.models.panel.model import PanelTransformer

    real, calls = PanelTransformer.fit, []

    def thin_first_fold(self, panel):
        calls.append(1)
        if len(calls) == 1:
            raise NotEnoughData("too little data: 3 days")
        return real(self, panel)

    def broken(self, panel):
        raise ValueError("unknown factor 'x'")

    monkeypatch.setattr(PanelTransformer, "fit", thin_first_fold)
    monkeypatch.setattr(FactorScore, "fit", broken)
    res = CliRunner().invoke(main, ["backtest", str(folder), "--out", str(tmp_path / "r"), *FAST])
    assert res.exit_code == 0, res.output
    assert res.output.index("FAILED: ") < res.output.index("daily_rank_ic")
    assert "FAILED: transformer" not in res.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["skipped"]["0:transformer"] == "too little data: 3 days"
    assert metrics["failed"] and not any(key.endswith(":transformer") for key in metrics["failed"])


def test_universe_table_names_the_stock_left_out_and_stats_not_computed(tmp_path):
    write_synthetic_panel(tmp_path / "d", n_stocks=4, n_days=300, signal_ic=0.0, seed=5)
    short = sorted((tmp_path / "d").glob("*.csv"))[0]
    short.write_text("".join(short.read_text().splitlines(keepends=True)[:50]))  # header + 49 rows
    res = CliRunner().invoke(main, ["backtest", str(tmp_path / "d"), "--out", str(tmp_path / "r"), *FAST])
    assert res.exit_code == 0, res.output
    code = short.stem
    assert f"4 stocks loaded, 3 used, 1 left out: {code} (too few days" in res.output
    table = pd.read_csv(tmp_path / "r" / "universe.csv")
    row = table.set_index("code").loc[code]
    assert row["status"] == "left out" and row["days"] == 49
    assert "fewer than --min-stock-days 120" in row["reason"]
    used = table[table["status"] == "used"]
    assert len(used) == 3 and (used["scored_days"] > 0).all()
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert metrics["universe"]["loaded"] == 4 and list(metrics["universe"]["left_out"]) == [code]
    # Three stocks a day: no daily rank IC. Said in words, never as "nan" in a sentence.
    lines = metrics["verdict"] + metrics["notes"]
    assert any("daily rank IC not computed (fewer than 5 stocks" in line for line in lines)
    assert not any("nan" in line.lower().replace("nan cells", "") for line in lines)
    assert metrics["not_computed"]["transformer"]["mean_ic"].startswith("fewer than 5 stocks")
    assert any("SYNTHETIC" in line for line in metrics["notes"])
    assert not any("survivorship" in line for line in metrics["notes"])  # generated data: no selection


def test_caveats_are_conditional_unless_the_user_says_so():
    real = ["sh.600000", "sz.000001"]
    assert not any("SYNTHETIC" in n for n in data_caveats(real, panel=True))
    conditional = " ".join(data_caveats(real, panel=True))
    assert conditional.startswith("if these stocks were chosen by today's index membership")
    stated = " ".join(data_caveats(real, panel=True, index_constituents=True))
    assert "are an index's current constituents" in stated and "if these" not in stated
    assert "SYNTHETIC" in " ".join(data_caveats(["syn.000000"], panel=False))
    assert "1 of 2 stocks are SYNTHETIC" in " ".join(data_caveats(["syn.000001", "sh.600000"], panel=True))
