"""The point-in-time risk model (forecaster/risk): style exposures follow their windows and are
standardised over the universe, a planted factor structure (styles and unnamed industries) is
recovered, nothing of a day moves when later data change, the bias statistic of books drawn on
data from the model's own structure is near 1 and reads high after volatility doubles, and bad
options are refused by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from forecaster.risk import (
    STYLES,
    RiskModel,
    RiskModelConfig,
    RiskSnapshot,
    bias_statistic,
    book_outcomes,
    rolling_bias,
    style_exposures,
)
from forecaster.risk.exposures import raw_exposures

FACTOR_SD = np.array([0.012, 0.005, 0.004, 0.004, 0.0035, 0.003, 0.003])  # market, then 6 styles


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with threadpool_limits(1):  # small matrices: threads only contend on a shared machine
        yield


def planted(n_days=700, n_stocks=300, n_industries=0, industry_sd=0.008, seed=0, scale=None):
    """Returns ``X[t-1] f[t] + I g[t] + e[t]`` with known exposures ``X`` (persistent, drifting),
    factor covariance ``F`` (market and six styles), hidden industries and specific variances;
    ``scale`` ``[n_days]`` multiplies each day's returns (a regime of its own)."""
    rng = np.random.default_rng(seed)
    corr = np.eye(7)
    corr[0, 1] = corr[1, 0] = -0.3
    corr[1, 3] = corr[3, 1] = 0.4
    corr[2, 5] = corr[5, 2] = 0.3
    cov = corr * np.outer(FACTOR_SD, FACTOR_SD)
    x = rng.standard_normal((n_stocks, 6)) + np.cumsum(rng.standard_normal((n_days, n_stocks, 6)) * 0.02, 0)
    f = rng.multivariate_normal(np.zeros(7), cov, size=n_days)
    industry = rng.integers(0, max(n_industries, 1), n_stocks)
    g = rng.standard_normal((n_days, max(n_industries, 1))) * (industry_sd if n_industries else 0.0)
    specific_sd = rng.uniform(0.01, 0.03, n_stocks)
    r = np.full((n_days, n_stocks), np.nan)
    r[1:] = (f[1:, :1] + np.einsum("tnk,tk->tn", x[:-1], f[1:, 1:]) + g[1:, industry]
             + rng.standard_normal((n_days - 1, n_stocks)) * specific_sd)
    if scale is not None:
        r *= scale[:, None]
    return {"returns": r, "exposures": x, "cov": cov, "f": f, "industry": industry, "industry_returns": g,
            "specific_var": specific_sd ** 2, "dates": pd.bdate_range("2016-01-04", periods=n_days)}


