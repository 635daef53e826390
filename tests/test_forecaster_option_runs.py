"""Every option of ``backtest``, ``run``, ``train`` and ``predict`` exercised by a short real
run (a tiny synthetic panel, one epoch), not only by the parser: each run exits 0 and its
resolved experiment holds the value given. ``tests/test_forecaster_cli_options.py`` checks the
parsing and typing of the same table; ``train``'s real run is there too."""

from __future__ import annotations

import datetime
import json
import sys

import pandas as pd
from click.testing import CliRunner
from conftest import write_daily_and_bars

from forecaster.app.cli import backtest, main, predict
from forecaster.data import write_synthetic_panel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# What each backtest option is set to in a real run: quick and runnable on one CPU (the
# parser's table, with its other values, is tests/test_forecaster_cli_options.py).
PANEL = {
    "features__names": "ret_1d,volatility_20d,return_5d", "model__window": "8", "model__norm": "rank",
    "model__label_norm": "zscore", "model__drop_tails": "0.05", "model__d_model": "16",
    "model__n_heads": "2", "model__n_layers": "1", "model__d_ff": "32", "model__dropout": "0.2",
    "model__positional": "none", "model__cross_stock": True, "model__market": "gate",
    "model__loss": "listnet", "model__icir_floor": "0.6", "model__max_epochs": "1",
    "model__days_per_batch": "4", "model__lr": "0.002", "model__weight_decay": "0.02",
    "model__patience": "2", "model__val_fraction": "0.25", "model__average_last": "1",
    "model__n_seeds": "1", "model__epoch_stock_days": "2000", "model__stocks_per_batch": "20",
    "model__warm_epochs": "1", "model__preset": "market", "walk_forward__warm_start": "2",
    "model__precision": "bfloat16",
    "model__device": "cpu", "model__random_state": "7", "models__baselines": False,
    "models__seed_recipe": False, "models__per_stock": False, "walk_forward__scheme": "rolling",
    "walk_forward__train_days": "150", "walk_forward__retrain_every": "40", "walk_forward__purge": "3",
    "walk_forward__step": "2", "walk_forward__horizon": "2", "walk_forward__min_stock_days": "60",
    "walk_forward__margin_days": "140", "run__n_jobs": "1", "run__threads_per_task": "1",
    "walk_forward__start": "2018-07-02", "walk_forward__end": "2018-12-28",
    "walk_forward__label": "tradeable", "run__backend": "local", "strategy__rule": "top_k",
    "strategy__top_k": "4", "strategy__n_drop": "2", "strategy__weighting": "rank",
    "strategy__mode": "long_short", "strategy__threshold": "0.001",
    "strategy__top_k_above_threshold": True, "strategy__rebalance_every": "5", "strategy__exclude_st": False,
    "costs__commission_rate": "0.0003", "costs__min_commission": "1.0", "costs__stamp_duty_before": "0.002",
    "costs__stamp_duty_after": "0.001", "costs__stamp_duty_change": "2018-10-01",
    "costs__transfer_fee_rate": "0.00002", "costs__slippage_bps": "3", "market__lot_size": "200",
    "market__corporate_actions": "cash", "backtest__capital": "500000", "backtest__execution": "close",
    "backtest__rebalance_tolerance": "0.2", "backtest__predictions_format": "parquet",
    "data__synthetic_stocks": "30", "data__synthetic_days": "320", "data__synthetic_ic": "0.1",
    "data__synthetic_seed": "5",
}
# The other run's values: the baselines, a folder of files with minute bars beside it.
FOLDER = {
    "models__baselines": True, "models__seed_recipe": True, "models__per_stock": True,
    "models__time_series": True,
    "walk_forward__label": "close", "walk_forward__horizon": "1", "run__n_jobs": "2",
    "run__resume": True, "backtest__execution": "next_open", "data__on_bad": "drop",
    "data__index_constituents": True, "data__cache": True,
    "data__trust_code_column": True, "strategy__rule": "dropout", "data__max_file_mb": "64",
}
ONE_STOCK = {
    "model__attention_dropout": "0.1", "model__norm_first": False, "model__batch_size": "64",
    "model__train_stride": "2", "model__lr_step_size": "5", "model__lr_gamma": "0.7",
    "model__grad_clip": "0.5", "model__max_epochs": "1", "model__window": "12", "model__d_model": "16",
    "model__n_heads": "2", "model__n_layers": "1", "model__positional": "learned", "model__loss": "mse",
    "walk_forward__retrain_every": "120", "data__strict": True,  # (generated minute bars break limits)
}
# Options no real run here can take, and where they are run instead.
ENHANCED = ("strategy__tracking_error", "strategy__active_bound", "strategy__style_bound",
            "strategy__max_turnover", "strategy__alpha_ic", "strategy__risk_aversion",
            "strategy__alpha_shape", "strategy__alpha_halflife", "strategy__trade_aversion",
            "backtest__benchmark_weights")
