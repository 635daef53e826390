"""Scoring a walk-forward run: every model's out-of-sample statistics (point metrics and
Diebold-Mariano for return forecasts; daily rank IC, ICIR, quantile spreads, IC by horizon,
by calendar year and by board, and the paired IC-difference test for panels), each model's
backtest, and the verdict. The result,
a :class:`Report`, is what :mod:`forecaster.reporting` renders; nothing is computed there.

The data come in once, as the run's :class:`~forecaster.data.panel.Panel`: labels for other
horizons are computed on it (and cached by it) and the backtests trade on it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.data.market.exchange import board
from forecaster.data.minute.session import is_bar_calendar
from forecaster.data.panel import Panel
from forecaster.evaluation.bar_scoring import bar_notes, bar_scores
from forecaster.evaluation.tearsheet import StrategyStats, quantile_curves, strategy_stats
from forecaster.evaluation.universe import universe_counts, universe_line, universe_table
from forecaster.evaluation.verdict import (
    data_caveats,
    failure_line,
    ic_meaning,
    no_forecast_line,
    verdict_lines,
)
from forecaster.evaluation.walkforward import WalkForwardResult
from forecaster.features.labels import by_forecast_date, tradeable_label
from forecaster.metrics import (
    daily_ic,
    dm_table,
    groups_of,
    holm,
    ic_by_horizon,
    ic_difference_test,
    ic_summary,
    quantile_returns,
    quantile_summary,
    summarise,
)
from forecaster.metrics.returns import MIN_ANNUAL_DAYS, TOO_FEW_DAYS
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.delisted import delisting_notes
from forecaster.portfolio.strategy import st_note

log = logging.getLogger(__name__)

POINT_COLUMNS = ("mse", "mae", "r2_oos_zero", "r2_oos_mean")
# Boards of the IC breakdown, in this order: the exchange's boards, with Shenzhen's SME board
# (sz.002xxx, merged into the main board in 2021) apart from the main board.
BOARDS = ("main", "sme", "chinext", "star", "bse")
YEAR_COLUMNS = ("model", "year", "mean_ic", "icir", "n_days")
BOARD_COLUMNS = ("model", "board", "n_stocks", "mean_ic", "icir", "n_days")


@dataclass
class Report:
    """Everything a walk-forward report holds (also written to ``metrics.json``).

    ``ic_years`` and ``ic_boards`` (panels): each model's mean daily rank IC, ICIR and days
    per calendar year of the forecast date, and per board (:func:`report_board`; the IC of a
    day within that board's stocks), one row per model and year or board (columns
    :data:`YEAR_COLUMNS`, :data:`BOARD_COLUMNS`). ``predictions_format``: how the report
    folder stores the predictions (:attr:`BacktestConfig.predictions_format`). Minute bars:
    ``overall`` pools every bar; ``bar_positions`` holds each model's IC and rank IC by bar of
    the day across days, ``bar_summary`` their mean over the day's bars
    (:mod:`forecaster.metrics.bars`). ``strategy``: the backtests' tear sheet (risk table,
    returns before and after costs, relative growth, drawdowns, months, the paired test of the
    main model's strategy against each baseline's; :mod:`forecaster.evaluation.tearsheet`).
    ``quantile_curves`` (panels): each model's cumulative return per score quantile and its
    long-short curve (:func:`~forecaster.evaluation.tearsheet.quantile_curves`).
    """

    model: str
    overall: pd.DataFrame
    per_fold: pd.DataFrame
    per_stock: pd.DataFrame
    dm: pd.DataFrame
    ic: dict[str, dict]
    daily_ic: pd.DataFrame
    backtests: dict
    verdict: list[str]
    notes: list[str] = field(default_factory=list)
    ic_close: dict[str, dict] = field(default_factory=dict)
    ic_tests: pd.DataFrame = field(default_factory=pd.DataFrame)
    quantiles: dict[str, dict] = field(default_factory=dict)
    ic_horizons: pd.DataFrame = field(default_factory=pd.DataFrame)
    universe: pd.DataFrame = field(default_factory=pd.DataFrame)
    failed: dict = field(default_factory=dict)
    not_computed: dict = field(default_factory=dict)
    ic_years: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(YEAR_COLUMNS)))
    ic_boards: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(BOARD_COLUMNS)))
    predictions_format: str = "auto"
    bar_positions: pd.DataFrame = field(default_factory=pd.DataFrame)
    bar_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    timings: dict = field(default_factory=dict)  # seconds of the scoring's phases
    strategy: StrategyStats = field(default_factory=StrategyStats)  # the tear sheet (tearsheet.py)
    quantile_curves: dict = field(default_factory=dict)  # model -> cumulative quantile returns
    index_view: object | None = None  # the main book against its index (index_daily.IndexView)
    # the ex-dates read from prices as a large dividend (total_return.LARGE_COLUMNS): dividends.csv
    dividends: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def bars(self) -> bool:
        """Whether the run forecast one stock's minute bars (scored per bar and by bar of the day)."""
        return bool(len(self.bar_summary))

    @property
    def universe_counts(self) -> dict:
        return universe_counts(self.universe) if len(self.universe) else {}

    def summary_table(self) -> pd.DataFrame:
        """One row per model: forecast scores, DM p-value vs the main model, backtest. A panel
        run's main model ranks stocks (a score, not a return forecast): its table has no R^2
        against zero and no DM test, columns it would never fill."""
        cols = ["r2_oos_zero", "hit_rate", "pearson_ic", "rank_ic"]
        if self.ic:
            cols.remove("r2_oos_zero")
        table = self.overall.set_index("model")[cols].copy()
        if self.ic:
            table["daily_rank_ic"] = pd.Series({m: v["mean_ic"] for m, v in self.ic.items()})
            table["icir"] = pd.Series({m: v["icir"] for m, v in self.ic.items()})
            table["ic_days"] = pd.Series({m: v["n_days"] for m, v in self.ic.items()})
        if len(self.ic_tests):
            tests = self.ic_tests.set_index("baseline")
            table[f"ic_diff_p({self.model} vs)"] = tests["p_value"]
        if self.quantiles:
            table["q_spread"] = pd.Series({m: q["spread"] for m, q in self.quantiles.items()})
        if self.ic_close:
            table["rank_ic_close"] = pd.Series({m: v["mean_ic"] for m, v in self.ic_close.items()})
        if self.bars:
            table = table.join(self.bar_summary.set_index("model")[["position_ic", "position_rank_ic"]])
        dm = self.dm.set_index("baseline")["p_value"] if len(self.dm) else pd.Series(dtype=float)
        if len(dm) or not self.ic:
            table[f"dm_p({self.model} vs)"] = dm
        bt = pd.DataFrame({m: r.metrics for m, r in self.backtests.items()}).T
        if len(bt):
            table["ann_return"] = bt["annual_return"]
            # Each model against its own benchmark: same stocks and days as its backtest.
            table["excess_vs_bench"] = pd.Series({
                m: r.metrics["annual_return"] - r.benchmark_metrics["annual_return"]
                for m, r in self.backtests.items()})
            table["sharpe"] = bt["sharpe"]
            table["max_dd"] = -bt["max_drawdown"]  # a fall: negative, as in the figures
        return table

    @property
    def benchmark_metrics(self) -> dict:
        return next(iter(self.backtests.values())).benchmark_metrics if self.backtests else {}


