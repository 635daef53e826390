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


def save_figure(fig, path: str | Path, dpi: int = 110) -> Path:
    """Lay out ``fig``, write it to ``path`` as PNG (folder created; an existing file is only
    ever replaced by a whole one) and close it; returns the path."""
    path = Path(path)
    fig.tight_layout()
    with atomic_write(path) as f:
        fig.savefig(f, dpi=dpi, format="png")
    plt.close(fig)
    return path


__all__ = ["GAIN", "LOSS", "plt", "save_figure"]
