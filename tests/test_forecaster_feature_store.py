"""The run's feature store: computed once, read by every fold, the same values in memory and
on file, and the models fitted from it the same as from features they compute."""

import dataclasses
import sys

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.evaluation.fold_inputs import LABEL_FIELDS, store_features, with_feature_store
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.features.factors import DEFAULT_FEATURES, available_features, feature_tensor, missing_inputs
from forecaster.features.processors import make_processor
from forecaster.features.store import FeatureStore, FeatureView, write_stock_major
from forecaster.models.panel import scores
from forecaster.models.panel.baselines import FeatureRegressor
from forecaster.models.panel.dataset import ProcessedFeatures, market_context
from forecaster.models.panel.model import PanelTransformer
from forecaster.models.panel.scores import stock_groups

NAMES = ("ret_1d", "volatility_20d", "return_5d", "volume_surprise")
TINY = dict(window=8, d_model=8, n_heads=2, n_layers=1, max_epochs=2, n_seeds=1, days_per_batch=16)


@pytest.fixture(scope="module")
def panel():
    return Panel.from_frames(synthetic_panel(n_stocks=40, n_days=300, signal_ic=0.1, seed=3))


def test_file_and_memory_stores_read_the_computed_features(panel, tmp_path):
    computed = feature_tensor(panel, NAMES)  # [D, N, F]
    memory = FeatureStore.build(panel, NAMES)
    on_file = FeatureStore.build(panel, NAMES, tmp_path / "f.f32")
    assert on_file.values is None and (tmp_path / "f.f32").stat().st_size == computed.nbytes
    stocks = np.array([5, 0, 39, 17])
    for store in (memory, on_file):
        got = store.read(stocks, 100, 180)
        np.testing.assert_array_equal(got, computed[100:180, stocks].transpose(1, 0, 2))
        one = store.read(stocks, 100, 180, np.array([2]))  # a column
        np.testing.assert_array_equal(one[..., 0], computed[100:180, stocks, 2].T)
        two = store.read(stocks, 100, 180, np.array([3, 0]))  # columns in another order
        np.testing.assert_array_equal(two, computed[100:180][:, stocks][..., [3, 0]].transpose(1, 0, 2))
        assert store.read(stocks, 50, 50, np.array([1])).shape == (4, 0, 1)
    # a slice and a subset of a panel carrying the store read the store's rows and stocks
    view = FeatureView.whole(on_file)
    cut = dataclasses.replace(panel, features=view).slice("2018-03-01", "2018-09-28").take(
        [panel.codes[i] for i in (7, 3, 30)])
    lo = panel.dates.searchsorted(pd.Timestamp("2018-03-01"))
    np.testing.assert_array_equal(feature_tensor(cut, NAMES), computed[lo:lo + cut.n_days][:, [7, 3, 30]])
    np.testing.assert_array_equal(feature_tensor(cut, NAMES[::-1]),
                                  computed[lo:lo + cut.n_days][:, [7, 3, 30], ::-1])


