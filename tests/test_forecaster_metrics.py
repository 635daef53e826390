"""Forecast-evaluation statistics checked against hand-worked arrays, scipy and statsmodels."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forecaster.metrics import (
    daily_ic,
    diebold_mariano,
    dm_table,
    hln_factor,
    ic_summary,
    loss_differential,
    point_metrics,
    summarise,
)

# ------------------------------------------------------------------------------------ point_metrics


def test_point_metrics_hand_worked():
    f = [0.1, -0.2, 0.3, 0.0, -0.1]
    y = [0.2, -0.1, -0.1, 0.1, -0.3]
    m = [0.05] * 5
    out = point_metrics(f, y, mean_forecast=m)
    # errors f - y = [-0.1, -0.1, 0.4, -0.1, 0.2]; squares sum to 0.23, |.| sum to 0.9
    assert out["n"] == 5 and out["n_dropped"] == 0
    assert out["mse"] == pytest.approx(0.046)
    assert out["mae"] == pytest.approx(0.18)
    # sum y^2 = 0.16 -> 1 - 0.23/0.16
    assert out["r2_oos_zero"] == pytest.approx(-0.4375)
    # y - 0.05 = [0.15, -0.15, -0.15, 0.05, -0.35]; squares sum to 0.1925 -> 1 - 92/77
    assert out["r2_oos_mean"] == pytest.approx(-15 / 77)
    # forecast 0 on day 4 is excluded; 3 hits of 4; P(X>=3 | 4, .5) = 5/16, two-sided 10/16
    assert out["n_directional"] == 4
    assert out["hit_rate"] == pytest.approx(0.75)
    assert out["binomial_p"] == pytest.approx(0.625)


def test_point_metrics_positive_r2_and_no_mean_forecast():
    f = np.array([0.01, -0.02, 0.01, 0.02])
    y = np.array([0.02, -0.02, 0.0, 0.03])
    out = point_metrics(f, y)
    # SSE = 1e-4 + 0 + 1e-4 + 1e-4 = 3e-4; sum y^2 = 4e-4 + 4e-4 + 0 + 9e-4 = 17e-4
    assert out["r2_oos_zero"] == pytest.approx(1 - 3 / 17)
    assert math.isnan(out["r2_oos_mean"])
    # y == 0 on day 3 is excluded from the directional count
    assert out["n_directional"] == 3 and out["hit_rate"] == 1.0


def test_binomial_p_eight_of_ten():
    y = np.array([1, -1, 2, -2, 1, 1, -1, 3, 1, -1, 0.0, 1.0])
    f = np.array([1, -1, 1, -1, 1, 1, -1, 1, -1, 1, 1.0, 0.0])  # 8 hits, 2 misses, 2 excluded
    out = point_metrics(f, y)
    assert out["n_directional"] == 10
    assert out["hit_rate"] == pytest.approx(0.8)
    assert out["binomial_p"] == pytest.approx(0.109375)  # 2 * (1 + 10 + 45) / 1024


def test_point_metrics_series_alignment_and_positional_mean():
    f = pd.Series([0.1, 0.2, np.nan, 0.4], index=[0, 1, 2, 3])
    y = pd.Series([0.1, 0.3, 0.5, 0.2], index=[1, 2, 3, 4])
    m = np.array([0.0, 0.1, 0.2, 0.3])  # positional with f
    out = point_metrics(f, y, mean_forecast=m)
    # union 0..4: valid pairs only at 1 (0.2, 0.1) and 3 (0.4, 0.5)
    assert out["n"] == 2 and out["n_dropped"] == 3
    assert out["mse"] == pytest.approx(0.01)
    # mean forecasts 0.1 and 0.3 -> SSE 0 + 0.04; model SSE 0.02
    assert out["r2_oos_mean"] == pytest.approx(0.5)
    # arrays of unequal length are an error, not a silent truncation
    with pytest.raises(ValueError, match="length"):
        point_metrics([1.0, 2.0], [1.0])


def test_point_metrics_ic_matches_scipy():
    rng = np.random.default_rng(0)
    y = rng.normal(size=200)
    f = 0.3 * y + rng.normal(size=200)
    f[::7] = np.round(f[::7], 1)  # some ties for the rank IC
    out = point_metrics(f, y)
    assert out["pearson_ic"] == pytest.approx(stats.pearsonr(f, y)[0], abs=1e-12)
    assert out["rank_ic"] == pytest.approx(stats.spearmanr(f, y)[0], abs=1e-12)


def test_grouped_point_metrics_equal_point_metrics_group_by_group():
    """The vectorised per-group metrics (the report's thousands of (model, stock) rows) give
    point_metrics' numbers, edge cases included: dropped NaN pairs, ties, zeros, a constant
    forecast, one row, no valid row, a partly missing mean forecast, exact binomial p-values."""
    from forecaster.metrics.forecast import grouped_point_metrics

    rng = np.random.default_rng(0)
    parts = []
    for i in range(12):
        n = int(rng.integers(1, 40)) if i > 2 else (1, 3, 25)[i]
        f, y = rng.normal(size=n).round(1), rng.normal(size=n).round(1)  # rounded: ties and zeros
        m = rng.normal(size=n)
        f[rng.random(n) < 0.1] = np.nan
        y[rng.random(n) < 0.1] = np.nan
        m[rng.random(n) < 0.3] = np.nan
        if i == 4:
            f[:] = 0.25  # constant forecast: no IC
        if i == 5:
            y[:] = np.nan  # nothing scoreable
        parts.append(pd.DataFrame({"model": "ab"[i % 2], "code": f"c{i // 2}", "forecast": f,
                                   "actual": y, "mean_forecast": m}))
    frame = pd.concat(parts, ignore_index=True).sample(frac=1.0, random_state=1)  # rows shuffled
    got = grouped_point_metrics(frame, ["model", "code"])
    groups = list(frame.groupby(["model", "code"], sort=True))
    assert len(got) == len(groups) == 12
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for row, ((model, code), group) in zip(got.to_dict("records"), groups, strict=True):
            want = point_metrics(group["forecast"].to_numpy(), group["actual"].to_numpy(),
                                 group["mean_forecast"].to_numpy())
            assert (row["model"], row["code"]) == (model, code)
            for key, value in want.items():
                assert row[key] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), (model, code, key)
    assert got["n"].min() == 0 and got["pearson_ic"].isna().sum() >= 2  # the edge cases are there


def test_constant_forecast_gives_nan_ic_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = point_metrics(np.full(10, 0.001), np.linspace(-1, 1, 10))
        empty = point_metrics([np.nan], [1.0])
    assert math.isnan(out["pearson_ic"]) and math.isnan(out["rank_ic"])
    assert out["mse"] > 0
    assert empty["n"] == 0 and empty["n_dropped"] == 1 and math.isnan(empty["mse"])


# ------------------------------------------------------------------------------------ daily IC


def _random_panel(seed=1, n_dates=40, n_stocks=12):
    rng = np.random.default_rng(seed)
    dates = pd.date_range("2024-01-01", periods=n_dates, freq="B")
    codes = [f"s{i:02d}" for i in range(n_stocks)]
    actual = pd.DataFrame(rng.normal(size=(n_dates, n_stocks)), index=dates, columns=codes)
    forecast = 0.2 * actual + rng.normal(size=(n_dates, n_stocks))
    forecast = forecast.round(1)  # ties
    forecast = forecast.mask(rng.random(forecast.shape) < 0.2)
    actual = actual.mask(rng.random(actual.shape) < 0.1)
    forecast.iloc[3, :] = 0.5  # constant cross-section -> NaN
    forecast.iloc[5, 4:] = np.nan  # exactly 4 valid stocks
    forecast.iloc[5, :4] = [0.3, -0.1, 1.2, 0.4]
    actual.iloc[5, :4] = [0.5, 0.2, 0.9, -0.3]
    return forecast, actual


def _slow_daily_ic(forecast, actual, method, min_stocks):
    corr = stats.spearmanr if method == "spearman" else stats.pearsonr
    out = {}
    for date in forecast.index:
        f, y = forecast.loc[date], actual.loc[date]
        ok = f.notna() & y.notna()
        if ok.sum() < min_stocks or f[ok].nunique() < 2 or y[ok].nunique() < 2:
            continue
        out[date] = corr(f[ok], y[ok])[0]
    return pd.Series(out, dtype=float)


@pytest.mark.parametrize("method", ["spearman", "pearson"])
@pytest.mark.parametrize("min_stocks", [3, 5])
def test_daily_ic_matches_per_date_loop(method, min_stocks):
    forecast, actual = _random_panel()
    # extra date and stock in `actual` only: the inner alignment must ignore them
    actual_wide = actual.copy()
    actual_wide["extra"] = 1.0
    actual_wide.loc[pd.Timestamp("2030-01-01")] = 0.0
    got = daily_ic(forecast, actual_wide, method=method, min_stocks=min_stocks)
    expected = _slow_daily_ic(forecast, actual, method, min_stocks)
    assert list(got.index) == list(expected.index)
    np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=0, atol=1e-12)
    assert forecast.index[3] not in got.index
    assert (forecast.index[5] in got.index) == (min_stocks <= 4)


def test_daily_ic_min_stocks_boundary():
    dates = pd.date_range("2024-01-01", periods=2)
    f = pd.DataFrame([[1, 2, 3, 4, 5], [1, 2, 3, 4, np.nan]], index=dates, columns=list("abcde"))
    y = pd.DataFrame([[1, 2, 3, 5, 4], [4, 3, 2, 1, 0]], index=dates, columns=list("abcde"))
    got = daily_ic(f, y, min_stocks=5)
    assert list(got.index) == [dates[0]]
    assert got.iloc[0] == pytest.approx(0.9)  # one adjacent swap of 5: 1 - 6*2/(5*24)
    got4 = daily_ic(f, y, min_stocks=4)
    assert got4.iloc[1] == pytest.approx(-1.0)


def test_ic_summary_hand_worked():
    ic = pd.Series([0.1, -0.05, 0.2, 0.05, np.nan])
    out = ic_summary(ic)
    std = math.sqrt((0.025**2 + 0.125**2 + 0.125**2 + 0.025**2) / 3)
    assert out["n_days"] == 4
    assert out["mean_ic"] == pytest.approx(0.075)
    assert out["std_ic"] == pytest.approx(std)
    assert out["icir"] == pytest.approx(0.075 / std)
    assert out["icir_annual"] == pytest.approx(0.075 / std * math.sqrt(252))
    assert out["t_stat"] == pytest.approx(0.075 / std * 2.0)
    assert out["hit_rate"] == pytest.approx(0.75)


# ------------------------------------------------------------------------------------ Diebold-Mariano


@pytest.mark.parametrize("horizon", [1, 3])
def test_dm_uncorrected_matches_statsmodels_hac(horizon):
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(2)
    e_m, e_b = rng.normal(size=120), 1.1 * rng.normal(size=120)
    d = e_m**2 - e_b**2
    # DM's variance is the rectangular-kernel HAC with h-1 lags; for h=1 Bartlett (Newey-West)
    # with maxlags=0 is the same thing, for h>1 statsmodels' "uniform" kernel is the DM kernel
    kernel = "bartlett" if horizon == 1 else "uniform"
    fit = sm.OLS(d, np.ones_like(d)).fit(
        cov_type="HAC", cov_kwds={"maxlags": horizon - 1, "kernel": kernel, "use_correction": False}
    )
    out = diebold_mariano(e_m, e_b, horizon=horizon, use_correction=False)
    assert out["dm_stat"] == pytest.approx(fit.tvalues[0], rel=1e-10)
    assert out["p_value"] == pytest.approx(fit.pvalues[0], rel=1e-8)  # both normal
    assert out["mean_loss_diff"] == pytest.approx(d.mean())


def test_dm_hand_worked_horizon_three():
    e_m = np.array([1.0, 2, 0, 3, 1, 1])
    e_b = np.array([2.0, 1, 1, 2, 0, 0])
    # d = [-3, 3, -1, 5, 1, 1], mean 1, deviations u = [-4, 2, -2, 4, 0, 0]
    # gamma0 = 40/6; gamma1 = (-8 - 4 - 8 + 0 + 0)/6 = -20/6; gamma2 = (8 + 8 + 0 + 0)/6 = 16/6
    v = 40 / 6 + 2 * (-20 / 6 + 16 / 6)  # = 16/3
    raw = 1.0 / math.sqrt(v / 6)  # = 3/sqrt(8)
    factor = math.sqrt((6 + 1 - 6 + 3 * 2 / 6) / 6)  # = sqrt(1/3)
    stat = raw * factor
    assert stat == pytest.approx(math.sqrt(3 / 8))
    out = diebold_mariano(e_m, e_b, horizon=3)
    assert out["dm_stat"] == pytest.approx(stat)
    assert out["p_value"] == pytest.approx(2 * stats.t.sf(stat, df=5))
    assert out["p_value_better"] == pytest.approx(stats.t.cdf(stat, df=5))
    assert out["mean_loss_diff"] == pytest.approx(1.0)
    assert out["n"] == 6 and out["horizon"] == 3
    # h = 2: V = 40/6 - 40/6 = 0 -> NaN, no exception
    h2 = diebold_mariano(e_m, e_b, horizon=2)
    assert math.isnan(h2["dm_stat"]) and math.isnan(h2["p_value"]) and h2["mean_loss_diff"] == 1.0


def test_hln_correction_factor():
    assert hln_factor(6, 3) == pytest.approx(math.sqrt(1 / 3))
    assert hln_factor(100, 5) == pytest.approx(math.sqrt(0.912))  # (101 - 10 + 0.2) / 100
    assert hln_factor(50, 1) == pytest.approx(math.sqrt(49 / 50))
    rng = np.random.default_rng(3)
    e_m, e_b = rng.normal(size=100), rng.normal(size=100)
    corrected = diebold_mariano(e_m, e_b, horizon=5)
    raw = diebold_mariano(e_m, e_b, horizon=5, use_correction=False)
    assert corrected["dm_stat"] / raw["dm_stat"] == pytest.approx(math.sqrt(0.912))
    assert corrected["p_value"] == pytest.approx(2 * stats.t.sf(abs(corrected["dm_stat"]), df=99))


def test_dm_identical_forecasts_is_nan_without_error():
    e = np.random.default_rng(4).normal(size=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = diebold_mariano(e, e.copy())
    assert math.isnan(out["dm_stat"]) and math.isnan(out["p_value"]) and math.isnan(out["p_value_better"])
    assert out["mean_loss_diff"] == 0.0 and out["n"] == 50


def test_dm_detects_a_better_model():
    rng = np.random.default_rng(5)
    signal = rng.normal(scale=0.01, size=500)
    actual = signal + rng.normal(scale=0.02, size=500)
    e_model, e_zero = signal - actual, 0.0 - actual
    out = diebold_mariano(e_model, e_zero)
    assert out["dm_stat"] < -3
    assert out["p_value"] < 0.01 and out["p_value_better"] < 0.005
    rev = diebold_mariano(e_zero, e_model)
    assert rev["dm_stat"] == pytest.approx(-out["dm_stat"]) and rev["p_value_better"] > 0.995


def test_dm_series_alignment_drops_nan_pairs():
    a = pd.Series([1.0, 2.0, np.nan, 0.5], index=list("abcd"))
    b = pd.Series([0.5, 1.0, 1.0, 1.0], index=list("dbca"))
    # pairs on a, b, d: d_t = 1 - 1, 4 - 1, 0.25 - 0.25 -> [0, 3, 0]
    out = diebold_mariano(a, b)
    assert out["n"] == 3 and out["mean_loss_diff"] == pytest.approx(1.0)


# ------------------------------------------------------------------------------------ long frames


def _tiny_panel():
    dates = ["d1", "d2", "d3", "d4"]
    actual = {"A": [0.02, -0.03, 0.01, -0.02], "B": [-0.01, 0.01, 0.02, -0.02]}
    model = {"A": [0.01, -0.01, 0.00, 0.01], "B": [0.01, 0.02, 0.01, -0.03]}
    rows = []
    for i, date in enumerate(dates):
        for code in ("A", "B"):
            rows.append((date, code, "m", model[code][i], actual[code][i]))
            zero = np.nan if (date, code) == ("d2", "B") else 0.0
            rows.append((date, code, "zero", zero, actual[code][i]))
    rows.append(("d5", "A", "m", 0.01, 0.01))  # no baseline row: left out
    return pd.DataFrame(rows, columns=["date", "code", "model", "forecast", "actual"])


def test_loss_differential_pools_per_date():
    d = loss_differential(_tiny_panel(), "m", "zero")
    # per stock e_m^2 - y^2 (in 1e-4): d1 A 1-4, B 4-1; d2 A 4-9 (B has no baseline);
    # d3 A 1-1, B 1-4; d4 A 9-4, B 1-4
    expected = np.array([0.0, -5.0, -1.5, 1.0]) * 1e-4
    assert list(d.index) == ["d1", "d2", "d3", "d4"]
    np.testing.assert_allclose(d.to_numpy(), expected, rtol=0, atol=1e-15)


def test_dm_table_panel_matches_manual():
    table = dm_table(_tiny_panel(), "m", ["zero"])
    assert list(table.columns) == ["baseline", "dm_stat", "p_value", "p_value_better", "mean_loss_diff", "n"]
    row = table.iloc[0]
    # d = [0, -5, -1.5, 1] e-4, mean -1.375e-4, deviations [1.375, -3.625, -0.125, 2.375] e-4
    gamma0 = (1.375**2 + 3.625**2 + 0.125**2 + 2.375**2) / 4 * 1e-8
    stat = -1.375e-4 / math.sqrt(gamma0 / 4) * math.sqrt(3 / 4)
    assert row["baseline"] == "zero" and row["n"] == 4
    assert row["mean_loss_diff"] == pytest.approx(-1.375e-4)
    assert row["dm_stat"] == pytest.approx(stat)
    assert row["p_value"] == pytest.approx(2 * stats.t.sf(abs(stat), df=3))

    per_code = dm_table(_tiny_panel(), "m", ["zero"], by_code=True)
    assert list(per_code["code"]) == ["A", "B"]
    assert list(per_code["n"]) == [4, 3]
    np.testing.assert_allclose(per_code["mean_loss_diff"], [-0.75e-4, -1e-4], atol=1e-15)


def test_dm_table_rejects_mismatched_actuals():
    frame = _tiny_panel()
    frame.loc[(frame["model"] == "zero") & (frame["date"] == "d1"), "actual"] = 0.5
    with pytest.raises(ValueError, match="actual"):
        dm_table(frame, "m", ["zero"])


def test_summarise_per_fold_and_overall():
    rng = np.random.default_rng(6)
    dates = pd.date_range("2024-01-01", periods=60, freq="B")
    actual = rng.normal(scale=0.02, size=60)
    folds = np.repeat([0, 1], 30)
    forecasts = {"good": actual + rng.normal(scale=0.005, size=60), "zero": np.zeros(60)}
    frame = pd.concat([
        pd.DataFrame({"date": dates, "model": name, "fold": folds, "forecast": fc, "actual": actual,
                      "mean_forecast": 0.001})
        for name, fc in forecasts.items()
    ], ignore_index=True)
    per_fold = summarise(frame, by=("model", "fold"), baseline_for_dm=["zero"])
    assert len(per_fold) == 4
    row = per_fold[(per_fold["model"] == "good") & (per_fold["fold"] == 1)].iloc[0]
    sub = frame[(frame["model"] == "good") & (frame["fold"] == 1)]
    expected = point_metrics(sub["forecast"].to_numpy(), sub["actual"].to_numpy(), np.full(30, 0.001))
    for key, value in expected.items():
        assert row[key] == pytest.approx(value, nan_ok=True), key
    dm = diebold_mariano(sub["forecast"].to_numpy() - sub["actual"].to_numpy(), -sub["actual"].to_numpy())
    assert row["dm_stat_vs_zero"] == pytest.approx(dm["dm_stat"])
    assert row["p_value_better_vs_zero"] < 0.01
    zero_row = per_fold[per_fold["model"] == "zero"].iloc[0]
    assert math.isnan(zero_row["dm_stat_vs_zero"]) and zero_row["r2_oos_zero"] == 0.0

    overall = summarise(frame)
    assert list(overall["model"]) == ["good", "zero"] and list(overall["n"]) == [60, 60]


def test_summarise_panel_adds_daily_ic():
    forecast, actual = _random_panel(seed=7, n_dates=15, n_stocks=8)
    long = pd.DataFrame({
        "forecast": forecast.stack(future_stack=True), "actual": actual.stack(future_stack=True),
    }).rename_axis(["date", "code"]).reset_index().assign(model="m")
    out = summarise(long).iloc[0]
    expected = ic_summary(daily_ic(forecast, actual, method="spearman"))
    assert out["daily_rank_ic_mean"] == pytest.approx(expected["mean_ic"])
    assert out["daily_rank_ic_n_days"] == expected["n_days"]
    assert out["daily_ic_mean"] == pytest.approx(ic_summary(daily_ic(forecast, actual, "pearson"))["mean_ic"])
    assert out["n"] == int((forecast.notna() & actual.notna()).to_numpy().sum())


def test_grouped_rank_equals_pandas_groupby_rank():
    """Average ranks within groups, ties included, as pandas ranks them: with few groups (the
    16-bit radix path) and more than 2**16 (the general sort), rows in any order."""
    from forecaster.metrics.grouped import grouped_rank

    rng = np.random.default_rng(3)
    for n_groups, n in ((7, 5_000), (70_000, 200_000)):
        ids = rng.integers(0, n_groups, size=n)
        values = rng.normal(size=n).round(1)  # many ties
        want = pd.Series(values).groupby(ids).rank(method="average").to_numpy()
        np.testing.assert_array_equal(grouped_rank(ids, values), want)
    assert grouped_rank(np.array([4, 4, 4, 1]), np.array([2.0, 2.0, -1.0, 5.0])).tolist() == [2.5, 2.5, 1, 1]


@pytest.mark.parametrize("method", ["spearman", "pearson"])
def test_cross_section_ic_equals_daily_ic_day_by_day(method):
    """The IC of every (group, day) cross-section from long arrays is daily_ic's number for
    that day: NaN rows left out, ties, a constant day, a day with exactly 4 stocks (min 5: no
    IC), two groups sharing the days."""
    from forecaster.metrics.grouped import cross_section_ic

    panels = [_random_panel(seed=s, n_dates=30, n_stocks=10) for s in (11, 12)]
    longs = [pd.DataFrame({"forecast": f.stack(future_stack=True), "actual": a.stack(future_stack=True)})
             .rename_axis(["date", "code"]).reset_index().assign(group=k) for k, (f, a) in enumerate(panels)]
    long = pd.concat(longs, ignore_index=True).sample(frac=1.0, random_state=2)  # rows shuffled
    ids = long.groupby(["group", "date"], sort=True).ngroup().to_numpy()
    got = cross_section_ic(ids, long["forecast"].to_numpy(), long["actual"].to_numpy(), ids.max() + 1,
                           method=method)
    want = pd.concat([daily_ic(f, a, method=method).reindex(f.index) for f, a in panels], ignore_index=True)
    np.testing.assert_allclose(got, want.to_numpy(), rtol=0, atol=1e-12)
    assert np.isnan(got[[3, 5, 33, 35]]).all() and np.isfinite(got).sum() == want.notna().sum() >= 50


def test_cross_section_ic_reads_zero_without_signal():
    """A metric is a model too: 400 days of 300 stocks whose forecast is unrelated to the
    return (random-walk steps) read a mean IC within noise of zero, both methods."""
    from forecaster.metrics.grouped import cross_section_ic

    rng = np.random.default_rng(9)
    ids = np.repeat(np.arange(400), 300)
    forecast, actual = rng.normal(size=ids.size).cumsum(), rng.normal(size=ids.size)
    for method in ("spearman", "pearson"):
        ic = cross_section_ic(ids, forecast, actual, 400, method=method)
        assert abs(ic.mean()) < 3 * ic.std(ddof=1) / math.sqrt(400)
        assert abs(ic.mean()) < 0.01


def test_summarise_per_fold_panel_ic_equals_daily_ic_of_each_fold():
    """A (model, fold) row's daily IC summaries are ic_summary of daily_ic over that fold's
    days and stocks, for every model and fold."""
    forecast, actual = _random_panel(seed=4, n_dates=36, n_stocks=9)
    long = (pd.DataFrame({"forecast": forecast.stack(future_stack=True),
                          "actual": actual.stack(future_stack=True)})
            .rename_axis(["date", "code"]).reset_index())
    fold = long["date"].rank(method="dense").astype(int) // 13  # folds 0, 1, 2 by date
    frame = pd.concat([long.assign(model="a", fold=fold),
                       long.assign(model="b", fold=fold, forecast=-long["forecast"])], ignore_index=True)
    out = summarise(frame, by=("model", "fold"))
    assert len(out) == 6
    for row in out.to_dict("records"):
        days = long["date"][fold == row["fold"]].unique()
        sign = 1 if row["model"] == "a" else -1
        for prefix, method in (("daily_rank_ic", "spearman"), ("daily_ic", "pearson")):
            want = ic_summary(daily_ic(sign * forecast.loc[days], actual.loc[days], method=method))
            assert row[f"{prefix}_mean"] == pytest.approx(want["mean_ic"], abs=1e-12)
            assert row[f"{prefix}_ir"] == pytest.approx(want["icir"], abs=1e-9)
            assert row[f"{prefix}_n_days"] == want["n_days"]


def test_groups_of_gives_groupbys_groups_in_order():
    """One group's rows at a time, as ``groupby(sort=True, dropna=False)`` gives them, whether
    the frame is already grouped (slices) or not, a missing key last."""
    from forecaster.metrics import groups_of

    frame = pd.DataFrame({"model": ["b", "a", None, "b", "a", "c"], "x": range(6)})
    for f in (frame, frame.sort_values("model", kind="stable")):
        got = [(k, g) for k, g in groups_of(f, "model")]
        want = list(f.groupby("model", sort=True, dropna=False))
        assert [k for k, _ in got][:3] == ["a", "b", "c"] and pd.isna(got[3][0]) and len(got) == 4
        for (_, g), (_, w) in zip(got, want, strict=True):
            pd.testing.assert_frame_equal(g, w)