def reference_model(models: dict, role: str) -> str | None:
    """The name of the model whose ``reference`` role is ``role`` (``"zero"``, ``"mean"``):
    the report's analyses are keyed by role, so a run may name its models as it likes."""
    return next((name for name, m in models.items() if getattr(m, "reference", None) == role), None)


def _with_mean_forecast(pred: pd.DataFrame, mean_model: str | None) -> pd.DataFrame:
    """Attach the historical-mean forecast of each row (for R^2 against the mean)."""
    if mean_model is None or mean_model not in pred["model"].unique():
        return pred
    mean = pred.loc[pred["model"] == mean_model, ["date", "code", "forecast"]]
    return pred.merge(mean.rename(columns={"forecast": "mean_forecast"}), on=["date", "code"], how="left")


# Why a ranking model's book is not backtested when its forecasts cover one stock a day.
ONE_MEMBER = ("its forecasts cover one stock a day (a universe of one member: a score ranks nothing and a "
              "book of one stock weighs nothing against the others; any strategy, the enhanced book "
              "included, needs two or more members)")


def score_run(result: WalkForwardResult, data: Panel | Mapping[str, pd.DataFrame], models: dict,
                 model: str = "transformer", backtest: BacktestConfig | None = None,
                 horizon: int = 1, index_constituents: bool = False) -> Report:
    """Score every model of ``result`` and backtest its forecasts.

    Args:
        result: from :func:`forecaster.evaluation.walkforward.walk_forward`.
        data: the run's :class:`~forecaster.data.panel.Panel` (``{code: frame}`` is aligned
            into one here, for callers that hold only frames).
        models: the run's ``{name: estimator}``; factor scores (``is_return_forecast`` False)
            get rank statistics and backtests but no error metrics or DM test.
        model: the main model's name; DM compares it with every other return forecast.
        backtest: trading configuration (panels: top-k by forecast).
        horizon: forecast horizon (DM's HAC lags).
        index_constituents: the user says the stocks are an index's current constituents, so
            the survivorship caveat is stated as a fact (otherwise as a condition).
    """
    started = time.perf_counter()
    backtest_seconds = 0.0
    grid = data if isinstance(data, Panel) else Panel.from_frames(data)
    pred = _with_mean_forecast(result.predictions.reset_index(), reference_model(models, "mean"))
    pred = pred[pred["actual"].notna()]  # suspended days are not scored (counted below)
    n_suspended = int(result.predictions["actual"].isna().sum())
    factors = [n for n, m in models.items() if not getattr(m, "is_return_forecast", True)]
    present = set(pred["model"].unique())  # unique(): no Python object per row
    returns_models = [n for n in models if n not in factors and n in present]
    panel = pred["code"].nunique() > 1
    overall = summarise(pred, by=("model",), horizon=horizon)
    per_fold = summarise(pred, by=("model", "fold"), horizon=horizon)
    # Per stock: each stock's own time series (a panel model is evaluated stock by stock too).
    per_stock = (summarise(pred, by=("model", "code"), horizon=horizon) if panel
                 else pd.DataFrame(columns=["model", "code"]))
    for table in (overall, per_fold, per_stock):
        table.loc[table["model"].isin(factors), list(POINT_COLUMNS)] = np.nan
    baselines = [n for n in returns_models if n != model]
    dm = (dm_table(pred, model, baselines, horizon=horizon)  # it reads those models' rows only
          if model in returns_models and baselines else pd.DataFrame())

    ic, daily, ic_close, quantiles, horizons, tests, gaps, qcurves = {}, {}, {}, {}, {}, [], {}, {}
    years, boards = [], []
    if panel:
        actual = pred.pivot_table(index="date", columns="code", values="actual", aggfunc="first")
        close = ("actual_close" in pred.columns and
                 pred.pivot_table(index="date", columns="code", values="actual_close", aggfunc="first"))
        labels = _horizon_labels(grid, result) if result.config.label == "tradeable" else {}
        for name, g in groups_of(pred, "model"):
            f = g.pivot_table(index="date", columns="code", values="forecast", aggfunc="first")
            daily[name] = daily_ic(f, actual, method="spearman")
            ic[name] = ic_summary(daily[name])
            years.append(ic_by_year(daily[name]).assign(model=name))
            boards.append(ic_by_board(f, actual).assign(model=name))
            gaps[name] = _ic_gaps(ic[name], f, actual)
            if close is not False:
                ic_close[name] = ic_summary(daily_ic(f, close, method="spearman"))
            ranked = f[f.nunique(axis=1) > 1]  # a day whose forecast is one value ranks nothing
            if len(ranked):
                qret = quantile_returns(ranked, actual)
                quantiles[name] = quantile_summary(qret, horizon=horizon)
                if len(qret):  # no day with enough stocks: no curve to draw
                    qcurves[name] = quantile_curves(qret, horizon)
            else:
                gaps[name] = {**gaps[name], **{k: "a constant forecast has no ranking" for k in
                                               ("q_spread", "monotonicity")}}
            if labels:
                horizons[name] = ic_by_horizon(f, labels)
        if model in daily:
            for name in daily:
                if name != model:
                    tests.append({"baseline": name, **ic_difference_test(daily[model], daily[name],
                                                                         horizon=horizon)})
    daily_ic_frame = pd.DataFrame(daily)
    ic_tests = pd.DataFrame(tests)
    if len(ic_tests):  # the verdict counts wins over the whole family of comparisons
        ic_tests["p_holm"] = holm(ic_tests["p_value"])
    ic_years = (pd.concat(years, ignore_index=True)[list(YEAR_COLUMNS)] if years
                else pd.DataFrame(columns=list(YEAR_COLUMNS)))
    ic_boards = (pd.concat(boards, ignore_index=True)[list(BOARD_COLUMNS)] if boards
                 else pd.DataFrame(columns=list(BOARD_COLUMNS)))

    backtest = backtest or BacktestConfig.for_universe(grid.n_stocks)
    results, unbacktested = {}, {}
    bars = not panel and is_bar_calendar(result.predictions.index)
    positions, position_means = bar_scores(pred) if bars else (pd.DataFrame(), pd.DataFrame())
    for name, g in ([] if bars else groups_of(result.predictions, "model")):
        forecast = g.reset_index().pivot_table(index="date", columns="code", values="forecast",
                                               aggfunc="first")
        if not panel and name in factors:
            if grid.n_stocks > 1:  # a panel run cut to one stock (a universe of one member)
                unbacktested[name] = ONE_MEMBER
            continue
        if panel and (forecast.nunique(axis=1) <= 1).all():
            # The same forecast for every stock (zero) ranks nothing: top-k would just pick
            # the first columns. Said in the notes, never silently.
            unbacktested[name] = (ONE_MEMBER if int(forecast.notna().sum(axis=1).max()) <= 1 else
                                  "its forecast is one value for every stock on every day (it ranks nothing)")
            continue
        one = time.perf_counter()
        results[name] = run_backtest(grid, forecast, backtest)
        backtest_seconds += time.perf_counter() - one

    for name, r in results.items():  # a backtest too short to annualise says so in the table
        if r.metrics["n_days"] < MIN_ANNUAL_DAYS:
            gaps[name] = {**gaps.get(name, {}), **{k: f"{TOO_FEW_DAYS} ({r.metrics['n_days']} day(s))"
                                                   for k in ("ann_return", "excess_vs_bench", "sharpe")}}
    one = time.perf_counter()
    strategy = strategy_stats(results, model, horizon)
    backtest_seconds += time.perf_counter() - one
    verdict = verdict_lines(model, overall if model in returns_models else overall.iloc[:0], dm, ic,
                            results, ic_tests, horizon, gaps, reference_model(models, "zero"),
                            strategy_tests=strategy.tests)
    universe = universe_table(grid, result, model, getattr(models.get(model), "from_file", False))
    missing = no_forecast_line(model, result)
    if missing:
        verdict.insert(0, missing)
    if result.failed:  # first of all: a model that raised is a bug to fix, not a result to read
        verdict.insert(0, failure_line(model, result))
    why = ("without a scoreable tradeable outcome (suspended or no bar on the entry or exit day, "
           "limit-up at the entry, or an exit beyond the data)" if result.config.label == "tradeable"
           else "on suspended bars or overnight gaps excluded (below)" if bars else "on suspended days")
    notes = [f"{n_suspended} forecast rows {why} were not scored"]
    for reason in dict.fromkeys(unbacktested.values()):
        names = [n for n, r in unbacktested.items() if r == reason]
        notes.insert(0, f"no backtest of {', '.join(names)}: {reason}")
    if bars:
        notes += bar_notes(grid, result.predictions)
    notes.append(universe_line(universe_counts(universe)))
    if any(gaps.values()):
        notes.append("empty cells in the tables (n/c in the printed table, blank in the CSVs) are "
                     "statistics that could not be computed; 'not_computed' in metrics.json gives "
                     "each reason")
    if panel:
        notes.append(ic_meaning(result.config, horizon))
    # members chosen day by day (a dated list) from data that keep delisted stocks: no survivorship
    # by selection to warn of
    dated = grid.members is not None and bool((grid.members != grid.members[:1]).any())
    notes += data_caveats([str(c) for c in grid.codes], panel, index_constituents,
                          point_in_time=dated and bool(grid.delistings().delisted.any()))
    tradeable = panel and result.config.label == "tradeable"
    masked = tradeable_label(grid, horizon, result.config.execution)[1].masked if tradeable else None
    notes += delisting_notes(results, model, masked)  # delisted stocks, what the backtests did with them
    st = st_note({n: r.metrics.get("st_buys_skipped", 0) for n, r in results.items()}, backtest.strategy)
    notes += [st] if st else []  # the ST rule and the buys it skipped
    timings = {"backtests": backtest_seconds,
               "statistics": time.perf_counter() - started - backtest_seconds}
    return Report(model, overall, per_fold, per_stock, dm, ic, daily_ic_frame, results, verdict, notes,
                  ic_close, ic_tests, quantiles, pd.DataFrame(horizons).T, universe, dict(result.failed),
                  {m: g for m, g in gaps.items() if g}, ic_years, ic_boards, backtest.predictions_format,
                  positions, position_means, timings, strategy, qcurves)


