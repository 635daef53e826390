"""The CSI 300 enhanced index: the book a manager holds, judged against the index itself.

On CSI 300's point-in-time members in ``../shared/data/cn_qlib`` (2019-01-01..2026-12-31 by
default), with the Transformer's walk-forward forecasts of one run (``--report DIR`` reuses a
``forecaster backtest`` report's; without it the run is made first, ``--no-baselines``), it
backtests two books on the same forecasts through the same A-share backtest (lots, T+1,
limits, suspensions, ST, delisting, costs):

* ``enhanced``: ``--strategy enhanced`` at ``--tracking-error`` (the benchmark weights the
  data allow: the float market value, carried past its last day by price);
* ``topk``: the report's default top-k dropout book;

and prints, after costs, against the index's own series (SH000300, a price index)::

    benchmark index=sh.000300 weights=float_mv proxy_te=0.0000 proxy_corr=0.000
    book name=enhanced excess_ann=+0.000 te=0.000 ir=0.00 turnover=0.0 years_positive=N of M
    book name=topk excess_ann=+0.000 te=0.000 ir=0.00 turnover=0.0 years_positive=N of M
    risk bias=0.00

``proxy_*``: how the members at the benchmark weights follow the index over the books' days
(annualised tracking error, daily correlation). ``excess_ann``: the book's annualised return
minus the index's; ``te``: the annualised sd of the daily difference; ``ir``: its annualised
mean over ``te``; ``turnover``: one-sided, times the book a year; ``years_positive``: calendar
years the book beat the index. ``risk bias``: the enhanced book's realised daily active return
(its target weights against the benchmark weights, close to close) over the risk model's
predicted active sd: 1 when the risk model is calibrated. ``#`` lines add each book's excess by
year, the weighted members' and the equal weight's lines, the solver's fallbacks and timings.

With ``--qlib-python PY`` (the side venv of ``bench_qlib_zoo.py``, with ``ecos``), Qlib's own
``EnhancedIndexingOptimizer`` solves each rebalance on the same alpha, risk model and benchmark
weights (its turnover, per-stock and style limits set to this book's; its objective has no
tracking-error budget, only its risk aversion ``lamb`` = 1) and the same backtest trades its
weights: a line ``book name=qlib_enhanced ...``. Its solver is hard-coded to ECOS, which current
cvxpy no longer installs: without ``ecos`` every solve fails and it returns the holdings, so a
book started from cash stays in cash (the worker starts it from the index instead).

Targets (issue 72), after costs, against SH000300: IR >= 2.0 at a realised tracking error
<= 6 %; excess >= +10 %/yr; every calendar year positive; risk bias in [0.8, 1.2]; proxy
tracking error <= 4 %. The data hold only stocks delisted before 2022-01-10 (later ones are
missing); the index's own series does not have that bias, the members do.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent

from forecaster.app.pipeline import prepare  # noqa: E402
from forecaster.evaluation.index_book import against_index, daily_returns  # noqa: E402
from forecaster.portfolio.backtest import BacktestConfig, run_backtest  # noqa: E402
from forecaster.portfolio.index_series import attach_index, index_for  # noqa: E402
from forecaster.portfolio.index_weights import benchmark_weights, growth, weights_tracking  # noqa: E402
from forecaster.portfolio.strategy import StrategyConfig  # noqa: E402
from forecaster.reporting.report import read_predictions  # noqa: E402
from forecaster.risk import bias_statistic  # noqa: E402


def _report(args) -> Path:
    if args.report:
        return Path(args.report)
    out = Path(args.out) / "report"
    script = Path(sys.executable).with_name("forecaster")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "forecaster"]
    cmd = [*head, "backtest", args.data, "--universe", args.universe, "--start", args.start,
           "--end", args.end, "--cache", "--no-baselines", "--out", str(out), *args.forecaster_args]
    print("# " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    return out


def qlib_book(args, panel, forecast: pd.DataFrame, config, out: Path) -> pd.DataFrame | None:
    """Qlib's EnhancedIndexingOptimizer on the same forecasts, alpha rule, risk model and
    benchmark weights as the enhanced book (``scripts/qlib_enhanced_worker.py`` in
    ``--qlib-python``): its weights ``[date x code]`` on the rebalance rows, held between."""
    from forecaster.portfolio.enhanced import problem_inputs, risk_model_of
    from forecaster.portfolio.strategy import rebalance_rows

    s = config.strategy
    risk = risk_model_of(panel)
    bench = benchmark_weights(panel, config.benchmark_weights).weights
    g = growth(panel)
    scores = forecast.reindex(columns=[str(c) for c in panel.codes]).to_numpy(dtype=float)
    rows_of = panel.dates.get_indexer(forecast.index)
    arrays, kept, last_t, n_style = {}, [], None, 0
    for i in np.unique(rebalance_rows(len(forecast), s.rebalance_every)):
        t = int(rows_of[i])
        snap = risk.snapshot(t - 1) if t >= 1 else None
        if snap is None:
            continue
        day = panel.members[t] & panel.listed[t - 1] & (bench[t] > 0)
        use, alpha, wb, x, var, n_style, _ = problem_inputs(scores[i], bench[t], snap, day, s)
        k = len(kept)
        grow = np.prod(g[last_t:t, use], axis=0) if last_t is not None else np.ones(len(use))
        arrays.update({f"codes_{k}": np.array([str(panel.codes[u]) for u in use]), f"growth_{k}": grow,
                       f"r_{k}": alpha, f"F_{k}": x, f"cov_{k}": snap.factor_cov, f"var_{k}": var,
                       f"wb_{k}": wb})
        kept.append(i)
        last_t = t
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "inputs.npz", n=len(kept), **arrays)
    worker = Path(__file__).with_name("qlib_enhanced_worker.py")
    cmd = [args.qlib_python, str(worker), str(out), "--delta", str(2 * s.max_turnover), "--b-dev",
           str(s.active_bound), "--f-dev", str(s.style_bound), "--n-style", str(n_style)]
    print("# " + " ".join(cmd), flush=True)
    if subprocess.run(cmd, stdout=sys.stderr).returncode != 0:
        print("# qlib_enhanced: the worker failed (see above)")
        return None
    got = np.load(out / "qlib_weights.npz")
    frame = pd.DataFrame(np.nan, index=forecast.index, columns=forecast.columns)
    for k, i in enumerate(kept):
        frame.iloc[i] = 0.0
        frame.loc[forecast.index[i], [str(c) for c in arrays[f"codes_{k}"]]] = got[f"w_{k}"]
    print(f"# qlib_enhanced: {int(got['failed'])} of {len(kept)} rebalances returned the holdings unchanged")
    return frame.ffill()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/cn_qlib"))
    p.add_argument("--universe", default="csi300")
    p.add_argument("--start", default="2019-01-01")
    p.add_argument("--end", default="2026-12-31")
    p.add_argument("--report", default=None, help="reuse this report's transformer forecasts")
    p.add_argument("--out", default=str(REPO / "runs/bench_enhanced"))
    p.add_argument("--model", default="transformer")
    p.add_argument("--tracking-error", type=float, default=0.05)
    p.add_argument("--rebalance-every", type=int, default=1)
    p.add_argument("--max-turnover", type=float, default=StrategyConfig.max_turnover)
    p.add_argument("--benchmark-weights", default=None)
    p.add_argument("--qlib-python", default=None,
                   help="a Python with pyqlib and ecos (a side venv): Qlib's enhanced-index optimiser")
    p.add_argument("forecaster_args", nargs="*", help="after --: more options of the backtest run")
    args = p.parse_args()

    report = _report(args)
    pred = read_predictions(report)
    pred = pred[pred["model"] == args.model]
    forecast = pred.pivot_table(index=pred.index, columns="code", values="forecast", aggfunc="first")
    forecast = forecast.sort_index()
    started = time.perf_counter()
    exp, loaded = prepare({"data": {"path": args.data, "universe": args.universe, "cache": True}})
    panel = loaded.panel
    panel.members = loaded.universe.mask(panel.dates, panel.codes)
    forecast = forecast.reindex(columns=[str(c) for c in panel.codes])
    span = f"{forecast.index[0].date()}..{forecast.index[-1].date()}"
    took = time.perf_counter() - started
    print(f"# loaded {panel.n_stocks} stocks x {len(panel.dates)} days in {took:.0f} s; "
          f"{len(forecast)} forecast days {span}", flush=True)

    n_members = int(panel.members.sum(axis=1).max())
    base = BacktestConfig.for_universe(n_members, benchmark_weights=args.benchmark_weights)
    enhanced = dataclasses.replace(base, strategy=StrategyConfig(
        rule="enhanced", tracking_error=args.tracking_error, rebalance_every=args.rebalance_every,
        max_turnover=args.max_turnover))
    books, seconds = {}, {}
    for name, config in (("enhanced", enhanced), ("topk", base)):
        t0 = time.perf_counter()
        books[name] = run_backtest(panel, forecast, config)
        seconds[name] = time.perf_counter() - t0
    if args.qlib_python:
        t0 = time.perf_counter()
        weights = qlib_book(args, panel, forecast, enhanced, Path(args.out))
        if weights is not None:
            books["qlib_enhanced"] = run_backtest(panel, weights, enhanced, given=True)
        seconds["qlib_enhanced"] = time.perf_counter() - t0
    code = index_for(loaded.universe.name, loaded.indices)
    if code is None:
        raise SystemExit(f"the data hold no series of {args.universe}'s index")
    books = attach_index(books, code, loaded.indices[code], base.execution, base.capital)
    index = daily_returns(books["enhanced"].index_equity, base.capital)

    bench = benchmark_weights(panel, args.benchmark_weights)
    weighted = daily_returns(books["enhanced"].weighted_equity, base.capital)
    proxy = weights_tracking(weighted, index)
    print(f"benchmark index={code} weights={bench.source} proxy_te={proxy['te']:.4f} "
          f"proxy_corr={proxy['corr']:.3f}")
    for name, result in books.items():
        stats = against_index(result.returns, index)
        years = stats["years"]
        print(f"book name={name} excess_ann={stats['excess']:+.3f} te={stats['te']:.3f} "
              f"ir={stats['ir']:.2f} turnover={result.metrics['turnover'] / 2:.1f} "
              f"years_positive={sum(v > 0 for v in years.values())} of {len(years)}")
        print(f"# {name} by year: " + ", ".join(f"{y} {v:+.3f}" for y, v in years.items())
              + f"; backtest {seconds[name]:.0f} s; after costs {result.metrics['annual_return']:+.3f}/yr")
    book = books["enhanced"].enhanced
    rows = panel.dates.get_indexer(book.weights.index)
    index_of = {str(c): j for j, c in enumerate(panel.codes)}
    cols = np.array([index_of[c] for c in book.weights.columns])
    g = growth(panel)[rows][:, cols] - 1.0
    active = ((book.weights.to_numpy() - bench.weights[rows][:, cols]) * g).sum(axis=1)
    print(f"risk bias={bias_statistic(active, book.predicted_sd.to_numpy()):.2f}")
    d = book.diagnostics
    print(f"# enhanced: {len(d)} rebalances, status {d['status'].value_counts().to_dict()}, predicted te "
          f"{d['predicted_te'].mean():.4f} (factor {d['factor_te'].mean():.4f}, "
          f"style {d['style_te'].mean():.4f}, specific {d['specific_te'].mean():.4f}), "
          "realised target-weight te "
          f"{np.nanstd(active) * math.sqrt(252):.4f}; notes: {' | '.join(book.notes)}")
    equal = daily_returns(books["enhanced"].benchmark_equity, base.capital)
    for label, series in (("weighted members", weighted), ("equal weight", equal)):
        s = against_index(series, index)
        print(f"# {label} against the index: excess_ann={s['excess']:+.3f} te={s['te']:.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    d.to_csv(out / "enhanced_rebalances.csv", index=False)


if __name__ == "__main__":
    main()
