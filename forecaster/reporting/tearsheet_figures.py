"""The strategy tear sheet's figures (the numbers: :mod:`forecaster.evaluation.tearsheet`):
equity curves of the shown strategies against the benchmark, the growth over the benchmark
with and without costs and its drawdown, returns by year and month, each score quantile's
cumulative return and the long-short curve, holdings and turnover over time. Every line
figure draws the main model black and on top, each other model in its colour of the report
(:func:`~forecaster.reporting.figures.model_styles`), the legend outside the data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap, TwoSlopeNorm
from matplotlib.lines import Line2D

from forecaster.reporting.figures import (
    BENCHMARK_STYLE,
    GAIN,
    INDEX_STYLE,
    LOSS,
    date_axis,
    legend_outside,
    percent_axis,
    plt,
    save_figure,
    style_of,
)

# A-share colours in a heatmap: losses green, gains red, zero white.
GAIN_LOSS_CMAP = LinearSegmentedColormap.from_list("ashare", [LOSS, "#ffffff", GAIN])
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _ordered(curves: dict, main: str) -> list[str]:
    """The models drawn: the others first, the main model last (on top)."""
    return [m for m in curves if m != main] + ([main] if main in curves else [])


def plot_equity_curves(curves: dict[str, pd.DataFrame], styles: dict, path: str | Path, main: str,
                       benchmark: str = "benchmark", index: pd.Series | None = None,
                       index_label: str = "index") -> Path:
    """Growth of 1 after costs of each strategy in ``curves`` (``{model: curves frame}``, the
    shown ones) against the benchmark (and the universe's index where given), and below, each
    one's drawdown. The legend, right of the data, names every line of both panels."""
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 6.6), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1.4]})
    first = curves.get(main, next(iter(curves.values())))
    bench = first["benchmark"]
    ax1.plot(bench.index, bench, label=f"benchmark ({benchmark})", **BENCHMARK_STYLE)
    ax2.plot(bench.index, bench / bench.cummax() - 1, **BENCHMARK_STYLE)
    if index is not None and len(index.dropna()):
        s = index.dropna().reindex(bench.index).ffill().dropna()
        s = s / s.iloc[0]
        ax1.plot(s.index, s, label=index_label, **INDEX_STYLE)
        ax2.plot(s.index, s / s.cummax() - 1, **INDEX_STYLE)
    for name in _ordered(curves, main):
        c = curves[name]
        style = style_of(styles, name, main)
        ax1.plot(c.index, c["net"], label=name, **style)
        ax2.plot(c.index, c["drawdown"], **style)
    ax1.axhline(1, color="k", lw=0.5)
    ax1.set_ylabel("growth of 1, after costs")
    ax1.set_title("Equity after costs: each strategy against the benchmark", fontsize=10)
    ax2.set_ylabel("drawdown")
    percent_axis(ax2, decimals=0)
    date_axis(ax2)
    legend_outside(ax1, first=main)
    return save_figure(fig, path)


def plot_excess(curves: dict[str, pd.DataFrame], styles: dict, path: str | Path, main: str,
                benchmark: str = "benchmark") -> Path:
    """Cumulative excess return over the benchmark (the strategy's growth over the
    benchmark's, minus 1) after costs (solid) and before costs (dashed) of each model in
    ``curves`` (the main model and the best baseline), and below, the drawdown of that
    excess."""
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 6.2), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1.5]})
    handles, labels = [], []
    for name in _ordered(curves, main)[::-1]:  # the main model's entry first; drawn on top by zorder
        c = curves[name]
        style = style_of(styles, name, main)
        gross = {**style, "ls": "--", "lw": max(0.9, style.get("lw", 1.2) * 0.6), "alpha": 0.8}
        ax1.plot(c.index, c["excess_gross"], **gross)
        ax1.plot(c.index, c["excess"], **style)
        ax2.plot(c.index, c["excess_drawdown_gross"], **gross)
        ax2.plot(c.index, c["excess_drawdown"], **style)
        end = c["excess"].iloc[-1]
        handles.append(Line2D([], [], **style))
        labels.append(f"{name} ({end:+.1%} at the end)")
    handles += [Line2D([], [], color="#444", lw=1.2), Line2D([], [], color="#444", lw=0.9, ls="--")]
    labels += ["solid: after costs", "dashed: before costs"]
    ax1.axhline(0, color="k", lw=0.6)
    ax1.set_ylabel("excess return over the benchmark")
    ax1.set_title(f"Cumulative excess return over the benchmark ({benchmark})", fontsize=10)
    percent_axis(ax1, decimals=0)
    ax2.set_ylabel("drawdown of the excess")
    percent_axis(ax2, decimals=0)
    date_axis(ax2)
    legend_outside(ax1, handles, labels)
    return save_figure(fig, path)