def report_board(code: str) -> str:
    """The board of ``code`` in the IC breakdown (one of :data:`BOARDS`): the exchange's
    board (:func:`forecaster.data.market.exchange.board`), with ``"sme"`` for Shenzhen's former SME
    board (sz.002xxx) apart from ``"main"``."""
    name = board(code)
    number = str(code).strip().lower()
    number = number[4:] if number.startswith("syn.") else number
    return "sme" if name == "main" and number.startswith("sz.002") else name


def ic_by_year(daily: pd.Series) -> pd.DataFrame:
    """Mean daily IC, ICIR and days per calendar year of ``daily`` (a daily IC series indexed
    by date; NaN days ignored): one row per year, columns ``year, mean_ic, icir, n_days``."""
    daily = daily.dropna()
    rows = [{"year": int(year), **{k: ic_summary(values)[k] for k in ("mean_ic", "icir", "n_days")}}
            for year, values in daily.groupby(pd.DatetimeIndex(daily.index).year)]
    return pd.DataFrame(rows, columns=["year", "mean_ic", "icir", "n_days"])


def ic_by_board(forecast: pd.DataFrame, actual: pd.DataFrame, min_stocks: int = 5) -> pd.DataFrame:
    """The daily rank IC within each board's stocks (``[date x code]`` frames; a day with
    fewer than ``min_stocks`` of the board's stocks scored has none), summarised per board:
    one row per board with a scored stock, in :data:`BOARDS` order, columns ``board,
    n_stocks`` (stocks with a forecast and an outcome), ``mean_ic, icir, n_days``."""
    f, a = forecast.align(actual, join="inner")
    scored = (f.notna() & a.notna()).any(axis=0)
    of = pd.Series({c: report_board(c) for c in f.columns}, dtype=object)
    rows = []
    for name in BOARDS:
        codes = [c for c in f.columns if of[c] == name and scored[c]]
        if not codes:
            continue
        summary = ic_summary(daily_ic(f[codes], a[codes], method="spearman", min_stocks=min_stocks))
        rows.append({"board": name, "n_stocks": len(codes),
                     **{k: summary[k] for k in ("mean_ic", "icir", "n_days")}})
    return pd.DataFrame(rows, columns=["board", "n_stocks", "mean_ic", "icir", "n_days"])