ELSEWHERE = {
    **dict.fromkeys(ENHANCED, "the enhanced book's backtest and predict (tests/test_forecaster_enhanced.py "
                              "runs each: a book of an index needs its series and weights)"),
    **dict.fromkeys(("strategy__industries", "strategy__industry_bound", "strategy__industry_level",
                     "strategy__industry_min_members"),
                    "an industries file the test writes (tests/test_industries.py runs backtest and predict "
                    "with each)"),
    "backtest__dividend_data": "a dividend export the test writes (tests/test_enhanced_iii.py runs backtest, "
                               "score and predict with one)",
    "run__address": "an existing Ray cluster (tests/test_forecaster_backends.py runs backend "
                             "'ray' on a local one)",
    "data__intraday": "set by the folder run below (a folder of minute bars, not a fixed value)",
    "data__universe": "a universe file the test writes (tests/test_forecaster_universe.py)",
    "data__train_universe": "a universe file the test writes (tests/test_forecaster_universe.py)",
    "data__train_outside_weight": "a universe file the test writes (tests/test_forecaster_train_weights.py)",
    "features__blend": "a second set of inputs beside a first (tests/test_forecaster_blend.py runs backtest "
                       "with and without it)",
    "model__blend_seeds": "the second set's networks (tests/test_forecaster_blend.py runs backtest with it)",
    "model__name": "another model under test (tests/test_forecaster_registry.py runs backtest, run, "
                   "score and export-qlib with it)",
}


def _args(values: dict) -> list[str]:
    params = {p.name: p for p in backtest.params}
    args = []
    for name, text in values.items():
        param = params[name]
        if isinstance(text, bool):
            args.append(param.opts[0] if text else param.secondary_opts[0])
        else:
            args += [param.opts[0], text]
    return args


def _toml(folder) -> dict:
    """The run's experiment file, and how it was run (``[run]``: in metrics.json, not the file)."""
    toml = tomllib.loads((folder / "experiment.toml").read_text())
    assert "run" not in toml
    return {**toml, "run": json.loads((folder / "metrics.json").read_text())["experiment"]["run"]}


def _holds(toml: dict, values: dict) -> None:
    """The resolved experiment of the run holds every value given (as the option's text)."""
    for name, text in values.items():
        section, key = name.split("__")
        if key == "resume":
            continue  # how a run starts, kept out of the file
        got = toml[section][key]
        got = ",".join(got) if isinstance(got, list) else got
        if isinstance(got, datetime.date):
            got = got.isoformat()
        if isinstance(text, bool) or isinstance(got, str):
            assert got == text or str(got) == text, (name, got, text)
        else:
            assert float(got) == float(text), (name, got, text)


def test_every_backtest_option_is_run():
    options = {p.name for p in backtest.params if "__" in p.name}
    covered = set(PANEL) | set(FOLDER) | set(ONE_STOCK) | set(ELSEWHERE)
    assert options == covered, sorted(options ^ covered)


def test_a_panel_backtest_with_every_panel_option_then_run_resumes_it(tmp_path, one_thread):
    out = tmp_path / "rep"
    res = CliRunner().invoke(main, ["backtest", "--out", str(out), *_args(PANEL)])
    assert res.exit_code == 0, res.output
    _holds(_toml(out), PANEL)
    assert (out / "predictions.parquet").is_file()
    forecast = pd.read_parquet(out / "predictions.parquet").index
    assert forecast.min() >= pd.Timestamp("2018-07-02") and forecast.max() <= pd.Timestamp("2018-12-28")
    trades = pd.read_csv(out / "trades.csv")
    assert (trades.loc[trades["side"] == "buy", "shares"] % 200 == 0).all()  # --lot-size 200
    timings = json.loads((out / "metrics.json").read_text())["timings"]  # where the run's time went
    phases = ("load", "panel", "folds", "assembly", "statistics", "backtests", "report")
    assert all(timings[k] >= 0 for k in phases) and timings["models"]["transformer"] > 0
    assert timings["models"]["transformer"] <= timings["folds"]  # one worker: within the folds' wall time
    memory = json.loads((out / "metrics.json").read_text())["memory"]  # where the run's memory peaked
    if sys.platform == "linux":
        assert set(memory["main_process_gb"]) == {"load", "feature_store", "folds", "assembly", "scoring"}
        assert memory["peak_phase"] in memory["main_process_gb"]
        assert memory["peak_gb"] == max(memory["main_process_gb"].values()) > 0.1  # one process: no workers
    # `run` with the report's own experiment file resumes it: every fold from the store
    res = CliRunner().invoke(main, ["run", str(out / "experiment.toml"), "--out", str(out), "--resume"])
    assert res.exit_code == 0, res.output
    assert json.loads((out / "metrics.json").read_text())["resumed_folds"] > 0


