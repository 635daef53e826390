"""The CSI 300 enhanced index: the book a manager holds, judged against the index itself.

On CSI 300's point-in-time members in ``../shared/data/cn_qlib`` (2019-01-01..2026-12-31 by
default), with the Transformer's walk-forward forecasts of one run (``--report DIR`` reuses a
``forecaster backtest`` report's; without it the run is made first, ``--no-baselines``), it
backtests two books on the same forecasts through the same A-share backtest (lots, T+1,
limits, suspensions, ST, delisting, costs) at ``--capital`` CNY (1e8 by default):

* ``enhanced``: ``--strategy enhanced`` at ``--tracking-error`` against ``--benchmark-weights``
  (by default ``fitted``: fitted each month to the index's own series, which the data hold);
* ``topk``: the report's default top-k dropout book;

the enhanced book's other settings as ``--rebalance-every``, ``--max-turnover``,
``--active-bound``, ``--style-bound``, ``--alpha-shape``, ``--alpha-halflife`` and
``--trade-aversion`` say (the options of ``forecaster backtest``, defaults alike: the variants of
docs/results.md);

and prints, after costs, each book against both benchmarks (issue 79's contract, values
illustrative; each line one line, wrapped here)::

    benchmark index=sh.000300 weights=fitted proxy_te=0.0150 proxy_corr=0.997 dividends_ann=0.026
        capital=100000000
    book name=enhanced against=total_return excess_ann=+0.080 te=0.048 ir=1.67 turnover=12.3
        years_positive=8 of 8
    book name=enhanced against=price excess_ann=+0.106 te=0.049 ir=2.16 turnover=12.3 years_positive=8 of 8
    book name=topk against=total_return excess_ann=+0.130 te=0.115 ir=1.13 turnover=25.0
        years_positive=7 of 8
    book name=topk against=price excess_ann=+0.156 te=0.116 ir=1.34 turnover=25.0 years_positive=7 of 8
    risk bias=0.97
    cash name=enhanced max=0.004 mean=0.001 review_days_max=0.004
    timing name=enhanced solve_s=61.2 compile_s=40.0 backtest_s=150.3 baseline_s=280.0 ratio=0.54

and with ``--industries FILE [--industry-bound B]`` (issue 87) a third book, ``enhanced_industries``
(the enhanced book with its industry groups held within B of the benchmark's), its ``book`` and
``timing`` lines beside the others' and::

    risk name=enhanced_industries bias=1.01
    industries source=FILE groups=19 unclassified=1200 level=1 bound=0.05 max_active=0.0512

(``groups``: the groups of the run at ``--industry-level``; ``unclassified``: member-days without a
class; ``max_active``: the largest absolute active group weight held on a rebalance day;
``active_industries.csv`` in ``--out``).

``price``: the index's own series (SH000300, a price index: its members' dividends are not in
it); ``total_return``: the same with the dividends added back (an estimate: :func:`total_return`
adds the members' dividends at the benchmark weights, read off the data's adjustment;
``dividends_ann`` is what it adds a year; ``nan``, and ``nan`` figures on the ``total_return``
lines, where the data cannot tell the dividends). ``weights``: the benchmark weights'
source; ``proxy_*``: how the members at those weights follow the price index over the books'
days (annualised tracking error, daily correlation). ``excess_ann``: the book's annualised
return minus the benchmark's; ``te``: the annualised sd of the daily difference; ``ir``: its
annualised mean over ``te``; ``turnover``: one-sided, times the book a year;
``years_positive=N of M``: calendar years with a positive excess. ``risk bias``: the bias
statistic of the enhanced book's realised daily active return (its target weights against the
benchmark weights, close to close) over the risk model's predicted active sd: 1 when the risk
model is calibrated. ``cash`` (issue 86): the enhanced book's cash weight after each close, its
largest and mean over the run and its largest on review days (the members change);
``timing``: seconds inside the solver, building and compiling the problems (cvxpy), and the
whole backtest; with ``--baseline-wall S`` (the same backtest's seconds under another code, e.g.
bb839ca's from a worktree, measured just before on the same machine) also ``baseline_s`` and
``ratio`` (this backtest's over it). ``#`` lines add each book's excess by year, the weighted members' and the
equal weight's lines, the solver's fallbacks and timings. :func:`contract_lines` writes the
lines from a :class:`Summary`. In ``--out``: ``enhanced_rebalances.csv`` (the optimiser's row a
rebalance) and ``books_daily.csv`` (each book's daily return after costs, the price index's and
the total-return estimate's).

With ``--cells`` it runs instead the protocol that chooses the book's defaults (issue 88): each
candidate in four cells (CSI 300 and CSI 500, 2019-2022 and 2023-2026), lines ``cell ...``,
``verdict ...`` and ``default ...`` (``scripts/enhanced_cells.py`` says how).

With ``--qlib-python PY`` (the side venv of ``bench_qlib_zoo.py``, with ``ecos``), Qlib's own
``EnhancedIndexingOptimizer`` solves each rebalance on the same alpha, risk model and benchmark
weights, converted to Qlib's units (percent: ``scripts/qlib_enhanced_worker.py``), its turnover,
per-stock and style limits set to this book's (its objective has no tracking-error budget, only
its risk aversion ``lamb`` = 1), and the same backtest trades its weights: the lines ``book
name=qlib_enhanced ...``, ending in how many rebalances each of its trials solved
(``solved_trial1``: with every limit; ``solved_trial2``: its second trial, without the turnover
limit; ``unsolved``: the holdings kept) of how many (the worker bounds the statistical factors,
which this book leaves free, on their own scale: with a bound of 1e6 ECOS ended nearly every
rebalance ``optimal_inaccurate``, which fails the first trial). Its solver is hard-coded to ECOS, which
current cvxpy no longer installs: without ``ecos`` every solve fails and it returns the
holdings (the worker starts the book from the index, not from cash).

Targets (issue 79), after costs, against the total-return index, at 1e8 CNY: IR >= 1.5 at a
realised tracking error <= 5.5 % (a 5 % budget); excess >= +6 %/yr; every calendar year
positive; fitted weights' proxy tracking error <= 1.6 %; risk bias in [0.8, 1.2]. The data hold
only stocks delisted before 2022-01-10 (later ones are missing); the index's own series does
not have that bias, the members do.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # enhanced_cells, beside it

from enhanced_cells import DEFAULT_REPORTS, run_protocol  # noqa: E402

from forecaster.app.pipeline import prepare  # noqa: E402
from forecaster.evaluation.index_book import against_index, daily_returns  # noqa: E402
from forecaster.portfolio.alpha import ALPHA_SHAPES, decayed_scores  # noqa: E402
from forecaster.portfolio.backtest import BacktestConfig, run_backtest  # noqa: E402
from forecaster.portfolio.book_problem import TIMES, reset_times  # noqa: E402
from forecaster.portfolio.index_series import attach_index, index_for  # noqa: E402
from forecaster.portfolio.index_weights import benchmark_weights, growth, weights_tracking  # noqa: E402
from forecaster.portfolio.industry_groups import attach_industries, beyond_bound, industry_groups  # noqa: E402
from forecaster.portfolio.strategy import StrategyConfig  # noqa: E402
from forecaster.reporting.report import read_predictions  # noqa: E402
from forecaster.risk import bias_statistic  # noqa: E402

AGAINST = ("total_return", "price")  # the benchmarks each book is printed against, in order


def _optional(name: str):
    """The module ``name``, or None where the project does not have it (yet)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:
            raise
        return None


