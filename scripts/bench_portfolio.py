"""Portfolio rules on the same forecasts: turnover, costs and excess return after costs.

Reads a report folder's ``predictions.csv`` (e.g. from ``scripts/bench_walkforward.py`` or
``forecaster backtest``) and the prices it was made from, and backtests one model's scores
under several rules (same A-share rules, costs and next-open execution). Prints one line per
rule::

    portfolio RULE turnover=12.3 costs_pct=1.23 ann_return=+0.012 excess_ann=+0.034 sharpe=0.45

``turnover``: traded value / mean equity per year (both sides); ``costs_pct``: fees and
slippage paid per year as a percentage of mean equity; ``excess_ann``: annual return minus the
equal-weight benchmark's (no costs), as in the walk-forward report.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data import load_dir
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.strategy import StrategyConfig

REPO = Path(__file__).resolve().parents[1]

RULES = {
    "top10_daily": dict(rule="top_k", top_k=10),
    "top10_every5": dict(rule="top_k", top_k=10, rebalance_every=5),
    "dropout10_n1": dict(rule="dropout", top_k=10, n_drop=1),
    "dropout10_n2": dict(rule="dropout", top_k=10, n_drop=2),
    "dropout10_n3": dict(rule="dropout", top_k=10, n_drop=3),
    "dropout10_n2_rank": dict(rule="dropout", top_k=10, n_drop=2, weighting="rank"),
    "dropout10_n2_every5": dict(rule="dropout", top_k=10, n_drop=2, rebalance_every=5),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--report", default=str(REPO / "runs/bench_walkforward"), help="report folder")
    p.add_argument("--data", default=str(REPO.parent / "shared/data/ashare"))
    p.add_argument("--model", default="transformer")
    p.add_argument("--rules", default=",".join(RULES), help="comma-separated names of: " + ", ".join(RULES))
    args = p.parse_args()
    frames, _ = load_dir(args.data)
    pred = pd.read_csv(Path(args.report) / "predictions.csv", parse_dates=["date"])
    forecast = (pred[pred["model"] == args.model]
                .pivot_table(index="date", columns="code", values="forecast", aggfunc="first"))
    print(f"# {args.model} scores from {args.report}: {forecast.shape[0]} days x {forecast.shape[1]} stocks, "
          "next-open execution, default costs")
    for name in args.rules.split(","):
        start = time.perf_counter()
        config = BacktestConfig(strategy=StrategyConfig(top_k_above_threshold=False, **RULES[name]))
        result = run_backtest({c: frames[c] for c in forecast.columns}, forecast, config)
        m, b = result.metrics, result.benchmark_metrics
        years = m["n_days"] / 252
        costs_pct = 100 * m["costs_paid"] / float(np.mean(result.equity)) / years
        excess = m["annual_return"] - b["annual_return"]
        print(f"portfolio {name} turnover={m['turnover']:.1f} costs_pct={costs_pct:.2f} "
              f"ann_return={m['annual_return']:+.3f} excess_ann={excess:+.3f} "
              f"sharpe={m['sharpe']:.2f}  ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
