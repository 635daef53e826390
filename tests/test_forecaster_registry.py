"""The model under test by name (``--model NAME``, ``[model] name``): any registered model
is tested with the Transformer as a baseline, reports, verdicts, exports and scores name it,
and a new model is one class and one ``register`` line."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.base import BaseEstimator

from forecaster.app.cli import main
from forecaster.app.experiment import build_models, resolve
from forecaster.app.fields import ConfigError
from forecaster.data import write_synthetic_panel
from forecaster.models.panel.model import as_panel
from forecaster.models.panel.scores import scores_to_series
from forecaster.models.registry import MODELS, model_names, register, registered
from forecaster.reporting.report import read_predictions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

QUICK = ["--train-days", "150", "--retrain-every", "60", "--jobs", "1", "--synthetic-days", "260",
         "--synthetic-ic", "0.1"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("syn") / "syn"
    write_synthetic_panel(path, n_stocks=10, n_days=260, signal_ic=0.1, seed=3)
    return path


def test_the_registry_knows_the_runs_models():
    panel = {"transformer", "gbm", "lightgbm", "ridge_features", "composite", "ar5", "seed"}
    assert panel <= set(model_names(True))
    assert set(model_names(False)) == {"transformer", "zero", "hist_mean", "ar5", "ridge", "seed"}
    built = registered("lightgbm", True).build(True, {"horizon": 2, "features": None})
    assert built.get_params()["horizon"] == 2 and built.estimator == "lightgbm"
    with pytest.raises(ValueError, match="unknown model 'lgbm'; expected one of: transformer, gbm"):
        registered("lgbm", True)
    with pytest.raises(ValueError, match="'gbm' is not a model for one stock's file"):
        registered("gbm", False)


def test_another_model_under_test_makes_the_transformer_a_baseline():
    exp = resolve({"model": {"name": "ridge_features", "norm": "rank"}}, 30)
    models = build_models(exp)
    assert list(models)[0] == "ridge_features" and models["ridge_features"].norm == "rank"
    assert "transformer" in models and models["transformer"].window == 20  # its defaults
    alone = resolve({"model": {"name": "gbm"}, "models": {"baselines": False}}, 30)
    assert list(build_models(alone)) == ["gbm"]
    assert list(build_models(resolve({"models": {"baselines": False}}, 30))) == ["transformer"]
    # a Transformer parameter the model under test lacks sets the Transformer baseline (issue 78)
    assert build_models(resolve({"model": {"name": "gbm", "window": 10}}, 30))["transformer"].window == 10
    with pytest.raises(ConfigError, match="unknown key 'bogus_key' for gbm; expected one of"):
        resolve({"model": {"name": "gbm", "bogus_key": 10}}, 30)
    with pytest.raises(ConfigError, match=r"max_rows = 'many': expected int"):
        resolve({"model": {"name": "gbm", "max_rows": "many"}}, 30)


def test_backtest_model_names_the_report_verdict_and_export(tmp_path, one_thread):
    out = tmp_path / "rep"
    res = CliRunner().invoke(main, ["backtest", "--synthetic-stocks", "12", *QUICK, "--model",
                                    "ridge_features", "--no-time-series", "--out", str(out)])
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "ridge_features"
    assert tomllib.loads((out / "experiment.toml").read_text())["model"]["name"] == "ridge_features"
    tested = {t["baseline"] for t in metrics["rank_ic_difference_tests"]}
    assert "transformer" in tested and "ridge_features" not in tested  # the Transformer is a baseline
    assert "ridge_features daily rank IC" in res.output
    assert "preset panel (up to 500 stocks)" in res.output  # the regime of the Transformer's defaults
    assert "Walk-forward report: ridge_features" in (out / "report.html").read_text()
    res = CliRunner().invoke(main, ["export-qlib", str(out)])
    assert res.exit_code == 0 and "scores of ridge_features" in res.output, res.output
    a = read_predictions(out)  # (run reads a written experiment back: the one-line model's test)
    # score beside this report: the paired tests are against its model under test
    pred = tmp_path / "p.csv"
    mine = a[a["model"] == "ridge_features"].reset_index()
    mine.assign(score=-mine["forecast"])[["date", "code", "score"]].to_csv(pred, index=False)
    res = CliRunner().invoke(main, ["score", str(pred), "--report", str(out), "--out", str(tmp_path / "s"),
                                    "--dates", "target"])
    assert res.exit_code == 0, res.output
    scored = json.loads((tmp_path / "s" / "metrics.json").read_text())
    assert scored["model"] == "ridge_features"
    assert "p" in {t["baseline"] for t in scored["rank_ic_difference_tests"]}


class OneDayReversal(BaseEstimator):
    """A model for the registry test: the day's return times ``sign`` as the score."""

    is_return_forecast = False
    input_kind = "panel"  # fit/predict take a Panel (forecaster.models.interface)

    def __init__(self, horizon=1, sign=-1.0):
        self.horizon = horizon
        self.sign = sign

    def fit(self, data):
        return self

    def predict(self, data):
        panel = as_panel(data)
        rows = np.arange(panel.n_days - 1)
        return scores_to_series(self.sign * panel.returns()[rows], panel, rows)


def test_a_new_model_is_one_class_and_one_line(tmp_path, one_thread):
    register("one_day_reversal", OneDayReversal)
    try:
        out = tmp_path / "rep"
        res = CliRunner().invoke(main, ["backtest", "--synthetic-stocks", "12", *QUICK, "--model",
                                        "one_day_reversal", "--no-baselines", "--out", str(out)])
        assert res.exit_code == 0, res.output
        pred = read_predictions(out)
        assert set(pred["model"]) == {"one_day_reversal"}
        path = tmp_path / "e.toml"
        path.write_text('[model]\nname = "one_day_reversal"\nsign = 1.0\n[models]\nbaselines = false\n'
                        "[data]\nsynthetic_stocks = 12\nsynthetic_days = 260\nsynthetic_ic = 0.1\n"
                        "[walk_forward]\ntrain_days = 150\nretrain_every = 60\n[run]\nn_jobs = 1\n")
        res = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "flip")])
        assert res.exit_code == 0, res.output
        flip = read_predictions(tmp_path / "flip")
        np.testing.assert_allclose(flip["forecast"].to_numpy(), -pred["forecast"].to_numpy())
    finally:
        MODELS.pop("one_day_reversal")


def test_bad_model_names_are_refused_before_any_output(tmp_path, folder):
    res = CliRunner().invoke(main, ["backtest", str(folder), "--model", "lgbm", "--out", str(tmp_path / "a")])
    assert res.exit_code != 0 and "--model = 'lgbm': unknown model 'lgbm'" in res.output
    assert not (tmp_path / "a").exists()
    res = CliRunner().invoke(main, ["backtest", str(folder), "--model", "gbm", "--window", "0",
                                    "--out", str(tmp_path / "b")])  # the Transformer baseline's option
    assert res.exit_code != 0 and "Error: --window must be a positive integer, got 0" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "b").exists()
    res = CliRunner().invoke(main, ["train", str(folder), "--model", "lightgbm",
                                    "--out", str(tmp_path / "c")])
    assert res.exit_code != 0 and "--model lightgbm: train fits the Transformer" in res.output
    assert not (tmp_path / "c").exists()
