"""The figures of a book against its index, drawn from an
:class:`~forecaster.evaluation.index_daily.IndexView` (computed there, rendered here):
``index_excess.png`` (cumulative excess over the total-return and the price index, the book
and the top-k book, each calendar year's excess marked), ``tracking_error.png`` (the realised
tracking error over a rolling window against the budget and the risk model's prediction, the
bias statistic in the legend), ``active_weights.png`` (the largest average over- and
underweights, named, and the active style exposures at each rebalance), ``risk_split.png``
(the predicted active risk by part) and ``next_day_active.png`` (``predict``: tomorrow's target
weights against the benchmark weights)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from forecaster.reporting.figures import (
    GAIN,
    LOSS,
    MAIN_COLOR,
    date_axis,
    legend_outside,
    percent_axis,
    plt,
    save_figure,
)

TOPK_COLOR = "C0"
INDEX_FIGURES = ("index_excess.png", "tracking_error.png", "active_weights.png", "active_industries.png",
                 "risk_split.png")


def _label(code: str, names: dict) -> str:
    name = names.get(code, "")
    return f"{code} {name}" if name else code


def plot_index_excess(view, path: str | Path) -> Path:
    """``index_excess.png``: the book's (black) and the top-k book's (blue) growth over the
    total-return index (solid) and the price index (dashed), each year's excess of the book over
    the total-return index (the price index without one) written at the top."""
    fig, ax = plt.subplots(figsize=(10.5, 4.2))
    cum = view.cumulative
    names = {"book": f"{view.model}'s {'enhanced ' if view.enhanced else ''}book",
             "topk": view.topk or "top-k book"}
    refs = {"total_return": f"{view.code} total return (est.)", "price": f"{view.code} price index"}
    has_total = "book_over_total_return" in cum and cum["book_over_total_return"].notna().any()
    for b, color, lw, z in (("book", MAIN_COLOR, 2.0, 6), ("topk", TOPK_COLOR, 1.3, 4)):  # the book on top
        for r, ls in (("total_return", "-"), ("price", "--" if has_total else "-")):
            col = f"{b}_over_{r}"
            if col in cum and cum[col].notna().any():
                ax.plot(cum.index, cum[col], color=color, ls=ls, lw=lw if ls == "-" else lw * 0.7, zorder=z,
                        label=f"{names[b]} over {refs[r]}")
    ax.axhline(0, color="#888", lw=0.8)
    key = "book_over_total_return" if view.years.get("book_over_total_return", pd.Series()).notna().any() \
        else "book_over_price"
    years = view.years[key].dropna() if key in view.years else pd.Series(dtype=float)
    if len(cum):
        lo, hi = cum.index.min(), cum.index.max()
        for y, v in years.items():
            start = max(pd.Timestamp(f"{int(y)}-01-01"), lo)
            end = min(pd.Timestamp(f"{int(y)}-12-31"), hi)
            if start > lo:
                ax.axvline(start, color="#bbb", lw=0.8, ls=":")
            ax.text(start + (end - start) / 2, 1.0, f"{int(y)}: {v:+.1%}", transform=ax.get_xaxis_transform(),
                    ha="center", va="bottom", fontsize=8, color=GAIN if v > 0 else LOSS)
    percent_axis(ax)
    date_axis(ax)
    ax.set_ylabel("cumulative excess, after costs")
    ax.set_title(f"Growth over {view.code}, after costs (year labels: the book's excess over "
                 f"{'the total-return index' if key.endswith('total_return') else 'the price index'})",
                 fontsize=10, pad=16)
    ax.grid(alpha=0.3)
    legend_outside(ax, width=34)
    return save_figure(fig, path)


def plot_tracking_error(view, path: str | Path, window: int) -> Path:
    """``tracking_error.png``: the realised tracking error over a rolling ``window`` days
    (annual) against the benchmark ``daily["active"]`` is on and against the total-return index,
    the budget and the risk model's prediction, the bias statistic in the legend."""
    fig, ax = plt.subplots(figsize=(10.5, 3.8))
    t = view.tracking
    ax.plot(t.index, t["realised"], color=MAIN_COLOR, lw=1.8,
            label=f"realised over {window} days, against {view.active_over}")
    if t["realised_total_return"].notna().any() and not view.active_over.startswith(view.code + " with"):
        ax.plot(t.index, t["realised_total_return"], color="#777", lw=1.1, ls="--",
                label=f"realised over {window} days, against {view.code} total return (est.)")
    if t["predicted"].notna().any():
        bias = f"; bias statistic {view.bias:.2f} (1: right)" if np.isfinite(view.bias) else ""
        ax.plot(t.index, t["predicted"], color=TOPK_COLOR, lw=1.8, zorder=5,
                label=f"predicted by the risk model{bias}")
    if view.budget is not None:  # under the prediction, which often sits on it
        ax.axhline(view.budget, color=GAIN, lw=2.6, alpha=0.35, zorder=1, label=f"budget {view.budget:.1%}")
    ax.set_ylim(bottom=0)
    percent_axis(ax, decimals=1)
    date_axis(ax)
    ax.set_ylabel("tracking error, a year")
    ax.set_title(f"{view.model}: tracking error, realised and predicted", fontsize=10)
    ax.grid(alpha=0.3)
    legend_outside(ax, width=34)
    return save_figure(fig, path)