TOTAL_RETURN = _optional("forecaster.portfolio.total_return")  # issue 79's estimate, where there


@dataclass
class Summary:
    """What the contract lines say. ``books``: ``{name: {against: stats}}``, ``against`` in
    :data:`AGAINST`, ``stats`` as :func:`~forecaster.evaluation.index_book.against_index`
    gives them (``excess``, ``te``, ``ir``, ``years`` ``{year: excess}``); ``turnover``: one-sided,
    times the book a year, by name; ``extra``: words ending a book's lines (the Qlib peer's
    solves)."""

    index: str
    weights: str
    proxy_te: float
    proxy_corr: float
    dividends_ann: float
    capital: float
    books: dict[str, dict[str, dict]]
    turnover: dict[str, float]
    risk_bias: float
    extra: dict[str, str] = field(default_factory=dict)
    cash: dict[str, dict] = field(default_factory=dict)  # name -> cash_stats
    timing: dict[str, dict] = field(default_factory=dict)  # name -> solve_s, compile_s, backtest_s
    industries: dict | None = None  # source, groups, unclassified, level, bound, max_active (issue 87)
    risk_named: dict[str, float] = field(default_factory=dict)  # another book's risk bias, by name


def years_positive(years: dict) -> tuple[int, int]:
    """``(N, M)``: of the ``M`` calendar years in ``years`` ``{year: excess}``, ``N`` positive."""
    return sum(v > 0 for v in years.values()), len(years)