def test_a_folder_backtest_with_the_baselines_and_every_data_option(tmp_path, one_thread):
    daily, bars = write_daily_and_bars(tmp_path, n_stocks=6, n_days=200)
    quick = {k: PANEL[k] for k in ("model__max_epochs", "model__n_seeds", "model__window", "model__d_model",
                                   "model__n_heads", "model__n_layers", "walk_forward__train_days",
                                   "walk_forward__retrain_every", "walk_forward__min_stock_days")}
    out = tmp_path / "rep"
    args = ["backtest", str(daily), "--out", str(out), "--intraday", str(bars), *_args({**quick, **FOLDER})]
    res = CliRunner().invoke(main, args)  # --resume with nothing to resume starts afresh
    assert res.exit_code == 0, res.output
    toml = _toml(out)
    _holds(toml, {**quick, **FOLDER})
    assert toml["data"]["intraday"] == str(bars.resolve())
    models = set(pd.read_csv(out / "predictions.csv")["model"])
    assert {"transformer", "transformer_per_stock", "seed", "gbm", "ridge_features", "ar5", "ridge"} <= models
    assert "constituents" in (out / "report.html").read_text()


def test_one_stock_backtest_with_every_one_stock_option(tmp_path, one_thread):
    csv = tmp_path / "one.csv"
    write_synthetic_panel(tmp_path / "p", n_stocks=1, n_days=420, seed=2)
    next((tmp_path / "p").glob("*.csv")).rename(csv)
    out = tmp_path / "rep"
    extra = {"walk_forward__start": "2018-09-03", "models__baselines": False, "run__n_jobs": "1",
             "walk_forward__train_days": "250"}
    res = CliRunner().invoke(main, ["backtest", str(csv), "--out", str(out), *_args({**ONE_STOCK, **extra})])
    assert res.exit_code == 0, res.output
    _holds(_toml(out), {**ONE_STOCK, **extra})


def test_every_predict_option_is_run(tmp_path, one_thread):
    folder = tmp_path / "syn"
    write_synthetic_panel(folder, n_stocks=10, n_days=260, seed=1)
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(folder), "--out", str(run), "--end", "2018-10-31",
                                    "--epochs", "1", "--n-seeds", "1", "--window", "8", "--d-model", "16"])
    assert res.exit_code == 0, res.output
    holdings = tmp_path / "h.csv"
    holdings.write_text("code,shares\nsyn.000001,400\ncash,300000\n")
    out = tmp_path / "list" / "next.csv"
    out.parent.mkdir()
    args = ["predict", str(folder), "--run", str(run), "--out", str(out), "--device", "cpu",
            "--holdings", str(holdings), "--stale-after", "5", "--at-limit", "limit_order",
            "--rule", "top_k", "--top-k", "3", "--n-drop", "1", "--weighting", "rank", "--mode", "long_flat",
            "--threshold", "0.0", "--no-top-k-above-threshold", "--rebalance-every", "1", "--exclude-st",
            "--commission", "0.0003", "--min-commission", "1", "--stamp-duty-before", "0.002",
            "--stamp-duty-after", "0.001", "--stamp-duty-change", "2018-10-01", "--transfer-fee", "0.00002",
            "--slippage-bps", "3", "--lot-size", "200", "--corporate-actions", "cash",
            "--capital", "250000", "--rebalance-tolerance", "0.1", "--overwrite", "--cache",
            "--on-bad", "drop", "--max-file-mb", "64"]
    names = {p.name for p in predict.params}
    given = {p.name for p in predict.params for o in p.opts + p.secondary_opts if o in args}
    # --intraday: tests/test_forecaster_intraday.py predicts with a run trained on minute bars;
    # --universe: tests/test_forecaster_universe.py predicts for an index's members
    # the enhanced book's options: tests/test_forecaster_enhanced.py predicts with them
    # --report: tests/test_forecaster_enhanced.py predicts a decayed alpha from a report's forecasts
    # the industries options: tests/test_industries.py predicts an enhanced book with each
    industries = {"strategy__industries", "strategy__industry_bound", "strategy__industry_level",
                  "strategy__industry_min_members"}
    assert given | {"data", "data__intraday", "data__universe", "backtest__dividend_data", "report",
                    *ENHANCED, *industries} == names, names - given
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "Warning" in res.output and "--stale-after" in res.output  # 5 < the days after 2018-10-31
    assert (folder / ".forecaster_cache").is_dir()  # --cache
    orders = pd.read_csv(out.with_name("orders.csv"))
    table = pd.read_csv(out)
    assert (orders["signal_date"] == table["signal_date"].iloc[0]).all()
    buys = orders[(orders["side"] == "buy") & (orders["status"] != "blocked")]
    assert len(buys) and (buys["shares"] % 200 == 0).all() and buys["code"].nunique() <= 3
