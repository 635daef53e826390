"""Figures: attention heatmaps and positional-encoding curves (matplotlib, Agg backend, PNG)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from .core import atomic_write, sinusoidal_table  # noqa: E402

# Twice the 110 dpi the figures were sized for: sharp on a high-density screen and on paper.
DPI = 220


def save_figure(fig, path: str | Path, layout: bool = True) -> Path:
    """Lay out (unless ``layout`` is False: the figure lays itself out), write as PNG through
    :func:`seq2seq.core.atomic_write` (the folder created; an existing file only ever replaced
    by a whole one, and recorded in an output folder's manifest) and close ``fig``; returns the
    path. The translator's figure writer (the forecaster has its own,
    forecaster.reporting.figures)."""
    path = Path(path)
    if layout:
        fig.tight_layout()
    with atomic_write(path) as f:
        fig.savefig(f, dpi=DPI, format="png")
    plt.close(fig)
    return path


def _grid(n: int) -> tuple[int, int]:
    cols = min(n, 4)
    return math.ceil(n / cols), cols


def attention_axis_labels(title: str) -> tuple[str, str]:
    """``(x, y)`` axis titles of an attention heatmap, from what its title says it shows:
    columns are the attended (key) tokens, rows the attending (query) tokens."""
    t = title.lower()
    if "encoder" in t:
        return "source token attended to (key)", "source token attending (query)"
    if "decoder" in t and "self" in t:
        return "target input token attended to (key)", "target token being produced (query)"
    if "cross" in t:
        return "source token attended to (key)", "target token being produced (query)"
    return "key token (attended to)", "query token (attending)"


def plot_attention(weights: torch.Tensor, query_tokens: Sequence[str], key_tokens: Sequence[str],
                   path: str | Path, title: str = "", head_titles: Sequence[str] | None = None,
                   xlabel: str | None = None, ylabel: str | None = None) -> Path:
    """Heatmaps of attention probabilities, one panel per head, square cells, axis titles
    (``xlabel``/``ylabel``; default from the title: source and target, key and query) and one
    colour bar of the weight (0 to 1) shared by the panels.

    Args:
        weights: ``[heads, query_len, key_len]`` (or ``[query_len, key_len]`` for one panel).
        query_tokens: labels of the rows (y axis), ``query_len`` of them.
        key_tokens: labels of the columns (x axis), ``key_len`` of them.
        path: PNG file to write.
    """
    w = weights.detach().float().cpu()
    if w.dim() == 2:
        w = w[None]
    if w.dim() != 3 or w.shape[1:] != (len(query_tokens), len(key_tokens)):
        raise ValueError(f"weights of shape {tuple(weights.shape)} do not match {len(query_tokens)} query "
                         f"and {len(key_tokens)} key tokens")
    default_x, default_y = attention_axis_labels(title)
    xlabel, ylabel = xlabel or default_x, ylabel or default_y
    rows, cols = _grid(w.size(0))
    cell = 0.32
    width = cell * len(key_tokens) + 2.2
    height = cell * len(query_tokens) + 2.0
    fig, axes = plt.subplots(rows, cols, figsize=(cols * width + 1.2, rows * height + (0.5 if title else 0)),
                             squeeze=False, layout="constrained")
    image = None
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= w.size(0):
            ax.axis("off")
            continue
        image = ax.imshow(w[h].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="equal")
        ax.set_xticks(range(len(key_tokens)), labels=list(key_tokens), rotation=90, fontsize=8)
        ax.set_yticks(range(len(query_tokens)), labels=list(query_tokens), fontsize=8)
        if h // cols == rows - 1 or h + cols >= w.size(0):
            ax.set_xlabel(xlabel, fontsize=9)
        if h % cols == 0:
            ax.set_ylabel(ylabel, fontsize=9)
        if head_titles is not None:
            ax.set_title(head_titles[h], fontsize=9)
        elif w.size(0) > 1:
            ax.set_title(f"head {h}", fontsize=9)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path, layout=False)


def plot_positional_encoding(d_model: int, max_len: int, dims: Sequence[int], path: str | Path) -> Path:
    """Sinusoidal positional encoding: the chosen dimensions as curves over positions (top)
    and the whole ``[max_len, d_model]`` table as a heatmap (bottom)."""
    table = sinusoidal_table(max_len, d_model)
    bad = [d for d in dims if not 0 <= d < d_model]
    if bad:
        raise ValueError(f"dimensions {bad} are outside 0..{d_model - 1}")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8))
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        top.plot(range(max_len), table[:, d].numpy(), label=f"dim {d} ({kind}, wavelength "
                 f"{2 * math.pi * 10000 ** ((d - d % 2) / d_model):.0f})")
    top.set_xlabel("position")
    top.set_ylabel("value")
    top.set_title(f"Sinusoidal positional encoding, d_model={d_model}")
    top.legend(fontsize=8, loc="upper right")
    im = bottom.imshow(table.T.numpy(), aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    bottom.set_xlabel("position")
    bottom.set_ylabel("dimension")
    fig.colorbar(im, ax=bottom)
    return save_figure(fig, path)
