"""The figure of a bar run (one stock's minute bars): each model's rank IC by bar of the day,
across days (:func:`forecaster.metrics.bars.bar_positions`), instead of a rolling within-day
IC, which rewards forecasts that lean against the recent move whatever their skill."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.reporting.figures import MODEL_COLORS, plt, save_figure

BAR_POSITION_LABEL = "rank IC by bar of the day, across days (band: +/- 2 standard errors of a zero IC)"


def plot_bar_position_ic(positions: pd.DataFrame, path: str | Path, models: list[str] | None = None) -> Path:
    """One line per model (``models``: those shown, the main model first and drawn black):
    the rank IC of each bar position (its closing time) across days; the grey band is +/- 2 /
    sqrt(days), where a forecast without skill lies about 95 % of the time. A model without
    any value (a constant forecast) is named in the title instead."""
    fig, ax = plt.subplots(figsize=(12, 4.5))
    models = models or sorted(positions["model"].unique())
    closes = sorted(positions["bar_close"].unique())
    x = np.arange(len(closes))
    days = positions.groupby("bar_close")["n_days"].max().reindex(closes).to_numpy(float)
    band = 2 / np.sqrt(np.maximum(days, 1))
    ax.fill_between(x, -band, band, color="0.88", label="+/- 2 s.e.")
    empty = []
    for i, name in enumerate(models):
        ic = positions[positions["model"] == name].set_index("bar_close")["rank_ic"].reindex(closes)
        if not ic.notna().any():
            empty.append(str(name))
            continue
        main = i == 0
        ax.plot(x, ic.to_numpy(float), marker="o", ms=3, lw=1.6 if main else 0.9, label=str(name),
                color="k" if main else MODEL_COLORS[(i - 1) % len(MODEL_COLORS)])
    ax.axhline(0, color="k", lw=0.5)
    step = max(1, len(closes) // 16)
    ax.set_xticks(x[::step], closes[::step], fontsize=8)
    ax.set_xlabel("bar of the day (closing time)")
    ax.set_ylabel("rank IC across days", fontsize=9)
    title = BAR_POSITION_LABEL
    if empty:
        title += "\nnot drawn (no rank IC, e.g. a constant forecast): " + ", ".join(empty)
    ax.set_title(title, fontsize=10)
    # outside the axes: inside it would hide the first bars' points
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, borderaxespad=0.0)
    return save_figure(fig, path)
