"""The first screen of ``report.html`` for a run on an index universe whose series the data
hold: the main book judged against the index, rendered from the run's
:class:`~forecaster.evaluation.index_daily.IndexView` (never computed here). Its figures are
``metrics.json``'s ``index_book`` (:mod:`forecaster.evaluation.index_book`), the cumulative
excess is ``index_book.csv``'s; a run without the index's series has no such screen."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecaster.reporting.tables import NA, esc, fmt_money, fmt_pct, fmt_ratio, html_table

INDEX_CAPTIONS = {
    "index_excess.png": "Cumulative excess after costs over the index: over the estimated total-return "
                        "index (solid; where the data tell dividends) and the price index (dashed), the book "
                        "(black) and, beside an enhanced book, the top-k book on the same forecasts (blue); "
                        "each calendar year's excess at the top",
    "tracking_error.png": "Realised tracking error over a rolling 63 days against the budget and the risk "
                          "model's predicted tracking error; the bias statistic in the legend",
    "active_weights.png": "The largest average over- and underweights (names where the data or the "
                          "industries file have them; coloured by industry where the run has industries) "
                          "and the active style exposures at each rebalance",
    "active_industries.png": "Each industry group's active weight (the book's held weight in it less the "
                             "benchmark's) at each rebalance, the bound dotted; every day: "
                             "active_industries.csv",
    "risk_split.png": "Predicted active risk by part: the style factors, the statistical factors and "
                      "specific, at each rebalance",
}


def _get(d: dict | None, *keys, default=math.nan):
    for k in keys:
        if not isinstance(d, dict) or k not in d or d[k] is None:
            return default
        d = d[k]
    return d


def _last_year(years: dict | None) -> tuple[str | None, float]:
    if not years:
        return None, math.nan
    year = max(years, key=lambda y: int(y))
    return str(year), float(years[year])


def first_screen_rows(view) -> pd.DataFrame:
    """The first screen's table ``[book x figures]``: the main book, the top-k book beside an
    enhanced one and the members' equal weight (and the weighted members, where there are),
    against the total-return and the price index: cumulative since the start, a year, this
    (the last) calendar year; the tracking error and information ratio against the
    total-return index (the price index where the data cannot tell dividends)."""
    f = view.facts
    total = f.get("against_total_return") or None
    book, topk = f.get("book", {}), _get(f, "enhanced", "topk", default=None)
    cum = view.cumulative.ffill().iloc[-1] if len(view.cumulative) else pd.Series(dtype=float)
    strategies = view.strategies
    years_of = view.years

    def row(name, key, on_total, on_price, fallback):
        t_year, t_this = _last_year(_get(on_total, "years", default=None))
        p_year, p_this = _last_year(_get(on_price, "years", default=None))
        judged = on_total if on_total else on_price
        return {"name": name, "since_total": cum.get(f"{key}_over_total_return", math.nan),
                "year_total": _get(on_total, "excess"), "this_total": t_this,
                "since_price": cum.get(f"{key}_over_price", math.nan),
                "year_price": _get(on_price, "excess"), "this_price": p_this,
                "te": _get(judged, "te", default=fallback.get("te", math.nan)),
                "ir": _get(judged, "ir", default=fallback.get("ir", math.nan)), "year": t_year or p_year}

    label = f"{view.model}'s {'enhanced ' if view.enhanced else ''}book"
    rows = [row(label, "book", total, book, {})]
    if view.topk is not None:
        t = strategies.loc["top-k book"] if "top-k book" in strategies.index else pd.Series(dtype=float)
        years = years_of.get("topk_over_total_return", pd.Series(dtype=float)).dropna()
        on_total = ({"excess": t.get("over_total_return"), "te": t.get("te"), "ir": t.get("ir"),
                     "years": years.to_dict()} if total else None)
        rows.append(row(view.topk + ", same forecasts", "topk", on_total, topk, {}))
    if "benchmark" in strategies.index:
        e = strategies.loc["benchmark"]
        rows.append({"name": "the members' equal weight (no costs)", "since_total": e["since_total_return"],
                     "year_total": e["over_total_return"], "this_total": e["this_year_total_return"],
                     "since_price": e["since_price"], "year_price": e["over_price"],
                     "this_price": e["this_year_price"], "te": e["te"], "ir": e["ir"]})
    table = pd.DataFrame(rows).set_index("name")
    return table


def first_screen(view, has: dict, figure) -> list[str]:
    """The HTML of the first screen: the table, the tracking error against the budget, where
    the active risk is, what trading cost, then the index figures (``has``: which were written;
    ``figure(name, caption)``: one embedded)."""
    f = view.facts
    table = first_screen_rows(view)
    year = next((y for y in table.get("year", pd.Series(dtype=object)) if isinstance(y, str)), None)
    this = f"this year ({year}, to date)" if year else "this year"
    has_total = bool(f.get("against_total_return"))
    total_name = f"{view.code} with dividends (est.)"
    price_name = f"{view.code} (price index)"
    heads = {"since_total": f"since the start, over {total_name}", "year_total": f"a year, over {total_name}",
             "this_total": f"{this}, over {total_name}", "since_price": f"since the start, over {price_name}",
             "year_price": f"a year, over {price_name}", "this_price": f"{this}, over {price_name}",
             "te": "tracking error", "ir": "information ratio"}
    cols = [c for c in heads if c in table and (has_total or not c.endswith("_total"))]
    unsigned = lambda v: fmt_pct(v, sign=False)  # noqa: E731
    fmts = {c: fmt_ratio if c == "ir" else unsigned if c == "te" else fmt_pct for c in cols}
    # one column a book, one row a figure: three books fit an A4 page, nine figures would not
    shown = pd.DataFrame({c: table[c].map(fmts[c]) for c in cols}).rename(columns=heads).T
    shown.index.name = f"after costs, against {view.code}"
    against = "the estimated total-return index" if has_total else "the price index"
    weights = _get(f, "weights_used", default="?")
    added = (f" The total-return index adds them back at the benchmark weights ({weights}), estimated from "
             "the data's adjustment." if has_total else "")
    parts = [f'<p class="muted">{esc(view.code)} is a price index: its members\' dividends are not in it, '
             f"while the book's returns include them.{esc(added)} "
             f"A year: geometric annual excess; tracking error and information ratio: against {against}. "
             "Every day: index_book.csv.</p>",
             html_table(shown, fmt="{}")]
    if not has_total:
        parts.append(f'<p class="caveat">{esc(f.get("total_return_note") or "no total-return estimate")}</p>')
    parts.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in _lines(view)) + "</ul>")
    for name in ("index_excess.png", "tracking_error.png", "active_weights.png", "active_industries.png",
                 "risk_split.png"):
        if has.get(name):
            parts.append(figure(name, INDEX_CAPTIONS[name]))
    return parts


def _lines(view) -> list[str]:
    """The tracking error against the budget, where the active risk is and what trading cost."""
    f = view.facts
    e = f.get("enhanced") or {}
    total = f.get("against_total_return") or {}
    lines = []
    if view.enhanced:
        te = _get(e, "te_realised_against_weights", default=_get(e, "te_realised"))
        inside = "inside" if te <= view.budget else "over"
        bias = (f"; bias statistic {view.bias:.2f} (1: the forecast is right; above 1 it under-predicts)"
                if np.isfinite(view.bias) else "")
        index_te = (f"{fmt_pct(_get(total, 'te'), sign=False)} against {view.code} with dividends" if total
                    else f"{fmt_pct(_get(f, 'book', 'te'), sign=False)} against {view.code} (price index)")
        lines.append(f"Tracking error {fmt_pct(te, sign=False)} realised against {view.active_over} (the "
                     f"budget's benchmark), {inside} the budget of {fmt_pct(view.budget, sign=False)}; "
                     f"{index_te}; the risk model predicted {fmt_pct(_get(e, 'predicted_te'), sign=False)} "
                     f"on average{bias}.")
        named = ", ".join(f"{c}{' ' + view.names[c] if c in view.names else ''} {fmt_pct(v)}"
                          for c, v in (e.get("largest_active") or {}).items()) or NA
        lines.append(f"Active risk predicted: styles {fmt_pct(_get(e, 'style_te'), sign=False)}, all factors "
                     f"{fmt_pct(_get(e, 'factor_te'), sign=False)}, specific "
                     f"{fmt_pct(_get(e, 'specific_te'), sign=False)} (annual sds, averaged over the "
                     f"rebalances); largest average active weights: {named}.")
        rebalances, fallbacks = _get(e, "rebalances", default=0), _get(e, "fallbacks", default=0)
        lines.append(f"Trading: costs paid {fmt_money(_get(e, 'costs_paid'))} CNY "
                     f"({fmt_pct(view.costs_a_year, sign=False)} of the capital a year), turnover "
                     f"{_get(e, 'turnover_one_sided'):.1f}× the book a year (one-sided); "
                     f"{fallbacks} of {rebalances} rebalance(s) fell back (the optimiser did not solve).")
    else:
        main = view.strategies.loc[view.model] if view.model in view.strategies.index else None
        if main is not None:
            lines.append(f"Tracking error {fmt_pct(main['te'], sign=False)} against {view.code} "
                         f"({'with dividends' if total else 'price index'}); no budget: the book is a "
                         "top-k rule, not an enhanced book.")
        lines.append(f"Trading: costs {fmt_pct(view.costs_a_year, sign=False)} of the capital a year "
                     "(risk.csv: turnover, costs paid).")
    return lines