def contract_lines(s: Summary) -> list[str]:
    """The lines issue 79 names, in its order: the benchmark, each book against each benchmark,
    the risk bias."""
    lines = [f"benchmark index={s.index} weights={s.weights} proxy_te={s.proxy_te:.4f} "
             f"proxy_corr={s.proxy_corr:.3f} dividends_ann={s.dividends_ann:.3f} capital={s.capital:.0f}"]
    for name, by in s.books.items():
        for against in AGAINST:
            st = by[against]
            pos, n = years_positive(st["years"])
            line = (f"book name={name} against={against} excess_ann={st['excess']:+.3f} te={st['te']:.3f} "
                    f"ir={st['ir']:.2f} turnover={s.turnover[name]:.1f} years_positive={pos} of {n}")
            lines.append(line + (f" {s.extra[name]}" if s.extra.get(name) else ""))
    lines.append(f"risk bias={s.risk_bias:.2f}")
    for name, bias in s.risk_named.items():
        lines.append(f"risk name={name} bias={bias:.2f}")
    if s.industries:
        i = s.industries
        lines.append(f"industries source={i['source']} groups={i['groups']} unclassified={i['unclassified']} "
                     f"level={i['level']} bound={i['bound']:g} max_active={i['max_active']:.4f}")
    for name, c in s.cash.items():
        lines.append(f"cash name={name} max={c['max']:.4f} mean={c['mean']:.4f} "
                     f"review_days_max={c['review_days_max']:.4f}")
    for name, t in s.timing.items():
        line = (f"timing name={name} solve_s={t['solve_s']:.1f} compile_s={t['compile_s']:.1f} "
                f"backtest_s={t['backtest_s']:.1f}")
        if t.get("baseline_s"):  # the same backtest of another code, measured on this machine
            line += f" baseline_s={t['baseline_s']:.1f} ratio={t['backtest_s'] / t['baseline_s']:.2f}"
        lines.append(line)
    return lines


def cash_stats(result, members: np.ndarray, dates: pd.DatetimeIndex) -> dict:
    """An enhanced book's cash weight after each close (its ``held`` CASH column): the largest
    and mean over the run, and the largest on review days (the members change that day)."""
    cash = result.held["CASH"]
    change = np.zeros(len(dates), dtype=bool)
    change[1:] = (members[1:] != members[:-1]).any(axis=1)
    review = cash.index.isin(dates[change])
    return {"max": float(cash.max()), "mean": float(cash.mean()),
            "review_days_max": float(cash[review].max()) if review.any() else math.nan}


def solves_words(counts: dict, n: int) -> str:
    """The Qlib peer's line's ending: how many of its ``n`` rebalances each trial solved."""
    return (f"solved_trial1={counts['trial1']} solved_trial2={counts['trial2']} "
            f"unsolved={counts['failed']} of {n}")


def total_return(panel, price: pd.Series, weights: np.ndarray) -> tuple[pd.Series | None, float, str]:
    """``(daily returns [price's days], dividends a year, note)`` of the estimated total-return
    index: the price index's daily returns ``price`` plus the members' dividends at the
    benchmark ``weights`` ``[days, stocks]`` (``total_return_index`` of
    ``forecaster.portfolio.total_return``); ``(None, nan, why)`` where the project has no such
    estimator or the data cannot tell the dividends."""
    fn = getattr(TOTAL_RETURN, "total_return_index", None)
    if fn is None:
        return None, math.nan, ("no total-return estimator in the project: dividends_ann=nan and the "
                                "against=total_return lines are nan")
    tr, notes = fn(price, panel, weights)
    if tr is None:
        return None, math.nan, "no total-return estimate: " + "; ".join(notes)
    days = tr.notna() & price.notna()
    dividends = float((tr[days] - price[days]).mean() * 252) if days.any() else math.nan
    return tr, dividends, "total-return index: the price index plus " + "; ".join(notes)


