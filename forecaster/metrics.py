"""Out-of-sample forecast evaluation: point metrics, information coefficients and Diebold-Mariano.

All functions take out-of-sample forecasts of daily log returns and the realised returns.

* :func:`point_metrics` -- MSE, MAE, out-of-sample R^2 against the zero and the historical-mean
  forecasts, directional accuracy with an exact binomial p-value, Pearson and rank IC over time.
* :func:`daily_ic` / :func:`ic_summary` -- cross-sectional (per-day, across stocks) IC of a panel
  and its mean, ICIR and t-statistic.
* :func:`diebold_mariano` -- DM test of equal predictive accuracy (HAC variance with ``h - 1`` lags,
  Harvey-Leybourne-Newbold small-sample correction).
* :func:`summarise`, :func:`dm_table`, :func:`loss_differential` -- the same on a long frame of
  predictions (columns ``date, model, forecast, actual`` and optionally ``fold, code,
  mean_forecast``), per model / fold.

Missing values: pairs where the forecast or the actual is NaN are dropped (and counted) rather than
propagated, because walk-forward folds and stock panels routinely have holes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

TRADING_DAYS = 252

_POINT_KEYS = (
    "n", "n_dropped", "mse", "mae", "r2_oos_zero", "r2_oos_mean", "hit_rate", "n_directional",
    "binomial_p", "pearson_ic", "rank_ic",
)
_DM_COLUMNS = ("baseline", "dm_stat", "p_value", "p_value_better", "mean_loss_diff", "n")


# --------------------------------------------------------------------------------------------------
# alignment helpers


def _to_1d(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def _align_pair(first, second, names: tuple[str, str], extra=None):
    """Align two 1-D inputs (and an optional third aligned like ``first``) and drop NaN pairs.

    Two Series are aligned on their index (outer join, so a date present in only one of them
    counts as a dropped pair); anything else is aligned by position. ``extra`` follows ``first``:
    a Series is aligned on its index, an array by position with ``first``. NaNs in ``extra`` do
    not drop rows.

    Returns ``(a, b, extra_or_None, n_dropped)`` as float arrays.
    """
    both_series = isinstance(first, pd.Series) and isinstance(second, pd.Series)
    if both_series and not first.index.equals(second.index):
        for s, name in ((first, names[0]), (second, names[1])):
            if not s.index.is_unique:
                raise ValueError(f"{name} has a duplicated index; cannot align on it")
        index = first.index.union(second.index)
        a = first.reindex(index).to_numpy(dtype=float)
        b = second.reindex(index).to_numpy(dtype=float)
        if extra is not None:
            if not isinstance(extra, pd.Series):
                # positional with `first`: give it first's index before re-indexing
                extra = pd.Series(_to_1d(extra, "extra"), index=first.index)
            extra = extra.reindex(index)
    else:
        a, b = _to_1d(first, names[0]), _to_1d(second, names[1])
        if len(a) != len(b):
            raise ValueError(f"{names[0]} and {names[1]} differ in length: {len(a)} != {len(b)}")
        index = first.index if isinstance(first, pd.Series) else None
        if isinstance(extra, pd.Series) and index is not None and not extra.index.equals(index):
            extra = extra.reindex(index)
    if extra is not None:
        extra = _to_1d(extra, "extra")
        if len(extra) != len(a):
            raise ValueError(f"extra input has length {len(extra)}, expected {len(a)}")
    keep = ~(np.isnan(a) | np.isnan(b))
    n_dropped = int((~keep).sum())
    return a[keep], b[keep], (None if extra is None else extra[keep]), n_dropped


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation; NaN (silently) when n < 2 or either input is constant."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    xc, yc = x - x.mean(), y - y.mean()
    r = float(np.dot(xc, yc) / math.sqrt(np.dot(xc, xc) * np.dot(yc, yc)))
    return float(np.clip(r, -1.0, 1.0))


# --------------------------------------------------------------------------------------------------
# time-series point metrics


def point_metrics(forecast, actual, mean_forecast=None) -> dict[str, float]:
    """Point-forecast metrics of ``forecast`` against ``actual``.

    Args:
        forecast, actual: 1-D array-likes of equal length aligned by position, or two Series
            aligned on their index. Pairs where either is NaN are dropped and counted.
        mean_forecast: optional historical-mean forecast aligned like ``forecast`` (each value
            made from data before that day). Rows where it is NaN are left out of
            ``r2_oos_mean`` only.

    Returns:
        dict with ``n``, ``n_dropped``,
        ``mse = mean((f - y)^2)``, ``mae = mean(|f - y|)``,
        ``r2_oos_zero = 1 - sum((y - f)^2) / sum(y^2)``,
        ``r2_oos_mean = 1 - sum((y - f)^2) / sum((y - m)^2)`` (NaN without ``mean_forecast``),
        ``hit_rate`` = share of sign(f) == sign(y) over the ``n_directional`` days with f != 0
        and y != 0, ``binomial_p`` = two-sided exact binomial test of ``hit_rate`` vs 0.5,
        ``pearson_ic`` and ``rank_ic`` (Spearman) over time (NaN if either input is constant).
    """
    f, y, m, n_dropped = _align_pair(forecast, actual, ("forecast", "actual"), extra=mean_forecast)
    out = dict.fromkeys(_POINT_KEYS, math.nan)
    n = len(f)
    out.update(n=n, n_dropped=n_dropped, n_directional=0)
    if n == 0:
        return out

    err = f - y
    sse = float(np.dot(err, err))
    out["mse"] = sse / n
    out["mae"] = float(np.abs(err).mean())
    sst_zero = float(np.dot(y, y))
    out["r2_oos_zero"] = 1.0 - sse / sst_zero if sst_zero > 0 else math.nan
    if m is not None:
        ok = ~np.isnan(m)
        # both SSEs over the same days, so the ratio compares like with like
        sse_model = float(np.sum(err[ok] ** 2))
        sse_mean = float(np.sum((y[ok] - m[ok]) ** 2))
        out["r2_oos_mean"] = 1.0 - sse_model / sse_mean if sse_mean > 0 else math.nan

    directional = (f != 0) & (y != 0)
    n_dir = int(directional.sum())
    out["n_directional"] = n_dir
    if n_dir > 0:
        hits = int((np.sign(f[directional]) == np.sign(y[directional])).sum())
        out["hit_rate"] = hits / n_dir
        out["binomial_p"] = float(stats.binomtest(hits, n_dir, 0.5, alternative="two-sided").pvalue)

    out["pearson_ic"] = _corr(f, y)
    out["rank_ic"] = _corr(stats.rankdata(f), stats.rankdata(y))
    return out


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
        Vectorised over dates: ranks via ``DataFrame.rank(axis=1)``, row-wise correlation.
    """
    if method not in ("spearman", "pearson"):
        raise ValueError(f"method must be 'spearman' or 'pearson', got {method!r}")
    f_df, a_df = forecast.align(actual, join="inner")
    f_df, a_df = f_df.astype(float), a_df.astype(float)
    valid = f_df.notna().to_numpy() & a_df.notna().to_numpy()
    # mask first: the ranks (and means) must use only the stocks valid in both frames that day
    f_df, a_df = f_df.where(valid), a_df.where(valid)
    if method == "spearman":
        f_df, a_df = f_df.rank(axis=1), a_df.rank(axis=1)
    x, y = f_df.to_numpy(dtype=float), a_df.to_numpy(dtype=float)

    n = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        xc = np.where(valid, x - np.where(valid, x, 0.0).sum(axis=1, keepdims=True) / n[:, None], 0.0)
        yc = np.where(valid, y - np.where(valid, y, 0.0).sum(axis=1, keepdims=True) / n[:, None], 0.0)
        ic = (xc * yc).sum(axis=1) / np.sqrt((xc * xc).sum(axis=1) * (yc * yc).sum(axis=1))

    def constant(z: np.ndarray) -> np.ndarray:
        # exact max == min test: a centred constant row can leave rounding noise, not zero
        return np.where(valid, z, -np.inf).max(axis=1) == np.where(valid, z, np.inf).min(axis=1)

    ok = (n >= max(int(min_stocks), 2)) & ~constant(x) & ~constant(y) & np.isfinite(ic)
    result = pd.Series(np.clip(ic, -1.0, 1.0), index=f_df.index, name=f"{method}_ic")
    return result[ok]


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
# Diebold-Mariano