def test_file_store_is_written_a_chunk_of_stocks_at_a_time(panel, tmp_path):
    """The file store never holds the whole array: features go to a scratch file one at a
    time, then chunks of stocks (here 3 of 40, the last one short) into the stock-major file,
    byte for byte the array in memory; the scratch file goes, also when a feature fails."""
    computed = feature_tensor(panel, NAMES)  # [D, N, F]
    path = tmp_path / "f.f32"
    budget = 3 * panel.n_days * len(NAMES) * 4
    write_stock_major(path, (computed[:, :, i] for i in range(len(NAMES))), panel.n_stocks,
                      panel.n_days, len(NAMES), budget_bytes=budget)
    on_file = np.fromfile(path, np.float32).reshape(panel.n_stocks, panel.n_days, len(NAMES))
    np.testing.assert_array_equal(on_file, computed.transpose(1, 0, 2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.f32"]

    def failing():
        yield computed[:, :, 0]
        raise ValueError("a feature failed")

    with pytest.raises(ValueError, match="a feature failed"):
        write_stock_major(tmp_path / "g.f32", failing(), panel.n_stocks, panel.n_days, len(NAMES))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.f32"]
    with pytest.raises(ValueError, match="1 features given, 2 expected"):
        write_stock_major(tmp_path / "h.f32", iter([computed[:, :, 0]]), panel.n_stocks, panel.n_days, 2)


def test_processed_windows_equal_processing_the_whole_tensor(panel):
    computed = feature_tensor(panel, NAMES)
    view = FeatureView.whole(FeatureStore.build(panel, NAMES))
    robust = make_processor("robust", max_rows=2000)
    fitted = robust.fit(view, panel.dates)
    reference = make_processor("robust", max_rows=2000).fit(computed, panel.dates)
    np.testing.assert_array_equal(fitted.center_, reference.center_)  # the same sampled rows
    np.testing.assert_array_equal(fitted.scale_, reference.scale_)
    for processor in (fitted, make_processor("rank")):
        whole = processor.transform(computed.copy())
        padded = np.concatenate([np.zeros((5,) + whole.shape[1:], np.float32), whole])
        X = ProcessedFeatures.of(view, processor, context=5)
        assert (X.held is None) == (processor.kind == "robust")  # ranks need every stock of a day
        stocks = np.array([1, 2, 30])
        for lo, hi in ((0, 40), (3, 9), (200, 305)):
            np.testing.assert_array_equal(X.window(lo, hi, stocks), padded[lo:hi, stocks].transpose(1, 0, 2))
        np.testing.assert_allclose(market_context(X, panel.listed), market_context(whole, panel.listed),
                                   rtol=1e-6, atol=1e-6)


def test_market_context_by_chunks_equals_one_pass(panel):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 50, 3)).astype(np.float32)
    listed = rng.random((30, 50)) > 0.2
    m = market_context(X, listed)
    w = listed[..., None]
    mean = (X * w).sum(axis=1) / w.sum(axis=1)
    sd = np.sqrt((np.square(X - mean[:, None]) * w).sum(axis=1) / w.sum(axis=1))
    np.testing.assert_allclose(m, np.concatenate([mean, sd], axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", [PanelTransformer(**TINY, features=NAMES),
                                   FeatureRegressor("ridge", features=NAMES)])
def test_a_model_fitted_from_the_store_equals_one_that_computes(panel, model, tmp_path):
    train, test = panel.slice(end=panel.dates[229]), panel.slice(start=panel.dates[150])
    plain = clone(model).fit(train).predict(test)  # features computed from the fields
    store = FeatureStore.build(panel, NAMES, tmp_path / "f.f32")
    stored = dataclasses.replace(panel, features=FeatureView.whole(store), _cache={})
    lean_train = stored.slice(end=panel.dates[229]).lean(LABEL_FIELDS)
    assert set(lean_train.fields) == {"open", "close", "preclose"}
    fitted = clone(model).fit(lean_train)
    got = fitted.predict(stored.slice(start=panel.dates[150]))
    # a forecast reads 21 days of features and 8 of context: the slice's first days computed
    # alone lack the history the store has (the walk-forward gives 130 days of margin)
    later = got.index.get_level_values("date") > panel.dates[150 + 21 + 8]
    assert later.sum() > 1000 and not (got[~later] == plain[~later]).all()
    pd.testing.assert_series_equal(got[later], plain[later])


def test_a_lean_panel_answers_for_the_fields_it_left_out(panel):
    gappy = dict(panel.fields)
    gappy["turnover"] = gappy["turnover"].copy()
    gappy["turnover"][:, 4] = np.nan  # one stock without turnover
    full = dataclasses.replace(panel, fields=gappy, _cache={})
    lean = full.lean(LABEL_FIELDS)
    assert "turnover" not in lean.fields and lean.has("turnover") and lean.has("amount")
    assert not lean.has("no_such_column")
    assert available_features(lean, DEFAULT_FEATURES) == available_features(full, DEFAULT_FEATURES)
    assert missing_inputs(lean) == missing_inputs(full) == {panel.codes[4]: ("turnover",)}
    assert missing_inputs(lean.take(list(panel.codes[3:6]))) == {panel.codes[4]: ("turnover",)}