def risk_bias(panel, book, bench: np.ndarray) -> tuple[float, np.ndarray]:
    """The bias statistic of the enhanced ``book``'s realised daily active return (its target
    weights against ``bench`` ``[days, stocks]``, close to close) over its predicted active sd,
    and that realised active return ``[book's rows]``."""
    rows = panel.dates.get_indexer(book.weights.index)
    index_of = {str(c): j for j, c in enumerate(panel.codes)}
    cols = np.array([index_of[c] for c in book.weights.columns])
    g = growth(panel)[rows][:, cols] - 1.0
    active = ((book.weights.to_numpy() - bench[rows][:, cols]) * g).sum(axis=1)
    return bias_statistic(active, book.predicted_sd.to_numpy()), active


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


def qlib_book(args, panel, forecast: pd.DataFrame, config, out: Path
              ) -> tuple[pd.DataFrame, dict, int] | None:
    """Qlib's EnhancedIndexingOptimizer on the same forecasts, alpha rule, risk model and
    benchmark weights as the enhanced book (``scripts/qlib_enhanced_worker.py`` in
    ``--qlib-python``, which converts them to Qlib's percent): ``(weights [date x code]`` on the
    rebalance rows, held between, ``{trial1, trial2, failed}`` counts, rebalances``)``; None
    when the worker fails."""
    from forecaster.portfolio.enhanced import problem_inputs
    from forecaster.portfolio.panel_risk import risk_model_of
    from forecaster.portfolio.strategy import rebalance_rows

    s = config.strategy
    risk = risk_model_of(panel)
    bench = benchmark_weights(panel, config.benchmark_weights).weights
    g = growth(panel)
    scores = decayed_scores(forecast.reindex(columns=[str(c) for c in panel.codes]).to_numpy(dtype=float),
                            s.alpha_halflife)
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
    counts = {key: int(got[key]) for key in ("trial1", "trial2", "failed")}
    return frame.ffill(), counts, len(kept)


def _args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/cn_qlib"))
    p.add_argument("--universe", default="csi300")
    p.add_argument("--start", default="2019-01-01")
    p.add_argument("--end", default="2026-12-31")
    p.add_argument("--report", default=None, help="reuse this report's transformer forecasts")
    p.add_argument("--out", default=str(REPO / "runs/bench_enhanced"))
    p.add_argument("--model", default="transformer")
    p.add_argument("--capital", type=float, default=1e8, help="every book's starting cash, CNY (1e8)")
    p.add_argument("--rebalance-tolerance", type=float, default=BacktestConfig.rebalance_tolerance,
                   help="the enhanced books' --rebalance-tolerance (a held position resized only when off "
                        "its target by more than this fraction)")
    p.add_argument("--tracking-error", type=float, default=0.05)
    p.add_argument("--rebalance-every", type=int, default=1)
    p.add_argument("--max-turnover", type=float, default=StrategyConfig.max_turnover)
    p.add_argument("--benchmark-weights", default=None)
    p.add_argument("--active-bound", type=float, default=StrategyConfig.active_bound)
    p.add_argument("--style-bound", type=float, default=StrategyConfig.style_bound)
    p.add_argument("--alpha-shape", default=StrategyConfig.alpha_shape, choices=ALPHA_SHAPES)
    p.add_argument("--alpha-halflife", type=float, default=StrategyConfig.alpha_halflife)
    p.add_argument("--trade-aversion", type=float, default=StrategyConfig.trade_aversion)
    p.add_argument("--qlib-python", default=None,
                   help="a Python with pyqlib and ecos (a side venv): Qlib's enhanced-index optimiser")
    p.add_argument("--industries", default=None, metavar="FILE",
                   help="also the enhanced book with industries (the book enhanced_industries): "
                        "the classes' file")
    p.add_argument("--industry-bound", type=float, default=0.05, help="with --industries: the bound (0.05)")
    p.add_argument("--industry-level", type=int, default=StrategyConfig.industry_level,
                   help="with --industries: the level of a CSRC class (1 the letter, 2 the division)")
    p.add_argument("--baseline-wall", type=float, default=None, metavar="S",
                   help="the enhanced backtest's seconds under another code on this machine: "
                        "prints the ratio")
    p.add_argument("--cells", action="store_true",
                   help="run the protocol that chooses the book's defaults "
                        "(issue 88: scripts/enhanced_cells.py)")
    p.add_argument("--cell-report", action="append", default=[], metavar="INDEX=DIR",
                   help="--cells: an index's walk-forward report (default csi300=runs/csi300_pit_one_set, "
                        "csi500=runs/csi500_pit_one_set)")
    p.add_argument("forecaster_args", nargs="*", help="after --: more options of the backtest run")
    args = p.parse_args(argv)
    # checked before anything is run or written
    if args.baseline_wall is not None and not (math.isfinite(args.baseline_wall) and args.baseline_wall > 0):
        p.error(f"--baseline-wall {args.baseline_wall}: expected a positive number of seconds")
    if not (math.isfinite(args.capital) and args.capital > 0):
        p.error(f"--capital {args.capital}: expected a positive amount of CNY")
    if args.report and not Path(args.report).is_dir():
        p.error(f"--report {args.report}: no such folder (a forecaster backtest report)")
    if args.cells:
        reports = dict(DEFAULT_REPORTS)
        for item in args.cell_report:
            index, sep, folder = item.partition("=")
            if not sep or index not in reports:
                p.error(f"--cell-report {item}: expected INDEX=DIR, INDEX one of {', '.join(reports)}")
            reports[index] = folder
        for index, folder in reports.items():
            if not (Path(folder) / "predictions.csv").is_file():
                p.error(f"--cells: {index}'s report {folder} has no predictions.csv "
                        f"(give --cell-report {index}=DIR)")
        args.cell_reports = reports
    if args.industries and not Path(args.industries).is_file():
        p.error(f"--industries {args.industries}: no such file (an industries file)")
    if args.qlib_python and not Path(args.qlib_python).is_file():
        p.error(f"--qlib-python {args.qlib_python}: no such file (a Python with pyqlib and ecos)")
    return args