def market_panel(n_days=400, n_stocks=60, seed=0):
    """``(returns, close, volume, market_value)`` ``[n_days, n_stocks]`` of a market with
    staggered listings, suspensions (no bar) and a one-factor structure; stock 0 has beta 2.5."""
    rng = np.random.default_rng(seed)
    market = rng.standard_normal(n_days) * 0.012
    beta = rng.uniform(0.6, 1.4, n_stocks)
    beta[0] = 2.5
    r = market[:, None] * beta + rng.standard_normal((n_days, n_stocks)) * 0.015
    r[:, 0] = market * beta[0] + rng.standard_normal(n_days) * 0.002
    start = rng.integers(0, n_days // 3, n_stocks)
    start[:5] = 0
    before = np.arange(n_days)[:, None] < start
    r[before] = np.nan
    r[start, np.arange(n_stocks)] = np.nan  # the first day has no return
    close = 10 * np.exp(np.nancumsum(np.log1p(r), axis=0))
    close[before] = np.nan
    volume = rng.lognormal(15, 0.5, (n_days, n_stocks))
    volume[before] = np.nan
    suspended = (rng.random((n_days, n_stocks)) < 0.01) & ~before
    suspended[:, 0] = False
    volume[suspended] = 0.0
    r[suspended] = np.nan
    market_value = close * rng.lognormal(19, 1, n_stocks)
    return r, close, volume, market_value


# ------------------------------------------------------------------ exposures


def test_exposures_are_standardised_over_the_universe():
    r, close, volume, mv = market_panel()
    universe = np.isfinite(close) & (np.arange(r.shape[1]) % 3 != 0)  # two thirds of the market
    x = style_exposures(r, close, volume, mv, universe)
    assert x.shape == (*r.shape, len(STYLES))
    checked = 0
    for t in range(300, r.shape[0], 17):
        for k in range(len(STYLES)):
            v = x[t, :, k]
            member = universe[t] & np.isfinite(v)
            w = mv[t, member]
            assert abs(np.sum(w * v[member]) / w.sum()) < 1e-9
            assert np.std(v[member]) == pytest.approx(1.0, abs=1e-9)
            checked += 1
    assert checked > 30
    # equal weights without market values (the mean is then equal-weighted)
    x_eq = style_exposures(r, close, volume, None, universe)
    v = x_eq[350, :, 0]
    member = universe[350] & np.isfinite(v)
    assert abs(v[member].mean()) < 1e-9 and np.std(v[member]) == pytest.approx(1.0)
    # winsorised: a huge size does not stretch everyone else's scale
    mv_big = mv.copy()
    mv_big[:, 1] *= 1e12
    top = style_exposures(r, close, volume, mv_big, None)[350, :, 0]
    assert np.nanmax(top) < 4.5 and np.nanargmax(top) == 1


def test_a_planted_high_beta_stock_has_the_highest_beta():
    r, close, volume, mv = market_panel()
    x = style_exposures(r, close, volume, mv)
    beta = x[:, :, STYLES.index("beta")]
    days = range(100, r.shape[0])
    assert all(np.nanargmax(beta[t]) == 0 for t in days)
    # the residual volatility of that stock (noise 0.002) is the lowest
    res_vol = x[:, :, STYLES.index("residual_volatility")]
    assert all(np.nanargmin(res_vol[t]) == 0 for t in days)


def test_exposures_are_nan_before_enough_history_and_without_a_bar():
    r, close, volume, mv = market_panel()
    x = style_exposures(r, close, volume, mv)
    listed = np.isfinite(close)
    first = listed.argmax(axis=0)
    late = np.flatnonzero(first > 20)[0]
    beta = x[:, late, STYLES.index("beta")]
    # beta needs 63 returns in its window: the first day has none, so 64 days after listing
    assert np.isnan(beta[: first[late] + 63]).all()
    assert np.isfinite(beta[first[late] + 64])
    assert np.isnan(x[: first[late], late]).all()  # nothing before listing
    assert np.isfinite(x[first[late], late, STYLES.index("size")])  # size: from the first day
    suspended = (volume == 0) & listed
    assert suspended.any() and np.isnan(x[suspended]).all()


def test_raw_styles_follow_their_stated_windows():
    r, close, volume, mv = market_panel(n_days=320, n_stocks=8, seed=3)
    market = np.full(len(r), 0.001)
    market[1:] = np.sin(np.arange(1, len(r)))  * 0.01
    raw = raw_exposures(r, close, volume, mv, market)
    t, i = 300, 2
    log_r = np.nan_to_num(np.log1p(r[:, i]))
    assert raw[t, i, 2] == pytest.approx(log_r[t - 251:t - 20].sum(), rel=1e-10)  # momentum
    assert raw[t, i, 5] == pytest.approx(log_r[t - 4:t + 1].sum(), rel=1e-10)  # reversal
    assert raw[t, i, 0] == pytest.approx(np.log(mv[t, i]))  # size
    turnover = volume[t - 20:t + 1, i] * close[t - 20:t + 1, i] / mv[t - 20:t + 1, i]
    assert raw[t, i, 4] == pytest.approx(np.log(np.nanmean(turnover)), rel=1e-10)  # liquidity
    # beta: weighted least squares over 252 days, half-life 63
    rows = np.arange(t - 251, t + 1)
    y, m = r[rows, i], market[rows]
    ok = np.isfinite(y)
    w = 0.5 ** ((t - rows) / 63)
    slope, intercept = np.polyfit(m[ok], y[ok], 1, w=np.sqrt(w[ok]))
    assert raw[t, i, 1] == pytest.approx(slope, rel=1e-8)
    resid = y[ok] - intercept - slope * m[ok]
    assert raw[t, i, 3] == pytest.approx(np.sqrt(np.average(resid ** 2, weights=w[ok])), rel=1e-8)
    # without a market value: size is the log 20-day mean traded value
    proxy = raw_exposures(r, close, volume, None, market)
    traded = close[t - 19:t + 1, i] * volume[t - 19:t + 1, i]
    assert proxy[t, i, 0] == pytest.approx(np.log(traded.mean()), rel=1e-10)


def test_exposures_refuse_mismatched_shapes():
    r, close, volume, mv = market_panel(n_days=50, n_stocks=5)
    with pytest.raises(ValueError, match="market_value"):
        style_exposures(r, close, volume, mv[:, :4])
    with pytest.raises(ValueError, match="returns"):
        style_exposures(r[0], close, volume, mv)


# ------------------------------------------------------------------ the model


def test_a_planted_factor_structure_is_recovered():
    """1,000 days of 600 stocks with known exposures: the regressions' factor returns follow the
    planted ones (correlation > 0.95 each); with a window of all 1,000 days (half-life 500) the
    factor covariance of the last day is within a relative Frobenius error of 0.15 of the planted
    one (about 0.05-0.10 from sampling alone; the default window's 252 days at half-life 90 give
    0.1-0.4, too few days to test against); specific variances are within 10 % (median)."""
    s = planted(n_days=1000, n_stocks=600, seed=1)
    config = RiskModelConfig(window=1000, half_life=500, n_statistical=0)
    model = RiskModel(config).fit(s["returns"], s["exposures"], None, s["dates"])
    for j in range(7):
        assert np.corrcoef(model.factor_returns_[1:, j], s["f"][1:, j])[0, 1] > 0.95, model.factor_names[j]
    snap = model.snapshot(999)
    assert snap.factor_names == ("market", *STYLES)
    assert np.linalg.norm(snap.factor_cov - s["cov"]) / np.linalg.norm(s["cov"]) < 0.15
    default = RiskModel(RiskModelConfig(n_statistical=0)).fit(s["returns"], s["exposures"], None, s["dates"])
    specific = default.snapshot(999).specific_var
    assert np.median(specific / s["specific_var"]) == pytest.approx(1.0, abs=0.1)
    assert np.corrcoef(specific, s["specific_var"])[0, 1] > 0.9


def test_statistical_factors_recover_planted_industries():
    """Industries the model is not told about: the statistical factors' loadings span them
    (each industry's demeaned membership is explained with R^2 > 0.88), the three components
    the four industries leave beyond the market carry more risk than the noise components, and a
    book long one industry is predicted right (bias near 1) only with them."""
    s = planted(n_days=700, n_stocks=300, n_industries=4, industry_sd=0.012, seed=2)
    model = RiskModel().fit(s["returns"], s["exposures"], None, s["dates"])
    snap = model.snapshot(450)
    dummies = (s["industry"][snap.stocks, None] == np.arange(4)).astype(float)
    dummies -= dummies.mean(axis=0)
    loadings = snap.exposures[:, 7:]
    fitted = loadings @ np.linalg.lstsq(loadings, dummies, rcond=None)[0]
    r2 = 1 - ((dummies - fitted) ** 2).sum(axis=0) / (dummies ** 2).sum(axis=0)
    assert (r2 > 0.88).all(), r2
    stat_sd = np.sqrt(np.diag(snap.factor_cov)[7:])
    assert stat_sd[:3].min() > 1.5 * stat_sd[3:].max()
    assert np.sqrt(np.mean(loadings ** 2, axis=0)) == pytest.approx(np.ones(5))  # standardised

    def industry_book(snap, t):
        member = s["industry"][snap.stocks] == 0
        return member / member.sum() - 1 / len(member)

    days = range(199, 699)
    with_stats = bias_statistic(*book_outcomes(model, s["returns"], days, industry_book))
    bare = RiskModel(RiskModelConfig(n_statistical=0)).fit(s["returns"], s["exposures"], None, s["dates"])
    without = bias_statistic(*book_outcomes(bare, s["returns"], days, industry_book))
    assert 0.85 < with_stats < 1.15 and without > 2.0


def test_industries_handed_in_are_factors_of_their_own():
    """Four planted industries handed in as labels (industry 3 small, stocks without a class):
    each industry's factor return follows the planted one less the market-value-weighted mean
    (correlation > 0.95: the market factor takes that mean), the weighted sum is zero each day
    to rounding, an industry with fewer than three stocks in a day's regression is 0 that day;
    the snapshot loads each classed stock 1 on its industry; a book long one industry is
    predicted right (bias near 1) with industry factors and no statistical ones."""
    s = planted(n_days=700, n_stocks=300, n_industries=4, industry_sd=0.012, seed=2)
    mv = np.random.default_rng(7).lognormal(0, 1, (700, 300))
    labels = np.broadcast_to(s["industry"], (700, 300)).copy()
    labels[:, :20] = -1  # unclassified: no industry
    labels[:400, np.flatnonzero(s["industry"] == 3)[2:]] = 1  # industry 3 holds two stocks until day 400
    model = RiskModel(RiskModelConfig(n_statistical=0)).fit(
        s["returns"], s["exposures"], None, s["dates"], weights=mv, industries=labels,
        industry_names=["a", "b", "c", "d"])
    f = model.factor_returns_
    assert model.factor_names == ("market", *STYLES, "industry:a", "industry:b", "industry:c", "industry:d")
    assert (f[1:401, 10] == 0).all() and (f[402:, 10] != 0).all()
    cap = np.stack([[mv[t - 1][labels[t - 1] == g].sum() for g in range(4)] for t in range(402, 700)])
    np.testing.assert_allclose((f[402:, 7:] * cap).sum(axis=1), 0, atol=1e-12)
    g = s["industry_returns"][402:]
    planted_rel = g - (g * cap).sum(axis=1, keepdims=True) / cap.sum(axis=1, keepdims=True)
    for j in range(4):
        assert np.corrcoef(f[402:, 7 + j], planted_rel[:, j])[0, 1] > 0.95, j
    snap = model.snapshot(650)
    dummies = snap.exposures[:, 7:11]
    np.testing.assert_array_equal(dummies.sum(axis=1), (labels[650, snap.stocks] >= 0).astype(float))
    np.testing.assert_array_equal(dummies[labels[650, snap.stocks] == 2, 2], 1.0)

    def industry_book(snap, t):
        member = labels[t, snap.stocks] == 0
        return member / member.sum() - 1 / len(member)

    days = range(450, 699)
    assert 0.85 < bias_statistic(*book_outcomes(model, s["returns"], days, industry_book)) < 1.15
    with pytest.raises(ValueError, match="industry_names"):
        RiskModel().fit(s["returns"], s["exposures"], None, s["dates"], industries=labels,
                        industry_names=["a"])


def _random_books(seed):
    rng = np.random.default_rng(seed)

    def book(snap: RiskSnapshot, t: int) -> np.ndarray:
        n = len(snap.stocks)
        top = np.zeros(n)
        top[rng.choice(n, 30, replace=False)] = 1 / 30
        return np.stack([rng.standard_normal(n) / n,  # long-short
                         rng.dirichlet(np.ones(n)) - 1 / n,  # random active weights
                         top - 1 / n,  # 30 names against the equal-weighted market
                         snap.exposures[:, 1 + rng.integers(0, 6)] / n])  # a style tilt

    return book


def test_bias_is_near_one_on_data_from_the_models_structure():
    """500 days of books drawn each day on data simulated from the model's structure (styles
    and hidden industries): realised over predicted risk has a standard deviation within
    [0.85, 1.15] for each kind of book."""
    s = planted(n_days=700, n_stocks=300, n_industries=4, industry_sd=0.012, seed=3)
    model = RiskModel().fit(s["returns"], s["exposures"], None, s["dates"])
    realised, predicted = book_outcomes(model, s["returns"], range(199, 699), _random_books(3))
    assert realised.shape == (500, 4) and np.isfinite(realised).all()
    for j in range(4):
        assert 0.85 < bias_statistic(realised[:, j], predicted[:, j]) < 1.15, j


def test_bias_reads_high_when_volatility_doubles():
    """The model fitted on a calm window, read on 300 later days whose volatility is twice the
    window's: the bias statistic reads about 2 (> 1.5); the rolling bias of a model refitted
    day by day is high just after the change and comes back as the window adapts."""
    n_days, change = 700, 400
    scale = np.where(np.arange(n_days) > change, 2.0, 1.0)
    s = planted(n_days=n_days, n_stocks=300, n_industries=4, industry_sd=0.012, seed=4, scale=scale)
    calm = slice(0, change + 1)
    snap = RiskModel().fit(s["returns"][calm], s["exposures"][calm], None, s["dates"][calm]).snapshot(change)
    book = _random_books(4)
    realised, predicted = [], []
    for t in range(change, n_days - 1):
        w = book(snap, t)
        realised.append(w @ s["returns"][t + 1, snap.stocks])
        predicted.append([np.sqrt(snap.variance(x)) for x in w])
    assert bias_statistic(np.array(realised), np.array(predicted)) > 1.5
    model = RiskModel().fit(s["returns"], s["exposures"], None, s["dates"])
    realised, predicted = book_outcomes(model, s["returns"], range(change - 20, n_days - 1), book)
    rolling = rolling_bias(realised, predicted, window=21)
    assert rolling.shape == (len(realised),)
    assert np.nanmean(rolling[30:60]) > 1.3 and np.nanmean(rolling[-60:]) < 1.2


def test_perturbing_the_future_never_moves_today():
    """Every return, price, volume, market value and universe entry after day t changed (or
    removed), industries reclassed: the exposures of days <= t and the snapshot of day t (exposures, factor
    covariance, specific variance) are bitwise the same; a later snapshot does move."""
    r, close, volume, mv = market_panel(n_days=400, n_stocks=60, seed=5)
    universe = np.isfinite(close) & (np.arange(60) % 4 != 1)
    dates = pd.bdate_range("2018-01-02", periods=400)
    t = 300

    industries = np.broadcast_to(np.arange(60) % 5, (400, 60)).copy()

    def build(r, close, volume, mv, universe, industries=industries):
        x = style_exposures(r, close, volume, mv, universe)
        return x, RiskModel().fit(r, x, universe, dates, weights=mv, industries=industries,
                                  industry_names=list("abcde"))

    x0, model0 = build(r, close, volume, mv, universe)
    rng = np.random.default_rng(9)
    noise = rng.lognormal(0.0, 0.5, r.shape)
    future = np.arange(400)[:, None] > t
    r1 = np.where(future, r * noise + rng.normal(0, 0.02, r.shape), r)
    close1, volume1, mv1 = (np.where(future, a * noise[::-1], a) for a in (close, volume, mv))
    universe1 = np.where(future, ~universe, universe)
    r1[t + 5:, :10] = np.nan  # delisted later
    moved = np.where(future, (industries + 1) % 5, industries)
    x1, model1 = build(r1, close1, volume1, mv1, universe1, moved)
    np.testing.assert_array_equal(x0[: t + 1], x1[: t + 1])
    a, b = model0.snapshot(t), model1.snapshot(t)
    for name in ("stocks", "exposures", "factor_cov", "specific_var"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.shrinkage == b.shrinkage and a.date == b.date == dates[t]
    later0, later1 = model0.snapshot(t + 10), model1.snapshot(t + 10)
    assert not np.allclose(later0.factor_cov, later1.factor_cov)


def test_a_snapshot_is_a_consistent_covariance():
    s = planted(n_days=300, n_stocks=80, n_industries=3, seed=6)
    model = RiskModel(RiskModelConfig(min_history=100)).fit(s["returns"], s["exposures"], None, s["dates"])
    assert model.snapshot(99) is None  # 99 regressions (day 0 has none)
    assert model.snapshot(100) is not None
    snap = model.snapshot(299)  # the last day, by its index (a negative one raises: issue 79)
    n, k = snap.exposures.shape
    assert (n, k) == (80, 12) and len(snap.factor_names) == k
    np.testing.assert_array_equal(snap.exposures[:, 0], 1.0)
    np.testing.assert_allclose(snap.factor_cov, snap.factor_cov.T, atol=0)
    assert np.linalg.eigvalsh(snap.factor_cov).min() >= 0 and (snap.specific_var > 0).all()
    w = np.random.default_rng(0).standard_normal(n)
    cov = snap.covariance()
    assert snap.variance(w) == pytest.approx(w @ cov @ w, rel=1e-10)
    assert snap.factor_variance(w) < snap.variance(w)
    with pytest.raises(ValueError, match="one weight per covered stock"):
        snap.variance(w[:-1])
    with pytest.raises(IndexError, match="outside"):
        model.snapshot(300)


def test_weighted_regressions_and_fixed_shrinkage():
    """With market values the regressions are weighted (a stock without one is left out of
    them but keeps a residual); a fixed shrinkage of 1 leaves a diagonal covariance."""
    s = planted(n_days=300, n_stocks=100, seed=7)
    weights = np.random.default_rng(1).lognormal(20, 1, s["returns"].shape)
    weights[:, 5] = np.nan
    model = RiskModel(RiskModelConfig(shrinkage=1.0, n_statistical=2)).fit(
        s["returns"], s["exposures"], None, s["dates"], weights=weights)
    t = 200
    x = np.column_stack([np.ones(100), s["exposures"][t - 1]])
    used = np.arange(100) != 5
    sw = np.sqrt(weights[t - 1, used])
    root = np.sqrt(sw)  # weighted least squares with weights sqrt(market value)
    expected = np.linalg.lstsq(x[used] * root[:, None], s["returns"][t, used] * root, rcond=None)[0]
    np.testing.assert_allclose(model.factor_returns_[t], expected, rtol=1e-8)
    assert np.isfinite(model.residuals_[t, 5])
    cov = model.snapshot(t).factor_cov
    np.testing.assert_array_equal(cov, np.diag(np.diag(cov)))


def test_fit_refuses_mismatched_inputs():
    s = planted(n_days=50, n_stocks=20)
    model = RiskModel()
    with pytest.raises(ValueError, match="exposures"):
        model.fit(s["returns"], s["exposures"][:, :10], None, s["dates"])
    with pytest.raises(ValueError, match="dates"):
        model.fit(s["returns"], s["exposures"], None, s["dates"][:-1])
    with pytest.raises(ValueError, match="weights"):
        model.fit(s["returns"], s["exposures"], None, s["dates"], weights=np.ones((50, 3)))
    with pytest.raises(RuntimeError, match="fit"):
        RiskModel().snapshot(0)
    with pytest.raises(TypeError, match="RiskModelConfig"):
        RiskModel({"window": 10})


@pytest.mark.parametrize(("field", "value"), [
    ("window", 1), ("window", 25.0), ("half_life", 0), ("specific_half_life", True),
    ("newey_west_lags", -1), ("n_statistical", -2), ("shrinkage", 1.5), ("shrinkage", "auto"),
    ("min_history", 300), ("specific_prior_days", -1.0), ("remove_estimation_error", 1),
])
def test_config_errors_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"^{field} must"):
        RiskModelConfig(**{field: value})


# ------------------------------------------------------------------ the bias statistic


def test_bias_statistic_is_the_sd_of_standardised_outcomes():
    rng = np.random.default_rng(0)
    predicted = rng.uniform(0.005, 0.02, 20000)
    realised = 2.0 * predicted * rng.standard_normal(20000)
    assert bias_statistic(realised, predicted) == pytest.approx(2.0, rel=0.03)
    realised[:100] = np.nan
    predicted[100:200] = 0.0  # no prediction: left out
    assert bias_statistic(realised, predicted) == pytest.approx(2.0, rel=0.03)
    assert np.isnan(bias_statistic(np.array([0.01]), np.array([0.01])))
    with pytest.raises(ValueError, match="one shape"):
        bias_statistic(realised, predicted[:-1])
    rolling = rolling_bias(realised[:500], predicted[:500], window=100)
    z = realised[400:500] / predicted[400:500]
    assert rolling[499] == pytest.approx(np.std(z, ddof=1), rel=1e-10)
    assert np.isnan(rolling[100]) or rolling[100] > 0


def test_the_factor_returns_estimation_error_is_removed():
    """60 stocks: the regressions' factor returns carry their estimation noise (the factor
    variances read 25 %+ above the planted ones, and factor-mimicking books are over-predicted);
    removing the noise's sandwich estimate brings both back to about 1."""
    s = planted(n_days=1000, n_stocks=60, seed=8)

    def mimicking(snap, t):  # one book per style: exposure 1 to it, 0 to the other factors
        return np.linalg.pinv(snap.exposures)[1:]

    for remove, low, high in ((False, 1.25, 3.0), (True, 0.85, 1.15)):
        config = RiskModelConfig(window=1000, half_life=1000, n_statistical=0, remove_estimation_error=remove)
        model = RiskModel(config).fit(s["returns"], s["exposures"], None, s["dates"])
        ratio = np.diag(model.snapshot(999).factor_cov) / np.diag(s["cov"])
        assert low < np.mean(ratio) < high, (remove, ratio)
        realised, predicted = book_outcomes(model, s["returns"], range(300, 999), mimicking)
        bias = bias_statistic(realised, predicted)
        assert (0.93 < bias < 1.07) if remove else bias < 0.93, (remove, bias)


# ------------------------------------------------------------------ the model's edges (issue 79 item 4)


def _small_panel(n_stocks=12, n_days=40, seed=0):
    """A Panel whose stock 0 is suspended on day 20 with a bar (baostock's folders: volume 0,
    the close the previous one)."""
    from forecaster.data.panel import Panel

    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2021-01-04", periods=n_days)
    close = 10 * np.cumprod(1 + rng.normal(0, 0.02, (n_days, n_stocks)), axis=0)
    close[20, 0] = close[19, 0]
    frames = {}
    for j in range(n_stocks):
        pre = np.r_[10.0, close[:-1, j]]
        volume = np.full(n_days, 1e6)
        volume[20] = 0.0 if j == 0 else 1e6
        frames[f"sh.{600000 + j}"] = pd.DataFrame({
            "code": f"sh.{600000 + j}", "open": pre, "high": np.maximum(pre, close[:, j]),
            "low": np.minimum(pre, close[:, j]), "close": close[:, j], "preclose": pre, "volume": volume,
            "float_mv": close[:, j] * 1e8}, index=pd.Index(dates, name="date"))
    return Panel.from_frames(frames)


def test_a_snapshot_of_a_day_outside_the_data_raises_instead_of_wrapping():
    s = planted(n_days=150, n_stocks=40)
    model = RiskModel(RiskModelConfig(min_history=20, window=60)).fit(s["returns"], s["exposures"], None,
                                                                       s["dates"])
    assert model.snapshot(149) is not None
    for day in (-1, -150, 150):
        with pytest.raises(IndexError, match=f"day {day} is outside the fitted days 0..149"):
            model.snapshot(day)


def test_a_suspended_day_with_a_bar_is_no_return(monkeypatch):
    from forecaster.portfolio import panel_risk

    panel = _small_panel()
    assert panel.suspended[20, 0] and panel.listed[20, 0]
    seen = {}

    def fit(self, returns, exposures, universe, dates, weights=None, **industries):
        seen["returns"] = returns
        return self

    monkeypatch.setattr(RiskModel, "fit", fit)
    panel_risk.risk_model_of(panel)
    r = seen["returns"]
    assert np.isnan(r[20, 0])  # not the zero return close / preclose - 1 reads
    assert np.isfinite(r[20, 1:]).all() and np.isfinite(r[19, 0]) and np.isfinite(r[21, 0])


def test_the_cached_risk_model_keys_on_the_members(monkeypatch):
    from forecaster.portfolio import panel_risk

    panel = _small_panel()
    fits = []

    def fit(self, returns, exposures, universe, dates, weights=None, **industries):
        fits.append(universe.copy())
        return self

    monkeypatch.setattr(RiskModel, "fit", fit)
    everyone = panel_risk.risk_model_of(panel)
    assert panel_risk.risk_model_of(panel) is everyone and len(fits) == 1  # cached
    panel.members = np.ones(panel.listed.shape, dtype=bool)
    panel.members[:, :6] = False
    some = panel_risk.risk_model_of(panel)
    assert some is not everyone and len(fits) == 2 and not fits[1][:, :6].any()
    panel.members = None
    assert panel_risk.risk_model_of(panel) is everyone and len(fits) == 2


def test_top_eigen_by_lanczos_equals_lapacks_to_rounding():
    from scipy.linalg import eigh

    from forecaster.risk.estimators import top_eigen

    rng = np.random.default_rng(3)
    e = rng.normal(0, 1, (120, 900)) + np.outer(rng.normal(0, 3, 120), rng.normal(1, 0.2, 900))
    e -= e.mean(axis=0)  # demeaned as the residuals are: the Gram holds a null vector
    gram = e @ e.T
    values, vectors = top_eigen(gram, 5)
    ref_values, ref_vectors = eigh(gram, subset_by_index=[115, 119])
    assert np.allclose(values, ref_values, rtol=1e-12)
    assert np.allclose(np.abs((vectors * ref_vectors).sum(axis=0)), 1.0, atol=1e-10)  # up to sign
    again = top_eigen(gram, 5)  # a fixed start: the same answer each call
    assert np.array_equal(again[0], values) and np.array_equal(again[1], vectors)
    small_values, _ = top_eigen(gram[:12, :12], 5)  # too small for Lanczos: LAPACK's
    assert np.allclose(small_values, eigh(gram[:12, :12])[0][-5:])
