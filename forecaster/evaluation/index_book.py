"""A book judged as its holder is: against the index's own series, else its weighted members.

For a run whose universe is an index whose series the data hold, the main model's book is
measured against that series (a price index: its dividends are not in it, while the stocks'
returns include theirs): excess a year after costs, tracking error, information ratio and the
excess of each calendar year; then against the members at the benchmark weights and at equal
weight. An enhanced book (``--strategy enhanced``) adds its tracking error against the budget,
the predicted active risk split into factors (styles apart) and specific, its largest average
active weights, turnover and costs, the optimiser's fallbacks, and the top-k book on the same
forecasts beside it. Without the index's series, an enhanced book's figures are measured
against the members at the benchmark weights (what its optimiser tracks, dividends included).
Every figure names its benchmark. :func:`index_book` computes all of it; the lines go to the
verdict and the figures to ``metrics.json`` (``index_book``: ``index``, the series' code or
None; ``benchmark``, what ``book`` is measured against; ``book``; ``proxy``, how the weighted
members follow the index; ``against_weights``, the book against the weighted members;
``equal_weight``; ``enhanced``).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from forecaster.metrics.returns import active_stats, period_returns
from forecaster.portfolio.backtest import run_backtest
from forecaster.portfolio.fitted_weights import index_series_of
from forecaster.portfolio.index_weights import (
    benchmark_weights,
    carried_float_mv,
    weighted_returns,
    weights_tracking,
)
from forecaster.portfolio.strategy import StrategyConfig
from forecaster.portfolio.total_return import total_return_index

TOP_ACTIVE = 5  # largest average active weights named


def daily_returns(equity: pd.Series, capital: float) -> pd.Series:
    """``[date]`` daily returns of an equity curve that started from ``capital``."""
    return equity / equity.shift(1).fillna(capital) - 1.0


def against_index(book: pd.Series, index: pd.Series) -> dict:
    """``excess``, ``te``, ``ir``, ``n_days`` of daily returns ``book`` against ``index``, and
    ``years`` ``{year: book's return minus the index's}``."""
    stats = active_stats(book, index)
    a, b = book.align(index, join="inner")
    years = (period_returns(a.dropna(), "Y") - period_returns(b.dropna(), "Y")).dropna()
    return {"excess": stats["excess_annual_return"], "te": stats["tracking_error"],
            "ir": stats["information_ratio"], "n_days": stats["n_days"],
            "years": {int(k): float(v) for k, v in years.items()}}


def _line(name: str, s: dict, over: str) -> str:
    """``name``'s figures ``s`` (:func:`against_index`) over the benchmark ``over`` names."""
    pos = sum(v > 0 for v in s["years"].values())
    return (f"{name}: {s['excess']:+.2%}/yr over {over}, tracking error {s['te']:.2%}, information ratio "
            f"{s['ir']:.2f}; ahead in {pos} of {len(s['years'])} calendar years")


def _by_year(s: dict) -> str:
    return "; by year " + ", ".join(f"{y} {v:+.1%}" for y, v in s["years"].items())


