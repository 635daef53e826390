"""Experiments from one file: every key checked, the resolved file reproduces the report, the
CLI options are the same fields, and the shipped examples run."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import tomli_w
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.app.experiment import ConfigError, read_toml, resolve, to_toml
from forecaster.app.pipeline import prepare

REPO = Path(__file__).resolve().parents[1]
TINY = """
[data]
synthetic_stocks = 12
synthetic_days = 330
synthetic_ic = 0.08
synthetic_seed = 4

[model]
window = 8
d_model = 8
n_heads = 2
n_layers = 1
max_epochs = 1

[walk_forward]
train_days = 200
retrain_every = 65

[run]
n_jobs = 1

[strategy]
rule = "dropout"
top_k = 4
n_drop = 1
"""


def _write(tmp_path, text, name="exp.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("text, message", [
    ("[strategy]\ntopk = 3\n", "[strategy] unknown key 'topk'; expected one of"),
    ('[walk_forward]\ntrain_days = "500"\n', "[walk_forward] train_days = '500': expected int"),
    ("[walkforward]\ntrain_days = 5\n", "unknown section(s) ['walkforward']"),
    ("[model]\nwindoww = 5\n", "[model] unknown key 'windoww' for one stock"),
    ("[model]\nwindow = 2.5\n", "[model] window = 2.5: expected int"),
    ('[strategy]\nrule = "best"\n', "[strategy] rule must be one of"),
    ("[costs]\ncommission_rate = 0.5\n", "[costs] CostModel.commission_rate must be a fraction"),
    ("[backtest]\ncapital = -1\n", "[backtest] capital must be a positive amount"),
    ("strategy = 3\n", "strategy must be a [strategy] section"),
])
def test_bad_keys_and_values_name_the_file_section_and_key(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        prepare(read_toml(path), str(path))
    assert str(path) in str(err.value) and message in str(err.value)
    res = CliRunner().invoke(main, ["run", str(path), "--out", str(tmp_path / "r")])
    assert res.exit_code != 0 and message in res.output
    assert not (tmp_path / "r" / "metrics.json").exists()


def test_defaults_depend_on_the_data_and_are_written_out():
    one = resolve({}, n_stocks=1)
    panel = resolve({"walk_forward": {"horizon": 5}}, n_stocks=30)
    assert one.walk_forward.label == "close" and one.backtest.strategy.rule == "threshold"
    assert panel.walk_forward.label == "tradeable" and panel.backtest.strategy.top_k == 10
    assert panel.backtest.strategy.rebalance_every == 5  # the horizon
    assert panel.model["window"] == 20 and one.model["window"] == 40
    text = to_toml(panel)
    assert "rebalance_every = 5" in text and "label = \"tradeable\"" in text and "top_k = 10" in text


def test_cli_options_are_the_config_fields(tmp_path):
    file_exp, _ = prepare(read_toml(_write(tmp_path, TINY)), "file")
    args = ["--synthetic-stocks", "12", "--synthetic-days", "330", "--synthetic-ic", "0.08",
            "--synthetic-seed", "4", "--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1",
            "--epochs", "1", "--train-days", "200", "--retrain-every", "65", "--jobs", "1",
            "--rule", "dropout", "--top-k", "4", "--n-drop", "1"]
    from forecaster.app.cli import backtest
    from forecaster.app.options import raw_sections

    ctx = backtest.make_context("backtest", ["--out", str(tmp_path / "x"), *args])
    cli_exp, _ = prepare(raw_sections(ctx.params), "cli")
    assert to_toml(cli_exp).split("\n", 3)[3] == to_toml(file_exp).split("\n", 3)[3]


def test_the_resolved_experiment_reproduces_the_report(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    res = CliRunner().invoke(main, ["run", str(_write(tmp_path, TINY)), "--out", str(first)])
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, ["run", str(first / "experiment.toml"), "--out", str(second)])
    assert res.exit_code == 0, res.output
    assert (first / "predictions.csv").read_text() == (second / "predictions.csv").read_text()
    a, b = (json.loads((d / "metrics.json").read_text()) for d in (first, second))
    # the same experiment; how it ran is not in the file (the rerun: every core, the first: 1 worker)
    assert a["experiment"].pop("run")["n_jobs"] == 1 and b["experiment"].pop("run")["n_jobs"] == -1
    assert a["experiment"] == b["experiment"] and a["experiment"]["strategy"]["rule"] == "dropout"
    assert a["daily_rank_ic"] == b["daily_rank_ic"] and a["backtest"] == b["backtest"]
    _check_html(first, set(a["daily_rank_ic"]))
    # compare: one row per report, the model under test's figures from metrics.json
    res = CliRunner().invoke(main, ["compare", str(first), str(second), "--out", str(tmp_path / "c.csv")])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(tmp_path / "c.csv", index_col="report")
    assert list(table.index) == [str(first), str(second)]
    assert table.loc[str(first), "rank_ic"] == pytest.approx(a["daily_rank_ic"]["transformer"]["mean_ic"])
    strat = a["backtest"]["transformer"]
    assert table.loc[str(first), "excess_ann"] == pytest.approx(
        strat["strategy"]["annual_return"] - strat["benchmark"]["annual_return"])
    # a drawdown is a fall, negative as the report shows it
    assert table.loc[str(first), "max_dd"] == pytest.approx(-strat["strategy"]["max_drawdown"])
    assert table.loc[str(first), "max_dd"] < 0
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    res = CliRunner().invoke(main, ["compare", str(tmp_path)])
    assert res.exit_code != 0 and "not a report folder" in res.output


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.cells, self.tags = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs))

    def handle_data(self, data):
        if self.tags and self.tags[-1] == "td":
            self.cells.append(data.strip())


def _check_html(folder, models):
    """report.html parses, embeds every figure of the folder (no external reference) and
    names every model."""
    page = _Page()
    page.feed((folder / "report.html").read_text())
    alts = {img["alt"] for img in page.images}
    assert alts == {p.name for p in folder.glob("*.png")} and alts
    assert all(img["src"].startswith("data:image/png;base64,") for img in page.images)
    assert models <= set(page.cells)
    text = (folder / "report.html").read_text()
    assert "Verdict" in text and "SYNTHETIC" in text and "[walk_forward]" in text
    assert "http://" not in text and "https://" not in text


@pytest.mark.slow
@pytest.mark.parametrize("name", ["one_stock.toml", "panel.toml"])
def test_shipped_examples_run(tmp_path, name):
    """Each shipped example, as written but for one epoch a network (the file's every other key
    is read and run; its results are the docs', not this test's)."""
    raw = read_toml(REPO / "examples" / name)
    raw.setdefault("model", {})["max_epochs"] = 1
    (tmp_path / name).write_text(tomli_w.dumps(raw))
    res = CliRunner().invoke(main, ["run", str(tmp_path / name), "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    metrics = json.loads((tmp_path / "r" / "metrics.json").read_text())
    assert "transformer" in metrics["backtest"]
    assert any("SYNTHETIC" in line for line in metrics["notes"])


def test_real_data_example_resolves():
    exp = resolve(read_toml(REPO / "examples" / "csi300.toml"), n_stocks=60)
    assert exp.data.index_constituents and exp.walk_forward.retrain_every == 21
    assert exp.data.path.endswith("shared/data/ashare")


def test_the_time_series_baselines_run_up_to_500_stocks_and_not_beyond_unless_asked():
    from forecaster.app.experiment import build_models, resolve

    def names(n_stocks, **models):
        return set(build_models(resolve({"models": models}, n_stocks)))

    assert {"zero", "hist_mean", "ar5", "ridge"} <= names(60)
    wide = names(600)
    assert not {"zero", "hist_mean", "ar5", "ridge"} & wide and {"gbm", "ridge_features"} <= wide
    assert {"ar5", "ridge"} <= names(600, time_series=True)
    assert "ar5" not in names(60, time_series=False)


def test_warm_started_refits_are_the_default_past_500_stocks_only():
    from forecaster.app.experiment import resolve
    from forecaster.evaluation.walkforward import WalkForwardConfig
    from forecaster.models.panel.sizing import SizeRules

    for n_jobs in (1, 2, 16, -1):  # the stride from the data, whatever the workers
        assert resolve({"walk_forward": {"n_jobs": n_jobs}}, 600).walk_forward.warm_start == 2
    assert resolve({"walk_forward": {"warm_start": 16}}, 600).walk_forward.warm_start == 16  # asked for
    assert resolve({}, 60).walk_forward.warm_start == 0
    assert resolve({}, 1).walk_forward.warm_start == 0
    assert resolve({"walk_forward": {"warm_start": 0}}, 600).walk_forward.warm_start == 0
    assert WalkForwardConfig().warm_start is None  # the Python API resolves it from the panel
    assert SizeRules().warm_start(501) == 2 and SizeRules().warm_start(500) == 0


@pytest.mark.parametrize("cores", [2, 16])
def test_a_market_experiment_resolves_alike_on_any_workers_and_machine(cores, monkeypatch):
    """Every default of a 600-stock experiment comes from the data and the options: 1 worker and
    3 (and all the cores of a 2- or 16-core machine) resolve the same settings but n_jobs."""
    import os

    import joblib
    import joblib.parallel

    from forecaster.app.experiment import experiment_dict

    for module, name in ((os, "cpu_count"), (joblib, "cpu_count"), (joblib.parallel, "cpu_count")):
        monkeypatch.setattr(module, name, lambda *a, **k: cores)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)

    def settings(n_jobs):
        resolved = experiment_dict(resolve({"run": {"n_jobs": n_jobs}}, 600))
        assert resolved.pop("run")["n_jobs"] == n_jobs and "n_jobs" not in resolved["walk_forward"]
        return resolved

    one = settings(1)
    assert settings(3) == one and settings(-1) == one
    assert one["walk_forward"]["warm_start"] == 2


def test_named_features_reach_every_feature_regression(tmp_path):
    """``[features] names`` is the input of every learnt model of a panel run, so the Transformer
    and the gradient boosting, LightGBM and ridge beside it compare on the same features: a run
    with two named features fits gbm on exactly those (plus its lagged returns)."""
    from forecaster.app.experiment import build_models, resolve
    from forecaster.data import write_synthetic_panel

    models = build_models(resolve({"features": {"names": ["return_5d", "volatility_20d"]}}, 60))
    regressions = [m for name, m in models.items() if name in ("gbm", "lightgbm", "ridge_features")]
    assert len(regressions) >= 2
    assert all(m.features == ("return_5d", "volatility_20d") for m in regressions)
    assert models["transformer"].features == ("return_5d", "volatility_20d")
    assert all(m.features is None for name, m in build_models(resolve({}, 60)).items()
               if name in ("gbm", "ridge_features"))
    write_synthetic_panel(tmp_path / "syn", n_stocks=10, n_days=300, seed=3)
    res = CliRunner().invoke(main, ["backtest", str(tmp_path / "syn"), "--out", str(tmp_path / "r"),
                                    "--features", "return_5d,volatility_20d", "--epochs", "1",
                                    "--n-seeds", "1", "--window", "8", "--d-model", "8",
                                    "--train-days", "200", "--retrain-every", "50", "--jobs", "1"])
    assert res.exit_code == 0, res.output
    pred = pd.read_csv(tmp_path / "r" / "predictions.csv")
    assert {"gbm", "ridge_features", "transformer"} <= set(pred["model"])


def test_the_written_experiment_reads_back_whatever_its_strings_hold(tmp_path):
    import tomllib as toml_reader

    from forecaster.app.experiment import resolve, to_toml

    odd = 'a "quoted" \\ back\nslash, tab\t, é and 股'
    exp = resolve({"data": {"universe": odd, "train_universe": "x'y"}}, 30, source="e\n[data]\nz.toml")
    text = to_toml(exp)
    back = toml_reader.loads(text)
    assert back["data"]["universe"] == odd and back["data"]["train_universe"] == "x'y"
    assert "[data]\nz.toml" not in text  # the source stays inside its comment line
    assert to_toml(resolve(back, 30, source="e\n[data]\nz.toml")) == text


def test_the_regime_of_the_defaults_is_a_named_preset_recorded_in_the_file():
    import tomllib as toml_reader

    from forecaster.app.experiment import resolve, to_toml
    from forecaster.models.panel.model import PanelTransformer

    small, wide = resolve({}, 30), resolve({}, 600)
    def regime(exp):
        return exp.model["preset"], exp.models.time_series, exp.walk_forward.warm_start

    assert regime(small) == ("panel", True, 0) and regime(wide) == ("market", False, 2)
    assert toml_reader.loads(to_toml(wide))["model"]["preset"] == "market"
    forced = resolve({"model": {"preset": "market"}}, 30)  # a rerun on fewer stocks keeps the regime
    assert (forced.models.time_series, forced.walk_forward.warm_start) == (False, 2)
    net = PanelTransformer(preset="market")
    assert net.budget(30, 100)["loss"] == "icir" and net.market_mode(30) == "gate"
    assert net._net_config(5, 30).d_ff == 128
    narrow = PanelTransformer(preset="panel")
    assert narrow.budget(900, 100)["loss"] == "pairwise" and narrow.market_mode(900) == "none"
    assert PanelTransformer().budget(900, 100)["loss"] == "icir"  # auto: by breadth
    with pytest.raises(ValueError, match="preset"):
        PanelTransformer(preset="huge")._validate_params()


def test_a_file_giving_run_control_in_walk_forward_is_read_with_a_warning(tmp_path, caplog):
    from forecaster.app.experiment import read_toml, resolve

    path = tmp_path / "old.toml"
    path.write_text("[walk_forward]\ntrain_days = 200\nn_jobs = 1\nbackend = \"local\"\n")
    with caplog.at_level("WARNING"):
        exp = resolve(read_toml(path), 30, str(path))
    assert exp.run.n_jobs == 1 and exp.walk_forward.n_jobs == 1 and exp.walk_forward.train_days == 200
    assert "[walk_forward] n_jobs, backend: how a run is carried out now lives in [run]" in caplog.text
    path.write_text("[walk_forward]\nn_jobs = 1\n[run]\nn_jobs = 2\n")
    with pytest.raises(ValueError, match=r"\[walk_forward\] n_jobs is also given in \[run\]"):
        resolve(read_toml(path), 30, str(path))


@pytest.mark.parametrize(("name", "n_stocks", "blend", "n_seeds"), [
    ("szse.toml", 1294, ("alpha158",), 1), ("csi300_pit.toml", 2964, ("alpha158",), 1),
    ("csi300_pit_one_set.toml", 2964, (), 2), ("csi500_pit_one_set.toml", 2964, (), 2),
    ("ashare.toml", 60, (), 2)])
def test_the_results_pages_examples_resolve_to_their_rows_inputs(name, n_stocks, blend, n_seeds):
    """Each results row's file, read and resolved at its data's breadth: the whole-market ones
    blend Alpha158 with one network on each set unless the file keeps one set."""
    from conftest import shared_path

    shared_path()
    exp = resolve(read_toml(REPO / "examples" / name), n_stocks=n_stocks)
    assert exp.features.blend == blend and exp.model["n_seeds"] == n_seeds
    assert ("blend = [" in to_toml(exp)) and f"n_seeds = {n_seeds}" in to_toml(exp)
