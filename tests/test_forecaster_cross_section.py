"""Cross-sectional evaluation: paired IC test, quantile portfolios, IC by horizon, their plots."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forecaster.metrics import (
    ic_by_horizon,
    ic_difference_test,
    newey_west_lags,
    quantile_returns,
    quantile_summary,
)

CODES = list("abcdefghij")


def _dates(n: int) -> pd.DatetimeIndex:
    return pd.bdate_range("2020-01-01", periods=n, name="date")


def _panel(rng, n_days: int, n_stocks: int, signal: float):
    dates = _dates(n_days)
    codes = [f"s{i:03d}" for i in range(n_stocks)]
    f = rng.normal(size=(n_days, n_stocks))
    y = signal * f + rng.normal(size=(n_days, n_stocks))
    return pd.DataFrame(f, dates, codes), pd.DataFrame(y, dates, codes)


# --------------------------------------------------------------------------------- quantile_returns


def _hand_panel():
    dates = _dates(3)
    nan = np.nan
    forecast = pd.DataFrame(
        [
            [5, 3, 9, 1, 7, 0, 8, 2, 6, 4],
            # tie b == c straddles the q1/q2 edge; e has no forecast
            [1, 2, 2, 3, nan, 4, 5, 6, 7, 8],
            [1, 2, 3, nan, nan, nan, nan, nan, nan, nan],
        ],
        index=dates, columns=CODES, dtype=float,
    )
    actual = pd.DataFrame(
        [
            [10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
            [1, 2, 3, 4, 5, 6, nan, 8, 9, 10],  # g has no label
            [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        ],
        index=dates, columns=CODES, dtype=float,
    )
    return forecast, actual


def test_quantile_returns_hand_worked():
    forecast, actual = _hand_panel()
    q = quantile_returns(forecast, actual, n_quantiles=5)
    # day 3 has 3 valid stocks < 5 -> dropped
    assert list(q.index) == list(forecast.index[:2])
    assert list(q.columns) == [1, 2, 3, 4, 5]
    # day 1, ascending forecast: f(60) d(40) | h(80) b(20) | j(100) a(10) | i(90) e(50) | g(70) c(30)
    assert q.iloc[0].tolist() == [50.0, 50.0, 55.0, 70.0, 50.0]
    # day 2, 8 valid (e, g out): a b | c d | f | h i | j (group = floor(r0 * 5 / 8));
    # the b/c tie goes by column order, b first
    assert q.iloc[1].tolist() == [1.5, 3.5, 6.0, 8.5, 10.0]


def test_quantile_returns_min_stocks_and_uneven_groups():
    forecast, actual = _hand_panel()
    q = quantile_returns(forecast, actual, n_quantiles=5, min_stocks=9)
    assert list(q.index) == [forecast.index[0]]  # day 2 has only 8 valid stocks
    # three groups of 10 stocks: sizes 4, 3, 3 (rank r0 -> floor(3 r0 / 10))
    q3 = quantile_returns(forecast.iloc[:1], actual.iloc[:1], n_quantiles=3)
    assert q3.iloc[0].tolist() == pytest.approx([(60 + 40 + 80 + 20) / 4, (100 + 10 + 90) / 3,
                                                 (50 + 70 + 30) / 3])
    # min_stocks below n_quantiles is raised to n_quantiles: no empty groups, no NaN cells
    q_low = quantile_returns(forecast, actual, n_quantiles=5, min_stocks=2)
    assert len(q_low) == 2 and q_low.notna().all().all()


def test_quantile_returns_matches_per_day_loop():
    rng = np.random.default_rng(3)
    f, y = _panel(rng, 20, 23, 0.3)
    f = f.mask(rng.random(f.shape) < 0.15)
    y = y.mask(rng.random(y.shape) < 0.15)
    q = quantile_returns(f, y, n_quantiles=4)
    for date in q.index:
        ok = f.loc[date].notna() & y.loc[date].notna()
        order = np.argsort(f.loc[date][ok].to_numpy(), kind="stable")
        y_sorted = y.loc[date][ok].to_numpy()[order]
        n = len(y_sorted)
        group = np.arange(n) * 4 // n
        sizes = np.bincount(group, minlength=4)
        assert sizes.max() - sizes.min() <= 1
        expected = [y_sorted[group == g].mean() for g in range(4)]
        assert q.loc[date].tolist() == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------------- quantile_summary


def test_quantile_summary_planted_monotone_signal():
    f, y = _panel(np.random.default_rng(0), 250, 60, 0.2)
    s = quantile_summary(quantile_returns(f, y, n_quantiles=5))
    assert s["monotonicity"] == 1.0
    assert s["mean"] == sorted(s["mean"]) and len(s["mean"]) == 5
    assert s["spread"] > 0
    assert s["spread_t_stat"] > 5 and s["spread_p_value"] < 1e-6
    assert s["n_days"] == 250 and s["lags"] == newey_west_lags(250, 1) == 4


def test_quantile_summary_random_forecast_is_insignificant():
    f, y = _panel(np.random.default_rng(1), 250, 60, 0.0)
    s = quantile_summary(quantile_returns(f, y, n_quantiles=5), horizon=5)
    assert abs(s["spread_t_stat"]) < 2.5
    assert s["spread_p_value"] > 0.01
    assert s["lags"] == 4  # horizon 5 needs 4 lags; the n-rule gives floor(4 * 2.5^(2/9)) = 4


def test_quantile_summary_spread_matches_difference_test():
    f, y = _panel(np.random.default_rng(5), 120, 30, 0.1)
    q = quantile_returns(f, y, n_quantiles=3)
    s = quantile_summary(q, horizon=3)
    t = ic_difference_test(q[3], q[1], horizon=3)
    assert s["spread"] == pytest.approx(t["mean_diff"], rel=1e-12)
    assert s["spread_t_stat"] == pytest.approx(t["t_stat"], rel=1e-12)
    assert s["lags"] == t["lags"]


# ------------------------------------------------------------------------------- ic_difference_test


def test_ic_difference_known_value():
    dates = _dates(5)
    base = pd.Series([0.05, 0.01, -0.02, 0.03, 0.0], dates)
    d = np.array([1.0, -1.0, 2.0, 0.0, 3.0])
    # u = d - 1 = [0, -2, 1, -1, 2]; gamma0 = 10/5 = 2; gamma1 = (0 - 2 - 1 - 2)/5 = -1;
    # Bartlett w1 = 1/2 -> V = 2 + 2 * 0.5 * (-1) = 1; t = 1 / sqrt(1/5) = sqrt(5)
    out = ic_difference_test(base + d, base, lags=1)
    assert out["mean_diff"] == pytest.approx(1.0)
    assert out["t_stat"] == pytest.approx(math.sqrt(5), rel=1e-12)
    assert out["p_value"] == pytest.approx(2 * stats.norm.sf(math.sqrt(5)))
    assert out["p_value_greater"] == pytest.approx(stats.norm.sf(math.sqrt(5)))
    assert out["n_days"] == 5 and out["lags"] == 1
    # lags = 0 -> plain variance / n with ddof 0: t = 1 / sqrt(2/5)
    assert ic_difference_test(base + d, base, lags=0)["t_stat"] == pytest.approx(math.sqrt(2.5))


def test_ic_difference_identical_and_shifted():
    ic = pd.Series(np.random.default_rng(0).normal(0.03, 0.1, 200), _dates(200))
    same = ic_difference_test(ic, ic.copy())
    # zero variance: mean 0, statistic and p-values NaN (documented; not 0)
    assert same["mean_diff"] == 0.0 and same["n_days"] == 200
    assert math.isnan(same["t_stat"]) and math.isnan(same["p_value"])
    shifted = ic_difference_test(ic + 0.02, ic)
    assert shifted["mean_diff"] == pytest.approx(0.02, rel=1e-12)
    assert math.isnan(shifted["t_stat"])  # a constant difference (up to rounding) is degenerate
    noisy = ic_difference_test(ic + 0.02 + np.random.default_rng(1).normal(0, 0.01, 200), ic)
    assert noisy["t_stat"] > 10 and noisy["p_value_greater"] < 1e-10


def test_ic_difference_alignment_and_too_few_days():
    dates = _dates(6)
    a = pd.Series([0.1, 0.2, np.nan, 0.4, 0.5, 0.6], dates)
    b = pd.Series([0.0, 0.1, 0.3, 0.1, 0.7], dates[1:])  # inner join: dates 1..5, NaN at 2
    out = ic_difference_test(a, b, lags=0)
    d = np.array([0.2 - 0.0, 0.4 - 0.3, 0.5 - 0.1, 0.6 - 0.7])
    assert out["n_days"] == 4
    assert out["mean_diff"] == pytest.approx(d.mean())
    assert out["t_stat"] == pytest.approx(d.mean() / math.sqrt(d.var() / 4))
    # date order, not input order, defines the lags
    shuffled = ic_difference_test(a.iloc[::-1], b.iloc[[3, 0, 4, 2, 1]], lags=2)
    assert shuffled["t_stat"] == pytest.approx(ic_difference_test(a, b, lags=2)["t_stat"], rel=1e-12)
    few = ic_difference_test(a.iloc[:2], a.iloc[:2] * 2)
    assert few["n_days"] == 2 and math.isnan(few["t_stat"]) and math.isnan(few["p_value"])


@pytest.mark.parametrize(("lags", "horizon"), [(0, 1), (3, 1), (None, 1), (None, 5), (None, 20)])
def test_ic_difference_matches_statsmodels(lags, horizon):
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(7)
    n = 300
    e = rng.normal(size=n + 4)
    d = 0.01 + 0.05 * (e[4:] + 0.6 * e[3:-1] + 0.3 * e[:-4])  # MA noise: autocorrelated
    base = pd.Series(rng.normal(0.02, 0.1, n), _dates(n))
    out = ic_difference_test(base + d, base, lags=lags, horizon=horizon)
    d_used = (base + d - base).to_numpy()
    fit = sm.OLS(d_used, np.ones(n)).fit(
        cov_type="HAC", cov_kwds={"maxlags": out["lags"], "use_correction": False})
    assert out["t_stat"] == pytest.approx(fit.tvalues[0], rel=1e-10)
    assert out["p_value"] == pytest.approx(fit.pvalues[0], rel=1e-8)
    assert out["mean_diff"] == pytest.approx(fit.params[0], rel=1e-12)
    if lags is not None:
        assert out["lags"] == lags


def test_lags_rule():
    # floor(4 (n/100)^(2/9)): n = 50 -> 3, n = 300 -> 5, n = 1000 -> 6
    assert [newey_west_lags(n) for n in (50, 300, 1000)] == [3, 5, 6]
    # overlapping 5-day labels need at least 4 lags, 20-day labels 19
    assert newey_west_lags(50, horizon=5) == 4
    assert newey_west_lags(1000, horizon=5) == 6
    assert newey_west_lags(1000, horizon=20) == 19
    ic = pd.Series(np.random.default_rng(2).normal(size=50), _dates(50))
    assert ic_difference_test(ic, ic * 0.5, horizon=5)["lags"] == 4
    assert ic_difference_test(ic, ic * 0.5)["lags"] == 3
    # lags are capped at n - 1
    assert ic_difference_test(ic.iloc[:4], ic.iloc[:4] * 0.5, lags=10)["lags"] == 3


# ----------------------------------------------------------------------------------- ic_by_horizon


def test_ic_by_horizon():
    rng = np.random.default_rng(4)
    f, noise = _panel(rng, 30, 12, 0.0)
    labels = {20: noise, 1: f * 2.0 + 1.0, 5: -f}  # rank IC 1, -1 and ~0
    out = ic_by_horizon(f, labels)
    assert isinstance(out, pd.Series)
    assert list(out.index) == [1, 5, 20]
    assert out[1] == pytest.approx(1.0) and out[5] == pytest.approx(-1.0)
    assert abs(out[20]) < 0.15


# ------------------------------------------------------------------------------------------- plots


def _summaries():
    f, y = _panel(np.random.default_rng(0), 60, 25, 0.2)
    good = quantile_summary(quantile_returns(f * 1e-2, y * 1e-2))
    f2, y2 = _panel(np.random.default_rng(1), 60, 25, 0.0)
    bad = quantile_summary(quantile_returns(f2 * 1e-2, y2 * 1e-2))
    bad["mean"][2] = math.nan  # a NaN cell
    return {"transformer": good, "momentum": bad}


def test_plot_quantile_returns(tmp_path):
    from forecaster.reporting.plots import plot_quantile_returns

    summaries = _summaries()
    for name, subset in (("two.png", summaries), ("one.png", {"transformer": summaries["transformer"]})):
        path = tmp_path / "figs" / name
        assert plot_quantile_returns(subset, path, title="quantiles") == path
        assert path.exists() and path.stat().st_size > 5_000


def test_plot_ic_by_horizon(tmp_path):
    from forecaster.reporting.plots import plot_ic_by_horizon

    table = pd.DataFrame({1: [0.03, 0.01], 5: [0.05, np.nan], 20: [0.04, -0.01]},
                         index=["transformer", "momentum"])
    for name, subset in (("two.png", table), ("one.png", table.iloc[[1]])):
        path = tmp_path / name
        assert plot_ic_by_horizon(subset, path, title="IC by horizon") == path
        assert path.exists() and path.stat().st_size > 5_000
