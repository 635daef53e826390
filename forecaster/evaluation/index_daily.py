"""What an index manager reads, day by day: the main book against its index, computed here for
``report.html``'s first screen, ``index_book.csv`` and the index figures (reporting renders it).

For a run whose universe is an index whose series the data hold (the backtest carries
``index_equity``), :func:`index_view` builds an :class:`IndexView` of the main model's book:

* ``daily`` (``index_book.csv``, :data:`DAILY_COLUMNS`): each day's returns of the book (after
  costs), the price index, the estimated total-return index (the price index plus its members'
  dividends, :mod:`forecaster.portfolio.total_return`; NaN where the data cannot tell
  dividends), the members at the benchmark weights (no costs) and at equal weight; ``active``,
  the book's return minus the benchmark weights' (the benchmark the risk model's forecast and
  the budget are on; without weighted members, minus the total-return index, else the price
  index); the excess over either index; ``predicted_active_sd`` (daily, the enhanced book's
  forecast in force that day; NaN for another rule) and ``turnover`` (value traded over the
  day's starting value).
* ``cumulative``: the growth of the book (and the top-k book on the same forecasts, beside an
  enhanced one) over each index, minus 1; ``years``: each calendar year's excess.
* ``tracking``: the realised tracking error over a rolling :data:`TE_WINDOW` days (annual) and
  the predicted one; ``bias``: the bias statistic of ``active`` over ``predicted_active_sd``
  (1: the forecast is right; above 1: it under-predicts).
* an enhanced book's largest average over- and underweights (``active_top``; ``names`` filled
  by the caller where the data carry names), its active style exposures at each rebalance
  (``styles``) and its predicted active risk by part (``risk_split``).
* ``strategies``: every backtest and the benchmark against the indices (the page's tables).
* ``facts``: ``metrics.json``'s ``index_book`` itself, the page's first screen reads its figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.evaluation.index_book import against_index, daily_returns
from forecaster.portfolio.index_weights import benchmark_weights
from forecaster.portfolio.total_return import total_return_index
from forecaster.risk.bias import bias_statistic

TE_WINDOW = 63  # trading days of the rolling tracking error
TOP_WEIGHTS = 8  # over- and underweights drawn, each
TRADING_DAYS = 252
DAILY_COLUMNS = ("date", "book", "index_price", "index_total_return", "benchmark_weights", "equal_weight",
                 "active", "excess_total_return", "excess_price", "predicted_active_sd", "turnover")


@dataclass
class IndexView:
    """The main book against its index (module docstring). ``code``: the index; ``active_over``:
    what ``daily["active"]`` is measured against; ``budget``: the enhanced book's tracking-error
    budget (None for another rule); ``topk``: the top-k book's name (None: not run);
    ``costs_a_year``: the costs paid over the starting capital, a year."""

    code: str
    model: str
    daily: pd.DataFrame
    cumulative: pd.DataFrame
    years: pd.DataFrame
    tracking: pd.DataFrame
    strategies: pd.DataFrame
    facts: dict
    active_over: str
    budget: float | None = None
    bias: float = math.nan
    costs_a_year: float = math.nan  # costs paid over the capital, a year
    topk: str | None = None
    active_top: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))
    names: dict = field(default_factory=dict)
    industry_of: dict = field(default_factory=dict)  # code: industry group, where the run has industries
    styles: pd.DataFrame = field(default_factory=pd.DataFrame)
    risk_split: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def enhanced(self) -> bool:
        return self.budget is not None


def _growth_over(book: pd.Series, ref: pd.Series) -> pd.Series:
    """The cumulative growth of ``book`` over ``ref`` (daily returns), minus 1, on both's days."""
    a, b = book.align(ref, join="inner")
    ok = a.notna() & b.notna()
    return (1 + a[ok]).cumprod() / (1 + b[ok]).cumprod() - 1


