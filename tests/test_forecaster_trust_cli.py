"""Issue 78 ("Trust VI"): only the project's typed input errors become one line (a bare
ValueError is a bug and keeps its traceback); presets are refused unless named exactly and the
summary says the settings resolved; Transformer options with another model under test set the
Transformer baseline; an optional package of the model under test is checked before the run;
the verdict says how many comparisons Holm was over; the strategies table ranks on shared days
and has a days column; backtest --help names the model under test."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from test_forecaster_returns import _backtest, _days

import forecaster.reporting.compare as compare_module
from forecaster.app.cli import main
from forecaster.app.console import model_lines
from forecaster.app.experiment import build_models, read_toml, resolve, to_toml
from forecaster.app.fields import ConfigError
from forecaster.data import DataError
from forecaster.evaluation.tearsheet import strategy_stats
from forecaster.evaluation.verdict import _ic_lines, holm_family
from forecaster.metrics import holm
from forecaster.models.panel.sizing import SizeRules
from forecaster.reporting.tables import strategy_section, strategy_table


def _compare_raising(monkeypatch, tmp_path, exc):
    def boom(folders):
        raise exc

    monkeypatch.setattr(compare_module, "compare_reports", boom)
    return CliRunner().invoke(main, ["compare", str(tmp_path)])


def test_a_bare_value_error_keeps_its_traceback_and_a_typed_error_is_one_line(monkeypatch, tmp_path):
    res = _compare_raising(monkeypatch, tmp_path, ValueError("a bug inside"))
    assert res.exit_code == 1 and isinstance(res.exception, ValueError)
    assert not isinstance(res.exception, SystemExit) and "Error: a bug inside" not in res.output
    with pytest.raises(ValueError, match="a bug inside"):  # outside the runner: it propagates
        main.main(["compare", str(tmp_path)], standalone_mode=False)
    res = _compare_raising(monkeypatch, tmp_path, TypeError("another bug"))
    assert isinstance(res.exception, TypeError)
    res = _compare_raising(monkeypatch, tmp_path, DataError(f"{tmp_path}: not a report folder"))
    assert res.exit_code == 1 and res.output == f"Error: {tmp_path}: not a report folder\n"
    assert isinstance(res.exception, SystemExit)


def test_a_folder_without_a_report_is_one_line_from_compare(tmp_path):
    res = CliRunner().invoke(main, ["compare", str(tmp_path)])
    assert res.exit_code == 1 and res.output == f"Error: {tmp_path}: not a report folder (no metrics.json)\n"


@pytest.mark.parametrize("name", ["bogus", "MARKET", "Panel"])
def test_unknown_presets_are_refused_naming_the_option(name):
    with pytest.raises(ConfigError, match=rf"^--preset must be one of \('auto', 'panel', 'market'\), "
                                          rf"got '{name}'$"):
        resolve({"model": {"preset": name}}, 30)
    with pytest.raises(ConfigError, match=r"^e\.toml: \[model\] preset must be one of"):
        resolve({"model": {"preset": name}}, 30, source="e.toml")
    with pytest.raises(ConfigError, match="preset must be one of"):
        SizeRules().is_market(30, name)  # never read as "panel"


def test_preset_bogus_on_the_command_line_stops_before_any_output(tmp_path):
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["backtest", "--synthetic-stocks", "6", "--synthetic-days", "200",
                                    "--preset", "bogus", "--out", str(out)])
    assert res.exit_code == 1 and "Error: --preset must be one of ('auto', 'panel', 'market')" in res.output
    assert "Traceback" not in res.output and not out.exists()


def test_the_summary_says_the_settings_resolved_not_the_presets_defaults():
    exp = resolve({"model": {"preset": "market", "max_epochs": 1}}, 30)
    (line,) = model_lines(exp)
    assert line.startswith("preset market (the whole-market regime")
    assert "icir loss, 1 epoch of 600,000 stock-days" in line and "12 epochs" not in line
    assert "the last epoch's weights" in line  # one epoch: nothing to average
    line = model_lines(resolve({"model": {"preset": "market", "max_epochs": 3, "loss": "ic", "d_ff": 48,
                                          "epoch_stock_days": 1000}}, 30))[0]
    assert "ic loss, 3 epochs of 1,000 stock-days, the last 3 averaged" in line and "feed-forward 48" in line
    line = model_lines(resolve({"model": {"n_seeds": 3}, "walk_forward": {"warm_start": 1}}, 30))[0]
    assert line.startswith("preset panel (up to 500 stocks): pairwise loss, up to 20 epochs")
    assert "3 network(s)" in line and "refits warm-started 1 folds back" in line
    assert SizeRules().describe("market").count("12 epochs") == 1  # the rule's own, given nothing


def test_transformer_options_with_another_model_set_the_transformer_baseline():
    exp = resolve({"model": {"name": "gbm", "max_epochs": 1, "window": 10, "max_rows": 5000}}, 30)
    assert exp.model["max_rows"] == 5000 and "max_epochs" not in exp.model
    assert exp.baseline == {"max_epochs": 1, "window": 10, "preset": "panel"}
    models = build_models(exp)
    assert list(models)[0] == "gbm" and models["gbm"].max_rows == 5000
    assert models["transformer"].max_epochs == 1 and models["transformer"].window == 10
    lines = model_lines(exp)
    assert lines[0].startswith("the Transformer baseline: preset panel") and "up to 1 epoch " in lines[0]
    assert lines[1] == ("--epochs, --window: of the Transformer; with gbm under test they apply to the "
                        "Transformer baseline")
    with pytest.raises(ConfigError, match="^--epochs must be None or a positive integer, got 0"):
        build_models(resolve({"model": {"name": "gbm", "max_epochs": 0}}, 30))


def test_the_written_experiment_keeps_the_baseline_settings(tmp_path):
    exp = resolve({"model": {"name": "ridge_features", "max_epochs": 2, "preset": "market"}}, 30)
    assert exp.model["preset"] == "market" and exp.baseline["preset"] == "market"  # the run's regime
    path = tmp_path / "experiment.toml"
    path.write_text(to_toml(exp))
    again = resolve(read_toml(path), 30, str(path))
    assert again.baseline == exp.baseline and again.model == exp.model
    assert build_models(again)["transformer"].max_epochs == 2


def test_a_model_whose_package_is_missing_is_refused_before_the_run(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "lightgbm", None)  # import lightgbm now raises ImportError
    with pytest.raises(ConfigError, match=r"lightgbm needs the lightgbm package.*"
                                          r"pip install 'ashare-seq2seq-toolkit\[lightgbm\]'"):
        resolve({"model": {"name": "lightgbm"}}, 30)
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["backtest", "--synthetic-stocks", "6", "--synthetic-days", "200",
                                    "--model", "lightgbm", "--out", str(out)])
    assert res.exit_code == 1 and "pip install 'ashare-seq2seq-toolkit[lightgbm]'" in res.output
    assert "Traceback" not in res.output and not out.exists()
    resolve({"model": {"name": "gbm"}}, 30)  # only the model under test's own package is asked for


def test_holm_wording_says_how_many_were_tested_and_why_not_the_rest():
    names = [f"b{k}" for k in range(6)]
    p = [0.001, 0.02, 0.3, 0.5, np.nan, np.nan]
    tests = pd.DataFrame({"baseline": names, "mean_diff": 0.01, "t_stat": 2.0, "p_value": p, "n_days": 250,
                          "mean_model": 0.05, "mean_baseline": 0.04})
    tests["p_holm"] = holm(tests["p_value"])
    ic = {n: {"mean_ic": 0.04, "icir": 0.3, "n_days": 250} for n in names}
    ic["transformer"] = {"mean_ic": 0.05, "icir": 0.5, "n_days": 250}
    gaps = {"b4": {"mean_ic": "the forecast is the same for every stock on every day"}}
    line = _ic_lines("transformer", ic, tests, gaps)[-1]
    assert line.startswith("transformer beats 1 of 6 other models significantly"), line
    assert ("Holm-adjusted p < 0.05 over the 4 comparisons with a p-value (2 not tested: b4: the forecast "
            "is the same for every stock on every day; b5: no variation in the daily difference") in line
    assert holm_family(pd.Series([0.1, 0.2], index=["a", "b"])) == "the 2 comparisons"


def _peer_report():
    """The main model over 300 days, a peer over the last 150 (a rising half): over its own days
    the peer reads far better; on the days both cover it earned less."""
    days = _days(300)
    rng = np.random.default_rng(7)
    trend = np.r_[np.full(150, -0.002), np.full(150, 0.003)]
    market = pd.Series(trend + rng.normal(0, 0.01, 300), index=days)
    main_returns = market + 0.0003 + rng.normal(0, 0.001, 300)
    peer = (market + rng.normal(0, 0.001, 300)).iloc[150:]
    backtests = {"transformer": _backtest(main_returns, market, {days[3]: 10.0}),
                 "peer": _backtest(peer, market.iloc[150:], {days[160]: 10.0})}
    return SimpleNamespace(model="transformer", backtests=backtests,
                           strategy=strategy_stats(backtests, "transformer"))


def test_the_strategies_table_ranks_on_shared_days_with_a_days_column():
    report = _peer_report()
    table = strategy_table(report)
    assert table.loc["peer", "annual_return"] > table.loc["transformer", "annual_return"]  # own days
    assert table.loc["peer", "vs_main"] < 0  # on the shared days it earned less
    assert list(table.index) == ["transformer", "peer", "benchmark"]  # as the verdict compares
    assert table.loc["transformer", "days"] == 300 and table.loc["peer", "days"] == 150
    assert table.loc["peer", "shared_days"] == 150 and table.loc["transformer", "shared_days"] == 300
    page = "".join(strategy_section(report, "peer"))
    assert "<th>days</th>" in page and page.index("<td>transformer</td>") < page.index("<td>peer</td>")
    assert "<td>300</td>" in page and "<td>150</td>" in page


def test_backtest_help_names_the_model_under_test():
    res = CliRunner().invoke(main, ["backtest", "--help"])
    text = " ".join(res.output.split())
    assert ("the exit status is 1 when the model under test (--model; the Transformer by default) "
            "failed") in text
    assert "when the Transformer failed" not in text


def test_a_strategy_with_more_days_than_it_shares_says_both():
    report = _peer_report()
    report.backtests = {"transformer": report.backtests["peer"], "peer": report.backtests["transformer"]}
    report.strategy = strategy_stats(report.backtests, "transformer")
    page = "".join(strategy_section(report, "peer"))
    assert "<td>300 (150 shared)</td>" in page and "<td>150</td>" in page
