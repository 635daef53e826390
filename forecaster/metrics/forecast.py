"""Point-forecast evaluation of daily log returns on a long frame of predictions.

* :func:`point_metrics` -- MSE, MAE, out-of-sample R^2 against the zero and the historical-mean
  forecasts, directional accuracy with an exact binomial p-value, Pearson and rank IC over time.
* :func:`summarise`, :func:`dm_table`, :func:`loss_differential` -- the same on a long frame of
  predictions (columns ``date, model, forecast, actual`` and optionally ``fold, code,
  mean_forecast``), per model / fold, with Diebold-Mariano tests.
* :func:`grouped_point_metrics` -- :func:`point_metrics` of every group of such a frame at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from forecaster.metrics.cross_section import ic_summary
from forecaster.metrics.grouped import cross_section_ic, grouped_corr, grouped_rank
from forecaster.metrics.hac import align_pair, corr, dm_from_differential

_POINT_KEYS = (
    "n", "n_dropped", "mse", "mae", "r2_oos_zero", "r2_oos_mean", "hit_rate", "n_directional",
    "binomial_p", "pearson_ic", "rank_ic",
)
_DM_COLUMNS = ("baseline", "dm_stat", "p_value", "p_value_better", "mean_loss_diff", "n")


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
    f, y, m, n_dropped = align_pair(forecast, actual, ("forecast", "actual"), extra=mean_forecast)
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

    out["pearson_ic"] = corr(f, y)
    out["rank_ic"] = corr(stats.rankdata(f), stats.rankdata(y))
    return out


def grouped_point_metrics(predictions: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """:func:`point_metrics` of every group of ``predictions`` (columns ``forecast``, ``actual``,
    optionally ``mean_forecast``) grouped by ``by``, all groups at once: one row per group in
    ``groupby(by, sort=True, dropna=False)`` order, the ``by`` columns then the metrics. The
    same numbers as calling :func:`point_metrics` group by group (a test checks it), without a
    Python loop over thousands of (model, stock) groups."""
    grouped = predictions.groupby(list(by), sort=True, dropna=False)
    out = grouped.size().index.to_frame(index=False)
    g, n_groups = grouped.ngroup().to_numpy(), len(out)
    f, y = predictions["forecast"].to_numpy(float), predictions["actual"].to_numpy(float)
    m = predictions["mean_forecast"].to_numpy(float) if "mean_forecast" in predictions.columns else None
    ok = ~np.isnan(f) & ~np.isnan(y)
    n_dropped = np.bincount(g[~ok], minlength=n_groups)
    g, f, y, m = g[ok], f[ok], y[ok], (None if m is None else m[ok])

    def total(values, where=None):
        return (np.bincount(g, values, n_groups) if where is None
                else np.bincount(g[where], values[where], n_groups))

    n = np.bincount(g, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        err = f - y
        sse = total(err * err)
        sst_zero = total(y * y)
        metrics = {"n": n, "n_dropped": n_dropped, "mse": np.where(n > 0, sse / n, np.nan),
                   "mae": np.where(n > 0, total(np.abs(err)) / n, np.nan),
                   "r2_oos_zero": np.where(sst_zero > 0, 1.0 - sse / sst_zero, np.nan),
                   "r2_oos_mean": np.full(n_groups, np.nan)}
        if m is not None:
            has_mean = ~np.isnan(m)  # both SSEs over the same days, as in point_metrics
            sse_mean = total((y - m) ** 2, has_mean)
            sse_model = total(err * err, has_mean)
            metrics["r2_oos_mean"] = np.where(sse_mean > 0, 1.0 - sse_model / sse_mean, np.nan)
        directional = (f != 0) & (y != 0)
        n_dir = np.bincount(g[directional], minlength=n_groups)
        hits = total((np.sign(f) == np.sign(y)).astype(float), directional)
        metrics["hit_rate"] = np.where(n_dir > 0, hits / n_dir, np.nan)
        metrics["n_directional"] = n_dir
        # The exact two-sided binomial test at 0.5 (symmetric): twice the smaller tail, at most 1.
        p = np.minimum(1.0, 2.0 * stats.binom.cdf(np.minimum(hits, n_dir - hits), n_dir, 0.5))
        metrics["binomial_p"] = np.where(n_dir > 0, p, np.nan)
        by_group = pd.DataFrame({"g": g, "f": f, "y": y}).groupby("g")[["f", "y"]]
        spread = (by_group.max() - by_group.min()).reindex(range(n_groups)).to_numpy()
        varies = (n >= 2) & (spread[:, 0] > 0) & (spread[:, 1] > 0)
        metrics["pearson_ic"] = np.where(varies, np.clip(grouped_corr(g, f, y, n_groups), -1.0, 1.0), np.nan)
        rank_ic = grouped_corr(g, grouped_rank(g, f), grouped_rank(g, y), n_groups)
        metrics["rank_ic"] = np.where(varies, np.clip(rank_ic, -1.0, 1.0), np.nan)
    for key in _POINT_KEYS:
        out[key] = metrics[key]
    return out


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
                res = dm_from_differential(group["d"].to_numpy(), horizon)
                rows.append({"baseline": base, "code": code, **{k: res[k] for k in _DM_COLUMNS[1:]}})
        else:
            res = dm_from_differential(loss_differential(predictions, model, base).to_numpy(), horizon)
            rows.append({"baseline": base, **{k: res[k] for k in _DM_COLUMNS[1:]}})
    columns = list(_DM_COLUMNS)
    if by_code and "code" in predictions.columns:
        columns.insert(1, "code")
    return pd.DataFrame(rows, columns=columns)


def _panel_ic_columns(part: pd.DataFrame, ids: np.ndarray, size: int) -> list[dict[str, float]]:
    """The summaries of each group's daily cross-sectional IC (Pearson ``daily_ic_*``, Spearman
    ``daily_rank_ic_*``): one dict per group id ``0..size-1`` of ``part``'s rows. A day's IC is
    :func:`~forecaster.metrics.cross_section.daily_ic`'s over that group's stocks on that day,
    computed for every (group, day) at once (:func:`cross_section_ic`), not by a pivot per
    group."""
    dates = pd.factorize(part["date"], sort=True)[0].astype(np.int64)
    n_dates = int(dates.max()) + 1 if len(dates) else 1
    # sorted keys: each group's days together, in date order (ic_summary's order)
    keys, day = np.unique(ids.astype(np.int64) * n_dates + dates, return_inverse=True)
    bounds = np.searchsorted(keys // n_dates, np.arange(size + 1))
    f, y = part["forecast"].to_numpy(float), part["actual"].to_numpy(float)
    out: list[dict[str, float]] = [{} for _ in range(size)]
    for prefix, method in (("daily_ic", "pearson"), ("daily_rank_ic", "spearman")):
        ic = cross_section_ic(day.ravel(), f, y, len(keys), method=method)
        for k in range(size):
            s = ic_summary(ic[bounds[k]:bounds[k + 1]])
            out[k].update({
                f"{prefix}_mean": s["mean_ic"], f"{prefix}_std": s["std_ic"], f"{prefix}_ir": s["icir"],
                f"{prefix}_ir_annual": s["icir_annual"], f"{prefix}_t": s["t_stat"],
                f"{prefix}_hit_rate": s["hit_rate"], f"{prefix}_n_days": s["n_days"],
            })
    return out


def groups_of(frame: pd.DataFrame, column: str):
    """``(value, rows)`` for each distinct value of ``column`` in sorted order (a missing value
    last), the rows in their order: ``groupby(column, sort=True, dropna=False)``'s groups, one
    copy at a time (iterating a groupby first copies the whole frame sorted: a gigabyte per
    pass at a whole market's 30 M rows)."""
    codes, values = pd.factorize(frame[column], sort=True, use_na_sentinel=False)
    if len(codes) and (np.diff(codes) >= 0).all():  # already grouped (the walk-forward's order)
        bounds = np.flatnonzero(np.diff(codes)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(codes)], strict=True):
            yield values[codes[lo]], frame.iloc[lo:hi]
        return
    for k, value in enumerate(values):
        yield value, frame.iloc[np.flatnonzero(codes == k)]


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
    # A model (the first key) at a time: a whole market's 30 M rows at once would need
    # gigabytes of temporaries. The chunks keep groupby(by, sort=True)'s order.
    points, ics = [], []
    for _, part in groups_of(predictions, by[0]):
        points.append(grouped_point_metrics(part, by))
        if panel:
            ids = part.groupby(by, sort=True, dropna=False).ngroup().to_numpy()
            ics += _panel_ic_columns(part, ids, len(points[-1]))
    point = pd.concat(points, ignore_index=True)
    if not panel and not baseline_for_dm:
        return point
    rows = []
    for i, metrics in enumerate(point.to_dict("records")):
        labels = {col: metrics[col] for col in by}
        row = {**labels, **{k: metrics[k] for k in _POINT_KEYS}, **(ics[i] if panel else {})}
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


def stat_text(value: float | None, spec: str, reason: str | None = None) -> str:
    """``format(value, spec)``, or "not computed (reason)" where the value is not a number:
    every printed statistic says why it is missing instead of showing ``nan``."""
    if value is not None and math.isfinite(float(value)):
        return format(float(value), spec)
    return f"not computed ({reason or 'not enough data'})"
