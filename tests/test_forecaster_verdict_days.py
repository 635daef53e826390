"""Models are compared on the days they share, each figure named by its model, and the count
of significant wins is corrected for many comparisons (issue 70)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_forecaster_returns import _backtest, _days

from forecaster.evaluation.tearsheet import strategy_stats
from forecaster.evaluation.verdict import _ic_lines, strategy_lines
from forecaster.metrics import holm, ic_difference_test


def test_a_peer_covering_the_late_half_is_judged_on_those_days():
    days = _days(300)
    rng = np.random.default_rng(7)
    # a falling first half, a rising second: over its own half the peer's book looks far better
    trend = np.r_[np.full(150, -0.002), np.full(150, 0.003)]
    market = pd.Series(trend + rng.normal(0, 0.01, 300), index=days)
    main = market + 0.0003 + rng.normal(0, 0.001, 300)
    peer = (market + rng.normal(0, 0.001, 300)).iloc[150:]
    backtests = {"transformer": _backtest(main, market, {days[3]: 10.0}),
                 "peer": _backtest(peer, market.iloc[150:], {days[160]: 10.0})}
    assert backtests["peer"].metrics["annual_return"] > backtests["transformer"].metrics["annual_return"]
    tests = strategy_stats(backtests, "transformer").tests
    lines = strategy_lines("transformer", backtests, tests)
    assert "over 300 days" in lines[0]
    assert "transformer's strategy beat the best baseline strategy, peer" in lines[1], lines[1]
    assert "on the 150 days both cover (transformer covers 300, peer 150)" in lines[1]
    t = tests.set_index("baseline").loc["peer"]
    mine, theirs = t["annual_return_model"] * 100, t["annual_return_baseline"] * 100
    assert f"transformer {mine:+.2f} %/yr, peer {theirs:+.2f} %/yr" in lines[1]
    assert "Holm-adjusted" in lines[1]
    assert lines[2].startswith("none of 1 baseline strategies earned more")


def test_figures_in_brackets_are_named_by_their_model():
    days = _days(300)
    rng = np.random.default_rng(5)
    bench = pd.Series(rng.normal(0.0002, 0.01, 300), index=days)
    backtests = {"transformer": _backtest(bench + 0.0002, bench, {days[3]: 10.0}),
                 "lightgbm": _backtest(bench + 0.0008, bench, {days[4]: 10.0})}
    line = strategy_lines("transformer", backtests, strategy_stats(backtests, "transformer").tests)[1]
    m, o = (backtests[n].metrics["annual_return"] * 100 for n in ("transformer", "lightgbm"))
    assert line.startswith("the best baseline strategy, lightgbm, BEAT transformer's")
    assert f"(transformer {m:+.2f} %/yr, lightgbm {o:+.2f} %/yr; Sharpe transformer" in line


def test_wins_are_counted_with_holm_adjusted_p_values():
    # ten comparisons: raw p 0.004 and 0.03 are wins at 0.05; after Holm only the first (0.04)
    p = [0.004, 0.03, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    names = [f"b{k}" for k in range(10)]
    tests = pd.DataFrame({"baseline": names, "mean_diff": 0.01, "t_stat": 2.0, "p_value": p, "n_days": 250,
                          "mean_model": 0.05, "mean_baseline": 0.04})
    tests["p_holm"] = holm(tests["p_value"])
    ic = {n: {"mean_ic": 0.04, "icir": 0.3, "n_days": 250} for n in names}
    ic["transformer"] = {"mean_ic": 0.05, "icir": 0.5, "n_days": 250}
    line = _ic_lines("transformer", ic, tests, {})[-1]
    assert line.startswith("transformer beats 1 of 10 other models significantly"), line
    assert "Holm-adjusted p < 0.05 over the 10 comparisons" in line


def test_ic_comparison_on_shared_days_names_each_mean():
    days = _days(300)
    rng = np.random.default_rng(2)
    main = pd.Series(np.r_[np.full(150, 0.0), np.full(150, 0.08)] + rng.normal(0, 0.05, 300), index=days)
    peer = (main - 0.01 + rng.normal(0, 0.05, 300)).iloc[150:]
    ic = {"transformer": {"mean_ic": float(main.mean()), "icir": 0.4, "n_days": 300},
          "peer": {"mean_ic": float(peer.mean()), "icir": 0.6, "n_days": 150}}
    assert ic["peer"]["mean_ic"] > ic["transformer"]["mean_ic"]  # over its own days the peer reads better
    tests = pd.DataFrame([{"baseline": "peer", **ic_difference_test(main, peer)}])
    tests["p_holm"] = holm(tests["p_value"])
    lines = _ic_lines("transformer", ic, tests, {})
    assert "(ICIR +0.400, 300 days); best baseline: peer" in lines[0] and "150 days)" in lines[0]
    t = tests.iloc[0]
    assert "on the 150 days both cover (transformer covers 300, peer 150)" in lines[1]
    assert f"(transformer {t['mean_model']:+.4f}, peer {t['mean_baseline']:+.4f})" in lines[1]
    assert t["mean_diff"] == pytest.approx(t["mean_model"] - t["mean_baseline"])


def test_holm_matches_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    rng = np.random.default_rng(0)
    for m in range(1, 15):  # each family size once (statsmodels' call takes ~60 ms)
        p = rng.uniform(0, 0.2, m)
        assert np.allclose(holm(p), multitest.multipletests(p, method="holm")[1])
    assert np.isnan(holm([0.01, np.nan])[1]) and holm([0.01, np.nan])[0] == pytest.approx(0.01)
