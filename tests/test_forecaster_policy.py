"""Policies (issue 79 item 3): the backtest asks its strategy for targets from what the book
actually holds; the enhanced book decides from the held weights, holds what cannot trade,
reads only what is known at the decision, and gives predict the same targets and orders."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data.panel import Panel
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.index_weights import benchmark_weights, next_weights
from forecaster.portfolio.orders import Book, book_orders_for_panel
from forecaster.portfolio.policy import EnhancedPolicy, Holding, known_weights
from forecaster.portfolio.strategy import StrategyConfig

N_STOCKS, N_DAYS, TEST_DAYS = 40, 300, 40
GAP, SUSPENDED = 275, 269  # stock 0 has no bar on day GAP; stock 1 is suspended on day SUSPENDED


@pytest.fixture(scope="module")
def world():
    """A factor-structured panel (as tests/test_forecaster_enhanced.py's, smaller), every stock
    a member, with one missing bar and one suspension inside the test days."""
    rng = np.random.default_rng(5)
    dates = pd.bdate_range("2020-01-02", periods=N_DAYS)
    loadings = np.column_stack([rng.normal(1.0, 0.2, N_STOCKS), np.eye(3)[rng.integers(0, 3, N_STOCKS)]])
    returns = rng.normal(0, [0.012, 0.006, 0.006, 0.006], (N_DAYS, 4)) @ loadings.T + rng.normal(
        0, 1, (N_DAYS, N_STOCKS)) * rng.uniform(0.008, 0.02, N_STOCKS)
    close = 10 * np.cumprod(1 + returns, axis=0)
    shares = rng.lognormal(20, 1, N_STOCKS)
    frames = {}
    for j in range(N_STOCKS):
        pre = np.r_[10.0, close[:-1, j]]
        frame = pd.DataFrame({
            "code": f"sh.{600000 + j}", "open": pre, "high": np.maximum(pre, close[:, j]) * 1.001,
            "low": np.minimum(pre, close[:, j]) * 0.999, "close": close[:, j], "preclose": pre,
            "volume": 1e7, "float_mv": close[:, j] * shares[j]}, index=pd.Index(dates, name="date"))
        if j == 0:
            frame = frame.drop(dates[GAP])
        if j == 1:
            frame.loc[dates[SUSPENDED], "volume"] = 0.0
        frames[f"sh.{600000 + j}"] = frame
    panel = Panel.from_frames(frames)
    panel.members = np.ones((N_DAYS, N_STOCKS), dtype=bool)
    noise = np.random.default_rng(1).normal(size=(TEST_DAYS, N_STOCKS))
    forecast = pd.DataFrame(noise, index=dates[-TEST_DAYS:], columns=list(panel.codes))
    return panel, forecast


def _config(**kwargs):
    strategy = StrategyConfig(rule="enhanced", tracking_error=0.03, rebalance_every=5, max_turnover=0.3,
                              active_bound=0.03)
    return BacktestConfig(strategy=strategy, **{"capital": 1e10, **kwargs})


def test_benchmark_weights_of_a_decision_are_known_at_its_close(world):
    """Row s is over the members known at s's close: a stock without a bar the next day keeps
    its weight, in the decision and in the index's holding over day s+1 alike (the index holds a
    member without a bar at its last price)."""
    panel, _ = world
    known = known_weights(panel)
    held_over = benchmark_weights(panel).weights
    s = GAP - 1
    assert known[s, 0] > 0 and held_over[s + 1, 0] == pytest.approx(known[s, 0], rel=1e-12)
    mv = panel.fields["float_mv"][s]
    np.testing.assert_allclose(known[s], mv / mv.sum(), rtol=1e-12)
    # nothing after s enters row s: the panel cut at s gives the same row, as predict sees it
    cut = panel.rows(panel.dates <= panel.dates[s])
    np.testing.assert_array_equal(known_weights(cut)[-1], known[s])
    np.testing.assert_allclose(next_weights(cut), known[s], rtol=1e-12)


def test_the_enhanced_book_decides_from_what_it_holds(world):
    panel, forecast = world
    result = run_backtest(panel, forecast, _config(capital=2e7))
    book, d = result.enhanced, result.enhanced.diagnostics
    assert len(d) == TEST_DAYS // 5 and (d["status"] == "optimal").all(), d
    days = result.equity.index
    for r in range(5, TEST_DAYS, 5):  # each turnover is measured from the weights actually held
        s = days.get_loc(forecast.index[r]) - 1
        close = pd.DataFrame(panel["close"]).ffill().to_numpy()[panel.dates.get_loc(days[s])]
        held = result.positions.iloc[s].to_numpy() * close / result.equity.iloc[s]
        target = book.weights.iloc[r].to_numpy()
        assert d["turnover"].iloc[r // 5] == pytest.approx(np.abs(target - held).sum() / 2, abs=1e-9)
        if forecast.index[r - 1] == panel.dates[SUSPENDED]:  # stock 1 suspended on the signal day
            assert held[1] > 0 and target[1] == pytest.approx(held[1], abs=1e-9)
            assert d["fixed_weight"].iloc[r // 5] == pytest.approx(held[1], abs=1e-12)
        if forecast.index[r] == panel.dates[GAP]:  # stock 0 has no bar on the trade day, one the day before
            b0 = target[0] - book.target_active.iloc[r, 0]  # its benchmark weight known at the signal day's
            assert b0 == pytest.approx(known_weights(panel)[GAP - 1, 0], rel=1e-9) and b0 > 0  # close, not 0
    assert d["fixed_weight"].gt(0).sum() == 1
    assert any("could not trade on the signal day (suspended, no bar) were held at their weight" in n
               for n in book.notes)


def test_a_rebalance_without_a_benchmark_is_not_a_fallback(world):
    """A day whose benchmark has no weight keeps what is held and is said apart: no note claims
    the optimiser held the benchmark then."""
    panel, forecast = world
    policy = EnhancedPolicy(panel, forecast, _config(), None, None)
    policy.inputs.known[policy.signal_of[0]] = 0.0  # no benchmark weight on the first signal day
    cash = Holding(np.zeros(N_STOCKS), 1e10)
    assert not policy.targets(0, cash, True).any()  # nothing held, nothing to track: cash
    assert policy.targets(5, cash, True).sum() == pytest.approx(1.0)
    book = policy.book()
    assert list(book.diagnostics["rung"])[0] == "empty" and book.fallbacks == 0
    assert not any("held the benchmark" in n for n in book.notes), book.notes
    assert any("the benchmark had no weight among the investable members on 1 of 2 rebalance(s)" in n
               for n in book.notes)


@pytest.mark.parametrize("halflife", [0.0, 3.0])
def test_the_same_day_data_and_holdings_give_the_same_orders_in_backtest_and_predict(world, halflife):
    """Trading at the close (execution "close"), the backtest's trades of a rebalance are the
    orders ``predict`` writes from the same book on the panel cut at that close; with the alpha
    at the holding horizon (``alpha_halflife``), predict handed the forecast rows before."""
    panel, forecast = world
    config = _config(capital=5e7, execution="close")
    config.strategy.alpha_halflife = halflife
    result = run_backtest(panel, forecast, config)
    r = 20  # a rebalance row with every stock trading on its signal day
    s = panel.dates.get_loc(forecast.index[r]) - 1
    before = result.positions.loc[panel.dates[s - 1]]
    book = Book({c: int(n) for c, n in before.items() if n}, float(result.cash.loc[panel.dates[s - 1]]))
    cut = panel.rows(panel.dates <= panel.dates[s])
    orders = book_orders_for_panel(forecast.iloc[r], cut, book, config, trade_date=forecast.index[r],
                                   recent=forecast.iloc[:r].to_numpy() if halflife else None)
    decided = result.enhanced.diagnostics.iloc[r // 5]
    assert orders.attrs["enhanced"]["status"] == decided["status"] == "optimal"
    for key in ("predicted_te", "turnover"):
        # the two solves agree to the solver's accuracy (1e-12 gap); the orders below to the lot
        assert orders.attrs["enhanced"][key] == pytest.approx(decided[key], abs=1e-6)
    placed = orders[orders["status"].isin(["order", "partial"])]
    traded = result.trades[(result.trades["date"] == panel.dates[s]) & (result.trades["shares"] > 0)]
    ours = sorted(zip(placed["code"], placed["side"], placed["shares"], strict=True))
    theirs = sorted(zip(traded["code"], traded["side"], traded["shares"], strict=True))
    assert len(ours) > 5 and ours == theirs
