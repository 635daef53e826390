"""PNG figures of a scored run's forecasts (matplotlib, Agg): forecasts against outcomes, rolling
IC, scores per fold, Diebold-Mariano p-values, quantile returns, IC by horizon. The figures of
a trained run for daily use (training curves, the ranked list, attention) live in
:mod:`forecaster.reporting.run_figures` and are importable from here too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from forecaster.metrics.forecast import point_metrics
from forecaster.reporting.figures import (
    GAIN,
    LOSS,
    MODEL_COLORS,
    NEUTRAL,
    ROLLING_IC_WINDOW,
    date_axis,
    legend_outside,
    model_styles,
    plt,
    plural,
    style_of,
)
from forecaster.reporting.figures import save_figure as _save
from forecaster.reporting.run_figures import (  # noqa: F401  (their home before; callers import them here)
    LOSS_NAMES,
    loss_label,
    plot_attention,
    plot_history,
    plot_panel_training,
    plot_price_path,
    plot_ranked_list,
    ranked_list_labels,
    ranked_list_title,
)


def _bar_date_ticks(ax, index, max_ticks: int = 8) -> None:
    """Ticks of bars drawn in trading order (x = 0, 1, ...): at the first bar of evenly spaced
    days, labelled with the date."""
    days = pd.DatetimeIndex(index).normalize()
    starts = np.flatnonzero(np.r_[True, days[1:] != days[:-1]])
    pick = starts[np.unique(np.linspace(0, len(starts) - 1, min(max_ticks, len(starts))).round().astype(int))]
    ax.set_xticks(pick, [str(days[i].date()) for i in pick], fontsize=8)


def plot_forecast_vs_actual(forecast: pd.Series, actual: pd.Series, path: str | Path,
                            title: str = "", bars: bool = False) -> Path:
    """Daily (or, with ``bars``, per-bar) realised log returns (top left) and the forecasts
    (below, on their own scale: a forecast is far smaller than the moves it forecasts) over
    time, and their scatter (right). Bars are drawn in trading order, so nights and lunch
    breaks leave no gaps, with the dates on the axis.

    The correlation and sign hit rate in the scatter's title are
    :func:`forecaster.metrics.point_metrics`'s, the report table's definitions: the hit rate
    counts only the days (bars) with a nonzero forecast and a nonzero outcome (a flat or
    suspended day has no direction to hit).
    """
    actual = actual.reindex(forecast.index)
    ok = actual.notna() & forecast.notna()
    unit = "bar" if bars else "day"
    fig = plt.figure(figsize=(13, 5.2))
    grid = fig.add_gridspec(2, 2, width_ratios=[2.2, 1], height_ratios=[1.3, 1])
    ax1 = fig.add_subplot(grid[0, 0])
    ax2 = fig.add_subplot(grid[:, 1])  # axes[1]: the scatter
    ax3 = fig.add_subplot(grid[1, 0], sharex=ax1)
    x = np.arange(len(forecast)) if bars else forecast.index
    ax1.plot(x, actual, lw=0.6, color="0.45")
    ax3.plot(x, forecast, lw=0.9, color="C0")
    for ax in (ax1, ax3):
        ax.axhline(0, color="k", lw=0.5)
    if bars:
        _bar_date_ticks(ax3, forecast.index)
    else:
        date_axis(ax3)
    ax1.tick_params(labelbottom=False)
    what = "bar" if bars else "daily"
    ax1.set_ylabel(f"actual {what}\nlog return", fontsize=9)
    ax3.set_ylabel("forecast\n(own scale)", fontsize=9)
    ax1.set_title(title or f"forecast vs actual {what} log return", fontsize=10)
    m = point_metrics(forecast.to_numpy(dtype=float), actual.to_numpy(dtype=float))
    ax2.scatter(forecast[ok], actual[ok], s=4, alpha=0.5)
    ax2.xaxis.set_major_locator(MaxNLocator(5))  # small forecasts' tick labels are long
    ax2.axhline(0, color="k", lw=0.5)
    ax2.axvline(0, color="k", lw=0.5)
    ax2.set_xlabel("forecast")
    ax2.set_ylabel("actual")
    ax2.set_title(f"corr {m['pearson_ic']:+.3f}, sign hit rate {m['hit_rate']:.1%}\n"
                  f"(over {plural(m['n_directional'], unit)} with nonzero forecast and outcome)",
                  fontsize=9)
    return _save(fig, path)


def plot_scatter(forecast: pd.Series, actual: pd.Series, path: str | Path, title: str = "") -> Path:
    """Forecast vs realised return, one point per (day, stock), with a binned mean."""
    ok = forecast.notna() & actual.notna()
    f, a = forecast[ok].to_numpy(), actual[ok].to_numpy()
    fig, ax = plt.subplots(figsize=(6.5, 5))
    ax.scatter(f, a, s=2, alpha=0.25)
    if len(f) > 50:
        edges = np.quantile(f, np.linspace(0, 1, 11))
        bins = np.clip(np.searchsorted(edges, f, side="right") - 1, 0, 9)
        centres = [f[bins == b].mean() for b in range(10)]
        means = [a[bins == b].mean() for b in range(10)]
        ax.plot(centres, means, "o-", color="C1", label="mean actual per\nforecast decile")
        legend_outside(ax)
    ax.axhline(0, color="k", lw=0.5)
    ax.axvline(0, color="k", lw=0.5)
    corr = float(np.corrcoef(f, a)[0, 1]) if len(f) > 2 else float("nan")
    ax.set_xlabel("forecast")
    ax.set_ylabel("actual")
    ax.set_title(f"{title}\npooled corr {corr:+.3f}, n={len(f)}", fontsize=10)
    return _save(fig, path)


def rolling_ic_label(window: int, panel: bool) -> str:
    """What :func:`plot_rolling_ic` draws (its axis label; report.html captions the figure
    with the same words). Bar runs draw :mod:`forecaster.reporting.bar_figures` instead."""
    return (f"{window}-day rolling mean of daily rank IC" if panel
            else f"{window}-day rolling correlation of forecast and actual")


def _main_last(names, main: str | None) -> list:
    """Draw order: the other models first, the main model last (on top)."""
    return [n for n in names if str(n) != main] + [n for n in names if str(n) == main]


def _legend_main_first(ax, main: str | None, **kwargs):
    return legend_outside(ax, first=main, **kwargs)


def plot_rolling_ic(predictions: pd.DataFrame, daily_ic: pd.DataFrame, path: str | Path,
                    window: int = ROLLING_IC_WINDOW, styles: dict | None = None, main: str = "transformer",
                    shown: list[str] | None = None) -> Path:
    """Rolling mean IC per model: the daily cross-sectional rank IC for panels, else the
    rolling time-series correlation of forecast and actual. ``shown``: the models drawn (the
    main model, the best baseline and a few named others; the rest are in the report's
    tables), each in its colour of ``styles``. A model without any value (a constant forecast
    such as zero has no correlation) has no line, so it is named in the title instead of the
    legend."""
    fig, ax = plt.subplots(figsize=(12, 4.5))
    panel = bool(len(daily_ic.columns))
    if panel:
        curves = daily_ic.rolling(window, min_periods=window // 2).mean()
    else:
        curves = {}
        for name, g in predictions.groupby("model"):
            g = g[g["actual"].notna()]
            curves[name] = g["forecast"].rolling(window, min_periods=window // 2).corr(g["actual"])
        curves = pd.DataFrame(curves)
    ylabel = rolling_ic_label(window, panel)
    empty = [str(name) for name in curves.columns if not curves[name].notna().any()]
    names = [str(n) for n in curves.columns]
    order = [*(n for n in (shown or []) if n in names), *(n for n in names if n not in (shown or []))]
    drawn = [n for n in order if n not in empty and (shown is None or n in shown)]
    curves.columns = names
    hidden = [str(n) for n in curves.columns if str(n) not in empty and n not in drawn]
    styles = styles or model_styles(_main_last(drawn, main)[::-1], main)
    for name in _main_last(drawn, main):
        ax.plot(curves.index, curves[name], label=str(name), **style_of(styles, name, main))
    ax.axhline(0, color="k", lw=0.5)
    date_axis(ax)
    ax.set_ylabel(ylabel, fontsize=9)
    title = ylabel
    if hidden:
        title += f" ({plural(len(hidden), 'other model')} in the tables)"
    if empty:
        title += f"\nnot drawn (no {'rank IC' if panel else 'correlation'}, e.g. a constant forecast): " + \
            ", ".join(empty)
    ax.set_title(title, fontsize=10)
    _legend_main_first(ax, main)
    return _save(fig, path)


def plot_fold_metrics(per_fold: pd.DataFrame, path: str | Path, styles: dict | None = None,
                      main: str = "transformer", shown: list[str] | None = None,
                      fold_days: dict | None = None, unit: str = "days") -> Path:
    """R^2 against zero (where any shown model has one) and IC per walk-forward fold, for the
    ``shown`` models in their ``styles``. The fold axis has one tick per fold, with its test
    days (``fold_days``: ``{fold: days}``; ``unit``: what they count, ``"bars"`` for minute
    bars) under it; a fold shorter than half the median is
    shaded, its statistics noisier. The R^2 axis is clipped around the bulk of the models so
    that one wild baseline (the seed recipe) cannot flatten the rest; clipped models are
    marked in the legend. A model without any value is named in the title, not the legend."""
    panel = "daily_rank_ic_mean" in per_fold and per_fold["daily_rank_ic_mean"].notna().any()
    ic_col = "daily_rank_ic_mean" if panel else "pearson_ic"
    present = [str(m) for m in per_fold["model"].unique()]
    models = [m for m in shown if m in present] if shown is not None else present
    data = per_fold[per_fold["model"].astype(str).isin(models)]
    # R^2 only where the main model has one (a panel's scores rank stocks: no R^2 to compare)
    mine = data.loc[data["model"].astype(str) == main, "r2_oos_zero"]
    has_r2 = (mine.notna().any() if len(mine) else data["r2_oos_zero"].notna().any())
    empty = [str(m) for m in models if not data.loc[data["model"] == m, ic_col].notna().any()
             and not data.loc[data["model"] == m, "r2_oos_zero"].notna().any()]
    models = [m for m in models if str(m) not in empty]
    styles = styles or model_styles(models, main)
    fig, axes = plt.subplots(2 if has_r2 else 1, 1, figsize=(12, 6 if has_r2 else 3.8), sharex=True,
                             squeeze=False)
    axes = list(axes[:, 0])
    ax_ic = axes[-1]
    if has_r2:
        ax1 = axes[0]
        r2 = data.dropna(subset=["r2_oos_zero"])
        typical = r2.groupby("model")["r2_oos_zero"].median().abs() <= 0.5  # sane forecasters
        bulk = r2.loc[r2["model"].map(typical), "r2_oos_zero"]
        lo, hi = (bulk.min(), bulk.max()) if len(bulk) else (-0.1, 0.1)
        pad = max(0.25 * (hi - lo), 0.01)
        lo, hi = lo - pad, hi + pad
        for name in _main_last(models, main):
            g = data[data["model"] == name].sort_values("fold")
            if g["r2_oos_zero"].notna().any():
                clipped = ((g["r2_oos_zero"] < lo) | (g["r2_oos_zero"] > hi)).any()
                ax1.plot(g["fold"], g["r2_oos_zero"].clip(lo, hi), marker="o", ms=3,
                         label=f"{name} (clipped)" if clipped else str(name), **style_of(styles, name, main))
        ax1.set_ylim(lo, hi)
        ax1.axhline(0, color="k", lw=0.5)
        ax1.set_ylabel("R^2 vs zero forecast")
        _legend_main_first(ax1, main)  # the same colours below: one legend
    for name in _main_last(models, main):
        g = data[data["model"] == name].sort_values("fold")
        ax_ic.plot(g["fold"], g[ic_col], marker="o", ms=3, label=str(name), **style_of(styles, name, main))
    ax_ic.axhline(0, color="k", lw=0.5)
    ax_ic.set_ylabel("mean daily rank IC" if panel else "correlation of\nforecast and actual")
    folds = sorted(int(f) for f in per_fold["fold"].unique())
    days = {int(k): int(v) for k, v in (fold_days or {}).items()}
    short_unit = "d" if unit == "days" else unit
    labels = [f"{f}\n{days[f]} {short_unit}" if f in days else str(f) for f in folds]
    ax_ic.set_xticks(folds, labels, fontsize=8 if len(folds) <= 40 else 6)
    if len(folds) > 40:  # too many to label each: every k-th
        for i, t in enumerate(ax_ic.get_xticklabels()):
            t.set_visible(i % int(np.ceil(len(folds) / 40)) == 0)
    ax_ic.set_xlabel(f"walk-forward fold (test {unit} under each)" if days else "walk-forward fold")
    short = []
    if days:
        median = float(np.median(list(days.values())))
        short = [f for f in folds if f in days and days[f] < 0.5 * median]
        for f in short:
            for ax in axes:
                ax.axvspan(f - 0.45, f + 0.45, color="#e8e8e8", zorder=0)
    title = "Scores per walk-forward fold"
    kept = {str(x) for x in models} | set(empty)
    others = [str(m) for m in per_fold["model"].unique() if str(m) not in kept]
    if others:
        title += f" ({plural(len(others), 'other model')} in fold_metrics.csv)"
    if short:
        title += "\nshaded: " + ", ".join(f"fold {f} ({days[f]} {unit})" for f in short) + \
            ", shorter than half the median fold: noisier"
    if empty:
        title += "\nnot drawn (no value, e.g. a constant forecast): " + ", ".join(empty)
    axes[0].set_title(title, fontsize=10)
    if not has_r2:
        _legend_main_first(ax_ic, main)
    return _save(fig, path)


def dm_colors(dm: pd.DataFrame, alpha: float = 0.05) -> list[str]:
    """The bar colour of each row of a Diebold-Mariano table: :data:`GAIN` (red) where the
    model's squared error is significantly lower (``p_value < alpha`` and ``dm_stat < 0``),
    :data:`LOSS` (green) where it is significantly higher, :data:`NEUTRAL` (grey) otherwise,
    whatever the sign (``p = 0.99`` is no evidence either way)."""
    out = []
    for stat, p in zip(dm["dm_stat"].astype(float), dm["p_value"].astype(float), strict=True):
        significant = bool(np.isfinite(p) and p < alpha)
        out.append(GAIN if significant and stat < 0 else LOSS if significant and stat > 0 else NEUTRAL)
    return out


def plot_dm(dm: pd.DataFrame, model: str, path: str | Path, alpha: float = 0.05) -> Path:
    """Diebold-Mariano p-values of the model against each baseline, as bars of ``-log10 p``
    (a significant result is a tall bar, not an invisible one; the axis is labelled in
    p-values), coloured by significance and direction (:func:`dm_colors`): red, the model's
    squared error is significantly lower; green, significantly higher; grey, no significant
    difference. Each bar carries its p-value."""
    from matplotlib.patches import Patch

    floor = 1e-6
    fig, ax = plt.subplots(figsize=(max(7.0, 0.9 * len(dm) + 2), 4.2))
    names = [str(b) for b in dm["baseline"]]
    p_values = dm["p_value"].to_numpy(dtype=float)
    heights = np.where(np.isfinite(p_values), -np.log10(np.clip(p_values, floor, 1.0)), 0.0)
    colors = dm_colors(dm, alpha)
    ax.bar(names, heights, color=colors)
    for x, (p, h, color) in enumerate(zip(p_values, heights, colors, strict=True)):
        text = "no test" if not np.isfinite(p) else "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
        ax.text(x, h + 0.05, text, ha="center", va="bottom", fontsize=7,
                color="0.35" if color == NEUTRAL else color)
    line = ax.axhline(-np.log10(alpha), color="k", ls="--", lw=0.8, label=f"p = {alpha:g}")
    handles = [Patch(color=GAIN, label=f"{model} significantly better (p < {alpha:g})"),
               Patch(color=LOSS, label=f"{model} significantly worse (p < {alpha:g})"),
               Patch(color=NEUTRAL, label="no significant difference"), line]
    top = max(3.0, float(np.max(heights, initial=0)) + 0.6)
    ax.set_ylim(0, top)
    ticks = [t for t in range(int(top) + 1)]
    ax.set_yticks(ticks, ["1" if t == 0 else f"{10.0 ** -t:g}" for t in ticks])
    ax.set_ylabel("two-sided p-value (log scale;\nsmaller = taller)")
    ax.tick_params(axis="x", labelsize=8, labelrotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    ax.set_title(f"Diebold-Mariano test of squared errors: {model} vs each baseline", fontsize=9)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return _save(fig, path)


def plot_quantile_returns(summary: dict[str, dict], path: str | Path, title: str = "",
                          styles: dict | None = None, main: str = "transformer") -> Path:
    """Mean label return (bps) per forecast quantile, one bar group per quantile and one bar
    colour per model (``styles``: the report's; the main model black), so monotonicity is
    visible at a glance; the legend, outside the bars, gives each model's spread t-statistic
    and monotonicity.

    Args:
        summary: model name -> :func:`forecaster.metrics.quantile_summary` dict (uses ``mean``,
            ``spread_t_stat`` and ``monotonicity``). NaN means leave a gap.
    """
    names = list(summary)
    n_q = max((len(s.get("mean", [])) for s in summary.values()), default=0)
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(7.5, 1.1 * n_q + 4.5), 4.2))
    x = np.arange(1, n_q + 1)
    for i, name in enumerate(names):
        s = summary[name]
        means = np.full(n_q, np.nan)
        values = np.asarray(s.get("mean", []), dtype=float) * 1e4
        means[: len(values)] = values
        t, mono = s.get("spread_t_stat", np.nan), s.get("monotonicity", np.nan)
        label = f"{name} (spread t {t:+.2f}, monotonicity {mono:+.2f})"
        ok = np.isfinite(means)
        color = (style_of(styles, name, main)["color"] if styles is not None
                 else MODEL_COLORS[i % len(MODEL_COLORS)])
        ax.bar(x[ok] - 0.4 + width * (i + 0.5), means[ok], width=width, color=color, label=label)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(x, [str(q) for q in x])
    ax.set_xlabel("forecast quantile (1 = lowest forecast)")
    ax.set_ylabel("mean label return (bps)")
    ax.set_title(title or "mean label return per forecast quantile", fontsize=10)
    legend_outside(ax)
    return _save(fig, path)


def plot_ic_by_horizon(table: pd.DataFrame, path: str | Path, title: str = "", styles: dict | None = None,
                       main: str = "transformer") -> Path:
    """Mean daily rank IC against label horizon, one line per model (``styles``: the
    report's colours; the main model black and on top).

    Args:
        table: index = model names, columns = horizons in trading days (e.g. 1, 5, 20),
            values = mean rank IC. NaN cells are skipped (the line joins the remaining points).
    """
    horizons = np.asarray(table.columns, dtype=float)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    styles = styles or model_styles(list(table.index), main)
    for name in _main_last(list(table.index), main):
        values = table.loc[name].to_numpy(dtype=float)
        ok = np.isfinite(values)
        ax.plot(horizons[ok], values[ok], marker="o", label=str(name), **style_of(styles, name, main))
    ax.axhline(0, color="k", lw=0.5)
    if len(horizons):
        ax.set_xticks(horizons, [f"{h:g}" for h in horizons])
    ax.set_xlabel("horizon (trading days)")
    ax.set_ylabel("mean daily rank IC")
    ax.set_title(title or "rank IC by label horizon", fontsize=10)
    _legend_main_first(ax, main)
    return _save(fig, path)


