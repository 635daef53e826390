"""Figures of a trained run, for daily use (``forecaster train``, ``predict`` and ``plot``):
the training curves with the loss named and the chosen epoch marked, tomorrow's ranked list
(names, held stocks and stocks at a price limit marked), one stock's implied price path and
attention over its input window. Written through
:func:`forecaster.reporting.figures.save_figure` (atomic, twice the screen resolution)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from forecaster.reporting import figures
from forecaster.reporting.figures import MODEL_COLORS, legend_outside, plt, plural, sign_colors


def _save(fig, path) -> Path:
    return figures.save_figure(fig, path)


def _day(x) -> str:
    """A date as ``YYYY-MM-DD`` (Timestamp, date or text)."""
    return str(pd.Timestamp(x).date())


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


# What each training loss is, in the words of an axis label.
LOSS_NAMES = {
    "mse": "mean squared error", "gaussian": "Gaussian negative log-likelihood",
    "quantile": "quantile (pinball) loss", "ic": "minus the mean daily correlation (loss 'ic')",
    "icir": "minus the daily correlation's mean / spread (loss 'icir')",
    "pairwise": "pairwise ranking loss (RankNet)", "listnet": "ListNet ranking loss",
}


def loss_label(loss: str | None) -> str:
    """The axis label of a training loss (``None``: not known)."""
    if not loss:
        return "training loss"
    return f"training loss: {LOSS_NAMES.get(loss, loss)}"


def plot_history(history: list[dict], path: str | Path, loss: str | None = None,
                 best_epoch: int | None = None) -> Path:
    """Training and validation loss per epoch (``loss``: its name, on the axis), the chosen
    epoch marked (``best_epoch``; default: the lowest validation loss)."""
    h = pd.DataFrame(history)
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    ax.plot(h["epoch"], h["train_loss"], marker="o", label="train")
    if "val_loss" in h and h["val_loss"].notna().any():
        ax.plot(h["epoch"], h["val_loss"], marker="o", label="validation")
        if best_epoch is None:
            best_epoch = int(h.loc[h["val_loss"].idxmin(), "epoch"])
    if best_epoch is not None:
        ax.axvline(best_epoch, color="#444", ls=":", lw=1.2, label=f"chosen epoch ({best_epoch})")
    ax.set_xlabel("epoch")
    label = loss_label(loss) + ("\n(standardised returns)" if loss in (None, "mse") else "")
    ax.set_ylabel(label, fontsize=9)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    legend_outside(ax)
    return _save(fig, path)


def ranked_list_title(table: pd.DataFrame, n: int = 10, signal_date=None, train_end=None) -> str:
    """The title of :func:`plot_ranked_list`: how many stocks it shows out of how many, and
    the signal date (with the table's ``trade_date``, the day whose open the list is for, where
    it has one) and the model's training end when given."""
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
        trade = table["trade_date"].dropna() if "trade_date" in table else ()
        when.append(f"signal date {_day(signal_date)}"
                    + (f", for the open of {_day(trade.iloc[0])}" if len(trade) else ""))
    if train_end is not None:
        when.append(f"model trained on data up to {_day(train_end)}")
    if when:
        lines.append("; ".join(when))
    lines.append("hatched: cannot be bought at the next open; red: score above 0, green: below")
    marks = []
    if "held" in table and table["held"].fillna(False).astype(bool).any():
        marks.append("[held]: in the book")
    if "at_limit" in table and table["at_limit"].fillna("").astype(str).ne("").any():
        marks.append("limit-up / limit-down: closed at the limit on the signal day")
    if marks:
        lines.append("; ".join(marks))
    unscored = len(table) - n_scored
    if unscored:
        lines.append(f"{plural(unscored, 'stock')} without a score (too new or missing inputs) not shown")
    return "\n".join(lines + held_not_shown(table, n, limit=4))


