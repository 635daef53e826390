"""The LightGBM baseline (Qlib's Alpha158 benchmark settings on the gradient boosting's
features and label): it recovers a planted signal, finds none in a null panel, is
deterministic, stops early on the latest training days, and is left out with one logged line
where the package is not installed."""

from __future__ import annotations

import logging
import sys

import pytest

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.evaluation.scoring import score_run
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.models.panel import baselines
from forecaster.models.panel.baselines import (
    LIGHTGBM_PARAMS,
    LIGHTGBM_ROUNDS,
    FeatureRegressor,
    panel_baselines,
)
from forecaster.models.presets import panel_models

needs_lightgbm = pytest.mark.skipif(not baselines.lightgbm_available(),
                                    reason="lightgbm is not installed (it is in the dev extra)")


def _walk(signal_ic: float):
    frames = synthetic_panel(n_stocks=60, n_days=500, signal_ic=signal_ic, seed=11)
    models = {"lightgbm": FeatureRegressor("lightgbm"), "gbm": FeatureRegressor("gbm")}
    config = WalkForwardConfig(train_days=250, retrain_every=125, min_stock_days=60, margin_days=80,
                               progress=False, n_jobs=1)
    result = walk_forward(frames, models, config)
    return result, score_run(result, frames, models, "lightgbm")


@needs_lightgbm
def test_lightgbm_recovers_a_planted_signal(one_thread):
    result, report = _walk(0.1)
    ic = report.ic["lightgbm"]
    assert not result.failed and not result.skipped
    assert ic["n_days"] > 200
    assert ic["mean_ic"] > 0.05 and ic["t_stat"] > 4  # planted rank IC 0.1


@needs_lightgbm
def test_lightgbm_finds_nothing_in_a_null_panel(one_thread):
    """The same draws without the signal: no significant IC (with Qlib's heavy L1/L2 the
    trees may not split at all, a forecast that ranks nothing: no IC days)."""
    _, report = _walk(0.0)
    ic = report.ic["lightgbm"]
    assert ic["n_days"] == 0 or ic["t_stat"] < 2


@pytest.fixture(scope="module")
def panel():
    return Panel.from_frames(synthetic_panel(n_stocks=40, n_days=400, signal_ic=0.1, seed=3))


@needs_lightgbm
def test_lightgbm_is_deterministic(panel):
    from threadpoolctl import threadpool_limits

    train, test = panel.slice(end=panel.dates[299]), panel.slice(start=panel.dates[250])
    with threadpool_limits(1):
        a = FeatureRegressor("lightgbm").fit(train).predict(test)
        b = FeatureRegressor("lightgbm").fit(train).predict(test)
        other_seed = FeatureRegressor("lightgbm", random_state=7).fit(train).predict(test)
    two_threads = FeatureRegressor("lightgbm", n_jobs=2).fit(train).predict(test)
    assert a.equals(b) and a.equals(two_threads)
    assert not a.equals(other_seed)  # the seed reaches the column sampling (colsample_bytree)
    assert a.nunique() > 1  # a ranking, not a constant


@needs_lightgbm
def test_lightgbm_uses_qlib_settings_and_stops_early_on_the_latest_days(panel, monkeypatch):
    import lightgbm

    assert LIGHTGBM_PARAMS == {"objective": "mse", "colsample_bytree": 0.8879, "learning_rate": 0.2,
                               "subsample": 0.8789, "lambda_l1": 205.6999, "lambda_l2": 580.9768,
                               "max_depth": 8, "num_leaves": 210}
    seen = {}
    real_train = lightgbm.train

    def spy(params, train_set, num_boost_round, valid_sets, **kw):
        seen.update(params=params, rounds=num_boost_round, n_train=len(train_set.get_label()),
                    n_valid=len(valid_sets[0].get_label()), callbacks=kw["callbacks"])
        return real_train(params, train_set, num_boost_round=num_boost_round, valid_sets=valid_sets, **kw)

    monkeypatch.setattr(lightgbm, "train", spy)
    model = FeatureRegressor("lightgbm", random_state=4, n_jobs=1).fit(panel.slice(end=panel.dates[299]))
    assert seen["rounds"] == LIGHTGBM_ROUNDS == 1000
    assert {k: seen["params"][k] for k in LIGHTGBM_PARAMS} == LIGHTGBM_PARAMS
    assert seen["params"]["seed"] == 4 and seen["params"]["deterministic"] is True
    assert seen["params"]["num_threads"] == 1
    assert [c.stopping_rounds for c in seen["callbacks"] if hasattr(c, "stopping_rounds")] == [50]
    # About a fifth of the labelled days validate; the gap days are in neither set.
    share = seen["n_valid"] / (seen["n_train"] + seen["n_valid"])
    assert 0.15 < share < 0.25
    assert 1 <= model.best_iteration_ < LIGHTGBM_ROUNDS  # stopped early (patience 50)


@needs_lightgbm
def test_lightgbm_in_the_presets():
    assert isinstance(panel_models(time_series=False)["lightgbm"], FeatureRegressor)
    assert panel_baselines()["lightgbm"].estimator == "lightgbm"


def test_lightgbm_skipped_when_not_installed(monkeypatch, caplog, panel):
    monkeypatch.setitem(sys.modules, "lightgbm", None)  # "import lightgbm" raises ImportError
    assert not baselines.lightgbm_available()
    with caplog.at_level(logging.INFO, logger=baselines.__name__):
        models = panel_models(time_series=False)
    assert "lightgbm" not in models and "gbm" in models
    lines = [r for r in caplog.records if "lightgbm" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno < logging.ERROR
    # Asked for by name it says what to install.
    with pytest.raises(ImportError, match=r"\[lightgbm\]"):
        FeatureRegressor("lightgbm").fit(panel.slice(end=panel.dates[299]))
