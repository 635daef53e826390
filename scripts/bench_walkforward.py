"""Walk-forward of the default panel configuration on the whole real panel.

All of ``../shared/data/ashare`` (60 CSI 300 stocks, 2020-2025): the panel Transformer and
every baseline (factor scores, the low-vol/low-turnover/value composite, gradient boosting
and ridge on the same features, and for one-day labels the time-series baselines) on the same
expanding-window folds, monthly refits (21 trading days), then the top-k A-share backtest
(next-open execution, costs, rebalanced every ``horizon`` days). Rank IC and ICIR are on the
tradeable label (next open -> open ``horizon`` days later).

Prints one line per model::

    model NAME rank_ic=+0.0000 icir=+0.000 excess_ann=+0.000

(``excess_ann``: the model's top-k strategy after costs minus the equal-weight benchmark,
annualised; blank models have no backtest), ``walkforward_wall_minutes M`` (target < 20),
the Transformer's rank-IC difference test against each baseline, and per fold year the same
figures (``year Y model NAME ...``). The full report goes to ``--out``.
"""

from __future__ import annotations

import argparse
import ast
import math
import time
from pathlib import Path

from forecaster.data import Panel, load_dir
from forecaster.evaluation.scoring import score_run
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.metrics import ic_summary
from forecaster.models.presets import panel_models
from forecaster.portfolio.backtest import BacktestConfig
from forecaster.portfolio.strategy import StrategyConfig
from forecaster.reporting.report import write_report

REPO = Path(__file__).resolve().parents[1]


def _fmt(x: float, digits: int) -> str:
    return f"{x:+.{digits}f}" if x is not None and math.isfinite(x) else "nan"


def _annual(equity) -> float:
    return (equity.iloc[-1] / equity.iloc[0]) ** (252 / (len(equity) - 1)) - 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/ashare"))
    p.add_argument("--out", default=str(REPO / "runs/bench_walkforward"))
    p.add_argument("--retrain-every", type=int, default=21)
    p.add_argument("--train-days", type=int, default=500)
    p.add_argument("--horizon", type=int, default=1)
    p.add_argument("--jobs", type=int, default=-1)
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--rule", choices=["top_k", "dropout"], default="top_k", help="portfolio rule")
    p.add_argument("--n-drop", type=int, default=1, help="dropout: names replaced per rebalance")
    p.add_argument("--rebalance-every", type=int, default=None, help="days between rebalances [horizon]")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a PanelTransformer parameter (repeatable), e.g. --set window=10")
    args = p.parse_args()
    overrides = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in args.set)}

    start = time.perf_counter()
    frames, _ = load_dir(args.data)
    models = panel_models(horizon=args.horizon, **overrides)
    config = WalkForwardConfig(train_days=args.train_days, retrain_every=args.retrain_every,
                               horizon=args.horizon, n_jobs=args.jobs, margin_days=130)
    panel = Panel.from_frames(frames)  # built once: the walk-forward, scoring and backtests read it
    result = walk_forward(frames, models, config, panel=panel)
    t_wf = time.perf_counter() - start
    rebalance = args.rebalance_every or args.horizon
    strategy = StrategyConfig(rule=args.rule, top_k=args.top_k, n_drop=args.n_drop,
                              top_k_above_threshold=False, rebalance_every=rebalance)
    bt = BacktestConfig(strategy=strategy)
    report = score_run(result, panel, models, "transformer", bt, args.horizon)
    write_report(report, result, args.out, extra={"data": args.data, "overrides": overrides})
    wall = time.perf_counter() - start

    table = report.summary_table()
    print(f"# {len(frames)} stocks, {len(result.folds)} folds (expanding, refit every {args.retrain_every} "
          f"days from day {args.train_days}), horizon {args.horizon}, top-{args.top_k} rebalanced every "
          f"{rebalance} days, {len(models)} models, overrides "
          f"{overrides or 'none'}; report in {args.out}")
    for name in table.index:
        ic = report.ic.get(name, {})
        excess = table.loc[name, "excess_vs_bench"] if "excess_vs_bench" in table else math.nan
        print(f"model {name} rank_ic={_fmt(ic.get('mean_ic', math.nan), 4)} "
              f"icir={_fmt(ic.get('icir', math.nan), 3)} excess_ann={_fmt(excess, 3)}")
    print(f"walkforward_wall_minutes {wall / 60:.2f}")
    print(f"# of which walk-forward {t_wf / 60:.2f} minutes; target < 20")
    for _, row in report.ic_tests.iterrows():
        print(f"ic_test transformer-vs-{row['baseline']} diff={_fmt(row['mean_diff'], 4)} "
              f"t={_fmt(row['t_stat'], 2)} p={row['p_value']:.3f}")
    # Per fold year: rank IC, ICIR and the strategy's excess return within that year.
    for year, daily in report.daily_ic.groupby(report.daily_ic.index.year):
        for name in table.index:
            if name not in daily or name not in report.ic:
                continue
            s = ic_summary(daily[name].dropna())
            r = report.backtests.get(name)
            excess = math.nan
            if r is not None:
                in_year = r.equity.index.year == year
                eq, bench = r.equity[in_year], r.benchmark_equity[in_year]
                if len(eq) > 1:
                    excess = _annual(eq) - _annual(bench)
            print(f"year {year} model {name} rank_ic={_fmt(s['mean_ic'], 4)} icir={_fmt(s['icir'], 3)} "
                  f"excess_ann={_fmt(excess, 3)}")
    for line in report.verdict + report.notes:
        print(f"- {line}")


if __name__ == "__main__":
    main()
