"""The tables of ``report.html``, rendered from a scored run's
:class:`~forecaster.evaluation.scoring.Report` (never computed here): cell formats (percentages
with their unit, p-values without a sign, "–" for a missing value), the strategy table, the
at-a-glance rows under the verdict, the risk table, the yearly returns, the worst drawdowns,
the forecast-skill table (sorted by the verdict's column, empty columns left out and named) and
the rank IC by year and by board."""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd

from forecaster.evaluation.verdict import best_ic_baseline
from forecaster.reporting.figures import plural

NA = "–"


# ------------------------------------------------------------------------------------------------
# cell formats (a NaN is "–")

def _ok(v) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def fmt_pct(v, sign: bool = True, digits: int = 2) -> str:
    """A fraction as a percentage with its unit: ``+15.11 %``."""
    if not _ok(v):
        return NA
    v = 0.0 if abs(float(v)) < 0.5 * 10.0 ** -(digits + 2) else float(v)  # no "-0.00 %"
    return f"{v * 100:{'+' if sign else ''}.{digits}f} %"


def fmt_p(v) -> str:
    """A p-value, never signed: ``0.010``, ``<0.001``."""
    if not _ok(v):
        return NA
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def fmt_ic(v) -> str:
    return f"{v:+.4f}" if _ok(v) else NA


def fmt_ratio(v) -> str:
    return f"{v:.2f}" if _ok(v) else NA


def fmt_signed_ratio(v) -> str:
    return f"{v:+.2f}" if _ok(v) else NA


def fmt_bp(v) -> str:
    return f"{v * 1e4:+.1f} bp" if _ok(v) else NA


def fmt_times(v) -> str:
    return f"{v:.1f}×" if _ok(v) else NA


def fmt_count(v) -> str:
    return f"{int(round(float(v))):,}" if _ok(v) else NA


def fmt_money(v) -> str:
    return f"{float(v):,.0f}" if _ok(v) else NA


def fmt_days(v) -> str:
    return f"{int(v)}" if _ok(v) else NA


def fmt_date(v) -> str:
    return "not yet" if v is None or pd.isna(v) else str(pd.Timestamp(v).date())


