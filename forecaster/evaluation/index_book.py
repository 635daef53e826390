"""A book judged as its holder is: against the index's own series.

For a run whose universe is an index whose series the data hold, the main model's book is
measured against that series (a price index: its dividends are not in it, while the stocks'
returns include theirs): excess a year after costs, tracking error, information ratio and the
excess of each calendar year; then against the members at the benchmark weights and at equal
weight. An enhanced book (``--strategy enhanced``) adds its tracking error against the budget,
the predicted active risk split into factors (styles apart) and specific, its largest average
active weights, turnover and costs, the optimiser's fallbacks, and the top-k book on the same
forecasts beside it. :func:`index_book` computes all of it; the lines go to the verdict and the
figures to ``metrics.json`` (``index_book``).
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from forecaster.metrics.returns import active_stats, period_returns
from forecaster.portfolio.backtest import run_backtest
from forecaster.portfolio.index_series import attach_index
from forecaster.portfolio.index_weights import weights_tracking
from forecaster.portfolio.strategy import StrategyConfig

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


def _line(name: str, s: dict) -> str:
    pos = sum(v > 0 for v in s["years"].values())
    return (f"{name}: {s['excess']:+.2%}/yr over the index, tracking error {s['te']:.2%}, information ratio "
            f"{s['ir']:.2f}; ahead in {pos} of {len(s['years'])} calendar years")


def index_book(report, forecast: pd.DataFrame, grid, backtest, index_code: str, index_frame: pd.DataFrame
               ) -> tuple[list[str], dict]:
    """The verdict's lines and ``metrics.json``'s ``index_book`` for the main model's book of
    ``report`` (its backtests already carry the index, :func:`attach_index`). ``forecast``: the
    main model's ``[date x code]`` forecasts (for the top-k book beside an enhanced one)."""
    main = report.backtests.get(report.model)
    if main is None or main.index_equity is None:
        return [], {}
    capital = backtest.capital
    index = daily_returns(main.index_equity, capital)
    enhanced = backtest.strategy.rule == "enhanced"
    label = "enhanced book" if enhanced else "book"
    mine = against_index(main.returns, index)
    lines = [f"{report.model}'s {label} after costs against {index_code} (the index's own series, a price "
             "index: its dividends are not in it) -- " + _line("it", mine) + "; by year "
             + ", ".join(f"{y} {v:+.1%}" for y, v in mine["years"].items())]
    out = {"index": index_code, "book": mine}
    if main.weighted_equity is not None:
        weighted = daily_returns(main.weighted_equity, capital)
        proxy = weights_tracking(weighted, index)
        out["proxy"] = {"weights": main.weighted_name, **proxy}
        te, corr, drift = proxy["te"], proxy["corr"], proxy["drift"]
        lines.append(f"{main.weighted_name} follow the index at a tracking error of {te:.2%} "
                     f"(daily correlation {corr:.3f}, {drift:+.2%}/yr, dividends the index lacks included); "
                     + _line(f"the {label} against them", against_index(main.returns, weighted)))
    equal = against_index(daily_returns(main.benchmark_equity, capital), index)
    lines.append(f"the members' equal weight ({main.benchmark}) against the index: "
                 f"{equal['excess']:+.2%}/yr, tracking error {equal['te']:.2%}")
    out["equal_weight"] = equal
    if enhanced and main.enhanced is not None:
        more, facts = _enhanced(report, main, forecast, grid, backtest, index_code, index_frame, index, mine)
        lines += more
        out["enhanced"] = facts
    return lines, out


def _enhanced(report, main, forecast, grid, backtest, index_code, index_frame, index, mine):
    book = main.enhanced
    s = backtest.strategy
    d = book.diagnostics
    solved = d[d["status"] != "benchmark"]
    active = book.active.mean().dropna()
    top = active.reindex(active.abs().sort_values(ascending=False).index[:TOP_ACTIVE])
    named = ", ".join(f"{c} {v:+.2%}" for c, v in top.items()) or "none (the benchmark held throughout)"
    m = main.metrics
    lines = [
        f"tracking error against the index {mine['te']:.2%} realised, budget {s.tracking_error:.2%} "
        f"(against the benchmark weights: predicted {solved['predicted_te'].mean():.2%} on average; "
        f"active risk from factors {solved['factor_te'].mean():.2%}, of which styles "
        f"{solved['style_te'].mean():.2%}, specific {solved['specific_te'].mean():.2%})",
        f"largest average active weights: {named}; turnover {m['turnover'] / 2:.1f}x the book a year "
        f"(one-sided), costs {m['costs_paid']:,.0f} "
        f"({m['costs_paid'] / backtest.capital / max(len(main.equity) / 252, 1e-9):.2%} of capital a year)",
        *book.notes,
    ]
    topk_config = dataclasses.replace(backtest, strategy=StrategyConfig.for_universe(
        int(grid.members.sum(axis=1).max()) if grid.members is not None else grid.n_stocks))
    topk = attach_index({"topk": run_backtest(grid, forecast, topk_config)}, index_code, index_frame,
                        backtest.execution, backtest.capital)["topk"]
    theirs = against_index(topk.returns, index)
    lines.append(f"on the same forecasts, the top-k book ({topk_config.strategy.rule}, top "
                 f"{topk_config.strategy.top_k}) -- " + _line("it", theirs)
                 + f"; the enhanced book's information ratio {mine['ir']:.2f} against its {theirs['ir']:.2f}")
    facts = {"budget": s.tracking_error, "predicted_te": float(solved["predicted_te"].mean()),
             "factor_te": float(solved["factor_te"].mean()), "style_te": float(solved["style_te"].mean()),
             "specific_te": float(solved["specific_te"].mean()), "fallbacks": book.fallbacks,
             "rebalances": len(d), "largest_active": {c: float(v) for c, v in top.items()},
             "turnover_one_sided": m["turnover"] / 2, "costs_paid": m["costs_paid"], "topk": theirs}
    return lines, facts
