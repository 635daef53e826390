"""Walk-forward: fold layout, no leakage for the model and every baseline, parallel == serial,
panel models."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from forecaster import CausalTransformerForecaster
from forecaster.data import SyntheticConfig, load_csv, load_dir, synthetic_prices
from forecaster.evaluation.walkforward import WalkForwardConfig, make_folds, walk_forward
from forecaster.models.panel.baselines import FactorScore, FeatureRegressor
from forecaster.models.panel.model import PanelTransformer
from forecaster.models.stock.baselines import (
    ARForecast,
    HistoricalMean,
    PerStock,
    RidgeForecast,
    ZeroForecast,
)
from forecaster.models.stock.seed import SeedRecipe

TINY = dict(window=20, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_epochs=2, batch_size=128,
            random_state=0, progress=False)


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    folder = tmp_path_factory.mktemp("panel")
    out = {}
    for i, code in enumerate(["sh.600000", "sz.000001", "sz.300001"]):
        path = folder / f"{code}.csv"
        synthetic_prices(SyntheticConfig(n_days=420, seed=10 + i, code=code)).to_csv(path, index=False)
        out[code] = load_csv(path)[0]
    return out


def models():
    return {
        "transformer": CausalTransformerForecaster(**TINY),
        "zero": ZeroForecast(),
        "hist_mean": HistoricalMean(),
        "ar3": ARForecast(p=3),
        "ridge": RidgeForecast(window=20),
        "reversal": FactorScore("reversal_1d"),
        "low_vol": FactorScore("low_vol_20d"),
        "panel": PanelTransformer(window=5, d_model=8, n_heads=2, n_layers=1, d_ff=16, max_epochs=2,
                                  days_per_batch=16),
        "gbm": FeatureRegressor("gbm"),
    }


CONFIG = dict(train_days=300, retrain_every=40, min_stock_days=100, margin_days=60, progress=False)
SERIAL = {**CONFIG, "n_jobs": 1}


def test_folds_tile_the_calendar_with_a_purge_gap():
    cal = pd.bdate_range("2021-01-01", periods=100)
    cfg = WalkForwardConfig(train_days=50, retrain_every=20, horizon=2, purge=3)
    folds = make_folds(cal, cfg)
    assert [len(f.test_days) for f in folds] == [20, 20, 8]
    for f in folds:
        assert cal.get_loc(f.test_days[0]) - cal.get_loc(f.cut) == 3  # the purge gap
        assert f.train_start == cal[0]
    assert folds[1].test_days[0] == folds[0].test_days[-1] + pd.offsets.BDay(1)  # contiguous
    rolling = make_folds(cal, WalkForwardConfig(scheme="rolling", train_days=50, retrain_every=20))
    assert all(cal.get_loc(f.cut) - cal.get_loc(f.train_start) == 49 for f in rolling)
    assert len(make_folds(cal, WalkForwardConfig(train_days=50, retrain_every=20, step=5))[0].test_days) == 4
    with pytest.raises(ValueError, match="purge"):
        WalkForwardConfig(horizon=2, purge=1)


def test_fitted_state_ignores_data_after_the_cutoff(frames):
    res = walk_forward(frames, models(), WalkForwardConfig(**SERIAL), keep_models=True)
    cut = pd.Timestamp(res.folds.loc[0, "train_end"])
    changed = {}
    for code, f in frames.items():
        f = f.copy()
        later = f.index > cut
        f.loc[later, ["open", "high", "low", "close"]] *= np.linspace(0.7, 1.6, later.sum())[:, None]
        changed[code] = f
    res2 = walk_forward(changed, models(), WalkForwardConfig(**SERIAL), keep_models=True)
    a, b = res.models[(0, "transformer")], res2.models[(0, "transformer")]
    for k, v in a.net_.state_dict().items():
        assert torch.equal(v, b.net_.state_dict()[k]), k
    for code in frames:
        np.testing.assert_array_equal(a.scalers_[code].mean_, b.scalers_[code].mean_)
        np.testing.assert_array_equal(res.models[(0, "ar3")].params_[code]["coef"],
                                      res2.models[(0, "ar3")].params_[code]["coef"])
        np.testing.assert_array_equal(res.models[(0, "ridge")].params_[code]["model"].coef_,
                                      res2.models[(0, "ridge")].params_[code]["model"].coef_)
        assert res.models[(0, "hist_mean")].params_[code] == res2.models[(0, "hist_mean")].params_[code]
    p, p2 = res.models[(0, "panel")], res2.models[(0, "panel")]
    np.testing.assert_array_equal(p.processor_.center_, p2.processor_.center_)
    for k, v in p.nets_[0].state_dict().items():
        assert torch.equal(v, p2.nets_[0].state_dict()[k]), k
    # The next fold sees the change (in its validation tail: its training targets end before
    # it, so whether its weights change depends on which epoch early stopping keeps).
    val = [[row["val_loss"] for row in r.models[(1, "transformer")].history_] for r in (res, res2)]
    assert val[0] != val[1]


def test_forecasts_up_to_a_day_ignore_that_day_and_later(frames):
    base = walk_forward(frames, models(), WalkForwardConfig(**SERIAL)).predictions
    day = base.index.unique().sort_values()[55]
    changed = {}
    for code, f in frames.items():
        f = f.copy()
        later = f.index >= day
        f.loc[later, ["open", "high", "low", "close", "preclose"]] *= 1.3
        f.loc[later, "volume"] *= 3
        changed[code] = f
    new = walk_forward(changed, models(), WalkForwardConfig(**SERIAL)).predictions
    for name in base["model"].unique():
        b = base[(base["model"] == name) & (base.index <= day)]
        n = new[(new["model"] == name) & (new.index <= day)]
        truth = ["actual", "actual_close"]  # outcomes after the day may change; forecasts may not
        pd.testing.assert_frame_equal(b.drop(columns=truth), n.drop(columns=truth), obj=name)
        assert len(b) > 0


def test_parallel_equals_serial(frames):
    serial = walk_forward(frames, models(), WalkForwardConfig(**CONFIG, n_jobs=1)).predictions
    parallel = walk_forward(frames, models(), WalkForwardConfig(**CONFIG, n_jobs=2)).predictions
    pd.testing.assert_frame_equal(serial, parallel)


def test_in_process_folds_restore_the_callers_thread_count(frames):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        walk_forward(frames, {"zero": ZeroForecast()}, WalkForwardConfig(**CONFIG, n_jobs=1))
        assert torch.get_num_threads() == 2  # folds ran with threads_per_task=1
    finally:
        torch.set_num_threads(before)


def test_output_frame(frames):
    res = walk_forward(frames, {"zero": ZeroForecast(), "mean": HistoricalMean()},
                       WalkForwardConfig(**SERIAL, label="close"))
    p = res.predictions
    assert p.index.name == "date" and list(p.columns) == ["code", "model", "fold", "forecast", "actual"]
    assert set(p["fold"]) == set(res.folds["fold"])
    # The truth is the day's log return.
    f = frames["sh.600000"]
    row = p[(p["code"] == "sh.600000") & (p["model"] == "zero")].iloc[3]
    assert row["actual"] == pytest.approx(np.log(f.loc[row.name, "close"] / f.loc[row.name, "preclose"]))
    # The default label is what a next-open strategy earns: open of the day -> next open.
    tradeable = walk_forward(frames, {"zero": ZeroForecast()}, WalkForwardConfig(**SERIAL)).predictions
    assert list(tradeable.columns)[-2:] == ["actual", "actual_close"]
    row = tradeable[tradeable["code"] == "sh.600000"].iloc[3]
    nxt = f.index[f.index.get_loc(row.name) + 1]
    if not (f.loc[row.name, "suspended"] or f.loc[nxt, "suspended"]):
        assert row["actual"] == pytest.approx(np.log(f.loc[nxt, "open"] / f.loc[row.name, "open"]))
    # Each fold's forecasts lie after its cut-off plus the purge.
    merged = p.reset_index().merge(res.folds, on="fold")
    assert (merged["date"] > merged["train_end"]).all()


def test_panel_model_scales_each_stock_on_its_own_training_rows(frames):
    model = CausalTransformerForecaster(**TINY).fit(frames)
    assert model.panel_ and sorted(model.scalers_) == sorted(frames)
    for code, f in frames.items():
        r = np.log(f["close"] / f["preclose"]).loc[: model.train_end_]
        np.testing.assert_allclose(model.scalers_[code].mean_, [r.mean()])
        trading = r[~f["suspended"].loc[: model.train_end_]]  # suspended days are no targets
        assert model.target_stats_[code][1] == pytest.approx(trading.std(ddof=0))
    pred = model.predict(frames)
    assert set(pred) == set(frames) and all(len(p) == 400 for p in pred.values())
    with pytest.raises(ValueError, match="no training statistics"):
        model.predict({"sh.999999": frames["sh.600000"]})
    # One stock of the panel alone gives the same forecasts as within the panel.
    alone = model.predict(frames["sz.000001"])
    pd.testing.assert_series_equal(alone, pred["sz.000001"])


def test_per_stock_seed_recipe(frames):
    res = walk_forward(frames, {"seed": PerStock(SeedRecipe(d_model=20, n_heads=2, max_epochs=1,
                                                            random_state=0))},
                       WalkForwardConfig(**{**SERIAL, "retrain_every": 80}))
    assert res.predictions["forecast"].notna().all() and res.predictions["code"].nunique() == 3


def test_real_panel_runs(ashare_dir):
    frames, _ = load_dir(ashare_dir)
    few = {c: frames[c] for c in ("sh.600000", "sh.603296", "sz.300832")}  # 603296 lists late
    res = walk_forward(few, {"mean": HistoricalMean(), "rev": FactorScore("reversal_1d")},
                       WalkForwardConfig(train_days=750, retrain_every=63, progress=False, n_jobs=1))
    counts = res.predictions[res.predictions["model"] == "mean"].groupby("code").size()
    assert counts["sh.600000"] == 1273 - 750
    assert counts["sh.603296"] < counts["sh.600000"]  # joins once it has 120 days of history


def test_report_finds_the_references_by_role_not_name(synthetic_frame):
    from forecaster.evaluation.scoring import score_run
    from forecaster.models.stock.baselines import ARForecast

    frame = synthetic_frame.iloc[:500]
    models = {"ar": ARForecast(p=2), "random_walk": ZeroForecast(), "average": HistoricalMean()}
    result = walk_forward(frame, models, WalkForwardConfig(train_days=300, retrain_every=100, n_jobs=1,
                                                           progress=False, label="close"))
    report = score_run(result, {str(frame["code"].iloc[0]): frame}, models, "ar")
    assert "the zero forecast" in report.verdict[0]
    assert "not computed" not in report.verdict[0]  # the DM test against the renamed zero ran
    assert set(report.dm["baseline"]) == {"random_walk", "average"}
    row = report.overall.set_index("model").loc["ar"]
    assert np.isfinite(row["r2_oos_mean"])  # R^2 against the renamed historical mean


def test_positions_of_string_and_categorical_columns():
    """Rows' positions in an index, each distinct value looked up once: -1 for a value the
    index lacks or a missing one, the same for a string and a categorical column."""
    from forecaster.evaluation.assembly import positions

    index = pd.Index(["sh.600000", "sz.000001", "sz.000002"])
    values = ["sz.000002", "sh.999999", "sh.600000", None, "sz.000002"]
    expected = [2, -1, 0, -1, 2]
    assert positions(index, pd.Series(values, dtype="str")).tolist() == expected
    categories = ["sh.999999", "sz.000002", "sh.600000", "x"]
    assert positions(index, pd.Series(pd.Categorical(values, categories=categories))).tolist() == expected


def test_assembly_equals_concat_and_sort(frames):
    """The column-wise assembly (integer keys, parts freed as read) gives what a concat of
    the parts, a label lookup and a stable (model, code, date) sort give."""
    from forecaster.data.panel import Panel
    from forecaster.evaluation.assembly import assemble, fold_part
    from forecaster.features.labels import by_forecast_date, tradeable_label

    grid = Panel.from_frames(frames)
    rng = np.random.default_rng(0)
    parts = []
    for fold, (lo, hi) in enumerate([(300, 340), (340, 380)]):
        for name in ("zeta", "alpha"):
            days = grid.dates[lo:hi]
            codes = rng.permutation(grid.codes)[:2]  # some stocks missing from a part
            idx = pd.MultiIndex.from_product([days, codes])
            parts.append(pd.DataFrame({"code": idx.get_level_values(1), "model": name, "fold": fold,
                                       "forecast": rng.normal(size=len(idx))},
                                      index=pd.DatetimeIndex(idx.get_level_values(0))))
    parts.append(pd.concat(parts[:2]).assign(fold=2))  # a resumed part may hold several models
    parts.append(fold_part(grid.dates[380:390], grid.codes[[1] * 10], "alpha", 3, rng.normal(size=10)))
    expected = pd.concat([p.astype({"code": str, "model": str}) for p in parts])
    expected.index.name = "date"
    label, _ = tradeable_label(grid, 1, "next_open")
    at = (grid.dates.get_indexer(expected.index), pd.Index(grid.codes).get_indexer(expected["code"]))
    expected["actual"] = by_forecast_date(label)[at]
    expected = expected.reset_index().sort_values(["model", "code", "date"], kind="stable").set_index("date")
    got = assemble(list(parts), grid, {}, WalkForwardConfig(**SERIAL))
    pd.testing.assert_frame_equal(got.drop(columns="actual_close"), expected)
    assert got["actual"].notna().mean() > 0.9
    stranger = parts[0].assign(code="sz.999999")
    with pytest.raises(ValueError, match="outside the panel"):
        assemble([stranger], grid, {}, WalkForwardConfig(**SERIAL))
