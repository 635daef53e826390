"""The enhanced book's alpha (issue 79 item 5): the score's shape, the alpha at the holding
horizon (decayed scores), and the trade penalty beside the turnover cap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from forecaster.portfolio.alpha import (
    alpha_of,
    decayed_scores,
    holding_scores,
    standard_scores,
    window_rows,
)
from forecaster.portfolio.strategy import StrategyConfig


def test_zscore_is_the_winsorised_z_score():
    s = np.array([1.0, 2.0, 3.0, 4.0, np.nan, 100.0])
    ok = np.isfinite(s)
    want = np.zeros(6)
    want[ok] = np.clip((s[ok] - s[ok].mean()) / s[ok].std(), -3, 3)
    assert np.array_equal(standard_scores(s), want)
    assert standard_scores(s)[4] == 0.0  # no score: no view
    assert np.array_equal(alpha_of(s, np.full(6, 0.02), 0.05), 0.05 * 0.02 * want)


def test_rank_scores_are_the_normal_scores_of_the_ranks():
    """Van der Waerden's scores, standardised: an outlier counts as its rank."""
    got = standard_scores(np.array([5.0, -1.0, 1000.0, 2.0]), "rank")
    raw = norm.ppf((np.array([3, 1, 4, 2]) - 0.5) / 4)
    assert got == pytest.approx((raw - raw.mean()) / raw.std(), abs=1e-12)
    assert got[2] == pytest.approx(1.3629, abs=1e-4)  # the outlier: the top rank's score, no more
    ties = standard_scores(np.array([1.0, 1.0, 2.0, 3.0]), "rank")
    assert ties[0] == ties[1]


def test_tails_give_no_view_on_the_middle_and_every_shape_has_unit_sd():
    rng = np.random.default_rng(0)
    s = rng.normal(size=200)
    s[:7] = np.nan
    ok = np.isfinite(s)
    tails = standard_scores(s, "tails")
    order = np.argsort(np.argsort(s[ok]))  # 0 = lowest of the 193 scored
    middle = (order >= 38) & (order < 193 - 38)  # a fifth of 193 is 38 in each tail
    assert (tails[ok][middle] == 0).all() and (tails[ok][~middle] != 0).all()
    assert (np.sign(tails[ok][~middle]) == np.where(order[~middle] >= 155, 1, -1)).all()
    for shape in ("zscore", "rank", "tails"):
        z = standard_scores(s, shape)
        assert abs(z[ok].mean()) < 1e-3 and z[ok].std() == pytest.approx(1.0, abs=1e-3), shape
        assert (z[~ok] == 0).all()
        assert (standard_scores(np.full(5, 2.0), shape) == 0).all()  # all alike: no view


def test_decayed_scores_are_the_windowed_mean_of_past_z_scores():
    """Row t: sum over lags < 10 half-lives of 2**(-lag/h) z[t-lag], over the weights of the rows
    that scored the stock; NaN where row t does not."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(80, 12))
    x[5, 3] = np.nan
    x[60:, 7] = np.nan
    h = 2.5
    z = np.stack([standard_scores(row) for row in x])
    got = decayed_scores(x, h)
    L = window_rows(h)
    assert L == 25
    for t in (0, 6, 24, 25, 59, 79):
        lags = np.arange(min(L, t + 1))
        w = 0.5 ** (lags / h)
        rows = z[t - lags]
        has = np.isfinite(x[t - lags])
        want = (w[:, None] * np.where(has, rows, 0)).sum(0) / (w[:, None] * has).sum(0)
        want[~np.isfinite(x[t])] = np.nan
        assert np.allclose(got[t], want, atol=1e-12, equal_nan=True), t
    assert np.array_equal(decayed_scores(x, 0), x, equal_nan=True)


def test_decayed_scores_read_no_future_row_and_nothing_past_their_window():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(100, 9))
    base = decayed_scores(x, 3.0)
    later = x.copy()
    later[50:] = rng.normal(size=(50, 9))
    assert np.array_equal(decayed_scores(later, 3.0)[:50], base[:50])
    older = x.copy()
    older[:20] = rng.normal(size=(20, 9))  # rows 20.. read only rows past 20 - 30 + 1
    assert np.allclose(decayed_scores(older, 3.0)[49:], base[49:], atol=1e-12)
    assert not np.allclose(decayed_scores(older, 3.0)[40], base[40])


def test_a_slow_signal_under_daily_noise_is_recovered_better_by_its_decayed_scores():
    """A persistent view (an AR(1) with a 20-day half-life) seen through daily noise twice its
    size: the decayed scores follow it more closely than the day's scores."""
    rng = np.random.default_rng(3)
    n_days, n = 400, 300
    phi = 0.5 ** (1 / 20)
    signal = np.zeros((n_days, n))
    signal[0] = rng.normal(size=n)
    for t in range(1, n_days):
        signal[t] = phi * signal[t - 1] + np.sqrt(1 - phi ** 2) * rng.normal(size=n)
    scores = signal + 2.0 * rng.normal(size=(n_days, n))

    def corr(a, b):
        return np.mean([np.corrcoef(a[t], b[t])[0, 1] for t in range(100, n_days)])

    raw, decayed = corr(scores, signal), corr(decayed_scores(scores, 5.0), signal)
    assert raw == pytest.approx(0.447, abs=0.02)  # 1 / sqrt(1 + 2**2)
    assert decayed > 0.7 and decayed > raw + 0.25


def test_holding_scores_of_a_day_are_the_backtests_row():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(70, 10))
    x[30:, 2] = np.nan
    for h in (0.0, 0.3, 2.0, 5.0):
        rows = decayed_scores(x, h)
        for t in (0, 3, 40, 69):
            assert np.allclose(holding_scores(x[t], x[:t], h), rows[t], atol=1e-12, equal_nan=True)
    assert np.array_equal(holding_scores(x[5], None, 3.0), x[5])


