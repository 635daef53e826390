"""A second set of inputs (``blend_features``, ``--blend-features``): its networks are the
ones a model of those features alone would train (the seeds after the first set's), the
forecast is the mean of the two sets' per-day standardised scores, and the blend survives
save/load, warm starts, the run's feature store and the command line."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import synthetic_panel, write_synthetic_panel
from forecaster.data.panel import Panel
from forecaster.evaluation.fold_inputs import store_features
from forecaster.models.panel.model import PanelTransformer
from forecaster.models.panel.scores import blend_scores
from forecaster.reporting.report import read_predictions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TINY = dict(window=10, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_epochs=2, patience=2,
            days_per_batch=8, n_seeds=1, random_state=0)
FIRST, SECOND = ("ret_1d", "volatility_20d", "return_5d"), ("return_20d", "range", "gap")


@pytest.fixture(scope="module")
def panel():
    return Panel.from_frames(synthetic_panel(n_stocks=24, n_days=220, signal_ic=0.1, seed=5))


@pytest.fixture(scope="module")
def fitted(panel):
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = PanelTransformer(**TINY, features=FIRST, blend_features=SECOND)
        model.fit(panel.slice(end=panel.dates[179]))
    finally:
        torch.set_num_threads(n)
    return model


def test_blend_scores_known_values():
    a = np.array([[1.0, 2.0, 3.0, np.nan], [0.0, 0.0, 1.0, 1.0]])
    b = np.array([[30.0, 10.0, 20.0, 5.0], [np.nan, np.nan, np.nan, np.nan]])
    out = blend_scores([a, b])
    za = np.array([-1, 0, 1]) * np.sqrt(1.5)  # population standard deviation
    zb = (np.array([30.0, 10, 20, 5]) - 16.25) / np.std([30.0, 10, 20, 5])
    np.testing.assert_allclose(out[0], [(za[0] + zb[0]) / 2, (za[1] + zb[1]) / 2, (za[2] + zb[2]) / 2, zb[3]])
    np.testing.assert_allclose(out[1], [-1, -1, 1, 1])  # the day the second set has no score
    assert np.isnan(blend_scores([np.full((1, 2), np.nan)] * 2)).all()


def test_blend_is_the_mean_of_the_two_sets_standardised_scores(panel, fitted, one_thread):
    train = panel.slice(end=panel.dates[179])
    alone = [PanelTransformer(**{**TINY, "random_state": seed}, features=names).fit(train)
             for seed, names in ((0, FIRST), (1, SECOND))]
    assert fitted.features_ == FIRST and fitted.blend_.features_ == SECOND
    for a, b in ((fitted, alone[0]), (fitted.blend_, alone[1])):  # the same networks, bit for bit
        for (k, v), w in zip(a.nets_[0].state_dict().items(), b.nets_[0].state_dict().values(), strict=True):
            assert np.array_equal(v.numpy(), w.numpy()), k
    test = panel.slice(start=panel.dates[150])
    got = fitted.predict(test)
    parts = [m.predict(test).unstack() for m in alone]
    z = [p.sub(p.mean(axis=1), axis=0).div(p.std(axis=1, ddof=0), axis=0) for p in parts]
    want = ((z[0] + z[1]) / 2).stack().dropna().rename("forecast")
    pd.testing.assert_series_equal(got.sort_index(), want.sort_index(), check_names=False, atol=1e-9)
    # and it differs from either set alone
    assert not np.allclose(got.sort_index().to_numpy(), z[0].stack().dropna().sort_index().to_numpy())
    nxt = fitted.predict_next(test)
    assert nxt.index.name == "code" and len(nxt) == test.n_stocks


def test_a_blended_model_saves_loads_and_warm_starts_both_sets(panel, fitted, tmp_path, one_thread):
    test = panel.slice(start=panel.dates[150])
    path = fitted.save(tmp_path / "m.pt")
    back = PanelTransformer.load(path, device="cpu")
    assert back.blend_features == SECOND and back.blend_.features_ == SECOND
    pd.testing.assert_series_equal(back.predict(test), fitted.predict(test))
    state = fitted.warm_state()
    assert state["blend"]["features"] == SECOND
    later = PanelTransformer(**TINY, features=FIRST, blend_features=SECOND, warm_epochs=1).warm_from(state)
    later.fit(panel.slice(end=panel.dates[199]))
    assert later.warm_started_ and later.blend_.warm_started_
    assert len(later.histories_[0]) == 1 and len(later.blend_.histories_[0]) == 1
    plain = PanelTransformer(**TINY, features=FIRST).fit(panel.slice(end=panel.dates[179]))
    assert plain.blend_ is None and plain.warm_state()["blend"] is None


def test_the_run_stores_both_sets_features(panel):
    model = PanelTransformer(features=FIRST, blend_features=SECOND)
    assert store_features({"transformer": model}, panel) == FIRST + SECOND


def panel_of_three() -> Panel:
    return Panel.from_frames(synthetic_panel(n_stocks=3, n_days=80, seed=1))


def test_bad_blend_features_are_refused_by_name():
    with pytest.raises(ValueError, match="unknown features"):
        PanelTransformer(blend_features=("no_such",))._validate_params()
    with pytest.raises(ValueError, match="list of names"):
        PanelTransformer(blend_features="alpha158")._validate_params()
    PanelTransformer(blend_features=None)._validate_params()  # None: one set, as ()
    one_set = PanelTransformer(features=FIRST, blend_features=None)
    assert store_features({"t": one_set}, panel_of_three()) == FIRST


def test_backtest_with_blend_features_runs_and_records_them(tmp_path):
    folder = tmp_path / "syn"
    write_synthetic_panel(folder, n_stocks=8, n_days=260, signal_ic=0.05, seed=1)
    common = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1",
              "--n-seeds", "1", "--train-days", "150", "--retrain-every", "40", "--jobs", "1",
              "--no-baselines", "--features", ",".join(FIRST)]
    runs = {}
    for name, extra in (("one", []), ("blend", ["--blend-features", ",".join(SECOND)])):
        res = CliRunner().invoke(main, ["backtest", str(folder), "--out", str(tmp_path / name),
                                        *common, *extra])
        assert res.exit_code == 0, res.output
        runs[name] = read_predictions(tmp_path / name)
    written = tomllib.loads((tmp_path / "blend" / "experiment.toml").read_text())
    assert tuple(written["features"]["blend"]) == SECOND and "blend_features" not in written["model"]
    one, blend = (runs[k].set_index(["code", "model"], append=True)["forecast"] for k in ("one", "blend"))
    assert one.index.equals(blend.index) and not np.allclose(one, blend)
    # the first set's networks are the same in both runs, so the blend moves each score toward
    # the second set's: correlated with the first set's, not equal to it
    assert 0.2 < np.corrcoef(one, blend)[0, 1] < 0.999


def test_bad_blend_features_are_refused_by_their_option_before_any_output(tmp_path):
    folder = tmp_path / "syn"
    write_synthetic_panel(folder, n_stocks=3, n_days=120, seed=1)
    one = next(folder.glob("*.csv"))
    for data, text in ((folder, "unknown features ['no_such']"), (one, "needs a panel")):
        res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(tmp_path / "o"),
                                        "--blend-features", "no_such" if data == folder else "gap"])
        assert res.exit_code != 0 and "--blend-features" in res.output and text in res.output, res.output
        assert "Traceback" not in res.output and not (tmp_path / "o").exists()


def test_a_single_stock_run_refuses_blend_features(tmp_path):
    frame = synthetic_panel(n_stocks=1, n_days=200, seed=2)
    path = tmp_path / "one.csv"
    next(iter(frame.values())).to_csv(path)
    res = CliRunner().invoke(main, ["train", str(path), "--out", str(tmp_path / "o"),
                                    "--blend-features", "gap"])
    assert res.exit_code != 0 and "--blend-features" in res.output and "panel" in res.output


def test_blend_seeds_sets_the_second_sets_networks(panel, one_thread):
    train = panel.slice(end=panel.dates[179])
    model = PanelTransformer(**{**TINY, "n_seeds": 2}, features=FIRST, blend_features=SECOND,
                             blend_seeds=1).fit(train)
    assert len(model.nets_) == 2 and len(model.blend_.nets_) == 1
    # the second set's one network: the seed after the first set's two
    alone = PanelTransformer(**{**TINY, "random_state": 2}, features=SECOND).fit(train)
    ours, theirs = model.blend_.nets_[0].state_dict(), alone.nets_[0].state_dict()
    pairs = zip(ours.values(), theirs.values(), strict=True)
    for v, w in pairs:
        assert np.array_equal(v.numpy(), w.numpy())
    with pytest.raises(ValueError, match="blend_seeds must be None or a positive integer"):
        PanelTransformer(blend_seeds=0)._validate_params()


def test_blend_seeds_option_runs_and_is_recorded(tmp_path):
    folder = tmp_path / "syn"
    write_synthetic_panel(folder, n_stocks=8, n_days=240, signal_ic=0.05, seed=1)
    res = CliRunner().invoke(main, ["backtest", str(folder), "--out", str(tmp_path / "r"), "--window", "8",
                                    "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1",
                                    "--n-seeds", "1", "--blend-seeds", "2", "--train-days", "150",
                                    "--retrain-every", "60", "--jobs", "1", "--no-baselines",
                                    "--features", ",".join(FIRST), "--blend-features", ",".join(SECOND)])
    assert res.exit_code == 0, res.output
    written = tomllib.loads((tmp_path / "r" / "experiment.toml").read_text())
    assert written["model"]["blend_seeds"] == 2 and written["model"]["n_seeds"] == 1


def test_the_market_preset_blends_alpha158_one_network_each_and_the_panel_preset_does_not():
    from forecaster.app.experiment import build_models, resolve

    exp = resolve({}, 30)  # panel preset: one set, two networks
    assert exp.features.blend == () and exp.model["n_seeds"] == 2
    exp = resolve({}, 600)  # market preset: 1 + 1 on the default inputs and Alpha158
    assert exp.features.blend == ("alpha158",) and exp.model["n_seeds"] == 1
    forced = resolve({"model": {"preset": "market"}}, 30)
    assert forced.features.blend == ("alpha158",) and forced.model["n_seeds"] == 1
    one_set = resolve({"features": {"blend": ()}}, 600)  # --blend-features "": one set, as before
    assert one_set.features.blend == () and one_set.model["n_seeds"] == 2
    net = build_models(resolve({"features": {"blend": ("alpha158",)}}, 30))["transformer"]
    assert net.blend_features == ("alpha158",) and net.seeds(30, True) == 2  # 2 + 2 on a small panel
    assert PanelTransformer().inputs_blend(600) == ("alpha158",) and PanelTransformer().seeds(600, True) == 1
    assert PanelTransformer().inputs_blend(30) == () and PanelTransformer().seeds(30, False) == 2


def test_a_market_preset_run_blends_by_default_and_an_empty_option_restores_one_set(tmp_path):
    folder = tmp_path / "syn"
    write_synthetic_panel(folder, n_stocks=8, n_days=240, signal_ic=0.05, seed=1)
    tiny = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1",
            "--train-days", "150", "--retrain-every", "60", "--jobs", "1", "--no-baselines",
            "--preset", "market", "--epoch-stock-days", "2000"]
    for given, blend, seeds in (([], ["alpha158"], 1), (["--blend-features", ""], [], 2)):
        out = tmp_path / f"r{len(given)}"
        res = CliRunner().invoke(main, ["backtest", str(folder), "--out", str(out), *tiny, *given])
        assert res.exit_code == 0, res.output
        written = tomllib.loads((out / "experiment.toml").read_text())
        assert written["features"]["blend"] == blend and written["model"]["n_seeds"] == seeds, given
        # the summary says what the run uses (issue 78): one set when --blend-features "" asks for one
        assert ("a second set (alpha158), 1 network(s) on each" if blend else "features (as the data's "
                "columns allow), 2 network(s); refits") in res.output


def test_the_alpha158_blend_runs_on_data_without_amount(tmp_path):
    """No amount, no VWAP: the second set is Alpha158 without its VWAP columns."""
    folder = tmp_path / "syn"
    write_synthetic_panel(folder, n_stocks=8, n_days=240, signal_ic=0.05, seed=2)
    for path in folder.glob("*.csv"):
        frame = pd.read_csv(path)
        frame.drop(columns=["amount"]).to_csv(path, index=False)
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["backtest", str(folder), "--out", str(out), "--window", "8",
                                    "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1",
                                    "--train-days", "150", "--retrain-every", "60", "--jobs", "1",
                                    "--no-baselines", "--n-seeds", "1", "--blend-features", "alpha158"])
    assert res.exit_code == 0, res.output
    written = tomllib.loads((out / "experiment.toml").read_text())
    assert written["features"]["blend"] == ["alpha158"] and written["model"]["n_seeds"] == 1
    assert len(read_predictions(out)) > 0
