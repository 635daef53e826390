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
    u = d - d.mean()
    # autocovariances divided by n (DM 1995), rectangular weights over lags 1..h-1
    gammas = [float(np.dot(u[k:], u[: n - k])) / n for k in range(horizon)]
    v = gammas[0] + 2.0 * sum(gammas[1:])
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