def hln_factor(n: int, horizon: int) -> float:
    """Harvey-Leybourne-Newbold (1997) factor ``sqrt((n + 1 - 2h + h(h-1)/n) / n)``."""
    arg = (n + 1 - 2 * horizon + horizon * (horizon - 1) / n) / n
    return math.sqrt(arg) if arg > 0 else math.nan


def _long_run_variance(d: np.ndarray, lags: int, kernel: str = "bartlett") -> float:
    """HAC long-run variance of a 1-D series ``d`` (no NaNs, order = time).

    ``gamma_k = sum_t (d_t - dbar)(d_{t-k} - dbar) / n`` for ``k = 0..lags`` and
    ``V = gamma_0 + 2 sum_{k=1}^{lags} w_k gamma_k``, with Bartlett (Newey-West) weights
    ``w_k = 1 - k / (lags + 1)`` or rectangular weights ``w_k = 1`` (the DM kernel).
    ``V / n`` is the HAC variance of the mean of ``d`` (statsmodels' ``cov_type="HAC"`` on a
    constant with ``use_correction=False``). Bartlett's V is never negative; the rectangular one
    can be.
    """
    if kernel not in ("bartlett", "rectangular"):
        raise ValueError(f"kernel must be 'bartlett' or 'rectangular', got {kernel!r}")
    n = len(d)
    u = d - d.mean()
    gammas = [float(np.dot(u[k:], u[: n - k])) / n for k in range(int(lags) + 1)]
    if kernel == "rectangular":
        return gammas[0] + 2.0 * sum(gammas[1:])
    return gammas[0] + 2.0 * sum((1.0 - k / (lags + 1)) * g for k, g in enumerate(gammas[1:], start=1))


