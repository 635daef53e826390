"""Key figures of several report folders side by side (``forecaster compare``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

COLUMNS = ("model", "rank_ic", "icir", "best_baseline", "baseline_rank_ic", "ic_diff_p", "ann_return",
           "excess_ann", "sharpe", "max_dd", "turnover", "costs_pct", "folds", "stocks")


def _num(x) -> float:
    return math.nan if x is None else float(x)


def report_row(folder: str | Path) -> dict:
    """The model under test's figures from ``folder/metrics.json``.

    Raises:
        ValueError: the folder has no readable ``metrics.json``.
    """
    path = Path(folder) / "metrics.json"
    try:
        m = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ValueError(f"{folder}: not a report folder (no metrics.json)") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
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
        "sharpe": _num(strat.get("sharpe")), "max_dd": _num(strat.get("max_drawdown")),
        "turnover": _num(strat.get("turnover")),
        # costs a year as a share of the final equity (metrics.json keeps no mean equity)
        "costs_pct": 100 * _num(strat.get("costs_paid")) / equity / years if equity and years else math.nan,
        "folds": len(m.get("folds", [])), "stocks": (m.get("universe") or {}).get("used", math.nan),
    }


def compare_reports(folders: list[str | Path]) -> pd.DataFrame:
    """One row per report folder (index: the folder), columns :data:`COLUMNS`."""
    rows = [report_row(f) for f in folders]
    return pd.DataFrame(rows).set_index("report")[list(COLUMNS)]


def plot_comparison(table: pd.DataFrame, path: str | Path) -> Path:
    """Bars of rank IC, ICIR, excess return and turnover per report."""
    from forecaster.reporting.figures import plt, save_figure

    names = [Path(str(i)).name or str(i) for i in table.index]
    panels = [("rank_ic", "daily rank IC"), ("icir", "ICIR"), ("excess_ann", "excess return / yr"),
              ("turnover", "turnover / yr")]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 3.2 + 0.15 * len(names)))
    for ax, (col, title) in zip(axes, panels, strict=True):
        ax.barh(names, table[col].to_numpy(dtype=float), color="#0969da")
        ax.axvline(0, color="#444", lw=0.8)
        ax.set_title(title, fontsize=10)
        ax.tick_params(labelsize=8)
        ax.invert_yaxis()
    for ax in axes[1:]:
        ax.set_yticklabels([])
    return save_figure(fig, path)