def test_the_options_are_checked():
    for bad in ({"alpha_shape": "cubic"}, {"alpha_halflife": -1.0}, {"alpha_halflife": 1e4},
                {"trade_aversion": -0.5}, {"trade_aversion": float("nan")}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            StrategyConfig(rule="enhanced", **bad)
    assert StrategyConfig(rule="enhanced", alpha_halflife=0, trade_aversion=0).trade_aversion == 0


def _problem(seed=0, n=60):
    rng = np.random.default_rng(seed)
    bench = rng.uniform(0.5, 1.5, n)
    bench /= bench.sum()
    exposures = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    factor_cov = np.diag([2e-4, 5e-5, 5e-5])
    specific = rng.uniform(1e-4, 4e-4, n)
    prev = bench * rng.uniform(0.5, 1.5, n)
    prev /= prev.sum()
    alpha = 0.05 * np.sqrt(specific) * rng.normal(size=n)
    return alpha, bench, prev, exposures, factor_cov, specific


@pytest.mark.parametrize("cap", [1.0, 0.1])
def test_a_heavier_trade_penalty_trades_less(cap):
    from forecaster.portfolio.enhanced import solve_book

    alpha, bench, prev, x, f, d = _problem()
    turnover = []
    for aversion in (0.0, 1.0, 5.0, 50.0):
        s = StrategyConfig(rule="enhanced", tracking_error=0.05, active_bound=0.05, max_turnover=cap,
                           trade_aversion=aversion)
        w = solve_book(alpha, bench, prev, x, f, d, 2, s, cost=0.002)
        turnover.append(np.abs(w - prev).sum() / 2)
    assert all(a >= b - 1e-6 for a, b in zip(turnover, turnover[1:], strict=False))
    assert turnover[-1] < 0.5 * turnover[0]
    assert max(turnover) <= cap + 1e-6


def test_the_trade_penalty_weighs_the_cost_term_by_its_factor():
    from forecaster.portfolio.book_terms import TradingCost
    from forecaster.portfolio.enhanced import book_parts

    alpha, bench, prev, x, f, d = _problem(1)
    w = bench.copy()
    s = StrategyConfig(rule="enhanced", trade_aversion=4.0)
    terms, _ = book_parts(alpha, bench, prev, x, f, d, 2, s, cost=0.001, sell_cost=0.002)
    cost = next(t for t in terms if isinstance(t, TradingCost))
    d_w = w - prev
    plain = 0.001 * np.clip(d_w, 0, None).sum() + 0.002 * np.clip(-d_w, 0, None).sum()
    assert cost.value(w) == pytest.approx(4.0 * plain, rel=1e-12)


def test_the_shape_reaches_the_problems_alpha():
    from forecaster.portfolio.enhanced import problem_inputs

    class Snap:
        factor_names = ("market", "size", "stat_1")
        n_style = 2

    rng = np.random.default_rng(5)
    n = 50
    snap = Snap()
    snap.stocks = np.arange(n)
    snap.exposures = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    snap.specific_var = rng.uniform(1e-4, 4e-4, n)
    scores = rng.normal(size=n)
    bench = np.full(n, 1 / n)
    day = np.ones(n, bool)
    out = {}
    for shape in ("zscore", "tails"):
        idx, alpha, *_ = problem_inputs(scores, bench, snap, day, StrategyConfig(rule="enhanced",
                                                                                 alpha_shape=shape))
        out[shape] = alpha
    assert (out["tails"] == 0).sum() == n - 2 * 10 and (out["zscore"] != 0).all()
    assert np.corrcoef(out["tails"], out["zscore"])[0, 1] > 0.8


def test_predict_reads_the_window_of_out_of_sample_forecasts_cut_to_each_days_members():
    """``recent_scores``: a report's forecasts of the window's days before the next one, a
    non-member's NaN; without out-of-sample forecasts the decay is refused, never read from the
    run's own model (fitted on those days)."""
    import pandas as pd

    from forecaster.app.signal_day import recent_scores
    from forecaster.checks import ConfigError

    class Grid:
        dates = pd.bdate_range("2024-01-01", periods=40)
        codes = np.array(["a", "b", "c"])
        members = np.ones((40, 3), bool)

    grid = Grid()
    grid.members[30:, 1] = False
    every = pd.DataFrame(np.arange(117.0).reshape(39, 3), index=grid.dates[1:], columns=list("abc"))
    s = StrategyConfig(rule="enhanced", alpha_halflife=1.5)
    assert recent_scores(grid, StrategyConfig(rule="enhanced"), None) == (None, "")
    got, entered = recent_scores(grid, s, every, "--report R")
    assert got.shape == (window_rows(1.5) - 1, 3) == (14, 3)
    want = every.iloc[-14:].to_numpy(copy=True)
    want[-10:, 1] = np.nan  # forecast dates 30..39: b is no member
    assert np.array_equal(got, want, equal_nan=True)
    assert entered == "14 of 14 days' out-of-sample forecasts from --report R"
    got, entered = recent_scores(grid, s, every.iloc[:-4], "--report R")  # a report ending 4 days early
    assert entered.startswith("10 of 14 days") and np.isnan(got[-4:]).all()
    with pytest.raises(ConfigError, match="in sample.*pass --report REPORT_DIR"):
        recent_scores(grid, s, None)
    with pytest.raises(ConfigError, match="no forecast on any of the 14 days"):
        recent_scores(grid, s, every.iloc[:10])