def _dm_from_differential(d, horizon: int, use_correction: bool = True) -> dict[str, float]:
    """DM test on a loss-differential series ``d`` (NaNs dropped, order = time)."""
    if int(horizon) != horizon or horizon < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    horizon = int(horizon)
    d = _to_1d(d, "d")
    d = d[~np.isnan(d)]
    n = len(d)
    out = {"dm_stat": math.nan, "p_value": math.nan, "p_value_better": math.nan,
           "mean_loss_diff": float(d.mean()) if n else math.nan, "n": n, "horizon": horizon}
    # need the h-1 autocovariances and a non-degenerate d (identical forecasts give d == 0)
    if n < 2 or horizon >= n or np.ptp(d) == 0:
        return out
    # autocovariances divided by n (DM 1995), rectangular weights over lags 1..h-1
    v = _long_run_variance(d, horizon - 1, kernel="rectangular")
    if not v > 0:
        return out
    stat = float(d.mean() / math.sqrt(v / n))
    if use_correction:
        factor = hln_factor(n, horizon)
        if math.isnan(factor):
            return out
        stat *= factor
        dist = stats.t(df=n - 1)
    else:
        dist = stats.norm()  # the original DM (1995) asymptotic normal test
    out["dm_stat"] = stat
    out["p_value"] = float(2.0 * dist.sf(abs(stat)))
    out["p_value_better"] = float(dist.cdf(stat))
    return out