def _ic_gaps(summary: dict, forecast: pd.DataFrame, actual: pd.DataFrame, min_stocks: int = 5) -> dict:
    """Why a model's daily rank IC or ICIR could not be computed (``{stat: reason}``; empty
    when both were)."""
    gaps = {}
    if summary["n_days"] == 0:
        f, a = forecast.align(actual, join="inner")
        valid = f.notna() & a.notna()
        most = int(valid.sum(axis=1).max()) if len(valid) else 0
        if most < min_stocks:
            gaps["mean_ic"] = (f"fewer than {min_stocks} stocks with a forecast and a scored outcome on "
                               f"every day (at most {most})")
        elif (f.where(valid).nunique(axis=1) <= 1).all():
            gaps["mean_ic"] = "the forecast is the same for every stock on every day"
        else:
            gaps["mean_ic"] = "no day had a cross-section that varies in both forecast and outcome"
        gaps["icir"] = gaps["mean_ic"]
    elif not math.isfinite(summary["icir"]):
        gaps["icir"] = ("needs at least 2 days of IC" if summary["n_days"] < 2
                        else "the daily IC does not vary")
    return gaps


def _horizon_labels(grid: Panel, result: WalkForwardResult, horizons=(1, 5, 20)) -> dict[int, pd.DataFrame]:
    """Tradeable labels ``[date x code]`` by forecast date for several horizons."""
    out = {}
    for h in horizons:
        label, _ = tradeable_label(grid, h, result.config.execution)
        out[h] = pd.DataFrame(by_forecast_date(label), index=grid.dates, columns=list(grid.codes))
    return out