# The parts of a ranked list's reason that say why a stock has no score, first match wins.
NO_SCORE = ("delisted", "in its delisting period", "no bar on the last day", "too new", "no score")


def held_not_shown(table: pd.DataFrame, n: int = 10, limit: int | None = None) -> list[str]:
    """Sentences naming the held stocks (``held``) that :func:`plot_ranked_list` does not draw,
    and why: no score (the list's ``reason``: delisted, no bar since a day, too new) or a rank
    between the top and bottom ``n``. ``limit``: codes named per sentence (the rest counted)."""
    if "held" not in table:
        return []
    held = table[table["held"].fillna(False).astype(bool)]
    scored = table.dropna(subset=["score"])
    shown = set(pd.concat([scored.head(n), scored.tail(n)])["code"])

    def named(items: list[str]) -> str:
        cut = items if limit is None else items[:limit]
        return ", ".join(cut) + (f" and {len(items) - len(cut)} more" if len(cut) < len(items) else "")

    lines = []
    unscored = held[held["score"].isna()]
    if len(unscored):
        whys = []
        for row in unscored.itertuples():
            parts = [p for p in str(getattr(row, "reason", "") or "").split("; ") if p]
            why = next((p for p in parts if p.startswith(NO_SCORE) or "delisted" in p),
                       "no score (missing inputs)")
            last = getattr(row, "last_date", None)
            if why == "no bar on the last day" and last is not None and pd.notna(last):
                why = f"no bar since {_day(last)}"
            whys.append(f"{row.code} ({why.replace('no score (missing inputs)', 'missing inputs')})")
        lines.append(f"{plural(len(unscored), 'held stock')} {'has' if len(unscored) == 1 else 'have'} "
                     f"no score, not shown: {named(whys)}")
    middle = held[held["score"].notna() & ~held["code"].isin(shown)]
    if len(middle):
        ranks = [f"{r.code} (rank {int(r.rank)} of {len(scored)})" for r in middle.itertuples()]
        lines.append(f"{plural(len(middle), 'held stock')} ranked between the top and bottom {n}, not "
                     f"shown: {named(ranks)}")
    return lines


def ranked_list_labels(shown: pd.DataFrame) -> list[str]:
    """The y labels of :func:`plot_ranked_list`: rank, code, the stock's name where the table
    has a ``name`` column, and ``[held]`` where ``held`` is true."""
    none = pd.Series("", index=shown.index)
    names = shown["name"].fillna("").astype(str) if "name" in shown else none
    held = shown["held"].fillna(False).astype(bool) if "held" in shown else none.astype(bool)
    return [f"{r}. {c}" + (f" {n}" if n else "") + (" [held]" if h else "")
            for r, c, n, h in zip(shown["rank"], shown["code"], names, held, strict=True)]


