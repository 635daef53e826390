"""Key figures of several report folders side by side (``forecaster compare``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from forecaster.data.sources import DataError

COLUMNS = ("model", "rank_ic", "icir", "best_baseline", "baseline_rank_ic", "ic_diff_p", "ann_return",
           "excess_ann", "sharpe", "max_dd", "turnover", "costs_pct", "folds", "stocks")


def _num(x) -> float:
    return math.nan if x is None else float(x)


def report_row(folder: str | Path) -> dict:
    """The model under test's figures from ``folder/metrics.json``.

    Raises:
        DataError: the folder has no readable ``metrics.json``.
    """
    path = Path(folder) / "metrics.json"
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise DataError(f"{folder}: not a report folder (no metrics.json)") from exc
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc
    model = m["model"]
    ic = m.get("daily_rank_ic", {})
    mine = ic.get(model, {})
    others = {k: v for k, v in ic.items() if k != model and v.get("mean_ic") is not None}
    best = max(others, key=lambda k: others[k]["mean_ic"]) if others else None
    tests = {t["baseline"]: t for t in m.get("rank_ic_difference_tests", [])}
    bt = m.get("backtest", {}).get(model, {})
    strat, bench = bt.get("strategy", {}), bt.get("benchmark", {})
    years = _num(strat.get("n_days")) / 252 if strat.get("n_days") else math.nan
    equity = _num(strat.get("final_equity"))
    return {
        "report": str(folder), "model": model, "rank_ic": _num(mine.get("mean_ic")),
        "icir": _num(mine.get("icir")), "best_baseline": best or "",
        "baseline_rank_ic": _num(others[best]["mean_ic"]) if best else math.nan,
        "ic_diff_p": _num(tests.get(best, {}).get("p_value")) if best else math.nan,
        "ann_return": _num(strat.get("annual_return")),
        "excess_ann": _num(strat.get("annual_return")) - _num(bench.get("annual_return")),
        # a fall: negative, as the report and the scoring table show it
        "sharpe": _num(strat.get("sharpe")), "max_dd": -_num(strat.get("max_drawdown")),
        "turnover": _num(strat.get("turnover")),
        # costs a year as a share of the final equity (metrics.json keeps no mean equity)
        "costs_pct": 100 * _num(strat.get("costs_paid")) / equity / years if equity and years else math.nan,
        "folds": len(m.get("folds", [])), "stocks": (m.get("universe") or {}).get("used", math.nan),
    }


def compare_reports(folders: list[str | Path]) -> pd.DataFrame:
    """One row per report folder (index: the folder), columns :data:`COLUMNS`."""
    rows = [report_row(f) for f in folders]
    return pd.DataFrame(rows).set_index("report")[list(COLUMNS)]


def _tick_text(x, _pos=None) -> str:
    """A short tick label: three significant digits, no float noise, no ``-0``."""
    return "0" if abs(x) < 1e-12 else f"{x:.3g}"


def shown_ticklabels(ax, which: str = "both") -> list:
    """The tick labels of ``ax`` that are drawn: visible, not empty, and at a tick inside the
    view (a locator may place ticks beyond it, whose labels keep stale positions)."""
    out = []
    for axis, limits, i in (("x", ax.get_xlim(), 0), ("y", ax.get_ylim(), 1)):
        if which not in (axis, "both"):
            continue
        lo, hi = sorted(limits)
        eps = 1e-9 * max(hi - lo, 1e-300)
        labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
        out += [t for t in labels if t.get_visible() and t.get_text()
                and lo - eps <= t.get_position()[i] <= hi + eps]
    return out


def _collide(labels, renderer, pad: float = 2.0) -> bool:
    """Whether any two of ``labels`` overlap (``pad`` pixels apart at least)."""
    boxes = [t.get_window_extent(renderer).padded(pad / 2) for t in labels]
    return any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def _declutter(fig, axes, max_rounds: int = 12) -> None:
    """Lay out ``fig``, thinning the value ticks (then turning them), shrinking the name labels
    and widening the gaps between the panels until no two tick labels of the figure overlap,
    within a panel or across panels."""
    from matplotlib.ticker import MaxNLocator

    nbins = {ax: 4 for ax in axes}
    w_pad = 1.08  # tight_layout's default, in font sizes
    for _ in range(max_rounds):
        fig.tight_layout(w_pad=w_pad)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        changed = False
        for ax in axes:
            if _collide(shown_ticklabels(ax, "x"), renderer):
                if nbins[ax] > 2:
                    nbins[ax] -= 1
                    ax.xaxis.set_major_locator(MaxNLocator(nbins=nbins[ax]))
                else:
                    ax.tick_params(axis="x", labelrotation=45)
                changed = True
        names = shown_ticklabels(axes[0], "y")
        if _collide(names, renderer):
            size = names[0].get_fontsize() if names else 8
            axes[0].tick_params(axis="y", labelsize=max(size - 1, 4))
            changed = True
        if changed:
            continue
        # the last tick label of one panel against the first of the next
        if not _collide([t for ax in axes for t in shown_ticklabels(ax)], renderer):
            return
        w_pad += 1.5


def plot_comparison(table: pd.DataFrame, path: str | Path) -> Path:
    """Bars of rank IC, ICIR, excess return and turnover per report (one row per report,
    in the table's order; no two tick labels overlap, whatever the number of reports)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    from forecaster.reporting.figures import plt, save_figure

    names = [Path(str(i)).name or str(i) for i in table.index]
    panels = [("rank_ic", "daily rank IC"), ("icir", "ICIR"), ("excess_ann", "excess return / yr"),
              ("turnover", "turnover / yr")]
    y = list(range(len(names)))
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 1.9 + 0.22 * max(len(names), 3)),
                             sharey=True)
    for ax, (col, title) in zip(axes, panels, strict=True):
        # positions, not names, on the axis: two folders of the same name stay two bars
        ax.barh(y, table[col].to_numpy(dtype=float), color="#0969da")
        ax.axvline(0, color="#444", lw=0.8)
        ax.set_title(title, fontsize=10)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.xaxis.set_major_formatter(FuncFormatter(_tick_text))
        ax.tick_params(labelsize=8)
    axes[0].set_yticks(y, names)
    axes[0].set_ylim(len(names) - 0.5, -0.5)  # first report on top (the axis is shared)
    for ax in axes[1:]:
        ax.tick_params(axis="y", labelleft=False)
    _declutter(fig, axes)
    return save_figure(fig, path, layout=False)  # laid out by _declutter
