"""PNG plots of forecasts, implied prices, attention and training curves (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
import pandas as pd

from forecaster.metrics.forecast import point_metrics
from forecaster.reporting.figures import (
    GAIN,
    LOSS,
    MODEL_COLORS,
    NEUTRAL,
    ROLLING_IC_WINDOW,
    plt,
    plural,
    sign_colors,
)
from forecaster.reporting.figures import save_figure as _save


def _day(x) -> str:
    """A date as ``YYYY-MM-DD`` (Timestamp, date or text)."""
    return str(pd.Timestamp(x).date())


def plot_forecast_vs_actual(forecast: pd.Series, actual: pd.Series, path: str | Path,
                            title: str = "", bars: bool = False) -> Path:
    """Daily (or, with ``bars``, per-bar) forecast and realised log returns over time, and
    their scatter. Bars are drawn in trading order, so nights and lunch breaks leave no gaps.

    The correlation and sign hit rate in the scatter's title are
    :func:`forecaster.metrics.point_metrics`'s, the report table's definitions: the hit rate
    counts only the days (bars) with a nonzero forecast and a nonzero outcome (a flat or
    suspended day has no direction to hit).
    """
    actual = actual.reindex(forecast.index)
    ok = actual.notna() & forecast.notna()
    unit = "bar" if bars else "day"
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [2.2, 1]})
    x = np.arange(len(forecast)) if bars else forecast.index
    ax1.plot(x, actual, lw=0.6, color="0.6", label="actual")
    ax1.plot(x, forecast, lw=0.9, color="C0", label="forecast")
    ax1.axhline(0, color="k", lw=0.5)
    if bars:
        ax1.set_xlabel(f"bar, in trading order ({pd.Timestamp(forecast.index[0]).date()} .. "
                       f"{pd.Timestamp(forecast.index[-1]).date()})")
    ax1.set_ylabel(f"{'bar' if bars else 'daily'} log return")
    ax1.legend(loc="upper left")
    ax1.set_title(title or f"forecast vs actual {'bar' if bars else 'daily'} log return")
    m = point_metrics(forecast.to_numpy(dtype=float), actual.to_numpy(dtype=float))
    ax2.scatter(forecast[ok], actual[ok], s=4, alpha=0.5)
    ax2.axhline(0, color="k", lw=0.5)
    ax2.axvline(0, color="k", lw=0.5)
    ax2.set_xlabel("forecast")
    ax2.set_ylabel("actual")
    ax2.set_title(f"corr {m['pearson_ic']:+.3f}, sign hit rate {m['hit_rate']:.1%}\n"
                  f"(over {plural(m['n_directional'], unit)} with nonzero forecast and outcome)",
                  fontsize=9)
    return _save(fig, path)


def plot_price_path(frame: pd.DataFrame, returns: pd.Series, forecast: pd.Series, path: str | Path) -> Path:
    """Two price views of return forecasts (``returns``: the stock's realised daily log returns).

    Top: the one-step implied price ``previous close * exp(forecast)`` next to the close. It
    always hugs the price, whatever the forecast's skill, because it starts from yesterday's
    close (the seed's plot looked good for this reason). Bottom: the honest view, cumulative
    log return of actual vs forecast.
    """
    close = frame["close"].reindex(forecast.index)
    prev = frame["preclose"] if "preclose" in frame.columns else frame["close"].shift(1)
    implied = prev.reindex(forecast.index) * np.exp(forecast)
    # Days without a return (the first one without preclose) add nothing to the cumulative sum.
    actual = returns.reindex(forecast.index).fillna(0.0)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    ax1.plot(close.index, close, lw=0.9, color="0.3", label="close")
    ax1.plot(implied.index, implied, lw=0.7, color="C1", label="previous close x exp(forecast)")
    ax1.set_ylabel("price")
    ax1.set_title("one-step implied price (tracks the close by construction: not evidence of skill)")
    ax1.legend(loc="upper left")
    ax2.plot(actual.index, actual.cumsum(), lw=0.9, color="0.3", label="actual cumulative log return")
    ax2.plot(forecast.index, forecast.cumsum(), lw=0.9, color="C0", label="sum of forecasts")
    ax2.axhline(0, color="k", lw=0.5)
    ax2.set_ylabel("cumulative log return")
    ax2.legend(loc="upper left")
    return _save(fig, path)


def plot_attention(weights: list[np.ndarray], dates: pd.DatetimeIndex, path: str | Path) -> Path:
    """Self-attention over the input window, per layer (mean over heads): the full causal map,
    and below it the row that makes the forecast (the last query).

    Args:
        weights: per layer ``[heads, window, window]``.
        dates: the window's dates (axis labels).
    """
    n = len(weights)
    fig, axes = plt.subplots(2, n, figsize=(5.2 * n, 8), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]})
    labels = [d.strftime("%m-%d") for d in dates]
    step = max(1, len(labels) // 12)
    ticks = range(0, len(labels), step)
    for i, w in enumerate(weights):
        mean = w.mean(0)
        # The first queries see only a few keys and take all the weight; clip the colour
        # scale so the structure of the later rows stays visible.
        lower = mean[np.tril_indices_from(mean)][min(len(mean), 15):]
        vmax = float(np.quantile(lower, 0.99)) if lower.size else None
        ax = axes[0, i]
        im = ax.imshow(mean, cmap="viridis", aspect="auto", vmin=0, vmax=vmax)
        ax.set_title(f"layer {i + 1} (mean of {w.shape[0]} heads)")
        ax.set_xticks(ticks, labels[::step], rotation=90, fontsize=7)
        ax.set_yticks(ticks, labels[::step], fontsize=7)
        ax.set_xlabel("attended day (key)")
        ax.set_ylabel("query day")
        fig.colorbar(im, ax=ax, fraction=0.046, extend="max")
        bar = axes[1, i]
        bar.bar(range(len(labels)), mean[-1], color="C0")
        bar.set_xticks(ticks, labels[::step], rotation=90, fontsize=7)
        bar.set_title(f"weights of the forecasting query ({labels[-1]})", fontsize=9)
    return _save(fig, path)


def plot_history(history: list[dict], path: str | Path) -> Path:
    """Training and validation loss per epoch."""
    h = pd.DataFrame(history)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(h["epoch"], h["train_loss"], marker="o", label="train")
    if "val_loss" in h:
        ax.plot(h["epoch"], h["val_loss"], marker="o", label="validation")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss (scaled units)")
    ax.legend()
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
        ax.plot(centres, means, "o-", color="C1", label="mean actual per forecast decile")
        ax.legend(loc="upper left")
    ax.axhline(0, color="k", lw=0.5)
    ax.axvline(0, color="k", lw=0.5)
    corr = float(np.corrcoef(f, a)[0, 1]) if len(f) > 2 else float("nan")
    ax.set_xlabel("forecast")
    ax.set_ylabel("actual")
    ax.set_title(f"{title}\npooled corr {corr:+.3f}, n={len(f)}", fontsize=10)
    return _save(fig, path)


def plot_equity(equity: pd.Series, benchmark: pd.Series, path: str | Path, title: str = "",
                index: pd.Series | None = None, index_label: str = "index") -> Path:
    """Equity of the strategy and its benchmark (normalised to 1), and their drawdowns; with
    ``index``, the universe's index's own series too."""
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 6.5), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 1.3]})
    lines = [(equity, "strategy", "C0"), (benchmark, "benchmark", "0.4")]
    if index is not None:
        lines.append((index, index_label, "C4"))
    for series, label, color in lines:
        s = series.dropna()
        if s.empty:
            continue
        norm = s / s.iloc[0]
        ax1.plot(norm.index, norm, color=color, lw=1, label=label)
        # lines, not filled areas: three overlapping fills hide one another
        ax2.plot(norm.index, norm / norm.cummax() - 1, color=color, lw=0.9, label=label)
    ax1.set_ylabel("growth of 1")
    ax1.set_title(title)
    ax1.legend(loc="upper left")
    ax2.set_ylabel("drawdown")
    ax2.legend(loc="lower left")
    return _save(fig, path)


def rolling_ic_label(window: int, panel: bool) -> str:
    """What :func:`plot_rolling_ic` draws (its axis label; report.html captions the figure
    with the same words). Bar runs draw :mod:`forecaster.reporting.bar_figures` instead."""
    return (f"{window}-day rolling mean of daily rank IC" if panel
            else f"{window}-day rolling correlation of forecast and actual")


def plot_rolling_ic(predictions: pd.DataFrame, daily_ic: pd.DataFrame, path: str | Path,
                    window: int = ROLLING_IC_WINDOW) -> Path:
    """Rolling mean IC per model: the daily cross-sectional rank IC for panels, else the
    rolling time-series correlation of forecast and actual. A model without any value (a constant
    forecast such as zero has no correlation) has no line, so it is named in the title
    instead of the legend."""
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
    # Model colours, never red or green (gains and losses); past eight models they repeat
    # dashed. The Transformer is drawn in black, thicker, so it stands out among fifteen lines.
    others = [n for n in curves.columns if str(n) not in empty and n != "transformer"]
    for i, name in enumerate(others):
        ax.plot(curves.index, curves[name], lw=0.8, label=str(name),
                color=MODEL_COLORS[i % len(MODEL_COLORS)], ls="-" if i < len(MODEL_COLORS) else "--")
    if "transformer" in curves.columns and "transformer" not in empty:
        ax.plot(curves.index, curves["transformer"], lw=1.6, color="k", label="transformer")
    ax.axhline(0, color="k", lw=0.5)
    locator = mdates.AutoDateLocator(maxticks=10)  # a short run's day ticks must not collide
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_ylabel(ylabel, fontsize=9)
    title = ylabel
    if empty:
        title += f"\nnot drawn (no {'rank IC' if panel else 'correlation'}, e.g. a constant forecast): " + \
            ", ".join(empty)
    ax.set_title(title, fontsize=10)
    if len(empty) < len(curves.columns):
        ax.legend(loc="upper left", ncol=4, fontsize=8)
    return _save(fig, path)


def plot_fold_metrics(per_fold: pd.DataFrame, path: str | Path) -> Path:
    """R^2 against zero and IC per fold for each model. The R^2 axis is clipped around the
    bulk of the models so that one wild baseline (the seed recipe) cannot flatten the rest;
    clipped models are marked in the legend."""
    panel = "daily_rank_ic_mean" in per_fold and per_fold["daily_rank_ic_mean"].notna().any()
    ic_col = "daily_rank_ic_mean" if panel else "pearson_ic"
    r2 = per_fold.dropna(subset=["r2_oos_zero"])
    typical = r2.groupby("model")["r2_oos_zero"].median().abs() <= 0.5  # sane forecasters
    bulk = r2.loc[r2["model"].map(typical), "r2_oos_zero"]
    lo, hi = (bulk.min(), bulk.max()) if len(bulk) else (-0.1, 0.1)
    pad = max(0.25 * (hi - lo), 0.01)
    lo, hi = lo - pad, hi + pad
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 6), sharex=True)
    for name, g in per_fold.groupby("model"):
        if g["r2_oos_zero"].notna().any():
            clipped = ((g["r2_oos_zero"] < lo) | (g["r2_oos_zero"] > hi)).any()
            ax1.plot(g["fold"], g["r2_oos_zero"].clip(lo, hi), marker=".", lw=0.8,
                     label=f"{name} (clipped)" if clipped else name)
        ax2.plot(g["fold"], g[ic_col], marker=".", lw=0.8, label=name)
    ax1.set_ylim(lo, hi)
    ax1.axhline(0, color="k", lw=0.5)
    ax1.set_ylabel("R^2 vs zero forecast")
    if ax1.get_legend_handles_labels()[0]:  # factor scores only: no R^2 to draw
        ax1.legend(loc="lower left", ncol=4, fontsize=8)
    ax2.axhline(0, color="k", lw=0.5)
    ax2.set_ylabel("mean daily rank IC" if panel else "correlation of forecast and actual")
    ax2.set_xlabel("fold")
    ax2.legend(loc="lower left", ncol=5, fontsize=8)
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
    """Diebold-Mariano p-values of the model against each baseline (bars), coloured by
    significance and direction (:func:`dm_colors`): red, the model's squared error is
    significantly lower; green, significantly higher; grey, no significant difference."""
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(max(7.0, 0.9 * len(dm) + 2), 4.2))
    names = [str(b) for b in dm["baseline"]]
    p_values = dm["p_value"].to_numpy(dtype=float)
    colors = dm_colors(dm, alpha)
    ax.bar(names, p_values, color=colors)
    # the significant bars are the short ones: say each p-value above its bar
    for x, (p, color) in enumerate(zip(p_values, colors, strict=True)):
        text = "no test" if not np.isfinite(p) else "p < 0.001" if p < 0.001 else f"p = {p:.3f}"
        ax.text(x, max(p if np.isfinite(p) else 0, alpha) + 0.012, text, ha="center", va="bottom", fontsize=7,
                color="0.35" if color == NEUTRAL else color)
    line = ax.axhline(alpha, color="k", ls="--", lw=0.8, label=f"p = {alpha:g}")
    handles = [Patch(color=GAIN, label=f"{model} significantly better (p < {alpha:g})"),
               Patch(color=LOSS, label=f"{model} significantly worse (p < {alpha:g})"),
               Patch(color=NEUTRAL, label="no significant difference"), line]
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("two-sided p-value")
    ax.tick_params(axis="x", labelsize=8, labelrotation=30)
    for label in ax.get_xticklabels():
        label.set_horizontalalignment("right")
    ax.set_title(f"Diebold-Mariano test of squared errors: {model} vs each baseline", fontsize=9)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return _save(fig, path)


def plot_quantile_returns(summary: dict[str, dict], path: str | Path, title: str = "") -> Path:
    """Mean label return (bps) per forecast quantile, one bar group per quantile and one bar
    colour per model, so monotonicity is visible at a glance.

    Args:
        summary: model name -> :func:`forecaster.metrics.quantile_summary` dict (uses ``mean``,
            ``spread_t_stat`` and ``monotonicity``). NaN means leave a gap.
    """
    names = list(summary)
    n_q = max((len(s.get("mean", [])) for s in summary.values()), default=0)
    width = 0.8 / max(len(names), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * n_q + 3), 4.2))
    x = np.arange(1, n_q + 1)
    for i, name in enumerate(names):
        s = summary[name]
        means = np.full(n_q, np.nan)
        values = np.asarray(s.get("mean", []), dtype=float) * 1e4
        means[: len(values)] = values
        t, mono = s.get("spread_t_stat", np.nan), s.get("monotonicity", np.nan)
        label = f"{name} (spread t {t:+.2f}, monotonicity {mono:+.2f})"
        ok = np.isfinite(means)
        ax.bar(x[ok] - 0.4 + width * (i + 0.5), means[ok], width=width,
               color=MODEL_COLORS[i % len(MODEL_COLORS)], label=label)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_xticks(x, [str(q) for q in x])
    ax.set_xlabel("forecast quantile (1 = lowest forecast)")
    ax.set_ylabel("mean label return (bps)")
    ax.set_title(title or "mean label return per forecast quantile")
    if names:
        ax.legend(loc="upper left", fontsize=8)
    return _save(fig, path)


def plot_ic_by_horizon(table: pd.DataFrame, path: str | Path, title: str = "") -> Path:
    """Mean daily rank IC against label horizon, one line per model.

    Args:
        table: index = model names, columns = horizons in trading days (e.g. 1, 5, 20),
            values = mean rank IC. NaN cells are skipped (the line joins the remaining points).
    """
    horizons = np.asarray(table.columns, dtype=float)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (name, row) in enumerate(table.iterrows()):
        values = row.to_numpy(dtype=float)
        ok = np.isfinite(values)
        ax.plot(horizons[ok], values[ok], marker="o", lw=1.2, color=MODEL_COLORS[i % len(MODEL_COLORS)],
                label=str(name))  # the colours of plot_quantile_returns
    ax.axhline(0, color="k", lw=0.5)
    if len(horizons):
        ax.set_xticks(horizons, [f"{h:g}" for h in horizons])
    ax.set_xlabel("horizon (trading days)")
    ax.set_ylabel("mean daily rank IC")
    ax.set_title(title or "rank IC by label horizon")
    if len(table.index):
        ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def ranked_list_title(table: pd.DataFrame, n: int = 10, signal_date=None, train_end=None) -> str:
    """The title of :func:`plot_ranked_list`: how many stocks it shows out of how many, and
    the signal date and the model's training end when given."""
    scored = table.dropna(subset=["score"])
    n_scored = len(scored)
    n_shown = len(pd.concat([scored.head(n), scored.tail(n)]).drop_duplicates("code"))
    if n_shown == n_scored:
        what = f"all {plural(n_scored, 'scored stock')}" if n_scored != 1 else "the one scored stock"
    else:
        what = f"top {n} and bottom {n} of {plural(n_scored, 'scored stock')}"
    lines = [f"{what}, ranked for the next open"]
    when = []
    if signal_date is not None:
        when.append(f"signal date {_day(signal_date)}")
    if train_end is not None:
        when.append(f"model trained on data up to {_day(train_end)}")
    if when:
        lines.append("; ".join(when))
    lines.append("hatched: cannot be bought at the next open; red: score above 0, green: below")
    unscored = len(table) - n_scored
    if unscored:
        lines.append(f"{plural(unscored, 'stock')} without a score (too new or missing inputs) not shown")
    return "\n".join(lines)


def plot_ranked_list(table: pd.DataFrame, path: str | Path, n: int = 10, title: str = "",
                     signal_date=None, train_end=None) -> Path:
    """The ``n`` best and ``n`` worst scores of a ranked list
    (:func:`forecaster.portfolio.next_day.ranked_list`), every score when there are at most
    ``2 n``; red bars score above zero, green below (A-share colours), hatched bars cannot be
    bought at the next open.

    Args:
        title: replaces the first line of the title (default: what is shown, out of how many).
        signal_date: the last day of the data the scores are made from (e.g. ``grid.dates[-1]``);
            None leaves it out of the title.
        train_end: the last day the model was trained on (``model.train_end_``); None leaves it out.
    """
    scored = table.dropna(subset=["score"])
    shown = pd.concat([scored.head(n), scored.tail(n)]).drop_duplicates("code")
    fig, ax = plt.subplots(figsize=(7.5, 0.28 * len(shown) + 1.8))
    y = np.arange(len(shown))
    bars = ax.barh(y, shown["score"].to_numpy(dtype=float), color=sign_colors(shown["score"]))
    for bar, ok in zip(bars, shown["buyable"], strict=True):
        if not ok:
            bar.set_hatch("///")
            bar.set_alpha(0.5)
    ax.set_yticks(y, [f"{r}. {c}" for r, c in zip(shown["rank"], shown["code"], strict=True)], fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="#444", lw=0.8)
    if len(shown) < len(scored):  # the stocks ranked between the top and the bottom group are left out
        ax.axhline(n - 0.5, color="#444", lw=0.8, ls=":")
    ax.set_xlabel("score (higher = expected to beat the others)")
    text = ranked_list_title(table, n, signal_date, train_end)
    if title:
        text = "\n".join([title, *text.split("\n")[1:]])
    ax.set_title(text, fontsize=9)
    return _save(fig, path)


def plot_panel_training(histories: list[list[dict]], path: str | Path) -> Path:
    """Training loss and validation rank IC per epoch, one line per seed."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    for i, history in enumerate(histories):
        h = pd.DataFrame(history)
        a.plot(h["epoch"], h["train_loss"], marker="o", label=f"seed {i}")
        if "val_rank_ic" in h:
            b.plot(h["epoch"], h["val_rank_ic"], marker="o", label=f"seed {i}")
    a.set(xlabel="epoch", ylabel="training loss", title="training loss")
    b.set(xlabel="epoch", ylabel="mean daily rank IC", title="validation rank IC (early stopping)")
    b.axhline(0, color="#444", lw=0.8)
    if not any("val_rank_ic" in row for history in histories for row in history):
        b.text(0.5, 0.5, "no validation days held out\n(a fixed schedule: every training day)",
               ha="center", va="center", transform=b.transAxes, fontsize=9, color="#444")
        b.set(xticks=[], yticks=[], ylabel="")
    a.legend(fontsize=8)
    return _save(fig, path)
