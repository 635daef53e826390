"""The tear sheet's statistics (forecaster.metrics.returns, forecaster.evaluation.tearsheet):
known values on hand-made series, about zero where there is nothing to find, and the same
numbers as empyrical (checked where empyrical is installed; it is not a dependency)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from forecaster.data.panel import Panel
from forecaster.data.synthetic.daily import synthetic_panel
from forecaster.evaluation.tearsheet import curves_of, quantile_curves, strategy_stats
from forecaster.evaluation.verdict import p_text, pct, strategy_lines
from forecaster.metrics.returns import (
    active_stats,
    annual_return,
    drawdown,
    drawdown_periods,
    gross_returns,
    growth,
    monthly_table,
    paired_return_test,
    period_returns,
    relative_growth,
)
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.broker import TRADE_COLUMNS, performance_metrics
from forecaster.portfolio.strategy import StrategyConfig


def _days(n: int, start: str = "2021-01-04") -> pd.DatetimeIndex:
    return pd.bdate_range(start, periods=n, name="date")


def test_annual_return_and_growth_known_values():
    r = np.full(252, 1.1 ** (1 / 252) - 1)
    assert annual_return(r) == pytest.approx(0.10)
    assert annual_return(np.full(126, 1.1 ** (1 / 252) - 1)) == pytest.approx(0.10)  # half a year, same rate
    assert annual_return([-1.0] + [0.1] * 19) == -1.0
    assert math.isnan(annual_return([])) and math.isnan(annual_return([-1.0, 0.1]))  # < 20 days
    g = growth(pd.Series([0.1, -0.5, 1.0]))
    assert g.tolist() == pytest.approx([1.1, 0.55, 1.1])


def test_drawdown_periods_known_path():
    curve = pd.Series([1.0, 1.2, 0.9, 1.0, 1.2, 1.3, 1.04, 1.3, 1.2, 1.1], index=_days(10))
    dd = drawdown(curve)
    assert dd.iloc[2] == pytest.approx(0.9 / 1.2 - 1) and dd.iloc[5] == 0.0
    table = drawdown_periods(curve)
    assert list(table.columns) == ["start", "trough", "recovery", "depth", "days_to_trough",
                                   "days_to_recover"]
    first = table.iloc[0]  # the deepest: 1.2 -> 0.9, back at 1.2 on day 4
    assert (first["start"], first["trough"], first["recovery"]) == tuple(curve.index[[1, 2, 4]])
    assert first["depth"] == pytest.approx(-0.25)
    assert (first["days_to_trough"], first["days_to_recover"]) == (1, 3)
    second = table.iloc[1]  # 1.3 -> 1.04 (-20 %), back on day 7
    assert second["depth"] == pytest.approx(-0.2) and second["recovery"] == curve.index[7]
    last = table.iloc[2]  # 1.3 -> 1.1, not recovered by the end
    assert pd.isna(last["recovery"]) and math.isnan(last["days_to_recover"])
    assert last["trough"] == curve.index[9] and last["depth"] == pytest.approx(1.1 / 1.3 - 1)
    assert drawdown_periods(pd.Series([1.0, 1.1, 1.2], index=_days(3))).empty  # never falls
    assert len(drawdown_periods(curve, n=1)) == 1


def test_monthly_table_compounds_by_month_and_year():
    days = pd.bdate_range("2021-11-01", "2022-02-28", name="date")
    r = pd.Series(0.01, index=days)
    table = monthly_table(r)
    assert list(table.index) == [2021, 2022]
    nov = int(((days.year == 2021) & (days.month == 11)).sum())
    assert table.loc[2021, 11] == pytest.approx(1.01 ** nov - 1)
    assert np.isnan(table.loc[2021, 1]) and np.isnan(table.loc[2022, 5])  # no days there
    assert table.loc[2022, "year"] == pytest.approx(1.01 ** int((days.year == 2022).sum()) - 1)
    assert period_returns(r, "Y").loc[2021] == pytest.approx(table.loc[2021, "year"])


def test_gross_returns_add_back_the_costs_over_the_starting_value():
    days = _days(4)
    returns = pd.Series([0.01, -0.02, 0.0, 0.03], index=days)
    equity = 1000 * (1 + returns).cumprod()
    assert gross_returns(returns, equity, pd.Series(dtype=float)).tolist() == pytest.approx(returns.tolist())
    costs = pd.Series([5.0, 2.0], index=[days[0], days[2]])
    gross = gross_returns(returns, equity, costs)
    assert gross.iloc[0] == pytest.approx(0.01 + 5.0 / 1000)  # the first day starts from the capital
    assert gross.iloc[2] == pytest.approx(0.0 + 2.0 / equity.iloc[1])
    assert gross.iloc[1] == pytest.approx(-0.02)


def test_active_stats_known_values_and_no_signal():
    days = _days(500)
    b = pd.Series(np.random.default_rng(0).normal(0.0004, 0.01, 500), index=days)
    active = np.where(np.arange(500) % 2 == 0, 0.011, -0.009)  # mean 0.001, std ~0.01
    stats = active_stats(b + active, b)
    expected_ir = active.mean() / np.std(active, ddof=1) * math.sqrt(252)
    assert stats["information_ratio"] == pytest.approx(expected_ir)
    assert stats["tracking_error"] == pytest.approx(np.std(active, ddof=1) * math.sqrt(252))
    assert stats["excess_annual_return"] == pytest.approx(annual_return(b + active) - annual_return(b))
    same = active_stats(b, b)  # the benchmark itself: nothing active
    assert same["tracking_error"] == 0 and math.isnan(same["information_ratio"])
    assert same["excess_annual_return"] == 0
    # no signal: the strategy is the benchmark plus zero-mean noise over 100 years of days
    n = 25_200
    rng = np.random.default_rng(7)
    long_b = pd.Series(rng.normal(0.0003, 0.012, n), index=_days(n, "1900-01-01"))
    noisy = long_b + rng.normal(0.0, 0.005, n)
    assert abs(active_stats(noisy, long_b)["information_ratio"]) < 0.3  # standard error 0.1
    assert relative_growth(long_b, long_b).eq(1.0).all()


def test_paired_return_test_known_and_no_signal():
    days = _days(400)
    rng = np.random.default_rng(1)
    base = pd.Series(rng.normal(0, 0.01, 400), index=days)
    ahead = base + 0.001 + pd.Series(rng.normal(0, 0.0005, 400), index=days)
    res = paired_return_test(ahead, base)
    assert res["mean_diff"] == pytest.approx(float((ahead - base).mean()))
    assert res["p_value"] < 0.001 and res["t_stat"] > 0 and res["n_days"] == 400
    assert res["annual_return_diff"] == pytest.approx(annual_return(ahead) - annual_return(base))
    other = pd.Series(rng.normal(0, 0.01, 400), index=days)  # same mean, independent
    assert paired_return_test(other, base)["p_value"] > 0.05
    same = paired_return_test(base, base)
    assert same["mean_diff"] == 0 and math.isnan(same["p_value"])  # nothing to test
    assert paired_return_test(base.iloc[:200], base.iloc[100:])["n_days"] == 100  # common days only


def test_paired_return_test_is_calibrated_on_top_k_books():
    """The test the verdict prints for two books, on books whose picks hold a stock for days
    (top-10 dropout, one name a day): two forecasts with no skill reject at about the nominal
    rate, and a planted signal's daily top-k book is told from a random one."""
    frames, signal = synthetic_panel(n_stocks=60, n_days=500, signal_ic=0.05, seed=3, return_signal=True)
    panel = Panel.from_frames(frames)
    forecast = signal.shift(1).iloc[60:]  # s[t] is known after day t's close: row t + 1
    rng = np.random.default_rng(0)

    def noise() -> pd.DataFrame:
        return pd.DataFrame(rng.standard_normal(forecast.shape), index=forecast.index,
                            columns=forecast.columns).where(forecast.notna())

    dropout = BacktestConfig(strategy=StrategyConfig(rule="dropout", top_k=10, n_drop=1))
    p = np.array([paired_return_test(run_backtest(panel, noise(), dropout).returns,
                                     run_backtest(panel, noise(), dropout).returns)["p_value"]
                  for _ in range(40)])
    # 40 pairs at a true 5 %: 7 or more rejections has probability 0.014
    assert (p < 0.05).sum() <= 6 and (p < 0.5).sum() >= 12  # not rejecting nothing either
    top_k = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=10))
    res = paired_return_test(run_backtest(panel, forecast, top_k).returns,
                             run_backtest(panel, noise(), top_k).returns)
    assert res["p_value"] < 0.01 and res["annual_return_diff"] > 0.1


