"""Warm-started refits: fold k's panel Transformer starts from fold k - s's networks, trains
``warm_epochs``, and still sees nothing past its own cut-off; a resumed run continues the chain."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.evaluation.warm_start import in_waves
from forecaster.models.panel.model import PanelTransformer

TINY = dict(window=8, d_model=16, n_heads=2, n_layers=1, n_seeds=1, max_epochs=2, warm_epochs=1,
            val_fraction=0.0, average_last=1, days_per_batch=8)


def test_waves_wait_for_the_fold_they_start_from():
    seen = []

    def run_wave(wave):
        seen.append([(t[0].fold, t[-1]) for t in wave])
        for t in wave:
            yield SimpleNamespace(fold=t[0].fold, states={"m": t[0].fold}), {}

    tasks = [(SimpleNamespace(fold=k), "x") for k in (5, 0, 1, 2, 3, 4)]
    done = {}
    list(in_waves(run_wave, tasks, 2, done))
    # two at a time; each fold handed the state of the fold two before it (none for 0 and 1)
    assert seen == [[(0, {}), (1, {})], [(2, {"m": 0}), (3, {"m": 1})], [(4, {"m": 2}), (5, {"m": 3})]]
    assert set(done) == set(range(6))
    seen.clear()  # a resumed run: folds 0..2 done, their states at hand
    list(in_waves(run_wave, [(SimpleNamespace(fold=k), "x") for k in (3, 4, 5)], 2, {0: {"m": 0},
                                                                                  1: {"m": 1}, 2: {"m": 2}}))
    assert seen == [[(3, {"m": 1}), (4, {"m": 2})], [(5, {"m": 3})]]


@pytest.fixture(scope="module")
def frames():
    return synthetic_panel(n_stocks=16, n_days=330, signal_ic=0.3, seed=4)


def _run(frames, warm_start=1, **kw):
    config = WalkForwardConfig(train_days=150, retrain_every=40, n_jobs=1, progress=False,
                               warm_start=warm_start, **kw)
    return walk_forward(Panel.from_frames(frames), {"transformer": PanelTransformer(**TINY)}, config,
                        keep_models=True)


def test_later_folds_start_from_the_earlier_fold_and_train_fewer_epochs(frames):
    result = _run(frames)
    kept = {fold: m for (fold, name), m in result.models.items()}
    assert len(kept) >= 4 and not kept[0].warm_started_
    for fold in sorted(kept)[1:]:
        assert kept[fold].warm_started_ and len(kept[fold].histories_[0]) == TINY["warm_epochs"]
    assert len(kept[0].histories_[0]) == TINY["max_epochs"]
    cold = _run(frames, warm_start=0)
    cold_kept = {fold: m for (fold, name), m in cold.models.items()}
    assert not any(m.warm_started_ for m in cold_kept.values())
    # the first fold has nothing to start from: the same fit either way; later ones differ
    first = result.predictions[result.predictions["fold"] == 0]["forecast"].to_numpy()
    assert np.array_equal(first, cold.predictions[cold.predictions["fold"] == 0]["forecast"].to_numpy())
    assert not np.allclose(result.predictions["forecast"], cold.predictions["forecast"])


def test_a_warm_chain_sees_no_future(frames):
    base = _run(frames)
    folds = base.folds
    cut = pd.Timestamp(folds["test_end"].iloc[1]) if "test_end" in folds else None
    if cut is None:
        cut = base.predictions[base.predictions["fold"] == 1].index.max()
    changed = {c: f.copy() for c, f in frames.items()}
    for f in changed.values():  # scramble every price after fold 1's last forecast day
        later = f.index > cut
        f.loc[later, ["open", "high", "low", "close", "preclose"]] *= np.exp(
            np.random.default_rng(0).normal(0, 0.05, size=(later.sum(), 1)))
    other = _run(changed)
    for fold in (0, 1):
        a = base.predictions[base.predictions["fold"] == fold]["forecast"].to_numpy()
        b = other.predictions[other.predictions["fold"] == fold]["forecast"].to_numpy()
        assert len(a) and np.array_equal(a, b), fold
    later = base.predictions["fold"] > 2
    assert not np.allclose(base.predictions.loc[later, "forecast"], other.predictions.loc[later, "forecast"])


def test_a_resumed_warm_run_continues_the_chain(frames, tmp_path):
    config = dict(train_days=150, retrain_every=40, n_jobs=1, progress=False, warm_start=1)
    models = {"transformer": PanelTransformer(**TINY)}
    panel = Panel.from_frames(frames)
    whole = walk_forward(panel, models, WalkForwardConfig(**config), checkpoint_dir=tmp_path)
    files = sorted(tmp_path.glob("fold_*.json"))
    for f in files[2:]:  # as if killed after two folds
        f.unlink()
    resumed = walk_forward(panel, models, WalkForwardConfig(**config, resume=True), checkpoint_dir=tmp_path)
    assert resumed.n_resumed == 2
    pd.testing.assert_frame_equal(resumed.predictions, whole.predictions)


def test_the_python_api_resolves_warm_start_from_the_panels_breadth():
    from forecaster.models.panel.baselines import FactorScore

    config = dict(train_days=120, retrain_every=60, min_stock_days=60, margin_days=40, progress=False,
                  n_jobs=1)
    for n_stocks, expected in ((501, 2), (40, 0)):
        panel = Panel.from_frames(synthetic_panel(n_stocks=n_stocks, n_days=260, seed=1))
        result = walk_forward(panel, {"low_vol_20d": FactorScore("low_vol_20d")}, WalkForwardConfig(**config))
        assert result.config.warm_start == expected
        assert len(result.predictions)


def test_a_market_run_resolves_its_warm_start_and_forecasts_alike_on_1_and_3_workers(frames, monkeypatch):
    """``warm_start=None`` past the market threshold (lowered to 10 stocks here, so the 16-stock
    panel is a market) is resolved from the panel, never from ``n_jobs``: one worker and three
    start each fold from the same earlier fold and forecast the same, bit for bit."""
    import forecaster.evaluation.walkforward as wf
    from forecaster.models.panel.sizing import SizeRules

    monkeypatch.setattr(wf, "SizeRules", lambda: SizeRules(market_above=10))
    runs = [walk_forward(Panel.from_frames(frames), {"transformer": PanelTransformer(**TINY)},
                         WalkForwardConfig(train_days=150, retrain_every=40, n_jobs=n_jobs, progress=False))
            for n_jobs in (1, 3)]
    assert runs[0].config.warm_start == runs[1].config.warm_start == 2
    assert len(runs[0].folds) >= 4  # some folds start warm
    pd.testing.assert_frame_equal(runs[0].predictions, runs[1].predictions)