def plot_ranked_list(table: pd.DataFrame, path: str | Path, n: int = 10, title: str = "",
                     signal_date=None, train_end=None) -> Path:
    """The ``n`` best and ``n`` worst scores of a ranked list
    (:func:`forecaster.portfolio.next_day.ranked_list`), every score when there are at most
    ``2 n``; red bars score above zero, green below (A-share colours), hatched bars cannot be
    bought at the next open. Optional columns: ``name`` (shown beside the code), ``held``
    (marked ``[held]``, in bold) and ``at_limit`` (``"up"``/``"down"``: closed at that limit on
    the signal day, written beside the bar).

    Args:
        title: replaces the first line of the title (default: what is shown, out of how many).
        signal_date: the last day of the data the scores are made from (e.g. ``grid.dates[-1]``);
            None leaves it out of the title.
        train_end: the last day the model was trained on (``model.train_end_``); None leaves it out.
    """
    scored = table.dropna(subset=["score"])
    shown = pd.concat([scored.head(n), scored.tail(n)]).drop_duplicates("code")
    fig, ax = plt.subplots(figsize=(8.5, 0.28 * len(shown) + 2.0))
    y = np.arange(len(shown))
    scores = shown["score"].to_numpy(dtype=float)
    bars = ax.barh(y, scores, color=sign_colors(shown["score"]))
    for bar, ok in zip(bars, shown["buyable"], strict=True):
        if not ok:
            bar.set_hatch("///")
            bar.set_alpha(0.5)
    ax.set_yticks(y, ranked_list_labels(shown), fontsize=8)
    if "held" in shown:
        for label, held in zip(ax.get_yticklabels(), shown["held"].fillna(False).astype(bool), strict=True):
            if held:
                label.set_fontweight("bold")
    if "at_limit" in shown:
        span = float(np.nanmax(np.abs(scores))) if len(scores) else 1.0
        for yy, v, lim in zip(y, scores, shown["at_limit"].fillna("").astype(str), strict=True):
            if lim:
                ax.text(v + (0.02 if v >= 0 else -0.02) * span, yy, f"limit-{lim}", va="center",
                        ha="left" if v >= 0 else "right", fontsize=7, color="#444")
        ax.margins(x=0.18)
    ax.invert_yaxis()
    ax.axvline(0, color="#444", lw=0.8)
    if len(shown) < len(scored):  # the stocks ranked between the top and the bottom group are left out
        ax.axhline(n - 0.5, color="#444", lw=0.8, ls=":")
    ax.set_xlabel("score (higher = expected to beat the others)")
    text = ranked_list_title(table, n, signal_date, train_end)
    if title:
        text = "\n".join([title, *text.split("\n")[1:]])
    # a long note (held stocks not drawn, with their reasons) wraps within the figure's width
    ax.set_title("\n".join(textwrap.fill(line, 110) for line in text.split("\n")), fontsize=9)
    return _save(fig, path)


def plot_panel_training(histories: list[list[dict]], path: str | Path, loss: str | None = None,
                        best_epochs: list[int] | None = None) -> Path:
    """Training loss (``loss``: its name, on the axis) and validation rank IC per epoch, one
    line per seed, the chosen epoch of each seed marked (``best_epochs``; default: the epoch
    of the best validation rank IC)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    validated = any("val_rank_ic" in row for history in histories for row in history)
    for i, history in enumerate(histories):
        h = pd.DataFrame(history)
        color = MODEL_COLORS[i % len(MODEL_COLORS)]
        a.plot(h["epoch"], h["train_loss"], marker="o", ms=3, color=color, label=f"seed {i}")
        best = best_epochs[i] if best_epochs is not None and i < len(best_epochs) else None
        if "val_rank_ic" in h and h["val_rank_ic"].notna().any():
            b.plot(h["epoch"], h["val_rank_ic"], marker="o", ms=3, color=color, label=f"seed {i}")
            if best is None:
                best = int(h.loc[h["val_rank_ic"].idxmax(), "epoch"])
            row = h[h["epoch"] == best]
            if len(row):
                b.plot([best], row["val_rank_ic"], marker="*", ms=14, color=color, mec="k", ls="none",
                       label=f"seed {i}: chosen epoch {best}")
        if best is not None and validated:
            a.axvline(best, color=color, ls=":", lw=1.0)
    a.set(xlabel="epoch", title="training loss (seeds as on the right)" if validated else "training loss")
    a.set_ylabel(loss_label(loss), fontsize=9)
    b.set(xlabel="epoch", ylabel="mean daily rank IC", title="validation rank IC (early stopping)")
    for ax in (a, b):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    b.axhline(0, color="#444", lw=0.8)
    if not validated:
        b.text(0.5, 0.5, "no validation days held out\n(a fixed schedule: every training day;\n"
               "the last epochs' weights averaged)", ha="center", va="center", transform=b.transAxes,
               fontsize=9, color="#444")
        b.set(xticks=[], yticks=[], ylabel="")
        legend_outside(a)
    else:
        legend_outside(b, title="star / dotted: chosen epoch")
    return _save(fig, path)
