"""The forecaster's figure writer: matplotlib on the Agg backend (files only, never a display),
PNGs written atomically at twice the screen resolution (:data:`DPI`), the A-share colours for
gains and losses, one colour and line style per model across every figure of a report
(:func:`model_styles`: the main model black, thick and on top), legends outside the data and
a CJK font for stock names (Noto Sans CJK, shipped as a dependency)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402

from seq2seq.core import atomic_write  # noqa: E402

# Fonts for Chinese stock names, tried after the default for the glyphs it lacks (matplotlib
# falls back glyph by glyph). The project ships Noto Sans CJK (OFL, the `manimgx-fonts-cjk`
# package) so names draw on any machine; a system CJK font is used where that package is absent.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
             "Source Han Sans SC", "SimHei", "Microsoft YaHei", "PingFang SC", "AR PL UMing CN")


def _register_packaged_cjk_font() -> None:
    """Add the packaged Noto Sans CJK collection to matplotlib's font list. It is a variable font
    whose default instance is weight 100; it is listed as regular (400) and bold (700) so that
    matplotlib picks it for ordinary and bold labels without a "Failed to find font weight"
    message (it draws the default instance either way: matplotlib does not set variation axes)."""
    try:
        import manimgx_fonts_cjk
    except ImportError:
        return
    path = Path(manimgx_fonts_cjk.__file__).with_name("NotoSansCJK-VF.otf.ttc")
    if not path.is_file():
        return
    manager = font_manager.fontManager
    known = {f.fname for f in manager.ttflist}
    if str(path) not in known:
        manager.addfont(str(path))
    ours = [f for f in manager.ttflist if f.fname == str(path)]
    manager.ttflist = [f for f in manager.ttflist if f.fname != str(path)] + [
        dataclasses.replace(f, weight=weight) for weight in (400, 700) for f in ours]


_register_packaged_cjk_font()
_installed = {f.name for f in font_manager.fontManager.ttflist}
CJK_FONT = next((name for name in CJK_FONTS if name in _installed), None)
if CJK_FONT and CJK_FONT not in matplotlib.rcParams["font.family"]:
    matplotlib.rcParams["font.family"] = [*matplotlib.rcParams["font.family"], CJK_FONT]
# Twice the 110 dpi the figures were sized for: sharp on a high-density screen and on paper.
DPI = 220
# zlib level of the PNGs: 3 wrote a 2,600-pixel equity figure in 0.21 s against 0.33 s at
# Pillow's default 6, for 14 % more bytes (a report writes ten or more figures every run).
PNG_COMPRESSION = 3

# A-share convention: red is up, green is down (the opposite of most Western charts).
GAIN, LOSS = "#d62728", "#2ca02c"
# Neither: no sign, or a difference that is not significant.
NEUTRAL = "#9a9a9a"
# One colour per model where bars or points are returns: the default cycle without its red
# and green, which would read as gain and loss.
MODEL_COLORS = ("C0", "C1", "C4", "C5", "C6", "C7", "C8", "C9")
# The main model (the Transformer) in every figure: black, thicker, drawn over the others.
MAIN_COLOR = "#000000"
BENCHMARK_STYLE = {"color": "#6e6e6e", "ls": "--", "lw": 1.2, "zorder": 2}
INDEX_STYLE = {"color": "#6e6e6e", "ls": ":", "lw": 1.4, "zorder": 2}
# Days in the report's rolling-IC window (the figure and its caption in report.html).
ROLLING_IC_WINDOW = 63


def sign_colors(values) -> list[str]:
    """:data:`GAIN` for each positive value, :data:`LOSS` for each negative one and
    :data:`NEUTRAL` for zero or NaN."""
    return [GAIN if v > 0 else LOSS if v < 0 else NEUTRAL for v in (float(x) for x in values)]


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``"1 stock"``, ``"2 stocks"``: the count and the noun in the right number."""
    return f"{n} {noun if n == 1 else nouns or noun + 's'}"


def model_styles(models, main: str | None = "transformer") -> dict[str, dict]:
    """``{model: matplotlib keywords}``: one colour and line style per model, the same in every
    figure that is given this map. ``main`` is black, thicker and drawn on top; the others
    take :data:`MODEL_COLORS` in the order given (never red or green, which read as gain and
    loss), dashed past eight."""
    styles, i = {}, 0
    for name in models:
        name = str(name)
        if name in styles:
            continue
        if name == main:
            styles[name] = {"color": MAIN_COLOR, "lw": 2.2, "ls": "-", "zorder": 6}
        else:
            styles[name] = {"color": MODEL_COLORS[i % len(MODEL_COLORS)], "lw": 1.2,
                            "ls": "-" if i < len(MODEL_COLORS) else "--", "zorder": 4}
            i += 1
    return styles


def style_of(styles: dict | None, name: str, main: str | None = "transformer") -> dict:
    """The keywords of ``name`` in ``styles`` (a model the map lacks gets a grey thin line;
    without a map, :func:`model_styles` of that one model)."""
    if styles is None:
        return model_styles([name], main)[str(name)]
    return styles.get(str(name), {"color": "#b0b0b0", "lw": 0.9, "ls": "-", "zorder": 3})


def legend_outside(ax, handles=None, labels=None, title: str | None = None, fontsize: float = 8,
                   first: str | None = None, width: int = 38, **kwargs):
    """A legend to the right of ``ax``, outside the data area (none when nothing is labelled):
    the entry ``first`` (the main model) at the top, labels wrapped at ``width`` characters so
    a long one cannot squeeze the axes."""
    import textwrap

    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    order = sorted(range(len(labels)), key=lambda i: labels[i] != first) if first else range(len(labels))
    handles = [handles[i] for i in order]
    labels = ["\n".join(textwrap.wrap(str(labels[i]), width)) or str(labels[i]) for i in order]
    return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
                     frameon=False, fontsize=fontsize, title=title, title_fontsize=fontsize, **kwargs)


def date_axis(ax, maxticks: int = 10) -> None:
    """Concise date ticks (a short run's days must not collide)."""
    locator = mdates.AutoDateLocator(maxticks=maxticks)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def percent_axis(ax, axis: str = "y", decimals: int | None = None) -> None:
    """Tick labels of fractions as percentages (``0.12`` -> ``12%``)."""
    from matplotlib.ticker import PercentFormatter

    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(PercentFormatter(1.0, decimals=decimals))


def save_figure(fig, path: str | Path, dpi: int = DPI, layout: bool = True) -> Path:
    """Lay out ``fig`` (unless ``layout`` is False: the caller has), write it to ``path`` as
    PNG (folder created; an existing file is only ever replaced by a whole one) and close it;
    returns the path."""
    path = Path(path)
    if layout:
        fig.tight_layout()
    with atomic_write(path) as f:
        fig.savefig(f, dpi=dpi, format="png", bbox_inches="tight", pad_inches=0.08,
                    pil_kwargs={"compress_level": PNG_COMPRESSION})
    plt.close(fig)
    return path


__all__ = ["BENCHMARK_STYLE", "CJK_FONT", "DPI", "GAIN", "INDEX_STYLE", "LOSS", "MAIN_COLOR", "MODEL_COLORS",
           "NEUTRAL", "ROLLING_IC_WINDOW", "date_axis", "legend_outside", "model_styles", "percent_axis",
           "plt", "plural", "save_figure", "sign_colors", "style_of"]
