"""What compiling the enhanced problem once a run saves, measured in one run on one machine.

Builds a factor-structured panel (``--stocks`` members, ``--days`` days, every stock a member)
and backtests the daily enhanced book on its last ``--test-days`` three ways, on the same
forecasts: ``compiled_once`` (today's: one :class:`~forecaster.portfolio.book_compiled.CompiledBook`
over the run's axis, parameters set each day), ``compiled_daily`` (the same problem compiled
for each day) and ``composed_daily`` (the problem composed from its terms and constraints each
day, as before issue 86: bb839ca's path). Prints one line a way::

    compile name=compiled_once backtest_s=41.2 solve_s=20.3 compile_s=12.1 ratio=0.52

``ratio``: its backtest's wall time over ``composed_daily``'s. Also checks that the three give
the same weights (to 1e-5) and says so.

    python scripts/bench_book_compile.py --stocks 300 --days 400 --test-days 120
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forecaster.data.panel import Panel  # noqa: E402
from forecaster.portfolio import book_problem, enhanced  # noqa: E402
from forecaster.portfolio.backtest import BacktestConfig, run_backtest  # noqa: E402
from forecaster.portfolio.book_problem import TIMES, reset_times  # noqa: E402
from forecaster.portfolio.panel_risk import risk_model_of  # noqa: E402
from forecaster.portfolio.strategy import StrategyConfig  # noqa: E402


def world(n_stocks: int, n_days: int, test_days: int, seed: int = 5):
    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2020-01-02", periods=n_days)
    loadings = np.column_stack([rng.normal(1.0, 0.2, n_stocks), np.eye(5)[rng.integers(0, 5, n_stocks)]])
    returns = rng.normal(0, [0.012, *[0.006] * 5], (n_days, 6)) @ loadings.T + rng.normal(
        0, 1, (n_days, n_stocks)) * rng.uniform(0.008, 0.02, n_stocks)
    close = 10 * np.cumprod(1 + returns, axis=0)
    shares = rng.lognormal(20, 1, n_stocks)
    frames = {}
    for j in range(n_stocks):
        pre = np.r_[10.0, close[:-1, j]]
        frames[f"sh.{600000 + j}"] = pd.DataFrame({
            "code": f"sh.{600000 + j}", "open": pre, "high": np.maximum(pre, close[:, j]) * 1.001,
            "low": np.minimum(pre, close[:, j]) * 0.999, "close": close[:, j], "preclose": pre,
            "volume": 1e7, "float_mv": close[:, j] * shares[j]}, index=pd.Index(dates, name="date"))
    panel = Panel.from_frames(frames)
    panel.members = np.ones((n_days, n_stocks), dtype=bool)
    truth = np.vstack([returns[1:], returns[-1:]])  # tomorrow's return, known a little
    forecast = pd.DataFrame(truth[-test_days:] / truth.std() * 0.1 + rng.normal(0, 1, (test_days, n_stocks)),
                            index=dates[-test_days:], columns=list(panel.codes))
    return panel, forecast


def composed_solve_book(alpha, bench, prev, exposures, factor_cov, specific_var, n_style, strategy,
                        no_buy=None, cost=0.0, turnover_limit=True, soft_style=False, held=None,
                        sell_cost=None, sold=None, compiled=None):
    """bb839ca's path: the problem composed from its parts and compiled on every solve."""
    parts = enhanced.book_parts(alpha, bench, prev, exposures, factor_cov, specific_var, n_style, strategy,
                                no_buy, cost, held, sell_cost, sold)
    return book_problem.solve(*book_problem.relax(*parts, turnover_limit, soft_style), len(alpha), prev, held)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stocks", type=int, default=300)
    p.add_argument("--days", type=int, default=400)
    p.add_argument("--test-days", type=int, default=120)
    args = p.parse_args(argv)
    panel, forecast = world(args.stocks, args.days, args.test_days)
    config = BacktestConfig(strategy=StrategyConfig(rule="enhanced", tracking_error=0.05, rebalance_every=1),
                            capital=1e8, benchmark_weights="float_mv")
    original, original_at = enhanced.solve_book, enhanced.Compiled.at
    risk_model_of(panel)  # fitted once per panel, before any way is timed (each reads it)
    results = {}
    for name in ("compiled_once", "compiled_daily", "composed_daily"):
        if name == "composed_daily":
            enhanced.solve_book = composed_solve_book
        daily = name == "compiled_daily"
        if daily:  # the compiled problem, but never reused: a run axis nothing lies on
            enhanced.Compiled.at = lambda self, idx: setattr(self, "where", None)
        reset_times()
        started = time.perf_counter()
        result = run_backtest(panel, forecast, config)
        wall = time.perf_counter() - started
        enhanced.solve_book, enhanced.Compiled.at = original, original_at
        results[name] = (wall, dict(TIMES), result.enhanced.weights.to_numpy())
    base = results["composed_daily"][0]
    for name, (wall, times, _) in results.items():
        print(f"compile name={name} backtest_s={wall:.1f} solve_s={times['solve_s']:.1f} "
              f"compile_s={times['compile_s']:.1f} ratio={wall / base:.2f}", flush=True)
    w = [r[2] for r in results.values()]
    gap = max(float(np.nanmax(np.abs(w[0] - other))) for other in w[1:])
    print(f"# the three ways' target weights differ by at most {gap:.2e} "
          f"({args.stocks} stocks, {args.test_days} daily rebalances)")


if __name__ == "__main__":
    main()