def plot_active_weights(view, path: str | Path) -> Path:
    """``active_weights.png``: left, the largest average over- and underweights at the
    rebalances (code and name; coloured by industry where the run has industries, else red
    over and green under); right, the active style exposures at each rebalance."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [1, 1.35]})
    top = view.active_top
    if len(top):
        y = np.arange(len(top))[::-1]
        industry = [view.industry_of.get(str(c), "") for c in top.index]
        if view.industry_of:  # one colour an industry, in the order they first appear
            shown = list(dict.fromkeys(industry))
            cmap = plt.get_cmap("tab10" if len(shown) <= 10 else "tab20")  # tab20 pairs alike colours
            palette = {g: cmap(i % cmap.N) for i, g in enumerate(shown)}
            colors = [palette[g] for g in industry]
        else:
            colors = [GAIN if v > 0 else LOSS for v in top]
        left.barh(y, top.to_numpy(), color=colors, height=0.7)
        left.set_yticks(y, [_label(str(c), view.names) for c in top.index], fontsize=8)
        if view.industry_of:
            from matplotlib.patches import Patch

            left.legend(handles=[Patch(color=c, label=g or "no class") for g, c in palette.items()],
                        fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3, frameon=False,
                        title="industry", title_fontsize=7)
        left.axvline(0, color="#888", lw=0.8)
        left.xaxis.set_major_locator(MaxNLocator(5))  # more ticks overlap under the narrow panel
        percent_axis(left, "x", decimals=1)
    else:
        left.text(0.5, 0.5, "no active weight", ha="center", transform=left.transAxes)
    left.set_title("largest average active weights\n(over the benchmark weights, at the rebalances)",
                   fontsize=9)
    left.grid(alpha=0.3, axis="x")
    styles = view.styles
    if len(styles):
        for i, col in enumerate(styles.columns):
            right.plot(styles.index, styles[col], lw=1.2, color=f"C{i % 10}", label=col)
        right.axhline(0, color="#888", lw=0.8)
        date_axis(right, maxticks=6)
        legend_outside(right, title="style", width=20)
    right.set_title("active style exposures at each rebalance (standardised units)", fontsize=9)
    right.grid(alpha=0.3)
    return save_figure(fig, path)


def plot_risk_split(view, path: str | Path) -> Path:
    """``risk_split.png``: the predicted active risk (annual sd) at each rebalance: in all, from
    the style factors (the market's included), the statistical factors, and specific."""
    fig, ax = plt.subplots(figsize=(10.5, 3.6))
    r = view.risk_split
    for col, color, label in (("total", MAIN_COLOR, "predicted tracking error"),
                              ("styles", "C1", "from the style factors (market included)"),
                              ("statistical", "C4", "from the statistical factors"),
                              ("specific", "C0", "specific (the stocks' own)")):
        ax.plot(r.index, r[col], color=color, lw=1.8 if col == "total" else 1.2, label=label, zorder=5)
    if view.budget is not None:
        ax.axhline(view.budget, color=GAIN, lw=2.6, alpha=0.35, zorder=1, label=f"budget {view.budget:.1%}")
    ax.set_ylim(bottom=0)
    percent_axis(ax, decimals=1)
    date_axis(ax)
    ax.set_ylabel("active sd, a year")
    ax.set_title("Predicted active risk by part (parts add as variances, not as sds)", fontsize=10)
    ax.grid(alpha=0.3)
    legend_outside(ax, width=32)
    return save_figure(fig, path)


def write_index_figures(view, out: Path, window: int) -> list[Path]:
    """Every index figure ``view`` has data for, into the folder ``out``; their paths."""
    out = Path(out)
    files = [plot_index_excess(view, out / "index_excess.png"),
             plot_tracking_error(view, out / "tracking_error.png", window)]
    if len(view.active_top) or len(view.styles):
        files.append(plot_active_weights(view, out / "active_weights.png"))
    # active_industries.png is the report's (written with active_industries.csv), shown on this screen
    if len(view.risk_split):
        files.append(plot_risk_split(view, out / "risk_split.png"))
    return files


def plot_next_day_active(table: pd.DataFrame, path: str | Path, title: str, n: int = 12) -> Path:
    """``next_day_active.png``: tomorrow's target weights (bars) against the benchmark weights
    (ticks) of the ``n`` largest over- and ``n`` largest underweights; ``table``: columns
    ``code``, ``label`` (the code and name), ``target``, ``benchmark``."""
    t = table.assign(active=table["target"] - table["benchmark"])
    shown = pd.concat([t.nlargest(n, "active")[lambda d: d["active"] > 0],
                       t.nsmallest(n, "active")[lambda d: d["active"] < 0]]).sort_values("active")
    fig, ax = plt.subplots(figsize=(9, max(3.0, 0.28 * len(shown) + 1.2)))
    y = np.arange(len(shown))
    ax.barh(y, shown["target"], height=0.6, color=[GAIN if v > 0 else LOSS for v in shown["active"]],
            label="target weight (red: over, green: under the benchmark)")
    ax.scatter(shown["benchmark"], y, marker="|", s=160, color=MAIN_COLOR, zorder=5, label="benchmark weight")
    ax.set_yticks(y, list(shown["label"]), fontsize=8)
    percent_axis(ax, "x", decimals=1)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3, axis="x")
    ax.set_title(title, fontsize=10)
    legend_outside(ax, width=28)  # outside: inside it would cover a bar or a tick
    return save_figure(fig, path)


