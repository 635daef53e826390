"""The enhanced-index book (issue 72): a book without a view holds the benchmark; a planted
alpha under a 2 % budget realises about 2 %; the active bounds hold on every rebalance; the
solver's fallbacks are exercised and counted; orders go through the same A-share backtest."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from forecaster.data.panel import Panel
from forecaster.portfolio import enhanced
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.index_weights import benchmark_weights, growth
from forecaster.portfolio.strategy import StrategyConfig

N_STOCKS, N_DAYS, TEST_DAYS = 80, 420, 150


@pytest.fixture(scope="module")
def world():
    """Prices from a known factor structure (a market, three industries, specific risk), float
    shares fixed: the risk model is right about them, so its predictions can be checked."""
    rng = np.random.default_rng(11)
    dates = pd.bdate_range("2020-01-02", periods=N_DAYS)
    industry = np.eye(3)[rng.integers(0, 3, N_STOCKS)]
    loadings = np.column_stack([rng.normal(1.0, 0.2, N_STOCKS), industry])
    factors = rng.normal(0, [0.012, 0.006, 0.006, 0.006], (N_DAYS, 4))
    specific = rng.normal(0, 1, (N_DAYS, N_STOCKS)) * rng.uniform(0.008, 0.02, N_STOCKS)
    returns = factors @ loadings.T + specific
    close = 10 * np.cumprod(1 + returns, axis=0)
    shares = rng.lognormal(20, 1, N_STOCKS)
    frames = {}
    for j in range(N_STOCKS):
        pre = np.r_[10.0, close[:-1, j]]
        frames[f"sh.{600000 + j}"] = pd.DataFrame({
            "code": f"sh.{600000 + j}", "open": pre, "high": np.maximum(pre, close[:, j]) * 1.001,
            "low": np.minimum(pre, close[:, j]) * 0.999, "close": close[:, j], "preclose": pre,
            "volume": 1e7, "float_mv": close[:, j] * shares[j]}, index=pd.Index(dates, name="date"))
    panel = Panel.from_frames(frames)
    panel.members = np.ones((N_DAYS, N_STOCKS), dtype=bool)
    truth = pd.DataFrame(returns, index=dates, columns=panel.codes)
    return panel, truth


def _config(**strategy):
    rules = dict(rule="enhanced", tracking_error=0.02, rebalance_every=5, max_turnover=0.2, active_bound=0.03)
    return BacktestConfig(strategy=StrategyConfig(**{**rules, **strategy}), capital=1e10)


def _active(panel, book):
    """Daily active returns of the target weights (close to close) and their predicted sd."""
    bench = benchmark_weights(panel).weights
    rows = panel.dates.get_indexer(book.weights.index)
    active = ((book.weights.to_numpy() - bench[rows]) * (growth(panel)[rows] - 1)).sum(axis=1)
    return active, book.predicted_sd.to_numpy()


def test_a_book_without_a_view_holds_the_benchmark(world):
    panel, truth = world
    zero = pd.DataFrame(0.0, index=truth.index[-TEST_DAYS:], columns=truth.columns)
    result = run_backtest(panel, zero, _config())
    d = result.enhanced.diagnostics
    assert (d["status"] == "optimal").all(), d["status"].value_counts()
    assert d["predicted_te"].max() < 0.003  # drift between rebalances only: about 0 before lots
    first = result.enhanced.target_active.dropna(how="all").iloc[0]
    assert first.abs().max() < 1e-5
    assert result.weighted_name.startswith("the members at float_mv weights")


def test_a_planted_alpha_under_a_2_percent_budget_realises_about_2_percent(world):
    panel, truth = world
    rng = np.random.default_rng(3)
    days = truth.index[-TEST_DAYS:]
    signal = truth.loc[days].to_numpy()  # the day's return, known a little
    forecast = pd.DataFrame(signal / signal.std() * 0.1 + rng.normal(0, 1, signal.shape), index=days,
                            columns=truth.columns)
    result = run_backtest(panel, forecast, _config())
    book = result.enhanced
    d = book.diagnostics
    assert (d["status"] == "optimal").all()
    assert np.allclose(d["predicted_te"], 0.02, atol=5e-4)  # the budget binds
    active, sd = _active(panel, book)
    realised = active.std() * np.sqrt(252)
    assert 0.014 < realised < 0.028, realised
    assert active.mean() > 0  # the planted alpha earns
    # the bounds hold on every rebalance; long-only and fully invested
    a = book.target_active.dropna(how="all")  # the targets hold the bounds
    assert a.abs().max().max() <= 0.03 + 1e-6
    w = book.weights.to_numpy()
    assert (w >= -1e-12).all() and np.allclose(w.sum(axis=1), 1.0)
    turnover = d["turnover"].iloc[1:]
    assert turnover.max() <= 0.2 + 1e-4
    # and the book is traded by the same backtest: lots, costs
    assert (result.trades["shares"] % 100 == 0).all() and result.metrics["costs_paid"] > 0


def test_the_solvers_fallbacks_are_exercised_and_counted(world, monkeypatch):
    panel, truth = world
    days = truth.index[-40:]
    noise = np.random.default_rng(0).normal(size=(40, N_STOCKS))
    forecast = pd.DataFrame(noise, index=days, columns=truth.columns)
    solve = enhanced.solve_book

    def without_turnover_only(*args, turnover_limit=True, **kwargs):
        return None if turnover_limit else solve(*args, turnover_limit=False, **kwargs)

    monkeypatch.setattr(enhanced, "solve_book", without_turnover_only)
    relaxed = run_backtest(panel, forecast, _config()).enhanced
    assert set(relaxed.diagnostics["status"]) == {"no_turnover_limit"}
    assert any("solved only without the turnover limit" in n for n in relaxed.notes)
    monkeypatch.setattr(enhanced, "solve_book", lambda *a, **k: None)
    failed = run_backtest(panel, forecast, _config()).enhanced
    assert failed.fallbacks == len(failed.diagnostics) == 8
    # the first fallback (from cash) holds the benchmark, the later ones the book as it is held
    assert list(failed.diagnostics["rung"]) == ["benchmark"] + ["held"] * 7
    assert any("held the benchmark on 1 of 8 rebalance(s) and kept the book as it was held on 7" in n
               and "8 the solver could not solve" in n for n in failed.notes), failed.notes
    bench = benchmark_weights(panel).weights[panel.dates.get_indexer(days)]
    assert np.allclose(failed.weights.to_numpy()[0], bench[0])


def test_options_of_the_enhanced_book_are_checked():
    with pytest.raises(ValueError, match="tracking_error must be a number in \\(0, 1\\]"):
        StrategyConfig(rule="enhanced", tracking_error=0)
    with pytest.raises(ValueError, match="rule 'enhanced' holds a long book only"):
        StrategyConfig(rule="enhanced", mode="long_short")
    with pytest.raises(ValueError, match="benchmark_weights must be one of"):
        BacktestConfig(benchmark_weights="no_such_file.csv")
    assert dataclasses.replace(StrategyConfig(), rule="enhanced").risk_aversion > 0


def test_an_enhanced_run_is_judged_against_the_index_beside_the_top_k_book(tmp_path):
    """``backtest --strategy enhanced`` on an index universe whose series the folder holds: the
    verdict measures the book against the series, names the weights and the budget, and puts
    the top-k book on the same forecasts beside it; metrics.json keeps the figures."""
    import json

    from click.testing import CliRunner
    from test_forecaster_universe import QUICK

    from forecaster.app.cli import main
    from forecaster.data import write_synthetic_panel

    data = tmp_path / "syn"
    paths = write_synthetic_panel(data, n_stocks=31, n_days=320, seed=2)
    codes = sorted(p.name[:-4] for p in paths)
    (data / "sh.000300.csv").write_text(paths[-1].read_text().replace(codes[-1], "sh.000300"))
    paths[-1].unlink()
    universe = tmp_path / "csi300.txt"
    universe.write_text("".join(f"{c.upper()}\t2010-01-04\t2099-12-31\n" for c in codes[:-1]))
    out = tmp_path / "r"
    enhanced_options = ["--strategy", "enhanced", "--tracking-error", "0.03", "--rebalance-every", "5",
                        "--active-bound", "0.1", "--style-bound", "0.6", "--max-turnover", "0.2",
                        "--alpha-ic", "0.04", "--risk-aversion", "5", "--benchmark-weights", "float_mv",
                        "--alpha-shape", "tails", "--alpha-halflife", "3", "--trade-aversion", "2"]
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(out), "--universe", str(universe),
                                    *enhanced_options, *QUICK])
    assert res.exit_code == 0, res.output
    metrics = json.loads((out / "metrics.json").read_text())
    resolved = metrics["experiment"]
    strategy = resolved["strategy"]
    assert (strategy["rule"], strategy["tracking_error"], strategy["active_bound"], strategy["style_bound"],
            strategy["max_turnover"], strategy["alpha_ic"], strategy["risk_aversion"]) == (
        "enhanced", 0.03, 0.1, 0.6, 0.2, 0.04, 5.0)
    assert (strategy["alpha_shape"], strategy["alpha_halflife"], strategy["trade_aversion"]) == (
        "tails", 3.0, 2.0)
    assert resolved["backtest"]["benchmark_weights"] == "float_mv"
    verdict = " | ".join(metrics["verdict"])
    assert "transformer's enhanced book after costs against sh.000300 (the index's own series, a" in verdict
    assert "the members at float_mv weights (no costs) follow the index at a tracking error of" in verdict
    assert "budget 3.00%" in verdict and "on the same forecasts, the top-k book (dropout" in verdict
    book = metrics["index_book"]
    assert book["index"] == "sh.000300" and book["enhanced"]["budget"] == 0.03
    assert set(book["enhanced"]["topk"]) >= {"excess", "te", "ir", "years"}
    assert book["enhanced"]["rebalances"] > book["enhanced"]["fallbacks"]  # the optimiser ran
    assert "largest average active weights: syn." in verdict
    # each figure names its benchmark (issue 78): the index's series, or the weighted members
    assert "/yr over sh.000300 (price index), tracking error" in verdict and "over the index" not in verdict
    assert "; the enhanced book against them: " in verdict
    assert "/yr over the members at float_mv weights, tracking error" in verdict
    assert book["benchmark"] == "sh.000300 (price index)"
    assert book["against_weights"]["benchmark"] == "the members at float_mv weights"
    assert book["enhanced"]["te_realised_against_weights"] == book["against_weights"]["te"]


def test_predict_gives_the_enhanced_books_orders_in_lots(tmp_path):
    """``predict --strategy enhanced``: tomorrow's orders of the optimised book, by the same
    order code (whole lots), with its predicted tracking error on the console."""
    from click.testing import CliRunner

    from forecaster.app.cli import main
    from forecaster.data import write_synthetic_panel

    data, run = tmp_path / "syn", tmp_path / "run"
    write_synthetic_panel(data, n_stocks=31, n_days=400, seed=2)
    tiny = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1"]
    assert CliRunner().invoke(main, ["train", str(data), "--out", str(run), *tiny]).exit_code == 0
    args = ["predict", "--run", str(run), str(data), "--capital", "100000000",
            "--strategy", "enhanced", "--tracking-error", "0.03",
            "--active-bound", "0.05", "--style-bound", "0.6", "--max-turnover", "0.3",
            "--alpha-ic", "0.04",
            "--risk-aversion", "5", "--benchmark-weights", "equal",
            "--alpha-shape", "rank", "--alpha-halflife", "2",
            "--trade-aversion", "2"]
    # decayed alpha reads out-of-sample forecasts only: refused without a report, before any write
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "pass --report REPORT_DIR" in res.output and "in sample" in res.output
    assert not (run / "orders.csv").exists() and not (run / "next_day.csv").exists()
    report = tmp_path / "rep"
    assert CliRunner().invoke(main, ["backtest", str(data), "--out", str(report), *tiny, "--n-seeds", "1",
                                     "--train-days", "250", "--retrain-every", "80", "--no-baselines",
                                     "--no-seed-recipe", "--jobs", "1"]).exit_code == 0
    res = CliRunner().invoke(main, [*args, "--report", str(report)])
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("orders for the next open"))
    assert "enhanced, tracking-error budget 3.0%, book predicted tracking error" in line
    assert "alpha: the scores of the last 20 days decayed at a half-life of 2 days (19 of 19 days' " in line
    assert f"out-of-sample forecasts from --report {report} and the signal day's)" in line
    assert "(optimal)" in line
    te = float(line.split("predicted tracking error ")[1].split("%")[0]) / 100
    assert 0.005 < te <= 0.0301
    orders = pd.read_csv(run / "orders.csv")
    buys = orders[orders["side"] == "buy"]
    assert len(buys) > 10 and (buys["shares"] % 100 == 0).all() and (orders["status"] != "blocked").all()
    assert buys["value"].sum() == pytest.approx(1e8, rel=0.02)  # fully invested, less lots and costs


def test_a_bad_weights_file_stops_the_run_before_anything_is_written(tmp_path):
    from click.testing import CliRunner
    from test_forecaster_universe import QUICK

    from forecaster.app.cli import main
    from forecaster.data import write_synthetic_panel

    data = tmp_path / "syn"
    write_synthetic_panel(data, n_stocks=6, n_days=200, seed=1)
    bad = tmp_path / "w.csv"
    bad.write_text("date,code,weight\n2018-03-01,syn.000001,60\n2018-03-01,syn.000002,40\n")
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(tmp_path / "r"),
                                    "--strategy", "enhanced", "--benchmark-weights", str(bad), *QUICK])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert "sum to 100.0000, expected 1" in res.output and not (tmp_path / "r").exists()


# ---------------------------------------------------------------- issue 78: what the lines say


def test_without_the_index_series_the_figures_are_against_the_weighted_members(world):
    """No series of the index: the enhanced book's figures are reported against the members at
    the benchmark weights (named in every line), never dropped."""
    from types import SimpleNamespace

    from forecaster.evaluation.index_book import against_index, daily_returns, index_book

    panel, truth = world
    days = truth.index[-40:]
    forecast = pd.DataFrame(np.random.default_rng(1).normal(size=(40, N_STOCKS)), index=days,
                            columns=truth.columns)
    config = _config()
    result = run_backtest(panel, forecast, config)
    assert result.index_equity is None and result.weighted_equity is not None
    report = SimpleNamespace(model="transformer", backtests={"transformer": result})
    lines, facts = index_book(report, forecast, panel, config, None, None)
    members = "the members at float_mv weights"
    assert lines[0].startswith(f"transformer's enhanced book after costs against {members} (no costs, "
                               "dividends included; the data hold no series of the index")
    expect = against_index(result.returns, daily_returns(result.weighted_equity, config.capital))
    assert facts["index"] is None and facts["benchmark"] == members
    assert facts["book"] == expect == {k: v for k, v in facts["against_weights"].items() if k != "benchmark"}
    assert f"it: {expect['excess']:+.2%}/yr over {members}, tracking error {expect['te']:.2%}" in lines[0]
    assert "over the index" not in " | ".join(lines)
    assert any(x.startswith(f"tracking error against {members} {expect['te']:.2%} realised, budget 2.00%")
               for x in lines)
    topk = next(x for x in lines if x.startswith("on the same forecasts, the top-k book"))
    assert f"over {members}" in topk and topk.endswith(f"(both over {members})")
    book = facts["enhanced"]
    assert book["benchmark"] == members and book["te_realised"] == expect["te"]
    assert book["rebalances"] == 8 and {"predicted_te", "fallbacks", "topk"} <= set(book)


def _small_folder(tmp_path, n_days=200):
    from forecaster.data import write_synthetic_panel

    data = tmp_path / "syn"
    paths = write_synthetic_panel(data, n_stocks=6, n_days=n_days, seed=1)
    dates = pd.read_csv(paths[0])["date"]
    return data, [p.name[:-4] for p in paths], list(dates)


@pytest.mark.parametrize("weights", [[], ["--benchmark-weights", "equal"]])
def test_an_enhanced_book_without_a_benchmark_is_refused(tmp_path, weights):
    from click.testing import CliRunner
    from test_forecaster_universe import QUICK

    from forecaster.app.cli import main

    data, _, _ = _small_folder(tmp_path)
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(tmp_path / "r"), "--strategy",
                                    "enhanced", *weights, *QUICK])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert ("--strategy enhanced needs a benchmark: an index universe (--universe csi300, or a membership "
            "file) or --benchmark-weights FILE (date,code,weight)") in res.output
    assert ("equal over every stock of the data is no index's book" in res.output) == bool(weights)
    assert not (tmp_path / "r").exists()


def test_weights_that_begin_after_the_first_test_day_stop_the_run(tmp_path):
    from click.testing import CliRunner
    from test_forecaster_universe import QUICK

    from forecaster.app.cli import main

    data, codes, dates = _small_folder(tmp_path)
    late = tmp_path / "late.csv"
    late.write_text("date,code,weight\n" + "".join(f"{dates[-10]},{c},{1 / len(codes)}\n" for c in codes))
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(tmp_path / "r"), "--strategy",
                                    "enhanced", "--benchmark-weights", str(late), *QUICK])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert (f"--benchmark-weights {late}: the first benchmark weights hold from {dates[-9]} (dated "
            f"{dates[-10]}), after the run's first test day") in res.output
    assert not (tmp_path / "r").exists()


def test_a_weights_file_is_recorded_by_its_absolute_path_and_digest(tmp_path, monkeypatch):
    """``--benchmark-weights good.csv`` (relative) is written to experiment.toml as the file's
    absolute path with its SHA-256, so the file runs from any folder; a changed file is refused."""
    import hashlib

    from forecaster.app.experiment import experiment_dict, read_toml, resolve, to_toml
    from forecaster.app.fields import ConfigError

    work, report, elsewhere = tmp_path / "work", tmp_path / "report", tmp_path / "elsewhere"
    for d in (work, report, elsewhere):
        d.mkdir()
    good = work / "good.csv"
    good.write_text("date,code,weight\n2018-03-01,syn.000001,1.0\n")
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    monkeypatch.chdir(work)
    exp = resolve({"backtest": {"benchmark_weights": "good.csv"}}, n_stocks=5)
    (report / "experiment.toml").write_text(to_toml(exp))
    assert f'benchmark_weights = "{good}"\nbenchmark_weights_sha256 = "{digest}"' in to_toml(exp)
    recorded = experiment_dict(exp)["backtest"]
    assert (recorded["benchmark_weights"], recorded["benchmark_weights_sha256"]) == (str(good), digest)
    monkeypatch.chdir(elsewhere)
    raw = read_toml(report / "experiment.toml")
    assert raw["backtest"]["benchmark_weights"] == str(good)
    assert "benchmark_weights_sha256" not in raw["backtest"]
    assert resolve(raw, n_stocks=5).backtest.benchmark_weights == str(good)
    good.write_text("date,code,weight\n2018-03-01,syn.000002,1.0\n")
    with pytest.raises(ConfigError) as err:
        read_toml(report / "experiment.toml")
    assert (f"[backtest] benchmark_weights = '{good}' has changed since the run (SHA-256 {digest[:12]}... "
            "recorded") in str(err.value) and "delete benchmark_weights_sha256" in str(err.value)
    # a relative path in an experiment file is read from the file's folder
    (report / "mine.csv").write_text(good.read_text())
    (report / "mine.toml").write_text('[backtest]\nbenchmark_weights = "mine.csv"\n')
    assert read_toml(report / "mine.toml")["backtest"]["benchmark_weights"] == str(report / "mine.csv")


def test_the_books_active_weights_are_measured_on_what_it_held(world):
    """``active`` after a backtest is the weights held at the rebalance day's close less the
    benchmark's at that close (the decision's weights drifted by the day's price moves):
    recomputed here from positions, closes and equity, and unlike the targets' where lots kept a
    target from being bought."""
    panel, truth = world
    days = truth.index[-TEST_DAYS:]
    forecast = pd.DataFrame(truth.loc[days].to_numpy(), index=days, columns=truth.columns)
    result = run_backtest(panel, forecast, _config())
    book = result.enhanced
    held = book.active.dropna(how="all")
    close = pd.DataFrame(panel["close"], index=panel.dates, columns=panel.codes).ffill()
    for day in held.index[:3]:
        value = result.positions.loc[day] * close.loc[day, result.positions.columns]
        weights = value / result.equity.loc[day]
        bench = book.weights.loc[day] - book.target_active.loc[day]
        moved = bench * close.loc[day] / close.shift(1).loc[day]  # no dividends in this world
        bench = moved * bench.sum() / moved.sum()
        np.testing.assert_allclose(held.loc[day].to_numpy(), (weights - bench.fillna(0)).to_numpy(),
                                   atol=1e-12)
    assert not np.allclose(held.to_numpy(), book.target_active.loc[held.index].to_numpy())
