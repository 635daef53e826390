"""The forecaster's figure writer: matplotlib on the Agg backend (files only, never a display),
PNGs written atomically, and the A-share colours for gains and losses."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from seq2seq.core import atomic_write  # noqa: E402

# A-share convention: red is up, green is down (the opposite of most Western charts).
GAIN, LOSS = "#d62728", "#2ca02c"
# Neither: no sign, or a difference that is not significant.
NEUTRAL = "#9a9a9a"
# One colour per model where bars or points are returns: the default cycle without its red
# and green, which would read as gain and loss.
MODEL_COLORS = ("C0", "C1", "C4", "C5", "C6", "C7", "C8", "C9")
# Days in the report's rolling-IC window (the figure and its caption in report.html).
ROLLING_IC_WINDOW = 63


def sign_colors(values) -> list[str]:
    """:data:`GAIN` for each positive value, :data:`LOSS` for each negative one and
    :data:`NEUTRAL` for zero or NaN."""
    return [GAIN if v > 0 else LOSS if v < 0 else NEUTRAL for v in (float(x) for x in values)]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``"1 stock"``, ``"2 stocks"``: the count and the noun in the right number."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def save_figure(fig, path: str | Path, dpi: int = 110, layout: bool = True) -> Path:
    """Lay out ``fig`` (unless ``layout`` is False: the caller has), write it to ``path`` as
    PNG (folder created; an existing file is only ever replaced by a whole one) and close it;
    returns the path."""
    path = Path(path)
    if layout:
        fig.tight_layout()
    with atomic_write(path) as f:
        fig.savefig(f, dpi=dpi, format="png")
    plt.close(fig)
    return path


__all__ = ["GAIN", "LOSS", "MODEL_COLORS", "NEUTRAL", "ROLLING_IC_WINDOW", "plt", "plural", "save_figure",
           "sign_colors"]