def diebold_mariano(e_model, e_benchmark, horizon: int = 1, power: float = 2, *,
                    use_correction: bool = True) -> dict[str, float]:
    """Diebold-Mariano test of equal predictive accuracy of two forecasts of the same targets.

    Args:
        e_model, e_benchmark: forecast errors, 1-D arrays (by position) or Series (aligned on
            the index); pairs with a NaN are dropped.
        horizon: forecast horizon h; the long-run variance uses lags 1..h-1.
        power: loss ``|e|^power`` (2 = squared error).
        use_correction: apply the Harvey-Leybourne-Newbold small-sample correction and Student-t
            with n-1 df (default). False gives the original DM statistic with normal p-values.

    Formulas:
        ``d_t = |e_model_t|^p - |e_benchmark_t|^p``, ``gamma_k = sum_t (d_t - dbar)(d_{t-k} - dbar) / n``,
        ``V = gamma_0 + 2 sum_{k=1}^{h-1} gamma_k``, ``DM = dbar / sqrt(V / n)``;
        corrected ``DM * sqrt((n + 1 - 2h + h(h-1)/n) / n)``.

    Returns:
        ``dm_stat`` (negative = model has the lower loss), ``p_value`` (two-sided),
        ``p_value_better`` (one-sided, H1: model better, = CDF(stat)), ``mean_loss_diff``,
        ``n``, ``horizon``. NaN statistic and p-values when V <= 0 (e.g. identical forecasts).
    """
    a, b, _, _ = _align_pair(e_model, e_benchmark, ("e_model", "e_benchmark"))
    d = np.abs(a) ** power - np.abs(b) ** power
    return _dm_from_differential(d, horizon, use_correction=use_correction)


# --------------------------------------------------------------------------------------------------
# long-frame conveniences


def _keys(predictions: pd.DataFrame) -> list[str]:
    return ["date", "code"] if "code" in predictions.columns else ["date"]


def _merged_losses(predictions: pd.DataFrame, model: str, baseline: str, power: float = 2) -> pd.DataFrame:
    """Rows where both ``model`` and ``baseline`` forecast the same (date[, code]), with column
    ``d = |f_model - y|^p - |f_baseline - y|^p``, sorted by the keys."""
    keys = _keys(predictions)
    cols = [*keys, "forecast", "actual"]
    m = predictions.loc[predictions["model"] == model, cols]
    b = predictions.loc[predictions["model"] == baseline, cols]
    for frame, name in ((m, model), (b, baseline)):
        if frame.duplicated(keys).any():
            raise ValueError(f"model {name!r} has several rows per {keys}; filter (e.g. by fold) first")
    merged = m.merge(b, on=keys, how="inner", suffixes=("_model", "_base"))
    merged = merged.dropna(subset=["forecast_model", "forecast_base", "actual_model"])
    y, y_base = merged["actual_model"].to_numpy(float), merged["actual_base"].to_numpy(float)
    # both forecasts must target the same realised return, else the comparison is meaningless
    if not np.allclose(y, y_base, equal_nan=True):
        raise ValueError(f"models {model!r} and {baseline!r} disagree on 'actual' for the same rows")
    merged = merged.assign(
        d=np.abs(merged["forecast_model"].to_numpy(float) - y) ** power
        - np.abs(merged["forecast_base"].to_numpy(float) - y) ** power
    )
    return merged.sort_values(keys, kind="stable").reset_index(drop=True)


def loss_differential(predictions: pd.DataFrame, model: str, baseline: str, power: float = 2) -> pd.Series:
    """Loss differential ``d_t`` of ``model`` minus ``baseline``, indexed by date (sorted).

    Without a ``code`` column: one row per date, ``d_t = |e_model|^p - |e_base|^p``.
    With a ``code`` column (panel): ``d_t`` = mean over the stocks both models forecast on date t.
    Errors of different stocks on the same day are strongly correlated (market moves), so they
    are not independent observations; pooling per day gives one time series whose serial
    dependence the DM HAC variance handles.
    """
    merged = _merged_losses(predictions, model, baseline, power)
    d = merged.groupby("date", sort=True)["d"].mean()
    return d.rename("loss_diff")


