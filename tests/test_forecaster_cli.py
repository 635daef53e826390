"""The forecaster command end to end on small data, and the seed baseline."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.models.stock.seed import SeedRecipe

FAST = ["--window", "16", "--d-model", "16", "--heads", "2", "--layers", "1", "--epochs", "2",
        "--batch-size", "64"]


@pytest.fixture(scope="module")
def small_csv(tmp_path_factory, synthetic_frame):
    from forecaster.data import synthetic_prices

    path = tmp_path_factory.mktemp("csv") / "small.csv"
    synthetic_prices().iloc[:300].to_csv(path, index=False)
    return path


def test_help_lists_every_command():
    out = CliRunner().invoke(main, ["--help"]).output
    for command in ("train", "predict", "plot", "fetch"):
        assert command in out


def test_train_predict_plot(tmp_path, small_csv):
    runner = CliRunner()
    run = tmp_path / "run"
    res = runner.invoke(main, ["train", str(small_csv), "--out", str(run), *FAST])
    assert res.exit_code == 0, res.output
    info = json.loads((run / "run.json").read_text())
    assert info["params"]["window"] == 16 and (run / "model.pt").is_file()
    res = runner.invoke(main, ["predict", "--run", str(run)])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(run / "predictions.csv", index_col="date", parse_dates=True)
    assert len(table) == 300 - 16 and {"forecast", "actual", "in_training"} <= set(table.columns)
    assert "next trading day" in res.output
    res = runner.invoke(main, ["plot", "--run", str(run)])
    assert res.exit_code == 0, res.output
    for name in ("forecast_vs_actual.png", "price_path.png", "attention.png"):
        assert (run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_clear_errors(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "bad.csv"
    bad.write_text("date,code,open,high,low,close\n2024-01-02,sh.600000,1,1,1,-1\n")
    res = runner.invoke(main, ["train", str(bad), "--out", str(tmp_path / "r")])
    assert res.exit_code != 0 and "expected a positive price" in res.output
    res = runner.invoke(main, ["predict", "--run", str(tmp_path)])
    assert res.exit_code != 0 and "not a run folder" in res.output
    res = runner.invoke(main, ["fetch", "sh.600000", "--start", "2024-01-01", "--end", "2024-02-01",
                               "--out", str(tmp_path / "x.csv")])
    assert res.exit_code != 0 and "baostock" in res.output and not (tmp_path / "x.csv").exists()


def test_seed_recipe_forecasts_levels(synthetic_frame):
    frame = synthetic_frame.iloc[:200]
    seed = SeedRecipe(d_model=20, n_heads=2, max_epochs=1, random_state=0).fit(frame)
    pred = seed.predict(frame)
    assert pred.index[0] == frame.index[7] and len(pred) == len(frame) - 7
    # The level forecast hugs the cumulative log price (the plot that "looked good")...
    level = np.log(frame["close"])
    assert np.corrcoef(seed.levels_, level.reindex(pred.index))[0, 1] > 0.9
    # ... while the implied return is read off as level forecast minus today's level.
    today = level.shift(1).reindex(pred.index).to_numpy()
    np.testing.assert_allclose(pred + today, seed.levels_, atol=1e-9)


def _backtest_args(tmp_path, data):
    return ["backtest", *([str(data)] if data else []), "--out", str(tmp_path / "report"),
            "--window", "16", "--d-model", "16", "--heads", "2", "--layers", "1", "--epochs", "1",
            "--train-days", "200", "--retrain-every", "50", "--jobs", "1"]


def test_backtest_one_stock_writes_the_report(tmp_path, small_csv):
    res = CliRunner().invoke(main, [*_backtest_args(tmp_path, small_csv), "--no-seed-recipe"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "report"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["model"] == "transformer"
    baselines = {"zero", "hist_mean", "ar5", "ridge"}
    assert {row["model"] for row in metrics["overall"]} == baselines | {"transformer"}
    assert {row["baseline"] for row in metrics["diebold_mariano"]} == baselines
    assert any("the zero forecast" in line for line in metrics["verdict"])
    pred = pd.read_csv(out / "predictions.csv", parse_dates=["date"])
    assert pred["date"].min() > pd.Timestamp(metrics["folds"][0]["train_end"])
    trades = pd.read_csv(out / "trades.csv")
    assert {"status", "reason", "commission", "stamp_duty"} <= set(trades.columns)
    equity = pd.read_csv(out / "equity.csv", index_col="date")
    assert {"transformer", "benchmark"} <= set(equity.columns)
    for name in ("equity.png", "predicted_vs_actual.png", "rolling_ic.png", "fold_metrics.png",
                 "dm_pvalues.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    assert "the zero forecast: out-of-sample R^2 vs zero" in res.output


def test_backtest_panel(tmp_path):
    from forecaster.data import SyntheticConfig, synthetic_prices

    folder = tmp_path / "panel"
    folder.mkdir()
    for i, code in enumerate(["sh.600000", "sz.000001", "sz.300001", "sh.688001", "sh.601000", "sz.002001"]):
        bars = synthetic_prices(SyntheticConfig(n_days=300, seed=i, code=code))
        bars.to_csv(folder / f"{code}.csv", index=False)
    res = CliRunner().invoke(main, _backtest_args(tmp_path, folder))
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    assert {"low_vol_20d", "reversal_1d", "momentum_20d", "transformer"} <= set(metrics["daily_rank_ic"])
    factor = next(r for r in metrics["overall"] if r["model"] == "low_vol_20d")
    assert factor["mse"] is None  # a score, not a return forecast: no error metrics
    assert "equal-weight" in metrics["backtest"]["transformer"]["benchmark_name"]
    per_stock = pd.read_csv(tmp_path / "report" / "stock_metrics.csv")
    assert per_stock.groupby("model")["code"].nunique()["transformer"] == 6
    assert not any(c.startswith("daily_") for c in per_stock.columns)  # no cross-section in one stock
    # The panel model is the model under test: a score, compared by rank IC with every baseline.
    assert {"composite", "gbm", "ridge_features"} <= set(metrics["daily_rank_ic"])
    assert {r["baseline"] for r in metrics["rank_ic_difference_tests"]} >= {"composite", "gbm"}
    assert any("best baseline" in line for line in metrics["verdict"])
    assert not any("zero forecast" in line for line in metrics["verdict"])
    assert set(metrics["ic_by_horizon"]["transformer"]) == {"1", "5", "20"}
    pred = pd.read_csv(tmp_path / "report" / "predictions.csv")
    assert {"actual", "actual_close"} <= set(pred.columns)
    for name in ("quantile_returns.png", "ic_by_horizon.png"):
        assert (tmp_path / "report" / name).read_bytes()[:4] == b"\x89PNG"