def index_book(report, forecast: pd.DataFrame, grid, backtest, index_code: str | None,
               index_frame: pd.DataFrame | None, keep: dict | None = None) -> tuple[list[str], dict]:
    """The verdict's lines and ``metrics.json``'s ``index_book`` for the main model's book of
    ``report`` (its backtests already carry the index, where there is one). ``forecast``: the
    main model's ``[date x code]`` forecasts (for the top-k book beside an enhanced one).
    ``index_code``/``index_frame``: the index's series (None: the data hold none; then only an
    enhanced book is judged, against the members at the benchmark weights). ``keep``: gets the
    top-k book run beside an enhanced one (``topk``, ``topk_name``), for the report's figures."""
    main = report.backtests.get(report.model)
    enhanced = backtest.strategy.rule == "enhanced"
    if main is None or (main.index_equity is None and not (enhanced and main.weighted_equity is not None)):
        return [], {}
    capital = backtest.capital
    label = "enhanced book" if enhanced else "book"
    weighted = None if main.weighted_equity is None else daily_returns(main.weighted_equity, capital)
    weights_name = main.weighted_name.removesuffix(" (no costs)")
    vs_weights = None if weighted is None else against_index(main.returns, weighted)
    if main.index_equity is not None:
        ref, ref_name = daily_returns(main.index_equity, capital), f"{index_code} (price index)"
        mine = against_index(main.returns, ref)
        lines = [f"{report.model}'s {label} after costs against {index_code} (the index's own series, a "
                 "price index: its dividends are not in it) -- " + _line("it", mine, ref_name)
                 + _by_year(mine)]
        out = {"index": index_code, "benchmark": ref_name, "book": mine}
        if weighted is not None:
            proxy = weights_tracking(weighted, ref)
            out["proxy"] = {"weights": main.weighted_name, **proxy}
            te, corr, drift = proxy["te"], proxy["corr"], proxy["drift"]
            lines.append(f"{main.weighted_name} follow the index at a tracking error of {te:.2%} "
                         f"(daily correlation {corr:.3f}, {drift:+.2%}/yr, dividends the index lacks "
                         "included); " + _line(f"the {label} against them", vs_weights, weights_name))
        headline, facts = total_return_figures(f"{report.model}'s {label}", main.returns, ref, grid,
                                               backtest.benchmark_weights, index_code)
        lines[0:0] = headline  # the headline: against the index with its dividends, the price index's beside
        out.update(facts)
    else:  # no series of the index: the benchmark the optimiser tracked is the one there is
        ref, ref_name, mine = weighted, weights_name, vs_weights
        lines = [f"{report.model}'s {label} after costs against {weights_name} (no costs, dividends "
                 "included; the data hold no series of the index, so every figure here is against them) -- "
                 + _line("it", mine, ref_name) + _by_year(mine)]
        out = {"index": None, "benchmark": ref_name, "book": mine}
    if vs_weights is not None:
        out["against_weights"] = {"benchmark": weights_name, **vs_weights}
    equal = against_index(daily_returns(main.benchmark_equity, capital), ref)
    lines.append(f"the members' equal weight ({main.benchmark}) against {ref_name}: "
                 f"{equal['excess']:+.2%}/yr, tracking error {equal['te']:.2%}")
    out["equal_weight"] = equal
    if enhanced and main.enhanced is not None:
        more, facts = _enhanced(report, main, forecast, grid, backtest, (ref, ref_name, mine),
                                None if main.index_equity is None else vs_weights, weights_name,
                                {} if keep is None else keep)
        lines += more
        out["enhanced"] = facts
    return lines, out