def dm_table(predictions: pd.DataFrame, model: str, baselines: list[str], horizon: int = 1,
             by_code: bool = False) -> pd.DataFrame:
    """Diebold-Mariano test (squared-error loss) of ``model`` against each of ``baselines``.

    Args:
        predictions: long frame with ``date, model, forecast, actual`` and optionally ``code``.
            Only (date[, code]) rows forecast by both models are used. Filter by fold first for
            per-fold tests.
        horizon: forecast horizon for the HAC lags and the HLN correction.
        by_code: panel only; one test per stock on its own time series instead of the pooled
            per-date differential (see :func:`loss_differential`). Adds a ``code`` column.

    Returns:
        One row per baseline (per baseline and stock with ``by_code``): ``baseline, dm_stat,
        p_value, p_value_better, mean_loss_diff, n`` (n = number of dates).
    """
    if isinstance(baselines, str):
        baselines = [baselines]
    rows = []
    for base in baselines:
        if by_code and "code" in predictions.columns:
            merged = _merged_losses(predictions, model, base)
            for code, group in merged.groupby("code", sort=True):
                res = _dm_from_differential(group["d"].to_numpy(), horizon)
                rows.append({"baseline": base, "code": code, **{k: res[k] for k in _DM_COLUMNS[1:]}})
        else:
            res = _dm_from_differential(loss_differential(predictions, model, base).to_numpy(), horizon)
            rows.append({"baseline": base, **{k: res[k] for k in _DM_COLUMNS[1:]}})
    columns = list(_DM_COLUMNS)
    if by_code and "code" in predictions.columns:
        columns.insert(1, "code")
    return pd.DataFrame(rows, columns=columns)


def _panel_ic_columns(group: pd.DataFrame) -> dict[str, float]:
    forecast = group.pivot(index="date", columns="code", values="forecast")
    actual = group.pivot(index="date", columns="code", values="actual")
    out: dict[str, float] = {}
    for prefix, method in (("daily_ic", "pearson"), ("daily_rank_ic", "spearman")):
        s = ic_summary(daily_ic(forecast, actual, method=method))
        out.update({
            f"{prefix}_mean": s["mean_ic"], f"{prefix}_std": s["std_ic"], f"{prefix}_ir": s["icir"],
            f"{prefix}_ir_annual": s["icir_annual"], f"{prefix}_t": s["t_stat"],
            f"{prefix}_hit_rate": s["hit_rate"], f"{prefix}_n_days": s["n_days"],
        })
    return out


def summarise(predictions: pd.DataFrame, by: Sequence[str] = ("model",), baseline_for_dm=None, *,
              horizon: int = 1) -> pd.DataFrame:
    """One row of metrics per group of a long prediction frame.

    Args:
        predictions: columns ``date, model, forecast, actual``; optional ``fold``, ``code``,
            ``mean_forecast`` (historical-mean forecast of the same row, for ``r2_oos_mean``).
        by: grouping columns, e.g. ``("model",)`` (overall) or ``("model", "fold")`` (per fold).
        baseline_for_dm: optional model name or list of names; adds ``dm_stat_vs_<b>``,
            ``p_value_vs_<b>`` and ``p_value_better_vs_<b>`` from :func:`dm_table` within each
            group's slice of the other ``by`` columns (NaN on the baseline's own row). Needs
            ``"model"`` in ``by``.
        horizon: forecast horizon for the DM columns.

    Returns:
        The ``by`` columns plus the :func:`point_metrics` keys (pooled over all rows of the
        group). With a ``code`` column (not among ``by``), also the per-day cross-sectional IC summaries
        ``daily_ic_*`` (Pearson) and ``daily_rank_ic_*`` (Spearman): ``_mean, _std, _ir,
        _ir_annual, _t, _hit_rate, _n_days``.
    """
    by = [by] if isinstance(by, str) else list(by)
    if isinstance(baseline_for_dm, str):
        baseline_for_dm = [baseline_for_dm]
    if baseline_for_dm and "model" not in by:
        raise ValueError("baseline_for_dm needs 'model' among the `by` columns")
    # Cross-sectional IC needs several stocks a day: not within one stock's group.
    panel = "code" in predictions.columns and "code" not in by
    has_mean = "mean_forecast" in predictions.columns
    rows = []
    for key, group in predictions.groupby(by, sort=True, dropna=False):
        labels = dict(zip(by, key, strict=True))
        row = dict(labels)
        row.update(point_metrics(
            group["forecast"].to_numpy(float), group["actual"].to_numpy(float),
            group["mean_forecast"].to_numpy(float) if has_mean else None,
        ))
        if panel:
            row.update(_panel_ic_columns(group))
        for base in baseline_for_dm or []:
            res = dict.fromkeys(("dm_stat", "p_value", "p_value_better"), math.nan)
            if labels["model"] != base:
                # the same slice of every other `by` column (e.g. the same fold), all models
                mask = np.ones(len(predictions), dtype=bool)
                for col, value in labels.items():
                    if col != "model":
                        column = predictions[col]
                        mask &= (column.isna() if pd.isna(value) else column == value).to_numpy()
                table = dm_table(predictions[mask], labels["model"], [base], horizon=horizon)
                res = table.iloc[0].to_dict()
            row.update({f"{k}_vs_{base}": res[k] for k in ("dm_stat", "p_value", "p_value_better")})
        rows.append(row)
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------------------
# cross-section: paired IC test, quantile portfolios, IC by horizon