def main(argv=None) -> None:
    args = _args(argv)
    if args.cells:
        run_protocol(args.cell_reports, args.data, Path(args.out))
        return
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

    code = index_for(loaded.universe.name, loaded.indices)
    if code is None:
        raise SystemExit(f"the data hold no series of {args.universe}'s index")
    n_members = int(panel.members.sum(axis=1).max())
    base = BacktestConfig.for_universe(n_members, benchmark_weights=args.benchmark_weights,
                                       capital=args.capital)
    tolerance = args.rebalance_tolerance
    enhanced = dataclasses.replace(base, rebalance_tolerance=tolerance, strategy=StrategyConfig(
        rule="enhanced", tracking_error=args.tracking_error, rebalance_every=args.rebalance_every,
        max_turnover=args.max_turnover, active_bound=args.active_bound, style_bound=args.style_bound,
        alpha_shape=args.alpha_shape, alpha_halflife=args.alpha_halflife,
        trade_aversion=args.trade_aversion))
    books, seconds, extra, timing = {}, {}, {}, {}
    runs = [("enhanced", enhanced), ("topk", base)]
    if args.industries:  # read and checked before any book runs
        notes = attach_industries(panel, args.industries)
        print("# " + " | ".join(notes), flush=True)
        runs.insert(1, ("enhanced_industries", dataclasses.replace(enhanced, strategy=dataclasses.replace(
            enhanced.strategy, industries=args.industries, industry_bound=args.industry_bound,
            industry_level=args.industry_level))))
    for name, config in runs:
        reset_times()
        t0 = time.perf_counter()
        books[name] = run_backtest(panel, forecast, config)
        seconds[name] = time.perf_counter() - t0
        if config.strategy.rule == "enhanced":
            timing[name] = {"solve_s": TIMES["solve_s"], "compile_s": TIMES["compile_s"],
                            "backtest_s": seconds[name], "baseline_s": args.baseline_wall,
                            "solves": TIMES["solves"], "inaccurate": TIMES["inaccurate"]}
    if args.qlib_python:
        t0 = time.perf_counter()
        got = qlib_book(args, panel, forecast, enhanced, Path(args.out))
        if got is not None:
            weights, counts, n = got
            books["qlib_enhanced"] = run_backtest(panel, weights, enhanced, given=True)
            extra["qlib_enhanced"] = solves_words(counts, n)
        seconds["qlib_enhanced"] = time.perf_counter() - t0
    books = attach_index(books, code, loaded.indices[code], base.execution, base.capital)
    price = daily_returns(books["enhanced"].index_equity, base.capital)
    bench = benchmark_weights(panel, args.benchmark_weights)
    tr, dividends, tr_note = total_return(panel, price, bench.weights)
    print(f"# {tr_note}")
    weighted = daily_returns(books["enhanced"].weighted_equity, base.capital)
    proxy = weights_tracking(weighted, price)
    nan_stats = {"excess": math.nan, "te": math.nan, "ir": math.nan, "years": {}}
    stats = {name: {"price": against_index(result.returns, price),
                    "total_return": against_index(result.returns, tr) if tr is not None else nan_stats}
             for name, result in books.items()}
    book = books["enhanced"].enhanced
    bias, active = risk_bias(panel, book, bench.weights)
    risk_named, industries, ind_table = {}, None, None
    if "enhanced_industries" in books:
        with_ind = books["enhanced_industries"].enhanced
        risk_named["enhanced_industries"] = risk_bias(panel, with_ind, bench.weights)[0]
        table = ind_table = with_ind.industry_weights()
        print("# " + beyond_bound(table, with_ind.industry_weights(decided=True), args.industry_bound))
        _, names, counts = industry_groups(panel, panel.members, runs[1][1].strategy)
        industries = {"source": args.industries, "groups": len(names), "unclassified": counts["unclassified"],
                      "level": args.industry_level, "bound": args.industry_bound,
                      "max_active": float(table["active"].abs().max()) if len(table) else math.nan}
    summary = Summary(index=code, weights=bench.source, proxy_te=proxy["te"], proxy_corr=proxy["corr"],
                      dividends_ann=dividends, capital=base.capital, books=stats,
                      turnover={name: r.metrics["turnover"] / 2 for name, r in books.items()},
                      risk_bias=bias, extra=extra, timing=timing, industries=industries,
                      risk_named=risk_named,
                      cash={name: cash_stats(r, panel.members, panel.dates) for name, r in books.items()
                            if not r.held.empty})
    for line in contract_lines(summary):
        print(line)
    for name, result in books.items():
        for against in AGAINST:
            years = stats[name][against]["years"]
            by_year = ", ".join(f"{y} {v:+.3f}" for y, v in years.items())
            print(f"# {name} against {against} by year: {by_year}")
        after = result.metrics["annual_return"]
        t = timing.get(name, {})
        solves = f"; {t['inaccurate']} of {t['solves']} solves short of the tolerances" if t else ""
        print(f"# {name}: backtest {seconds[name]:.0f} s; after costs {after:+.3f}/yr{solves}")
    d = book.diagnostics
    print(f"# enhanced: {len(d)} rebalances, status {d['status'].value_counts().to_dict()}, predicted te "
          f"{d['predicted_te'].mean():.4f} (factor {d['factor_te'].mean():.4f}, "
          f"style {d['style_te'].mean():.4f}, specific {d['specific_te'].mean():.4f}), "
          "realised target-weight te "
          f"{np.nanstd(active) * math.sqrt(252):.4f}; notes: {' | '.join(book.notes)}")
    print(f"# benchmark weights: {bench.source}; {' | '.join(bench.notes) or 'no notes'}")
    equal = daily_returns(books["enhanced"].benchmark_equity, base.capital)
    for label, series in (("weighted members", weighted), ("equal weight", equal)):
        s = against_index(series, price)
        print(f"# {label} against the price index: excess_ann={s['excess']:+.3f} te={s['te']:.3f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if ind_table is not None:  # the book with industries: each group's weight at each rebalance
        ind_table.assign(date=pd.DatetimeIndex(ind_table["date"]).date).to_csv(out / "active_industries.csv",
                                                                              index=False)
    d.to_csv(out / "enhanced_rebalances.csv", index=False)
    # each book's daily return after costs beside both benchmarks': for paired tests between runs
    daily = pd.DataFrame({name: result.returns for name, result in books.items()})
    daily["price"] = price
    if tr is not None:
        daily["total_return"] = tr
    daily.rename_axis("date").to_csv(out / "books_daily.csv")


if __name__ == "__main__":
    main()