def _enhanced(report, main, forecast, grid, backtest, against, vs_weights, weights_name, keep):
    """The enhanced book's lines and figures; ``against``: ``(daily returns, name, the book's
    figures)`` of the benchmark the lines are on; ``vs_weights``: the book against the weighted
    members, where that benchmark is the index."""
    ref, ref_name, mine = against
    book = main.enhanced
    if not (main.positions.to_numpy() != 0).any():  # a book of cash is described as one, not as a book
        blocked = main.trades[main.trades["status"] == "blocked"]["reason"].value_counts()
        why = ", ".join(f"{n} {r}" for r, n in blocked.items()) or "no buy was asked for"
        return [f"the enhanced book held no stock on any day (blocked buys: {why}); it is cash, so no "
                "active weight, predicted tracking error or top-k comparison of a book applies"], {
                    "benchmark": ref_name, "held_nothing": True}
    s = backtest.strategy
    d = book.diagnostics
    solved = d[d["status"] != "benchmark"]
    active = book.active.mean().dropna()
    top = active.reindex(active.abs().sort_values(ascending=False).index[:TOP_ACTIVE])
    named = ", ".join(f"{c} {v:+.2%}" for c, v in top.items()) or "none (the benchmark held throughout)"
    m = main.metrics
    realised = f"tracking error against {ref_name} {mine['te']:.2%} realised"
    if vs_weights is not None:
        realised += f" ({vs_weights['te']:.2%} against {weights_name}, the benchmark the budget is on)"
    lines = [
        f"{realised}, budget {s.tracking_error:.2%} "
        f"(against the benchmark weights: predicted {solved['predicted_te'].mean():.2%} on average; "
        f"active risk from factors {solved['factor_te'].mean():.2%}, of which styles "
        f"{solved['style_te'].mean():.2%}, specific {solved['specific_te'].mean():.2%})",
        f"largest average active weights: {named} (against the benchmark weights); turnover "
        f"{m['turnover'] / 2:.1f}x the book a year (one-sided), costs {m['costs_paid']:,.0f} "
        f"({m['costs_paid'] / backtest.capital / max(len(main.equity) / 252, 1e-9):.2%} of capital a year)",
        *book.notes,
    ]
    topk_config = dataclasses.replace(backtest, strategy=StrategyConfig.for_universe(
        int(grid.members.sum(axis=1).max()) if grid.members is not None else grid.n_stocks))
    topk = run_backtest(grid, forecast, topk_config)
    keep.update(topk=topk, topk_name=f"{topk_config.strategy.rule}, top {topk_config.strategy.top_k}")
    theirs = against_index(topk.returns, ref)
    lines.append(f"on the same forecasts, the top-k book ({topk_config.strategy.rule}, top "
                 f"{topk_config.strategy.top_k}) -- " + _line("it", theirs, ref_name)
                 + f"; the enhanced book's information ratio {mine['ir']:.2f} against its {theirs['ir']:.2f} "
                 f"(both over {ref_name})")
    facts = {"benchmark": ref_name, "te_realised": mine["te"], "budget": s.tracking_error,
             "predicted_te": float(solved["predicted_te"].mean()),
             "factor_te": float(solved["factor_te"].mean()), "style_te": float(solved["style_te"].mean()),
             "specific_te": float(solved["specific_te"].mean()), "fallbacks": book.fallbacks,
             "rebalances": len(d), "largest_active": {c: float(v) for c, v in top.items()},
             "turnover_one_sided": m["turnover"] / 2, "costs_paid": m["costs_paid"], "topk": theirs}
    if vs_weights is not None:
        facts["te_realised_against_weights"] = vs_weights["te"]
    return lines, facts


def total_return_figures(name: str, book: pd.Series, index: pd.Series, grid, spec: str | None, code: str
                         ) -> tuple[list[str], dict]:
    """The lines and ``metrics.json`` keys of ``book`` (daily returns) against the estimated
    total-return index: ``index`` (the price index's daily returns, on the book's days) plus
    the members' dividends at the benchmark weights ``spec`` names
    (:mod:`forecaster.portfolio.total_return`); and how closely the members at each source of
    weights follow the price index (``weights_sources``)."""
    bench = benchmark_weights(grid, spec)
    total, notes = total_return_index(index, grid, bench.weights)
    out = {"weights_used": bench.source}
    tracking = {}
    for source in ("fitted", "float_mv", "equal"):
        if source == "fitted" and index_series_of(grid) is None:
            continue
        if source == "float_mv" and carried_float_mv(grid) is None:
            continue
        weights = bench.weights if source == bench.source else benchmark_weights(grid, source).weights
        members = pd.Series(weighted_returns(grid, weights), index=grid.dates).reindex(index.index)
        tracking[source] = weights_tracking(members, index)
    out["weights_sources"] = tracking
    used = f"benchmark weights {bench.source} (used)"
    lines = [f"{used}; the members at each source of weights follow {code} at a tracking error of "
             + ", ".join(f"{k} {v['te']:.2%}" for k, v in tracking.items())]
    if total is None:
        out["against_total_return"] = None
        out["total_return_note"] = "; ".join(notes)
        lines.insert(0, f"no estimated total-return index of {code}: {'; '.join(notes)}; every figure is "
                        "against the price index, which lacks the dividends the stocks' returns include")
        return lines, out
    bench_name = f"{code} with its members' dividends (an estimated total-return index)"
    mine = against_index(book, total)
    dividends = float((total - index).mean() * 252)
    out["against_total_return"] = {"benchmark": bench_name, "dividends_ann": dividends, **mine}
    lines.insert(0, f"{name} after costs against {bench_name}: {code} plus its members' dividends at the "
                    f"{bench.source} weights, {dividends:+.2%}/yr, from the data's adjustment -- "
                    + _line("it", mine, "the total-return estimate") + _by_year(mine)
                    + "; the price-index figures follow")
    return lines, out
