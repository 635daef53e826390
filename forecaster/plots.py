"""PNG plots of forecasts, implied prices, attention and training curves (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the headless backend)
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_forecast_vs_actual(forecast: pd.Series, actual: pd.Series, path: str | Path,
                            title: str = "") -> Path:
    """Daily forecast and realised log returns over time, and their scatter."""
    actual = actual.reindex(forecast.index)
    ok = actual.notna()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [2.2, 1]})
    ax1.plot(actual.index, actual, lw=0.6, color="0.6", label="actual")
    ax1.plot(forecast.index, forecast, lw=0.9, color="C0", label="forecast")
    ax1.axhline(0, color="k", lw=0.5)
    ax1.set_ylabel("daily log return")
    ax1.legend(loc="upper left")
    ax1.set_title(title or "forecast vs actual daily log return")
    corr = float(np.corrcoef(forecast[ok], actual[ok])[0, 1]) if ok.sum() > 2 else float("nan")
    hit = float((np.sign(forecast[ok]) == np.sign(actual[ok])).mean()) if ok.any() else float("nan")
    ax2.scatter(forecast[ok], actual[ok], s=4, alpha=0.5)
    ax2.axhline(0, color="k", lw=0.5)
    ax2.axvline(0, color="k", lw=0.5)
    ax2.set_xlabel("forecast")
    ax2.set_ylabel("actual")
    ax2.set_title(f"corr {corr:+.3f}, sign hit rate {hit:.1%}")
    return _save(fig, path)


def plot_price_path(frame: pd.DataFrame, forecast: pd.Series, path: str | Path) -> Path:
    """Two price views of return forecasts.

    Top: the one-step implied price ``previous close * exp(forecast)`` next to the close. It
    always hugs the price, whatever the forecast's skill, because it starts from yesterday's
    close (the seed's plot looked good for this reason). Bottom: the honest view, cumulative
    log return of actual vs forecast.
    """
    close = frame["close"].reindex(forecast.index)
    prev = frame["preclose"] if "preclose" in frame.columns else frame["close"].shift(1)
    implied = prev.reindex(forecast.index) * np.exp(forecast)
    actual = np.log(frame["close"] / prev).reindex(forecast.index).fillna(0.0)
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