def plot_monthly_returns(monthly: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Returns after costs by year (rows) and month (columns), and each year's, as a heatmap
    in A-share colours (gains red, losses green, white at zero), each cell written in percent;
    a month without trading days is blank."""
    months = monthly[[c for c in monthly.columns if c != "year"]].astype(float)
    years = monthly["year"].astype(float) if "year" in monthly else pd.Series(np.nan, index=monthly.index)
    n = len(monthly)
    fig, (ax, ay) = plt.subplots(1, 2, figsize=(11, 0.42 * n + 1.5), gridspec_kw={"width_ratios": [12, 1.4]})
    for axis, values in ((ax, months.to_numpy()), (ay, years.to_numpy()[:, None])):
        finite = values[np.isfinite(values)]
        top = float(np.max(np.abs(finite))) if finite.size else 0.01
        norm = TwoSlopeNorm(vmin=-max(top, 1e-6), vcenter=0.0, vmax=max(top, 1e-6))
        axis.imshow(np.ma.masked_invalid(values), cmap=GAIN_LOSS_CMAP, norm=norm, aspect="auto")
        for (i, j), v in np.ndenumerate(values):
            if np.isfinite(v):
                axis.text(j, i, f"{v * 100:+.1f}", ha="center", va="center", fontsize=8,
                          color="white" if abs(v) > 0.65 * top else "#222")
        axis.set_yticks(range(n), [str(y) for y in monthly.index])
        axis.tick_params(length=0)
        for spine in axis.spines.values():
            spine.set_visible(False)
    ax.set_xticks(range(months.shape[1]), [MONTHS[int(m) - 1] for m in months.columns])
    ay.set_xticks([0], ["year"])
    ay.set_yticks([])
    ax.set_title(title or "Returns after costs by month (%; gains red, losses green)", fontsize=10)
    return save_figure(fig, path)


def plot_quantile_curves(curves: dict[str, pd.DataFrame], styles: dict, path: str | Path, main: str) -> Path:
    """Left: the main model's cumulative return per score quantile (1 = lowest scores) and its
    long-short curve (top minus bottom quantile). Right: the long-short curve of each model in
    ``curves``, in the report's model colours. Before costs."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.4), sharey=False)
    own = curves.get(main, next(iter(curves.values())))
    owner = main if main in curves else next(iter(curves))
    quantiles = [c for c in own.columns if c != "long_short"]
    cmap = plt.get_cmap("viridis")
    for k, q in enumerate(quantiles):
        ax1.plot(own.index, own[q], color=cmap(0.85 * k / max(len(quantiles) - 1, 1)), lw=1.2,
                 label=f"quantile {q}" + (" (lowest scores)" if k == 0 else " (highest)" if
                                          k == len(quantiles) - 1 else ""))
    ax1.plot(own.index, own["long_short"], color="k", lw=2.0, ls="--",
             label=f"long-short ({quantiles[-1]} - 1)")
    ax1.axhline(0, color="k", lw=0.5)
    ax1.set_title(f"{owner}: cumulative return per score quantile", fontsize=10)
    ax1.set_ylabel("cumulative log return, before costs")
    date_axis(ax1, 6)
    legend_outside(ax1)
    for name in _ordered(curves, main):
        ax2.plot(curves[name].index, curves[name]["long_short"], label=name, **style_of(styles, name, main))
    ax2.axhline(0, color="k", lw=0.5)
    ax2.set_title("long-short (top minus bottom quantile), per model", fontsize=10)
    date_axis(ax2, 6)
    legend_outside(ax2, first=main)
    return save_figure(fig, path)


def plot_holdings_turnover(curves: dict[str, pd.DataFrame], styles: dict, path: str | Path, main: str,
                           window: int = 21) -> Path:
    """The stocks held after each day's trades, and the value traded a day as a share of the
    portfolio (a ``window``-day rolling mean), for each strategy in ``curves``."""
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 5.2), sharex=True)
    for name in _ordered(curves, main):
        c = curves[name]
        style = style_of(styles, name, main)
        ax1.plot(c.index, c["holdings"], label=name, drawstyle="steps-post", **style)
        ax2.plot(c.index, c["turnover_mean"], **style)
    ax1.set_ylabel("stocks held")
    ax1.set_ylim(bottom=0)
    ax1.set_title("Holdings and turnover over time", fontsize=10)
    ax2.set_ylabel(f"turnover a day\n({window}-day mean, of the portfolio)")
    ax2.set_ylim(bottom=0)
    percent_axis(ax2)
    date_axis(ax2)
    legend_outside(ax1, first=main)
    return save_figure(fig, path)


__all__ = ["GAIN_LOSS_CMAP", "plot_equity_curves", "plot_excess", "plot_holdings_turnover",
           "plot_monthly_returns", "plot_quantile_curves"]