def newey_west_lags(n: int, horizon: int = 1) -> int:
    """Default HAC lags: ``max(horizon - 1, floor(4 (n / 100)^(2/9)))``.

    The Newey-West (1994) rule of thumb, raised to ``h - 1`` because overlapping ``h``-day labels
    make consecutive daily statistics MA(h-1) even without any predictability.
    """
    if int(horizon) != horizon or horizon < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    return max(int(horizon) - 1, math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0))) if n > 0 else int(horizon) - 1


def _hac_mean_test(d: np.ndarray, lags: int | None, horizon: int) -> dict[str, float]:
    """Newey-West (Bartlett) t-test of ``mean(d) == 0``; ``d`` without NaNs, in time order.

    Returns ``mean, t_stat, p_value`` (two-sided normal), ``p_value_greater`` (H1: mean > 0),
    ``n``, ``lags``. Fewer than 3 observations, or a zero variance (e.g. ``d`` constant): NaN
    statistic and p-values. Lags are capped at ``n - 1``.
    """
    n = len(d)
    if lags is None:
        lags = newey_west_lags(n, horizon)
    elif int(lags) != lags or lags < 0:
        raise ValueError(f"lags must be a non-negative integer or None, got {lags!r}")
    lags = int(min(int(lags), max(n - 1, 0)))
    out = {"mean": float(d.mean()) if n else math.nan, "t_stat": math.nan, "p_value": math.nan,
           "p_value_greater": math.nan, "n": n, "lags": lags}
    # a constant d (up to rounding) has no variance: the t-statistic is undefined, not huge
    if n < 3 or np.ptp(d) <= 8 * np.finfo(float).eps * float(np.abs(d).max()):
        return out
    v = _long_run_variance(d, lags, kernel="bartlett")
    if not v > 0:
        return out
    t = float(d.mean() / math.sqrt(v / n))
    out.update(t_stat=t, p_value=float(2.0 * stats.norm.sf(abs(t))), p_value_greater=float(stats.norm.sf(t)))
    return out


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
        H1: model IC > baseline IC), ``n_days``, ``lags``. With fewer than 3 common days, or a
        constant difference (identical series give ``mean_diff = 0``), ``t_stat`` and the
        p-values are NaN (not 0: the variance is zero, the statistic undefined).
    """
    both = pd.concat([pd.Series(ic_model, dtype=float), pd.Series(ic_baseline, dtype=float)],
                     axis=1, join="inner").dropna().sort_index(kind="stable")
    d = (both.iloc[:, 0] - both.iloc[:, 1]).to_numpy(dtype=float)
    res = _hac_mean_test(d, lags, horizon)
    return {"mean_diff": res["mean"], "t_stat": res["t_stat"], "p_value": res["p_value"],
            "p_value_greater": res["p_value_greater"], "n_days": res["n"], "lags": res["lags"]}


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
    res = _hac_mean_test(spread_series.to_numpy(dtype=float), None, horizon)
    finite = means.to_numpy(dtype=float)
    idx = np.arange(1, len(finite) + 1)
    ok = np.isfinite(finite)
    mono = math.nan
    if ok.sum() >= 2 and np.ptp(finite[ok]) > 0:
        # Pearson of the ranks: exactly 1.0 for strictly increasing means (scipy may give 1 - eps)
        mono = _corr(stats.rankdata(idx[ok]), stats.rankdata(finite[ok]))
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