# ------------------------------------------------------------------------------------------------
# the tear sheet of backtests


def _backtest(returns: pd.Series, bench: pd.Series, costs: dict | None = None, capital: float = 1e6):
    equity = capital * (1 + returns).cumprod()
    bench_equity = capital * (1 + bench).cumprod()
    rows = [(d, d, "syn.000001", "buy", 100, 100, 10.0, 1000.0, c, 0.0, 0.0, 0.0, "filled", "")
            for d, c in (costs or {}).items()]
    trades = pd.DataFrame(rows, columns=TRADE_COLUMNS)
    positions = pd.DataFrame({"syn.000001": 100, "syn.000002": 0}, index=returns.index)
    return SimpleNamespace(equity=equity, returns=returns, trades=trades, positions=positions,
                           benchmark_equity=bench_equity, benchmark="equal weight",
                           metrics=performance_metrics(equity, trades, capital),
                           benchmark_metrics=performance_metrics(bench_equity, None, capital))


def test_strategy_stats_known_values():
    days = _days(300)
    rng = np.random.default_rng(3)
    bench = pd.Series(rng.normal(0.0002, 0.01, 300), index=days)
    main = bench + 0.0008
    other = bench + 0.0002
    backtests = {"transformer": _backtest(main, bench, {days[10]: 500.0}), "ridge": _backtest(other, bench)}
    stats = strategy_stats(backtests, "transformer")
    risk = stats.risk
    assert list(risk.index) == ["transformer", "ridge", "benchmark"]
    assert risk.loc["transformer", "annual_return"] == pytest.approx(annual_return(main))
    assert risk.loc["transformer", "annual_return_gross"] > risk.loc["transformer", "annual_return"]
    assert risk.loc["ridge", "cost_drag"] == pytest.approx(0.0, abs=1e-12)  # no costs: the same curve
    assert risk.loc["transformer", "max_drawdown"] <= 0
    assert risk.loc["transformer", "costs_paid"] == 500.0 and risk.loc["transformer", "n_trades"] == 1
    assert risk.loc["transformer", "mean_holdings"] == 1.0
    assert risk.loc["benchmark", "annual_return_gross"] == risk.loc["benchmark", "annual_return"]
    curves = stats.curves["transformer"]
    ratio = (1 + main).cumprod() / (1 + bench).cumprod()
    assert curves["excess"].tolist() == pytest.approx((ratio - 1).tolist())
    assert curves["excess_drawdown"].max() == pytest.approx(0.0)
    test = stats.tests.set_index("baseline").loc["ridge"]
    assert test["annual_return_diff"] == pytest.approx(annual_return(main) - annual_return(other))
    assert test["p_value"] < 0.05 and test["mean_diff"] == pytest.approx(0.0006)
    assert list(stats.yearly.columns) == ["strategy", "benchmark", "excess"]
    assert stats.yearly["strategy"].tolist() == pytest.approx(period_returns(main, "Y").tolist())
    assert len(stats.monthly) == len(stats.yearly) and not stats.drawdowns.empty