def count_text(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def esc(x) -> str:
    return html.escape(str(x))


# ------------------------------------------------------------------------------------------------
# tables

def html_table(frame: pd.DataFrame, highlight: str | None = None, fmt="{:+.4f}", best: str | None = None,
           refs: tuple = (), text_columns: tuple = ()) -> str:
    """An HTML table of ``frame`` (its index the first column). ``fmt``: one format for every
    number (a format string or a function), or ``{column: function}``; ``highlight`` (the
    main model) and ``best`` (the verdict's best baseline) rows are marked, ``refs`` (a
    benchmark) shown muted; ``text_columns`` wrap."""
    text_class = ' class="text"'
    head = "".join(f"<th{text_class if c in text_columns else ''}>{esc(c)}</th>"
                   for c in [frame.index.name or "", *frame.columns])
    rows = []
    for idx, row in frame.iterrows():
        cells = []
        for col, v in row.items():
            f = fmt.get(col) if isinstance(fmt, dict) else fmt
            cls = ' class="text"' if col in text_columns else ""
            if callable(f):
                text = f(v)
            elif isinstance(v, (float, np.floating)):
                text = NA if pd.isna(v) else (f or "{}").format(v)
            else:
                text = NA if v is None or (not isinstance(v, str) and pd.isna(v)) else str(v)
            cells.append(f"<td{cls}>{esc(text)}</td>")
        cls = (' class="main"' if idx == highlight else ' class="best"' if idx == best
               else ' class="ref"' if idx in refs else "")
        rows.append(f"<tr{cls}><td>{esc(idx)}</td>{''.join(cells)}</tr>")
    return (f'<div class="wrap"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            "</table></div>")


def _drop_empty(frame: pd.DataFrame, why: dict, names: dict | None = None) -> tuple[pd.DataFrame, list[str]]:
    """``frame`` without its columns that hold no value, and a sentence for each left out
    (``names``: how the page calls a column)."""
    names = names or {}
    empty = [c for c in frame.columns if not frame[c].map(_ok).any()]
    return frame.drop(columns=empty), [f"{names.get(c, c)}: {why.get(c, 'no model has a value')}"
                                       for c in empty]


# The forecast-skill table: (key, header, format, what it is).
SKILL_COLUMNS = (
    ("daily_rank_ic", "daily rank IC", fmt_ic, "mean over days of the Spearman correlation across the stocks "
     "of a day between score and the label"),
    ("icir", "ICIR", fmt_signed_ratio, "mean / standard deviation of the daily rank IC"),
    ("ic_p", "p, IC vs {model}", fmt_p, "Newey-West test of the daily rank-IC difference with the main "
     "model"),
    ("q_spread", "top - bottom quintile, a day", fmt_bp, "mean label return of the top score quintile "
     "minus the bottom one, per day, before costs"),
    ("monotonicity", "quintile monotonicity", fmt_signed_ratio, "rank correlation of quintile and mean "
     "return (+1: each quintile earns more than the one below)"),
    ("rank_ic_close", "daily rank IC, close to close", fmt_ic, "the daily rank IC against the close-to-close "
     "return"),
    ("rank_ic", "pooled rank IC", fmt_ic, "rank correlation of forecast and outcome over every scored row"),
    ("hit_rate", "sign hit rate", lambda v: fmt_pct(v, sign=False, digits=1), "share of the rows with a "
     "nonzero forecast and outcome whose signs agree"),
    ("r2_oos_zero", "R² vs zero", fmt_ic, "out-of-sample R² against the zero forecast"),
    ("dm_p", "p, DM vs {model}", fmt_p, "Diebold-Mariano test of the squared-error difference with the main "
     "model"),
    ("position_ic", "IC by bar position", fmt_ic, "the IC of each bar of the day across days, averaged over "
     "the day's bars (bar_position_metrics.csv)"),
    ("position_rank_ic", "rank IC by bar position", fmt_ic, "the same for the rank IC"),
)
SKILL_EMPTY = {
    "r2_oos_zero": "no model here forecasts returns (scores rank stocks; an R² needs a return forecast)",
    "dm_p": "the Diebold-Mariano test compares return forecasts' errors; the main model's scores rank the "
            "stocks of a day (its rank-IC test is the p, IC column)",
    "ic_p": "no cross-section: one stock has no daily rank IC",
    "daily_rank_ic": "one stock: no cross-section to rank",
    "icir": "one stock: no cross-section to rank",
    "q_spread": "one stock: no quantiles across stocks",
    "monotonicity": "one stock: no quantiles across stocks",
    "rank_ic_close": "no close-to-close label in this run",
}


def skill_table(report) -> tuple[pd.DataFrame, dict]:
    """The forecast-skill table of every model, sorted by the column the verdict reads (daily
    rank IC for a panel, R² against zero for one stock), and ``{column: format}``."""
    overall = report.overall.set_index("model") if len(report.overall) else pd.DataFrame()
    models = list(overall.index)
    table = pd.DataFrame(index=pd.Index(models, name="model"))
    for col in ("rank_ic", "hit_rate", "r2_oos_zero"):
        table[col] = overall[col] if col in overall else np.nan
    ic = report.ic or {}
    table["daily_rank_ic"] = pd.Series({m: v["mean_ic"] for m, v in ic.items()}, dtype=float)
    table["icir"] = pd.Series({m: v["icir"] for m, v in ic.items()}, dtype=float)
    tests = report.ic_tests
    table["ic_p"] = (tests.set_index("baseline")["p_value"] if isinstance(tests, pd.DataFrame) and len(tests)
                     else np.nan)
    q = report.quantiles or {}
    table["q_spread"] = pd.Series({m: v["spread"] for m, v in q.items()}, dtype=float)
    table["monotonicity"] = pd.Series({m: v["monotonicity"] for m, v in q.items()}, dtype=float)
    close = report.ic_close or {}
    table["rank_ic_close"] = pd.Series({m: v["mean_ic"] for m, v in close.items()}, dtype=float)
    dm = report.dm
    has_dm = isinstance(dm, pd.DataFrame) and len(dm)
    table["dm_p"] = dm.set_index("baseline")["p_value"] if has_dm else np.nan
    bars = report.bar_summary
    if isinstance(bars, pd.DataFrame) and len(bars):
        table = table.join(bars.set_index("model")[["position_ic", "position_rank_ic"]])
    key = "daily_rank_ic" if table["daily_rank_ic"].map(_ok).any() else "r2_oos_zero"
    if not table[key].map(_ok).any():
        key = "rank_ic"
    table = table.sort_values(key, ascending=False, na_position="last", kind="stable")
    order = [c for c, *_ in SKILL_COLUMNS if c in table.columns]
    return table[order], key


def strategy_table(report) -> pd.DataFrame:
    """Every backtest after costs, the benchmark last: the columns the verdict reads, with each
    strategy's days (``days``) and those it shares with the model under test (``shared_days``).
    Ranked as the verdict compares: by ``vs_main``, its annual return minus the model under
    test's on the days both cover (the model under test at 0), never by a return over its own
    days (a peer on the last half of the days would rank by a half the model was not judged on);
    by the annual return where no paired test was made."""
    stats = report.strategy
    risk = stats.risk
    if not isinstance(risk, pd.DataFrame) or not len(risk):
        return pd.DataFrame()
    table = risk[["annual_return", "annual_return_gross", "excess_annual_return", "sharpe", "max_drawdown",
                  "information_ratio", "turnover"]].copy()
    tests = stats.tests.set_index("baseline") if len(stats.tests) else pd.DataFrame()
    table["vs_main"] = (-tests["annual_return_diff"].astype(float) if len(tests) else np.nan)
    table["p_paired"] = tests["p_value"] if len(tests) else np.nan
    backtests = getattr(report, "backtests", {}) or {}
    main = backtests.get(report.model)
    main_days = len(main.returns) if main is not None else np.nan
    table["days"] = [len(backtests[m].returns) if m in backtests else main_days for m in table.index]
    table["shared_days"] = tests["n_days"].astype(float) if len(tests) else np.nan
    table.loc[[m for m in table.index if m in (report.model, "benchmark")], "shared_days"] = main_days
    bench = table.loc[["benchmark"]] if "benchmark" in table.index else table.iloc[:0]
    rest = table.drop(index="benchmark", errors="ignore")
    if len(tests):  # the model under test itself at 0: the point the others are ranked from
        key = rest["vs_main"].where(rest.index != report.model, 0.0)
        rest = rest.loc[key.sort_values(ascending=False, na_position="last", kind="stable").index]
    else:
        rest = rest.sort_values("annual_return", ascending=False, na_position="last", kind="stable")
    return pd.concat([rest, bench])


def index_columns(report, rows: list, first_only: bool = False) -> dict[str, list]:
    """``{header: values of rows}``: each strategy's annual excess after costs over the index's
    estimated total return and over its price (``report.index_view``, where the run's universe
    is an index whose series the data hold; none otherwise). ``first_only``: the first of them
    alone (the strategy table is wide already)."""
    view = getattr(report, "index_view", None)
    if view is None:
        return {}
    s = view.strategies
    out = {}
    if s["over_total_return"].notna().any():
        out[f"over {view.code} with dividends, a year"] = [s["over_total_return"].get(m, np.nan)
                                                            for m in rows]
    out[f"over {view.code} (price), a year"] = [s["over_price"].get(m, np.nan) for m in rows]
    return dict(list(out.items())[:1]) if first_only else out


def strategy_section(report, best: str | None) -> list[str]:
    table = strategy_table(report)
    if not len(table):
        return []
    model = report.model
    headers = {"annual_return": "after costs, a year", "annual_return_gross": "before costs, a year",
               "excess_annual_return": "over the benchmark, a year", "sharpe": "Sharpe",
               "max_drawdown": "max drawdown", "information_ratio": "information ratio",
               "turnover": "turnover, a year", "vs_main": f"this minus {model}, a year",
               "p_paired": f"p, paired vs {model}", "days": "days"}
    fmts = {"annual_return": fmt_pct, "annual_return_gross": fmt_pct, "excess_annual_return": fmt_pct,
            "sharpe": fmt_ratio, "max_drawdown": fmt_pct, "information_ratio": fmt_ratio,
            "turnover": fmt_times, "vs_main": fmt_pct, "p_paired": fmt_p, "days": str}
    # one column (the page fits A4): a strategy's days, and those it shares with the model where fewer
    days = [fmt_count(d) if not np.isfinite(s) or s == d else f"{fmt_count(d)} ({fmt_count(s)} shared)"
            for d, s in zip(table["days"].astype(float), table["shared_days"].astype(float), strict=True)]
    shown = table.drop(columns="shared_days").assign(days=days).rename(columns=headers)
    for name, values in index_columns(report, list(shown.index), first_only=True).items():
        shown[name] = values
        headers[name] = name
        fmts[name] = fmt_pct
    shown.index.name = "strategy"
    bench = report.backtests[model].benchmark if model in report.backtests else "benchmark"
    caption = (f"Sorted as the verdict compares: by this minus {model} on the days both cover (the days "
               f"shared with {model}; {model} itself at 0), not by a return over a strategy's own days. "
               f"After costs, a year: over the strategy's own days (days; in brackets those it shares "
               f"with {model}, where fewer). Before costs: the same "
               f"positions without fees, stamp duty and slippage. Over the benchmark: annual return minus "
               f"the benchmark's ({bench}). Max drawdown: the largest fall from a peak. Information "
               f"ratio: mean / spread of the daily return over the benchmark, a year. Turnover: value "
               f"traded over the mean portfolio value, a year. This minus {model} (+: this earned more) "
               f"and its p: the paired Newey-West test of the two strategies' daily returns after costs. "
               f"Yellow: {model}; blue: the best baseline strategy{f' ({best})' if best else ''}.")
    return [f'<p class="muted">{esc(caption)}</p>',
            html_table(shown, highlight=model, best=best, refs=("benchmark",),
                   fmt={headers[k]: f for k, f in fmts.items()})]


def glance_table(report, best: str | None) -> str:
    """Three rows under the verdict: the main model's strategy, the best baseline's and the
    benchmark, after and before costs."""
    risk = report.strategy.risk
    model = report.model
    rows = [m for m in (model, best, "benchmark") if m is not None and m in risk.index]
    if model not in rows:
        return ""
    cols = {"annual_return": ("after costs, a year", fmt_pct), "annual_return_gross": ("before costs, a year",
                                                                                        fmt_pct),
            "excess_annual_return": ("over the benchmark, a year", fmt_pct), "sharpe": ("Sharpe", fmt_ratio),
            "max_drawdown": ("max drawdown", fmt_pct)}
    table = risk.loc[rows, list(cols)].rename(columns={k: v[0] for k, v in cols.items()})
    if report.ic:
        table["daily rank IC"] = [report.ic.get(m, {}).get("mean_ic", np.nan) for m in rows]
    index = index_columns(report, rows)
    for name, values in index.items():
        table[name] = values
    table.index = [f"{m} (best baseline strategy)" if m == best else m for m in rows]
    table.index.name = "at a glance"
    fmts = {v[0]: v[1] for v in cols.values()} | {"daily rank IC": fmt_ic} | {k: fmt_pct for k in index}
    return html_table(table, highlight=model, best=f"{best} (best baseline strategy)" if best else None,
                  refs=("benchmark",), fmt=fmts)


def risk_section(report, best: str | None) -> list[str]:
    risk = report.strategy.risk
    model = report.model
    cols = [m for m in (model, best, "benchmark") if m is not None and m in risk.index]
    if model not in cols:
        return []
    rows = (("annual_return", "annual return after costs", fmt_pct),
            ("annual_return_gross", "annual return before costs", fmt_pct),
            ("cost_drag", "costs, a year (before minus after)", lambda v: fmt_pct(v, sign=False)),
            ("excess_annual_return", "over the benchmark after costs, a year", fmt_pct),
            ("excess_annual_return_gross", "over the benchmark before costs, a year", fmt_pct),
            ("annual_volatility", "volatility, a year", lambda v: fmt_pct(v, sign=False)),
            ("sharpe", "Sharpe ratio", fmt_ratio), ("sortino", "Sortino ratio", fmt_ratio),
            ("calmar", "Calmar ratio (annual return / max drawdown)", fmt_ratio),
            ("max_drawdown", "max drawdown", fmt_pct),
            ("information_ratio", "information ratio (vs the benchmark)", fmt_ratio),
            ("tracking_error", "tracking error, a year", lambda v: fmt_pct(v, sign=False)),
            ("turnover", "turnover, a year", fmt_times), ("costs_paid", "costs paid (CNY)", fmt_money),
            ("n_trades", "trades", fmt_count),
            ("n_blocked", "blocked trades (limit, suspension, cash)", fmt_count),
            ("mean_holdings", "stocks held, mean", fmt_ratio))
    grid = pd.DataFrame({m: [f(risk.loc[m, key]) for key, _, f in rows] for m in cols},
                        index=pd.Index([label for _, label, _ in rows], name="risk"))
    return ["<h3>Risk and trading</h3>",
            '<p class="muted">252 trading days a year, no risk-free rate; the benchmark trades without '
            "costs. Every strategy's figures: risk.csv.</p>", html_table(grid, fmt=str)]


def years_section(report) -> list[str]:
    stats = report.strategy
    parts = []
    if len(stats.yearly):
        years = stats.yearly.copy()
        years.index = [str(y) for y in years.index]
        years.index.name = "year"
        years.columns = [f"{report.model} after costs", "benchmark", "difference"]
        parts.append(html_table(years, fmt=fmt_pct))
    return parts


def drawdowns_section(report) -> list[str]:
    stats = report.strategy
    out = []
    for frame, what in ((stats.drawdowns, f"{report.model}'s equity after costs"),
                        (stats.excess_drawdowns, f"{report.model}'s growth over the benchmark")):
        if not len(frame):
            continue
        t = frame.copy()
        t.index = range(1, len(t) + 1)
        t.index.name = "#"
        t = t.rename(columns={"start": "peak", "days_to_trough": "days to trough",
                              "days_to_recover": "days to recover"})
        fmts = {"peak": fmt_date, "trough": fmt_date, "recovery": fmt_date, "depth": fmt_pct,
                "days to trough": fmt_days, "days to recover": fmt_days}
        out.append(f'<div><h3>Worst drawdowns: {esc(what)}</h3>{html_table(t, fmt=fmts)}</div>')
    if not out:
        return []
    return ['<div class="grid2">', *out, "</div>",
            '<p class="muted">Peak: the last day at the high; trough: the lowest close before the high was '
            "regained; recovery: the first day back at the high (not yet: still below it at the end). "
            "Days are trading days. drawdowns.csv.</p>"]


def skill_section(report) -> list[str]:
    table, key = skill_table(report)
    if not len(table):
        return []
    model = report.model
    why = {c: SKILL_EMPTY.get(c, "no model has a value") for c in table.columns}
    spec = {c: (h.format(model=model), f, note) for c, h, f, note in SKILL_COLUMNS}
    table, left_out = _drop_empty(table, why, {c: v[0] for c, v in spec.items()})
    best = _best_ic(report)
    shown = table.rename(columns={c: spec[c][0] for c in table.columns})
    shown.index.name = "model"
    meaning = "; ".join(f"{spec[c][0]}: {spec[c][2]}" for c in table.columns)
    sort = spec.get(key, (key,))[0]
    parts = [f'<p class="muted">Sorted by {esc(sort)} (the verdict\'s column). {esc(meaning)}. '
             f"Yellow: {esc(model)}; blue: the best baseline{f' ({esc(best)})' if best else ''}.</p>",
             html_table(shown, highlight=model, best=best,
                        fmt={spec[c][0]: spec[c][1] for c in table.columns})]
    notes = []
    if left_out:
        notes.append("Columns left out, no model has a value: " + "; ".join(left_out) + ".")
    gaps = report.not_computed if isinstance(report.not_computed, dict) else {}
    for m, reasons in gaps.items():
        if m in table.index and reasons:
            texts = sorted(set(reasons.values()))
            notes.append(f"{m}: " + "; ".join(texts) + " (its empty cells).")
    if notes:
        parts.append('<p class="muted">' + " ".join(esc(n) for n in notes) + "</p>")
    return parts


def _best_ic(report) -> str | None:
    return best_ic_baseline(report.model, report.ic, report.ic_tests, report.overall)


def ic_breakdown_section(report) -> list[str]:
    """The daily rank IC by calendar year and by board: one row per model, each cell the mean
    IC and the ICIR in brackets (days and stocks: ic_by_year.csv, ic_by_board.csv). A board
    without any IC (too few of its stocks a day) is left out and named."""
    parts = []
    for table, key, title in ((report.ic_years, "year", "year"), (report.ic_boards, "board", "board")):
        if not len(table):
            continue
        cells = table.assign(cell=[(NA if pd.isna(m) else f"{m:+.4f}")
                                   + ("" if pd.isna(r) else f" ({r:+.2f})")
                                   for m, r in zip(table["mean_ic"], table["icir"], strict=True)])
        dropped = []
        if key == "board":  # the board's stocks in its column's name
            stocks = table.groupby("board", sort=False)["n_stocks"].max()
            empty = [b for b, g in table.groupby("board", sort=False) if not g["mean_ic"].notna().any()]
            dropped = [f"{b} ({plural(stocks[b], 'stock')})" for b in empty]
            cells = cells[~cells["board"].isin(empty)]
            cells["board"] = [f"{b} ({plural(stocks[b], 'stock')})" for b in cells["board"]]
        if not len(cells):
            continue
        order = list(dict.fromkeys(cells["model"]))
        if report.ic:  # the skill table's order: best daily rank IC first
            order = sorted(order, key=lambda m: -np.nan_to_num(report.ic.get(m, {}).get("mean_ic", np.nan),
                                                               nan=-9))
        grid = cells.pivot(index="model", columns=key, values="cell").reindex(
            columns=list(dict.fromkeys(cells[key])), index=order).fillna(NA)
        grid.index.name, grid.columns.name = "model", None
        grid.columns = [str(c) for c in grid.columns]
        parts += [f"<h3>By {title}</h3>",
                  html_table(grid, highlight=report.model, fmt="{}", best=_best_ic(report))]
        if dropped:
            parts.append(f'<p class="muted">Left out: {esc(", ".join(dropped))}: fewer than 5 of its stocks '
                         "scored on every day, so no daily IC within the board.</p>")
    if not parts:
        return []
    return ["<h3>Daily rank IC by year and by board</h3>",
            '<p class="muted">Each cell: mean daily rank IC (ICIR). A board\'s IC is the daily rank IC '
            "within its stocks (days with fewer than 5 of them scored have none); main excludes the "
            "former SME board (sz.002xxx). Days per cell: ic_by_year.csv, ic_by_board.csv.</p>", *parts]
