"""Backtest daily return forecasts under A-share rules: cash, 100-share lots, costs, price
limits, suspensions and T+1.

Timing convention
-----------------
A forecast frame is ``[date x code]``; row ``t`` is the forecast of day ``t``'s return, known
after day ``t-1``'s close. The target weights decided from row ``t`` are traded

* ``execution="next_open"`` (default, realistic): at day ``t``'s **open** -- the forecast made
  after day ``t-1``'s close trades at the next open. The position earns open -> close on day
  ``t`` and close -> close afterwards.
* ``execution="close"`` (idealised): at day ``t-1``'s **close**, the very close the forecast
  needed; the position earns day ``t``'s full close -> close return.

Either way the trade date (price limits, suspension, stamp-duty regime) is the day whose open
or close is used, and a trade's ``signal_date`` is the day whose close the decision used (as in
tomorrow's orders, :mod:`forecaster.portfolio.orders`): the trading day before the trade date
(the data's calendar) under ``next_open``, the trade date itself under ``close``. Equity is
marked at each day's close, from the first execution day through the last forecast date.

Simulation
----------
One pass over the days keeps the state that forbids vectorising across time (cash, shares,
T+1); within a day the orders are derived with numpy over all stocks
(:func:`~forecaster.portfolio.execution.simulate`). Each day the loop asks the strategy's policy
(:mod:`forecaster.portfolio.policy`) for the target weights of the forecast row it trades,
handing it what the book holds at the signal day's close (after lots, tolerance, blocked trades
and suspensions): top-k and top-k dropout decide from their own picks, all rows at once; the
enhanced book solves from the held weights on rebalance rows, by the function ``predict`` calls.
Each day, per stock:

* target shares = ``weight * NAV / price`` floored to whole lots (NAV at the execution prices;
  the price includes a cost estimate so a fully invested target is affordable);
* a held position whose weight keeps its sign is left alone, except on rebalance days when
  its value is more than ``rebalance_tolerance * |weight| * NAV`` away from target;
* sells run before buys; a buy that the cash cannot pay gets fewer lots (``"partial"``,
  reason ``"cash"``) or none (``"blocked"``, ``"cash"``);
* no trade in a suspended stock (``"suspended"``) or one without a bar (``"no_data"``); no buy
  at or above limit-up (``"limit_up"``), no sell at or below limit-down (``"limit_down"``);
  shares bought today cannot be sold today (``"t_plus_1"``; with one order per stock per day
  it only binds when :class:`Broker` is driven by hand). A blocked order is re-derived from
  the target the next day, so it executes later if still wanted.

Corporate actions: on ex-dates (``preclose`` differs from the previous close) held shares are
scaled by ``previous close / preclose`` (integer shares, the fraction paid as cash), which
keeps value and exposure and matches the ``close / preclose`` return the forecasts target;
``corporate_actions="cash"`` credits ``shares * (previous close - preclose)`` instead (exact
for cash dividends, keeps positions in whole lots, but a bonus issue turns part of the
position into cash). With ``"shares"`` positions may hold odd lots, sold with the rest.

Long-short (``mode="long_short"``) is a paper portfolio: shares go negative with the same
costs and rules (no short sale at limit-down, no cover at limit-up), short proceeds are
cash, and borrow fees, borrow availability and margin are ignored.

ST stocks (special treatment: ``ST``/``*ST`` in the day's name, :attr:`Panel.st
<forecaster.data.panel.Panel>`) are not bought by default (``StrategyConfig.exclude_st``, the
one rule the ranked list, tomorrow's orders and the report read too): on a signal day a stock
is ST the strategy picks it only if it already wanted it (a holding that becomes ST is not
forced out; it is sold when the rule drops it), and no buy of it is placed (a top-up is
blocked, reason ``"st"``). ``metrics["st_buys_skipped"]`` counts both: the picks the rule
would have made but for the ST mark, and the blocked top-ups.

Delisted stocks (:mod:`forecaster.data.market.delisting` tells them from suspended ones: a
``退`` name in their last bars, an instruments end, or bars that stop for good more than 20
trading days before the data end -- the last named "suspended or delisted", the data cannot say
which) are closed out, never carried at their last price nor dropped silently. From the
signal day the delisting is **known** (the first day of its ``退`` delisting period; for a stock
that stops without one, its last day) the stock is not bought, and a position in it is sold at
the next execution, like a stock leaving the universe (subject to its limits and T+1: a sell
at limit-down is retried the next day). What is still held at the close of its last trading
day is sold at that close when the stock trades that day and the close is above limit-down.
What that sale leaves (T+1 on shares bought that morning, a suspended last bar, limit-down) is
written down to zero after a ``退`` period (no cash comes in: the shares move to the
delisted-shares board, nearly worthless and hard to sell); a stock that stops without one (a
merger pays its holders in the acquirer's shares; or a long suspension) is valued at its last
close, a cash-equivalent exit, when that close is above limit-down, and always when the stop
is only "suspended or delisted" (:func:`~forecaster.portfolio.delisted.valued_at_last_close`).
A short is covered at the last close. Each exit is a row of
:attr:`BacktestResult.delisted_exits` (how, shares, price, value after fees, average cost,
loss = cost - value), counted in ``metrics`` (``delisted_exits``, ``delisting_loss``;
:mod:`forecaster.portfolio.delisted`).

Benchmarks: one stock -> buy-and-hold through the same engine (bought at the first execution
opportunity with the same costs and rules, never traded again); a panel -> the equal-weight
universe, **without costs or lots**: rebalanced at each close to equal value in the stocks
that traded that day (not suspended, not on their first bar), a suspended holding frozen until
it resumes, earning ``close / preclose`` (``close / open`` on a ``next_open`` first day); a
stock whose delisting is known is sold at the first close it trades (if its last bar does not
trade: written down to zero or valued at its last close by the rule above;
:mod:`forecaster.portfolio.benchmark`). The benchmark holds ST stocks: it is the universe. The universe is the
stocks given, i.e. today's constituents: survivorship bias flatters it and any strategy picked
from it.

Point-in-time universes: when the Panel carries ``members`` (an index's members by day), the
strategy picks only the day's members, a holding that leaves is sold at the next execution
(whatever the rule's ``n_drop`` or rebalance period), and the benchmark is the equal-weight
universe of the day's members (a stock that leaves is sold at that close, one that enters is
bought).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.checks import ConfigError, check_choice
from forecaster.configs import documented, option
from forecaster.data.panel import Panel
from forecaster.portfolio.benchmark import equal_weight_benchmark
from forecaster.portfolio.broker import TRADE_COLUMNS, Broker, performance_metrics
from forecaster.portfolio.delisted import EXIT_COLUMNS
from forecaster.portfolio.execution import simulate, trade_towards
from forecaster.portfolio.index_weights import members_equity, price_growth
from forecaster.portfolio.policy import EnhancedPolicy, Policy, RulePolicy, in_force
from forecaster.portfolio.rules import CostModel, MarketRules
from forecaster.portfolio.strategy import (
    ST_BLOCK,
    StrategyConfig,
    rebalance_rows,
    st_no_buy,
    target_weights,
)

log = logging.getLogger(__name__)

__all__ = [
    "BacktestConfig",
    "BacktestResult",
    "Broker",
    "CostModel",
    "MarketRules",
    "StrategyConfig",
    "TRADE_COLUMNS",
    "performance_metrics",
    "run_backtest",
    "trade_towards",
]

EXECUTIONS = ("next_open", "close")
WEIGHT_SOURCES = ("fitted", "float_mv", "equal")  # or a file (forecaster.portfolio.index_weights)
PREDICTIONS_FORMATS = ("auto", "csv", "parquet")
CASH = "CASH"  # the cash row of holdings.csv


@documented
@dataclass
class BacktestConfig:
    """How target weights become trades: the strategy, the market's rules, and the
    execution and cost settings, each its own piece.
    """

    strategy: StrategyConfig = option(factory=StrategyConfig,
        help="forecasts -> target weights (StrategyConfig: top-k, top-k dropout, threshold; equal or rank "
        "weights; rebalance period).")
    market: MarketRules = option(factory=MarketRules,
        help="the exchange's rules that are settings (MarketRules: lot size, corporate actions); price "
        "limits, suspensions and T+1 always apply.")
    capital: float = option(1_000_000.0, "starting cash in CNY.")
    execution: str = option("next_open",
        '"next_open" (default, realistic: a forecast made after a day\'s close trades at the next day\'s '
        'open) or "close" (idealised: at the very close the forecast needed).')
    costs: CostModel = option(factory=CostModel, help="the CostModel.")
    rebalance_tolerance: float = option(0.1,
        "on rebalance days a held position is resized only when its value is off target by more than this "
        "fraction of the target (0 resizes to the lot).")
    predictions_format: str = option("auto",
        'how the report folder stores every forecast: "csv" (predictions.csv), "parquet" '
        '(predictions.parquet) or "auto" (Parquet above 1,000,000 rows, e.g. a whole-market run, CSV below).')
    benchmark_weights: str | None = option(None,
        "the index's weights over its members (the enhanced book's benchmark, and a benchmark line of an "
        'index universe): "fitted" (fitted each month to the index\'s own series, the default where the data '
        'hold it), "float_mv" (the float market value at the previous close; the default where the '
        'data carry it and not the index), "equal", or a CSV file date,code,weight (index_weights).')
    dividend_data: str = option("",
        "a file of the stocks' corporate actions (baostock's query_dividend_data export or tushare's "
        "dividend): each ex-date's cash dividend read from it rather than from the price gap, for the index "
        "with its dividends and the benchmark weights' drift (a rights issue is then no dividend); empty: "
        "read from prices, each dividend read above 5 % of the price listed in dividends.csv.")

    def __post_init__(self):
        if not (isinstance(self.capital, (int, float)) and math.isfinite(self.capital) and self.capital > 0):
            raise ConfigError(f"capital must be a positive amount of CNY, got {self.capital!r}")
        check_choice("execution", self.execution, EXECUTIONS)
        if not (isinstance(self.rebalance_tolerance, (int, float)) and self.rebalance_tolerance >= 0):
            raise ConfigError(f"rebalance_tolerance must be >= 0, got {self.rebalance_tolerance!r}")
        if self.predictions_format not in PREDICTIONS_FORMATS:
            raise ConfigError(f"predictions_format must be one of {PREDICTIONS_FORMATS}, "
                             f"got {self.predictions_format!r}")
        spec = self.benchmark_weights
        if spec is not None and spec not in WEIGHT_SOURCES and not Path(str(spec)).is_file():
            raise ConfigError(f"benchmark_weights must be one of {WEIGHT_SOURCES} or a CSV file "
                             f"date,code,weight; {spec!r} is neither")
        for name, kind in (("strategy", StrategyConfig), ("market", MarketRules), ("costs", CostModel)):
            value = getattr(self, name)
            if not isinstance(value, kind):
                raise ConfigError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")

    @classmethod
    def for_universe(cls, n_stocks: int, strategy: StrategyConfig | None = None, **kwargs) -> BacktestConfig:
        """The walk-forward report's setting for ``n_stocks``: ``strategy`` as given, or the
        default of :meth:`StrategyConfig.for_universe`. ``kwargs``: the other fields."""
        return cls(strategy=strategy or StrategyConfig.for_universe(n_stocks), **kwargs)


@dataclass
class BacktestResult:
    """What :func:`run_backtest` produced.

    Attributes:
        equity: ``[date]`` mark-to-market value at each close (cash + shares * close).
        returns: ``[date]`` daily returns of ``equity``, the first relative to ``capital``.
        positions: ``[date x code]`` shares held after each day's trading (negative = short).
        cash: ``[date]`` cash after each day's trading.
        weights: ``[date x code]`` target weights, indexed by forecast (signal) date.
        trades: one row per wanted trade, columns :data:`TRADE_COLUMNS`; ``status`` is
            ``"filled"``, ``"partial"`` or ``"blocked"`` and ``reason`` says why it fell short.
        benchmark_equity: ``[date]`` buy-and-hold (one stock) or equal-weight universe (panel).
        metrics, benchmark_metrics: :func:`performance_metrics` of each.
        benchmark: a description of the benchmark.
        index_equity, index_metrics, index_name: the universe's index's own series over the
            same days, where the data hold it (:mod:`forecaster.portfolio.index_series`).
        delisted: the backtested stocks that are delisted or in their delisting period
            (:data:`forecaster.data.market.delisting.COLUMNS`: code, delisted, last_day,
            known_from, reason).
        delisted_exits: the positions ended by a delisting (module docstring), columns
            :data:`~forecaster.portfolio.delisted.EXIT_COLUMNS`.
        held: ``[date x code]`` an enhanced book's weights held after each close (shares at
            the close over the book's value) and a last column ``CASH``, each row summing to 1;
            empty for the other rules.
    """

    equity: pd.Series
    returns: pd.Series
    positions: pd.DataFrame
    cash: pd.Series
    weights: pd.DataFrame
    trades: pd.DataFrame
    benchmark_equity: pd.Series
    metrics: dict
    benchmark_metrics: dict
    benchmark: str = ""
    index_equity: pd.Series | None = None
    index_metrics: dict | None = None
    index_name: str = ""
    weighted_equity: pd.Series | None = None  # the members at the benchmark weights, no costs
    weighted_name: str = ""
    enhanced: object | None = None  # the enhanced book's diagnostics (portfolio.enhanced.EnhancedBook)
    delisted: pd.DataFrame = field(default_factory=pd.DataFrame)
    delisted_exits: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(EXIT_COLUMNS)))
    held: pd.DataFrame = field(default_factory=pd.DataFrame)

    def holdings(self) -> pd.DataFrame:
        """``date, code, weight``: :attr:`held` as rows, the names held and ``CASH`` each day."""
        if self.held.empty:
            return pd.DataFrame(columns=["date", "code", "weight"])
        long = self.held.rename_axis(index="date", columns="code").stack().rename("weight").reset_index()
        return long[(long["weight"] != 0) | (long["code"] == CASH)].reset_index(drop=True)

    def summary(self) -> pd.DataFrame:
        """Strategy and benchmark metrics side by side ``[metric x {strategy, benchmark}]``."""
        return pd.DataFrame({"strategy": self.metrics, "benchmark": self.benchmark_metrics})


@dataclass
class _Panel:
    """Prices on the union calendar as ``[days x stocks]`` arrays (NaN where no bar)."""

    dates: pd.DatetimeIndex
    codes: list[str]
    open: np.ndarray
    close: np.ndarray
    preclose: np.ndarray
    has_bar: np.ndarray
    suspended: np.ndarray
    first_bar: np.ndarray
    up: np.ndarray
    down: np.ndarray
    close_val: np.ndarray  # last known close, 0 before the first bar: values positions at close
    open_val: np.ndarray  # open where there is a bar, else the last close: values at the open
    ratio: np.ndarray  # corporate-action share factor: previous close / preclose (1 = none)
    payout: np.ndarray  # cash per share: previous close - preclose (0 = none)
    member: np.ndarray  # in the universe that day (all True without Panel.members)
    known: np.ndarray  # the stock's delisting is known at that day's close (forecaster.data.market.delisting)
    exclude: np.ndarray  # known at the previous day's close: not bought, sold (by forecast row)
    last: np.ndarray  # [stocks] the row of a delisted stock's last bar, -1 for the others
    delisted: pd.DataFrame  # the delisted stocks among them, and those in their delisting period
    in_period: np.ndarray  # [stocks] its bars stop in a 退 delisting period
    quiet: np.ndarray  # [stocks] they stop with neither a 退 name nor an instruments end
    st: np.ndarray  # ST at that day's close (carried over days without a bar)


def _build_panel(data: Panel, codes: list[str]) -> _Panel:
    """The trading view of :class:`~forecaster.data.panel.Panel` (alignment, suspensions and limit
    prices are computed there, once) for the stocks ``codes``, in that order, on the days any of
    them has a bar."""
    grid = data.take(codes)
    any_bar = grid.listed.any(axis=1)
    if not any_bar.all():
        grid = grid.rows(any_bar)
    open_, close, preclose = grid["open"], grid["close"], grid["preclose"]
    has_bar = grid.listed
    close_ff = pd.DataFrame(close).ffill().to_numpy()
    prev_close = np.vstack([np.full((1, len(codes)), np.nan), close_ff[:-1]])
    first_bar = has_bar & ~np.isfinite(prev_close)
    with np.errstate(invalid="ignore", divide="ignore"):
        event = has_bar & np.isfinite(prev_close) & (np.abs(prev_close - preclose) > 1e-6)
        ratio = np.where(event, prev_close / preclose, 1.0)
        payout = np.where(event, prev_close - preclose, 0.0)
    open_val = np.where(has_bar, open_, np.nan_to_num(prev_close))
    member = np.ones_like(has_bar) if grid.members is None else np.asarray(grid.members, dtype=bool)
    gone = data.delistings().take(codes, rows=any_bar)  # decided on the whole panel, once
    exclude = np.zeros_like(gone.known)
    exclude[1:] = gone.known[:-1]
    return _Panel(dates=grid.dates, codes=codes, open=open_, close=close, preclose=preclose, has_bar=has_bar,
                  suspended=grid.suspended, first_bar=first_bar, up=grid.limit_up, down=grid.limit_down,
                  close_val=np.nan_to_num(close_ff), open_val=np.nan_to_num(open_val), ratio=ratio,
                  payout=payout, member=member, known=gone.known, exclude=exclude, last=gone.last,
                  delisted=gone.table, in_period=gone.in_period, quiet=gone.quiet,
                  st=pd.DataFrame(np.where(has_bar, grid.st, np.nan)).ffill().to_numpy() == 1)


def run_backtest(data: Panel | Mapping[str, pd.DataFrame], forecast: pd.DataFrame | pd.Series,
                 config: BacktestConfig | None = None, given: bool = False) -> BacktestResult:
    """Trade forecasts ``[date x code]`` against prices under A-share rules.

    Args:
        data: the run's :class:`~forecaster.data.panel.Panel`, or code -> canonical frame
            (:func:`forecaster.data.load_csv`, aligned into a Panel here); at least the
            forecast's columns. Optional columns default sensibly (no ``preclose``: the previous
            close; no ``is_st``: not ST; no ``suspended``: ``trade_status == 0 or volume == 0``).
        forecast: ``[date x code]`` forecasts of each day's return (row ``t`` known after day
            ``t-1``'s close); a Series is accepted with a single frame. Rows on dates without
            any bar are dropped with a warning; trading days missing between the first and last
            row keep the previous weights.
        config: :class:`BacktestConfig`.
        given: ``forecast`` holds target weights decided elsewhere (another optimiser's book),
            traded as they are: the strategy's rule is not applied, its rebalance period is.

    Returns:
        :class:`BacktestResult`; equity runs from the first execution day to the last forecast
        date. See the module docstring for timing, rules and benchmarks.
    """
    config = config or BacktestConfig()
    if not isinstance(data, Panel):
        data = Panel.from_frames(data)
    if isinstance(forecast, pd.Series):
        if data.n_stocks != 1:
            raise ValueError("a forecast Series needs exactly one frame; pass a DataFrame [date x code]")
        forecast = forecast.to_frame(str(data.codes[0]))
    if not isinstance(forecast, pd.DataFrame) or forecast.shape[1] == 0:
        raise ValueError("forecast must be a DataFrame [date x code] with at least one column")
    if (not given and config.strategy.rule == "enhanced" and data.members is not None
            and isinstance(forecast, pd.DataFrame)):
        # every member of the forecast days is in the benchmark, forecast or not (no view: alpha 0)
        days = data.dates.isin(pd.DatetimeIndex(forecast.index))
        members = [str(c) for c in np.asarray(data.codes)[data.members[days].any(axis=0)]]
        forecast = forecast.reindex(columns=[*map(str, forecast.columns),
                                             *sorted(set(members) - set(map(str, forecast.columns)))])
    codes = [str(c) for c in forecast.columns]
    known = set(data.codes)
    unknown = [c for c in codes if c not in known]
    if unknown:
        raise ValueError(f"forecast columns without a price frame: {unknown[:5]}")
    forecast = forecast.copy()
    forecast.columns = codes
    forecast.index = pd.DatetimeIndex(forecast.index)
    if not (forecast.index.is_monotonic_increasing and forecast.index.is_unique):
        raise ValueError("forecast dates must be sorted and unique")
    panel = _build_panel(data, codes)
    on_calendar = forecast.index.isin(panel.dates)
    if not on_calendar.all():
        log.warning("%d forecast rows fall on dates without any price bar and are ignored (first: %s)",
                    int((~on_calendar).sum()), forecast.index[~on_calendar][0].date())
        forecast = forecast.loc[on_calendar]
    if forecast.empty:
        raise ValueError("no forecast row falls on a date of the price data")

    rows_of = panel.dates.get_indexer(forecast.index)
    pit = None if data.members is None else panel.member[rows_of]
    delisting = bool(panel.exclude.any())
    if delisting:  # a stock known to delist is not picked (its place filled like a leaver's)
        pit = (np.ones_like(panel.exclude[rows_of]) if pit is None else pit) & ~panel.exclude[rows_of]
    no_buy = np.zeros_like(panel.st)  # by forecast row: ST on its signal day (the ST rule)
    no_buy[1:] = st_no_buy(panel.st[:-1], config.strategy)
    no_buy = no_buy if no_buy.any() else None
    book = bench = None
    if given:
        policy: Policy = RulePolicy(forecast.fillna(0.0))
    elif config.strategy.rule == "enhanced":
        allowed = ~panel.exclude[rows_of] if delisting else None
        policy = EnhancedPolicy(data, forecast, config, allowed, None if no_buy is None else no_buy[rows_of])
        bench = policy.bench
    else:
        policy = RulePolicy(target_weights(forecast, config.strategy, pit,
                                           None if no_buy is None else no_buy[rows_of]))
    first, last = panel.dates.get_loc(forecast.index[0]), panel.dates.get_loc(forecast.index[-1])
    row_of = np.full(len(panel.dates), -1)  # the forecast row in force each day (between rows: the last)
    row_of[rows_of] = np.arange(len(rows_of))
    row_of[first:last + 1] = np.maximum.accumulate(row_of[first:last + 1])
    rebalance = np.zeros(len(panel.dates), dtype=bool)
    rows = np.unique(rebalance_rows(len(forecast), config.strategy.rebalance_every))
    rebalance[panel.dates.get_indexer(forecast.index[rows])] = True
    if isinstance(policy, EnhancedPolicy) and data.members is not None:
        # an index review (its members change) is a rebalance: a leaver's sale and its
        # reinvestment are one decision, never cash until the next scheduled one
        review = np.zeros(len(panel.dates), dtype=bool)
        review[1:] = (panel.member[1:] != panel.member[:-1]).any(axis=1)
        on_rows = np.zeros(len(panel.dates), dtype=bool)
        on_rows[rows_of] = True
        rebalance |= review & on_rows
    if isinstance(policy, EnhancedPolicy):
        policy.expect(rebalance, panel.dates)
    targets = in_force(policy, panel, row_of, rebalance, data.members is not None, delisting)
    if config.execution == "next_open":
        start = first
    elif first > 0:
        start = first - 1
    else:
        start = first
        log.warning("execution='close' trades row %s at the previous close, which the price data lacks; "
                    "that row is skipped", forecast.index[0].date())
    if start == last and config.execution == "close":
        raise ValueError("execution='close' needs at least two trading days")

    allow_short = config.strategy.mode == "long_short"
    eq, cash, pos, trades, exits = simulate(panel, targets, rebalance, start, last, config,
                                            config.rebalance_tolerance, allow_short, no_buy)
    days = panel.dates[start:last + 1]
    held = pd.DataFrame()
    if isinstance(policy, EnhancedPolicy):  # what it decided in the loop, measured on what it held
        book = policy.book()
        close = panel.close_val[start:last + 1]
        at = np.ix_(data.dates.get_indexer(days), pd.Index(data.codes).get_indexer(codes))
        growth = price_growth(data)[at]
        book.held_after(pos, eq, close, days, growth)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.nan_to_num(pos * close / np.asarray(eq)[:, None])
        held = pd.DataFrame(np.column_stack([value, cash / np.asarray(eq)]), index=days,
                            columns=[*codes, CASH])
        book.note_cash(held[CASH], trades)
    weights = book.weights if book is not None else policy.weights
    equity = pd.Series(eq, index=days, name="equity")
    returns = pd.Series(np.diff(np.concatenate([[config.capital], eq])) / np.concatenate(
        [[config.capital], eq[:-1]]), index=days, name="returns")

    if len(codes) == 1:
        ones = np.zeros((len(panel.dates), 1))
        ones[first:last + 1] = 1.0
        bench_config = dataclasses.replace(config, strategy=dataclasses.replace(config.strategy,
                                                                                 mode="long_flat"))
        if delisting:
            ones[first:last + 1] *= ~panel.exclude[first:last + 1]
        b_eq, _, _, b_trades, _ = simulate(panel, lambda k, held: ones[k], np.zeros_like(rebalance), start,
                                           last, bench_config, math.inf, False)
        benchmark = f"buy-and-hold {codes[0]} (same costs and rules)"
    else:
        b_eq = equal_weight_benchmark(panel, start, last, config.capital, config.execution == "next_open")
        b_trades = None
        benchmark = (f"equal-weight universe of {len(codes)} stocks, daily rebalanced, no costs"
                     if data.members is None else
                     f"equal-weight universe of the day's members ({len(codes)} stocks at some time), "
                     "daily rebalanced, no costs")
    benchmark_equity = pd.Series(b_eq, index=days, name="benchmark")
    weighted, weighted_name = None, ""
    if len(codes) > 1 and (book is not None or data.members is not None or config.benchmark_weights):
        weighted, weighted_name = members_equity(data, bench or config.benchmark_weights, days,
                                                 config.capital, config.execution == "next_open")
    metrics = performance_metrics(equity, trades, config.capital)
    metrics["delisted_exits"] = len(exits)
    metrics["delisting_loss"] = float(np.nansum(exits["loss"])) if len(exits) else 0.0
    metrics["st_buys_skipped"] = int(weights.attrs.get("st_skipped", 0)) + int(
        ((trades["status"] == "blocked") & (trades["reason"] == ST_BLOCK)).sum())
    return BacktestResult(
        equity=equity,
        returns=returns,
        positions=pd.DataFrame(pos, index=days, columns=codes),
        cash=pd.Series(cash, index=days, name="cash"),
        weights=weights,
        trades=trades,
        benchmark_equity=benchmark_equity,
        metrics=metrics,
        benchmark_metrics=performance_metrics(benchmark_equity, b_trades, config.capital),
        benchmark=benchmark,
        delisted=panel.delisted,
        delisted_exits=exits,
        weighted_equity=weighted,
        weighted_name=weighted_name,
        enhanced=book,
        held=held,
    )