def _years(book: pd.Series, ref: pd.Series | None) -> pd.Series:
    if ref is None:
        return pd.Series(dtype=float)
    return pd.Series(against_index(book, ref)["years"], dtype=float)


def index_view(report, grid, backtest, facts: dict, topk=None, topk_name: str = "top-k") -> IndexView | None:
    """The :class:`IndexView` of ``report``'s main book (None without the index's series, or
    without the book). ``grid``: the run's Panel; ``backtest``: its
    :class:`~forecaster.portfolio.backtest.BacktestConfig`; ``facts``: :func:`index_book`'s
    ``metrics.json`` figures; ``topk``: the top-k book run beside an enhanced one (a
    :class:`~forecaster.portfolio.backtest.BacktestResult`, None: none), ``topk_name`` its rule."""
    main = report.backtests.get(report.model)
    if main is None or main.index_equity is None or not facts.get("index"):
        return None
    capital = backtest.capital
    book = main.returns.astype(float)
    price = daily_returns(main.index_equity, capital).reindex(book.index)
    bench = benchmark_weights(grid, backtest.benchmark_weights)
    total, _ = total_return_index(price.dropna(), grid, bench.weights)
    total = total.reindex(book.index) if total is not None else None
    weighted = None if main.weighted_equity is None else daily_returns(main.weighted_equity, capital)
    equal = daily_returns(main.benchmark_equity, capital).reindex(book.index)
    enhanced = main.enhanced if backtest.strategy.rule == "enhanced" else None
    sd = (enhanced.predicted_sd.reindex(book.index).astype(float) if enhanced is not None
          else pd.Series(np.nan, index=book.index))
    if weighted is not None:
        over, over_name = weighted.reindex(book.index), main.weighted_name.removesuffix(" (no costs)")
    elif total is not None:
        over, over_name = total, f"{facts['index']} with its members' dividends"
    else:
        over, over_name = price, f"{facts['index']} (price index)"
    curves = report.strategy.curves.get(report.model) if isinstance(report.strategy.curves, dict) else None
    turnover = (curves["turnover"].reindex(book.index) if curves is not None and "turnover" in curves
                else pd.Series(np.nan, index=book.index))
    nan = pd.Series(np.nan, index=book.index)
    daily = pd.DataFrame({
        "date": book.index, "book": book, "index_price": price,
        "index_total_return": total if total is not None else nan,
        "benchmark_weights": weighted.reindex(book.index) if weighted is not None else nan,
        "equal_weight": equal, "active": book - over,
        "excess_total_return": book - total if total is not None else nan,
        "excess_price": book - price, "predicted_active_sd": sd, "turnover": turnover}, index=book.index)
    daily = daily[list(DAILY_COLUMNS)]
    refs = {"total_return": total, "price": price}
    books = {"book": book} | ({"topk": topk.returns.astype(float)} if topk is not None else {})
    cumulative = pd.DataFrame({f"{b}_over_{r}": _growth_over(series, ref) for b, series in books.items()
                               for r, ref in refs.items() if ref is not None})
    years = pd.DataFrame({f"{b}_over_{r}": _years(series, ref) for b, series in books.items()
                          for r, ref in refs.items()})
    years.index.name = "year"
    year = math.sqrt(TRADING_DAYS)
    active = daily["active"]
    tracking = pd.DataFrame({
        "realised": active.rolling(TE_WINDOW, min_periods=TE_WINDOW).std() * year,
        "realised_total_return": (daily["excess_total_return"].rolling(TE_WINDOW, min_periods=TE_WINDOW).std()
                                  * year),
        "predicted": sd * year}, index=book.index)
    view = IndexView(code=str(facts["index"]), model=report.model, daily=daily.reset_index(drop=True),
                     cumulative=cumulative, years=years, tracking=tracking,
                     strategies=_strategies(report, capital, refs, topk), facts=facts, active_over=over_name,
                     topk=None if topk is None else f"top-k book ({topk_name})")
    years_held = max(len(book) / TRADING_DAYS, 1e-9)
    view.costs_a_year = float(main.metrics.get("costs_paid", math.nan)) / capital / years_held
    if enhanced is not None:
        view.budget = float(backtest.strategy.tracking_error)
        view.bias = bias_statistic(active.to_numpy(), sd.to_numpy())
        _active_parts(view, enhanced, grid)
    return view