def test_strategy_stats_no_signal():
    """A strategy that is the benchmark: nothing over it, no tracking, and a baseline that is
    the same strategy cannot be told apart."""
    days = _days(250)
    bench = pd.Series(np.random.default_rng(4).normal(0.0003, 0.01, 250), index=days)
    stats = strategy_stats({"transformer": _backtest(bench, bench), "copy": _backtest(bench, bench)},
                           "transformer")
    row = stats.risk.loc["transformer"]
    assert row["excess_annual_return"] == pytest.approx(0.0, abs=1e-12)
    assert row["tracking_error"] == pytest.approx(0.0, abs=1e-12) and math.isnan(row["information_ratio"])
    assert stats.curves["transformer"]["excess"].abs().max() < 1e-12
    assert stats.excess_drawdowns.empty
    assert math.isnan(stats.tests.set_index("baseline").loc["copy", "p_value"])
    assert curves_of(_backtest(bench.iloc[:0], bench.iloc[:0])).empty


def test_quantile_curves_cumulate_per_horizon_day():
    qret = pd.DataFrame({1: [-0.01, -0.02], 2: [0.0, 0.0], 3: [0.02, 0.01]}, index=_days(2))
    curves = quantile_curves(qret, horizon=1)
    assert curves["1"].tolist() == pytest.approx([-0.01, -0.03])
    assert curves["long_short"].tolist() == pytest.approx([0.03, 0.06])
    assert quantile_curves(qret, horizon=2)["long_short"].tolist() == pytest.approx([0.015, 0.03])