def plot_active_industries(table: pd.DataFrame, bound: float, path: str | Path) -> Path:
    """``active_industries.png``: each industry group's active weight (the book's weight in it
    less the benchmark's) at each rebalance, ``table`` as ``active_industries.csv``; the bound
    (``bound`` > 0) drawn at +-bound."""
    fig, ax = plt.subplots(figsize=(11, 4.6))
    wide = table.pivot_table(index="date", columns="industry", values="active", aggfunc="first").sort_index()
    order = wide.abs().mean().sort_values(ascending=False).index
    for i, col in enumerate(order):
        ax.plot(pd.DatetimeIndex(wide.index), wide[col], lw=1.0, color=f"C{i % 10}",
                ls="-" if i < 10 else "--", label=str(col))
    ax.axhline(0, color="#888", lw=0.8)
    if bound > 0:
        for level in (bound, -bound):
            ax.axhline(level, color="#444", lw=1.0, ls=":")
        ax.text(0.01, bound, f"the bound, ±{bound:.1%}", transform=ax.get_yaxis_transform(), fontsize=8,
                va="bottom", color="#444")
    date_axis(ax, maxticks=8)
    percent_axis(ax, "y", decimals=1)
    legend_outside(ax, title="industry", width=18)
    ax.set_title("active weight of each industry group at each rebalance (the book's held weight less the "
                 "benchmark's)", fontsize=9)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)