def _strategies(report, capital: float, refs: dict, topk) -> pd.DataFrame:
    """``[strategy x {over_total_return, over_price, te, ir, since_total_return, since_price,
    this_year_total_return, this_year_price}]``: each backtest after costs, the top-k book and
    the members' equal weight (``benchmark``) against the indices: a year; the tracking error
    and information ratio against the total-return index (the price index where the data
    cannot tell dividends); the cumulative excess since the start and the last calendar
    year's."""
    main = report.backtests[report.model]
    series = {name: r.returns.astype(float) for name, r in report.backtests.items()}
    if topk is not None:
        series["top-k book"] = topk.returns.astype(float)
    series["benchmark"] = daily_returns(main.benchmark_equity, capital)
    rows = {}
    for name, r in series.items():
        on_price = against_index(r, refs["price"])
        on_total = against_index(r, refs["total_return"]) if refs["total_return"] is not None else None
        judged = on_total or on_price
        rows[name] = {"over_total_return": on_total["excess"] if on_total else math.nan,
                      "over_price": on_price["excess"], "te": judged["te"], "ir": judged["ir"]}
        for key, on in (("total_return", on_total), ("price", on_price)):
            ref = refs[key]
            since = _growth_over(r, ref) if ref is not None else pd.Series(dtype=float)
            years = (on or {}).get("years") or {}
            rows[name][f"since_{key}"] = float(since.iloc[-1]) if len(since) else math.nan
            rows[name][f"this_year_{key}"] = float(years[max(years)]) if years else math.nan
    return pd.DataFrame.from_dict(rows, orient="index")


def _active_parts(view: IndexView, book, grid) -> None:
    """An enhanced book's average over- and underweights, active style exposures at each
    rebalance (the risk model's exposures on the signal day, the trading day before) and its
    predicted active risk by part."""
    from forecaster.portfolio.panel_risk import style_exposures_of
    from forecaster.risk import STYLES

    active = book.active.dropna(how="all")
    mean = book.active.fillna(0.0).loc[active.index].mean() if len(active) else pd.Series(dtype=float)
    mean = mean[mean != 0]
    over, under = mean.nlargest(TOP_WEIGHTS), mean.nsmallest(TOP_WEIGHTS)
    top = pd.concat([over[over > 0], under[under < 0]])
    view.active_top = top.sort_values(ascending=False)
    exposures = style_exposures_of(grid)  # the book's styles, whichever industries its model had
    styles = list(STYLES)
    column = pd.Index([str(c) for c in grid.codes]).get_indexer([str(c) for c in active.columns])
    rows = {}
    for date, w in active.iterrows():
        s = int(grid.dates.get_indexer([date])[0]) - 1
        if s < 0:
            continue
        x = exposures[s][np.maximum(column, 0)]  # [codes, styles]
        ok = (column >= 0)[:, None] & np.isfinite(x) & np.isfinite(w.to_numpy())[:, None]
        rows[date] = np.where(ok, x * np.nan_to_num(w.to_numpy())[:, None], 0.0).sum(axis=0)
    view.styles = pd.DataFrame.from_dict(rows, orient="index", columns=styles)
    d = book.diagnostics
    d = d[d["status"] != "benchmark"].set_index("date")
    if len(d):
        rest = np.sqrt(np.maximum(d["factor_te"] ** 2 - d["style_te"] ** 2, 0.0))
        view.risk_split = pd.DataFrame({"total": d["predicted_te"], "styles": d["style_te"],
                                        "statistical": rest, "specific": d["specific_te"]})
