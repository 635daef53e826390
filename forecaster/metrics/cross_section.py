"""Cross-sectional skill: per-day information coefficients across stocks, their summary (mean,
ICIR, t), the paired IC-difference test, quantile portfolios and IC by horizon.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from forecaster.metrics.grouped import cross_section_ic
from forecaster.metrics.hac import corr, hac_mean_test

TRADING_DAYS = 252


# --------------------------------------------------------------------------------------------------
# cross-sectional IC


def daily_ic(forecast: pd.DataFrame, actual: pd.DataFrame, method: str = "spearman",
             min_stocks: int = 5) -> pd.Series:
    """Cross-sectional IC per date: correlation across stocks of forecast and actual.

    Args:
        forecast, actual: ``[dates, stocks]`` frames (index = date, one column per stock); both
            are aligned on index and columns (inner join).
        method: ``"spearman"`` (rank IC; average ranks for ties, ranked over the stocks valid in
            both frames that day) or ``"pearson"``.
        min_stocks: dates with fewer valid (both non-NaN) stocks are dropped.

    Returns:
        Series indexed by date (dates with too few stocks or a constant cross-section dropped).
        Vectorised over dates: each date's row is one cross-section of
        :func:`~forecaster.metrics.grouped.cross_section_ic` (the one implementation, also
        used on long frames).
    """
    f_df, a_df = forecast.align(actual, join="inner")
    n_dates, n_stocks = f_df.shape
    ic = cross_section_ic(np.repeat(np.arange(n_dates), n_stocks), f_df.to_numpy(dtype=float).ravel(),
                          a_df.to_numpy(dtype=float).ravel(), n_dates, method=method, min_stocks=min_stocks)
    result = pd.Series(ic, index=f_df.index, name=f"{method}_ic")
    return result[~np.isnan(ic)]


def ic_summary(ic: pd.Series) -> dict[str, float]:
    """Summary of a daily IC series (NaNs ignored).

    Returns:
        ``mean_ic``, ``std_ic`` (sample, ddof=1), ``icir = mean/std``,
        ``icir_annual = icir * sqrt(252)``, ``t_stat = mean / (std / sqrt(n))``,
        ``hit_rate`` = share of days with IC > 0, ``n_days``.
    """
    values = np.asarray(ic, dtype=float)
    values = values[~np.isnan(values)]
    n = len(values)
    out = {"mean_ic": math.nan, "std_ic": math.nan, "icir": math.nan, "icir_annual": math.nan,
           "t_stat": math.nan, "hit_rate": math.nan, "n_days": n}
    if n == 0:
        return out
    mean = float(values.mean())
    out["mean_ic"] = mean
    out["hit_rate"] = float((values > 0).mean())
    if n >= 2:
        std = float(values.std(ddof=1))
        out["std_ic"] = std
        if std > 0:
            out["icir"] = mean / std
            out["icir_annual"] = mean / std * math.sqrt(TRADING_DAYS)
            out["t_stat"] = mean / (std / math.sqrt(n))
    return out


# --------------------------------------------------------------------------------------------------
# cross-section: paired IC test, quantile portfolios, IC by horizon


def ic_difference_test(ic_model: pd.Series, ic_baseline: pd.Series, lags: int | None = None,
                       horizon: int = 1) -> dict[str, float]:
    """Paired Newey-West test that two daily IC series have the same mean.

    Args:
        ic_model, ic_baseline: daily IC series indexed by date (e.g. from :func:`daily_ic`); only
            the dates both have with both values non-NaN are used (inner join), in date order.
        lags: HAC lags; ``None`` = ``max(horizon - 1, floor(4 (n/100)^(2/9)))``
            (:func:`newey_west_lags`). Capped at ``n - 1``.
        horizon: label horizon in trading days (overlapping ``h``-day labels need ``h - 1`` lags).

    Formulas:
        ``d_t = ic_model_t - ic_baseline_t``, Bartlett weights ``w_k = 1 - k/(L+1)``,
        ``V = gamma_0 + 2 sum_{k=1}^{L} w_k gamma_k`` (autocovariances divided by n),
        ``t = mean(d) / sqrt(V / n)``, normal p-values; identical to statsmodels' OLS of d on a
        constant with ``cov_type="HAC", cov_kwds={"maxlags": L, "use_correction": False}``.

    Returns:
        ``mean_diff``, ``t_stat``, ``p_value`` (two-sided), ``p_value_greater`` (one-sided,
        H1: model IC > baseline IC), ``n_days``, ``lags``, ``mean_model`` and ``mean_baseline``
        (each series' mean over the common days). With fewer than 3 common days, or a
        constant difference (identical series give ``mean_diff = 0``), ``t_stat`` and the
        p-values are NaN (not 0: the variance is zero, the statistic undefined).
    """
    both = pd.concat([pd.Series(ic_model, dtype=float), pd.Series(ic_baseline, dtype=float)],
                     axis=1, join="inner").dropna().sort_index(kind="stable")
    d = (both.iloc[:, 0] - both.iloc[:, 1]).to_numpy(dtype=float)
    res = hac_mean_test(d, lags, horizon)
    return {"mean_diff": res["mean"], "t_stat": res["t_stat"], "p_value": res["p_value"],
            "p_value_greater": res["p_value_greater"], "n_days": res["n"], "lags": res["lags"],
            "mean_model": float(both.iloc[:, 0].mean()) if len(both) else math.nan,
            "mean_baseline": float(both.iloc[:, 1].mean()) if len(both) else math.nan}


def quantile_returns(forecast: pd.DataFrame, actual: pd.DataFrame, n_quantiles: int = 5,
                     min_stocks: int | None = None) -> pd.DataFrame:
    """Mean realised return per forecast quantile, per day.

    Args:
        forecast, actual: ``[dates, stocks]`` frames, aligned on index and columns (inner join).
        n_quantiles: number of groups.
        min_stocks: days with fewer stocks valid (non-NaN) in both frames are dropped; default
            ``n_quantiles``, and never fewer than ``n_quantiles`` (so no group is empty).

    Each day the ``n`` valid stocks are ranked by forecast (ties broken by column order, so the
    result is deterministic) and rank ``r = 1..n`` goes to group ``floor((r-1) Q / n) + 1``:
    groups as equal as possible (sizes differ by at most one), 1 = lowest forecast. Vectorised
    over days.

    Returns:
        ``[date x quantile]`` frame (columns ``1..Q``) of the mean ``actual`` per group.
    """
    q = int(n_quantiles)
    if q != n_quantiles or q < 1:
        raise ValueError(f"n_quantiles must be a positive integer, got {n_quantiles!r}")
    min_n = max(q if min_stocks is None else int(min_stocks), q, 1)
    f_df, a_df = forecast.align(actual, join="inner")
    f_df, a_df = f_df.astype(float), a_df.astype(float)
    valid = f_df.notna().to_numpy() & a_df.notna().to_numpy()
    ranks = f_df.where(valid).rank(axis=1, method="first").to_numpy(dtype=float)
    n = valid.sum(axis=1)
    keep = n >= min_n
    ranks, valid, n = ranks[keep], valid[keep], n[keep]
    a = np.where(valid, a_df.to_numpy(dtype=float)[keep], 0.0)
    # integer arithmetic: no rounding at the group edges
    r0 = np.nan_to_num(ranks, nan=1.0).astype(np.int64) - 1  # 0-based rank among the valid stocks
    bucket = np.where(valid, r0 * q // n[:, None], -1)
    means = np.empty((len(n), q))
    for g in range(q):  # loop over groups, not days
        member = bucket == g
        means[:, g] = (a * member).sum(axis=1) / member.sum(axis=1)
    columns = pd.Index(range(1, q + 1), name="quantile")
    return pd.DataFrame(means, index=f_df.index[keep], columns=columns)


def quantile_summary(qret: pd.DataFrame, horizon: int = 1) -> dict:
    """Summary of a :func:`quantile_returns` frame.

    Returns:
        ``mean``: list of the mean return per quantile (lowest forecast first, NaNs skipped);
        ``spread``: mean over days of top minus bottom quantile; ``spread_t_stat``,
        ``spread_p_value`` (two-sided normal), ``spread_p_value_greater`` (H1: spread > 0) from
        the Newey-West test of :func:`ic_difference_test` with lags
        ``max(horizon - 1, floor(4 (n/100)^(2/9)))``; ``lags``; ``monotonicity``: Spearman
        correlation of quantile index and mean return (1 = increasing; NaN if the means are
        constant or fewer than 2 are finite); ``n_days``: days with both extreme quantiles.
    """
    means = qret.astype(float).mean(axis=0)
    spread_series = (qret.iloc[:, -1] - qret.iloc[:, 0]).astype(float).dropna().sort_index(kind="stable")
    res = hac_mean_test(spread_series.to_numpy(dtype=float), None, horizon)
    finite = means.to_numpy(dtype=float)
    idx = np.arange(1, len(finite) + 1)
    ok = np.isfinite(finite)
    mono = math.nan
    if ok.sum() >= 2 and np.ptp(finite[ok]) > 0:
        # Pearson of the ranks: exactly 1.0 for strictly increasing means (scipy may give 1 - eps)
        mono = corr(stats.rankdata(idx[ok]), stats.rankdata(finite[ok]))
    return {"mean": [float(x) for x in finite], "spread": res["mean"], "spread_t_stat": res["t_stat"],
            "spread_p_value": res["p_value"], "spread_p_value_greater": res["p_value_greater"],
            "lags": res["lags"], "monotonicity": mono, "n_days": res["n"]}


def ic_by_horizon(forecast: pd.DataFrame, labels: dict[int, pd.DataFrame]) -> pd.Series:
    """Mean daily rank IC (:func:`daily_ic`, Spearman) of one forecast frame against each
    horizon's label frame. Returns a Series indexed by horizon (sorted); NaN where no day has
    enough stocks."""
    values = {h: daily_ic(forecast, labels[h], method="spearman").mean() for h in sorted(labels)}
    out = pd.Series(values, dtype=float, name="mean_rank_ic")
    out.index.name = "horizon"
    return out
