"""Figures: attention heatmaps and positional-encoding curves (matplotlib, Agg backend, PNG)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from .core import sinusoidal_table  # noqa: E402


def save_figure(fig, path: str | Path) -> Path:
    """Lay out, write as PNG (creating the folder) and close ``fig``; returns the path.
    The translator's figure writer (the forecaster has its own, forecaster.reporting.figures)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _grid(n: int) -> tuple[int, int]:
    cols = min(n, 4)
    return math.ceil(n / cols), cols


def plot_attention(weights: torch.Tensor, query_tokens: Sequence[str], key_tokens: Sequence[str],
                   path: str | Path, title: str = "", head_titles: Sequence[str] | None = None) -> Path:
    """Heatmaps of attention probabilities, one panel per head.

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
    rows, cols = _grid(w.size(0))
    size = 0.35 * max(len(key_tokens), len(query_tokens)) + 1.5
    fig, axes = plt.subplots(rows, cols, figsize=(cols * size, rows * size), squeeze=False)
    for h in range(rows * cols):
        ax = axes[h // cols][h % cols]
        if h >= w.size(0):
            ax.axis("off")
            continue
        ax.imshow(w[h].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(key_tokens)), labels=list(key_tokens), rotation=90, fontsize=8)
        ax.set_yticks(range(len(query_tokens)), labels=list(query_tokens), fontsize=8)
        if head_titles is not None:
            ax.set_title(head_titles[h], fontsize=9)
        elif w.size(0) > 1:
            ax.set_title(f"head {h}", fontsize=9)
    if title:
        fig.suptitle(title)
    return save_figure(fig, path)


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