def test_strategy_verdict_says_when_a_baseline_beat_the_main_model():
    days = _days(300)
    rng = np.random.default_rng(5)
    bench = pd.Series(rng.normal(0.0002, 0.01, 300), index=days)
    noise = [pd.Series(rng.normal(0, 0.002, 300), index=days) for _ in range(3)]
    backtests = {"transformer": _backtest(bench + 0.0002 + noise[0], bench, {days[3]: 10.0}),
                 "ridge_features": _backtest(bench + 0.0006 + noise[1], bench, {days[4]: 10.0}),
                 "composite": _backtest(bench - 0.0004 + noise[2], bench, {days[5]: 10.0})}
    cash = _backtest(pd.Series(0.0, index=days), bench)
    tests = strategy_stats(backtests, "transformer").tests
    lines = strategy_lines("transformer", backtests, tests)
    assert lines[0].startswith("transformer strategy after costs: ") and "%/yr" in lines[0]
    assert "the best baseline strategy, ridge_features, BEAT transformer's after costs by" in lines[1]
    diff = (backtests["ridge_features"].metrics["annual_return"]
            - backtests["transformer"].metrics["annual_return"])
    assert f"by {diff * 100:.2f} %/yr" in lines[1]
    assert "p < 0.001" in lines[1] or "p = 0." in lines[1]
    assert "1 of 2 baseline strategies earned more than transformer's after costs: ridge_features" in lines[2]
    # a baseline that never traded and beat the main model is said to have held cash
    idle = strategy_lines("transformer", {"transformer": backtests["composite"], "cash": cash}, None)
    assert "the best baseline strategy, cash (no trades: it held cash), BEAT" in idle[1]
    assert "-0.00" not in idle[1] and "Sharpe" in idle[1]
    assert pct(0.1511, per_year=True) == "+15.11 %/yr" and pct(-0.2098) == "-20.98 %"
    assert p_text(0.0099) == "p = 0.010" and p_text(0.00001) == "p < 0.001"
    assert p_text(float("nan"), "no test").startswith("p = not computed")


def test_statistics_agree_with_empyrical():
    ep = pytest.importorskip("empyrical")
    days = _days(700)
    rng = np.random.default_rng(11)
    r = pd.Series(rng.normal(0.0005, 0.012, 700), index=days)
    b = pd.Series(rng.normal(0.0002, 0.010, 700), index=days)
    equity = 1e6 * (1 + r).cumprod()
    m = performance_metrics(equity, None, 1e6)
    assert m["annual_return"] == pytest.approx(ep.annual_return(r))
    assert annual_return(r) == pytest.approx(ep.annual_return(r))
    assert m["annual_volatility"] == pytest.approx(ep.annual_volatility(r))
    assert m["sharpe"] == pytest.approx(ep.sharpe_ratio(r))
    assert m["sortino"] == pytest.approx(ep.sortino_ratio(r))
    assert -m["max_drawdown"] == pytest.approx(ep.max_drawdown(r))
    assert m["calmar"] == pytest.approx(ep.calmar_ratio(r))
    assert drawdown(growth(r)).min() == pytest.approx(ep.max_drawdown(r))
    assert active_stats(r, b)["information_ratio"] / math.sqrt(252) == pytest.approx(ep.excess_sharpe(r, b))
    months = period_returns(r, "M")
    assert months.to_numpy() == pytest.approx(ep.aggregate_returns(r, "monthly").to_numpy())
    assert period_returns(r, "Y").to_numpy() == pytest.approx(ep.aggregate_returns(r, "yearly").to_numpy())