def test_the_walk_forward_stores_the_features_its_models_read(panel):
    models = {"t": PanelTransformer(**TINY), "ridge": FeatureRegressor("ridge", features=("ret_1d", "gap"))}
    names = store_features(models, panel)
    defaults = available_features(panel, DEFAULT_FEATURES)
    assert names[: len(defaults)] == defaults
    assert "gap" in names and len(set(names)) == len(names)
    stored = with_feature_store(panel, models, None)
    assert stored.features.store.names == names and stored.features.store.path is None
    assert with_feature_store(panel, {}, None) is panel  # nothing reads features: no store


def test_one_process_and_two_workers_forecast_alike(panel):
    models = {"t": PanelTransformer(**TINY), "ridge": FeatureRegressor("ridge")}
    config = WalkForwardConfig(train_days=200, retrain_every=50, progress=False, warm_start=0)
    one = walk_forward(panel, models, dataclasses.replace(config, n_jobs=1)).predictions
    before = {k: v.copy() for k, v in panel.fields.items()}
    # two workers: a file store, and the caller's panel spilled to its files during the folds
    run = walk_forward(panel, models, dataclasses.replace(config, n_jobs=2))
    two = run.predictions
    pd.testing.assert_frame_equal(one, two)
    # where the memory went: each fold's worker measured apart from the main process's phases
    assert run.memory["workers"] == 2
    assert set(run.memory["main_process_gb"]) == {"feature_store", "folds", "assembly"}
    if sys.platform == "linux":
        peaks = run.memory["fold_worker_gb"]
        assert len(peaks) == len(run.folds) and all(0.05 < v < 4 for v in peaks.values())
    for name, values in panel.fields.items():  # read back into memory, unchanged
        assert not isinstance(values, np.memmap) and np.array_equal(values, before[name], equal_nan=True)
    assert not isinstance(panel.limit_up, np.memmap) and not isinstance(panel.listed, np.memmap)
    assert one["model"].nunique() == 2 and len(one) > 1000


def test_memory_summary_names_the_phase_of_the_peak():
    from forecaster.evaluation.memory import memory_summary

    m = memory_summary({"load": 2.0, "folds": 1.5, "scoring": 3.0}, {0: 1.0, 1: 2.5, 2: 2.0}, 2)
    assert m["peak_phase"] == "folds" and m["peak_gb"] == 1.5 + 2.5 + 2.0  # the two largest folds at once
    assert m["fold_worker_peak_gb"] == 2.5 and m["fold_of_worker_peak"] == 1
    assert memory_summary({"load": 2.0, "folds": 1.5}, {}, 0)["peak_phase"] == "load"
    assert memory_summary({}, {}, 2) == {}



def test_scoring_in_groups_of_stocks_equals_scoring_them_together(panel, monkeypatch):
    """Without a layer across stocks a stock's score is its own: a pass over a wide block of
    stocks split into groups (to bound the inputs' memory) scores as one pass does."""
    model = PanelTransformer(**{**TINY, "n_seeds": 2}, features=NAMES, market="gate").fit(panel)
    together = model.predict(panel)
    data = model._windows(panel)
    width = model.net_config_.n_features + model.net_config_.n_market
    groups = stock_groups(data.context + 64, panel.n_stocks, width, False, budget_bytes=40_000)
    assert len(groups) > 3 and groups[-1].stop == panel.n_stocks
    assert stock_groups(data.context + 64, panel.n_stocks, width, True, budget_bytes=40_000) == [
        slice(0, panel.n_stocks)]
    monkeypatch.setattr(scores, "GROUP_BYTES", 40_000)
    apart = model.predict(panel)
    pd.testing.assert_index_equal(apart.index, together.index)
    np.testing.assert_allclose(apart.to_numpy(), together.to_numpy(), rtol=0, atol=1e-5)
