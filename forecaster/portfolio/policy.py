"""Policies: what the book should hold after a rebalance, decided from what it holds.

The backtest's day loop (:mod:`forecaster.portfolio.backtest`) asks its policy for the target
weights ``[stocks]`` on every trading day, handing it the weights actually held at the signal
day's close (after lots, the rebalance tolerance, blocked trades and suspensions):

* :class:`RulePolicy`: top-k, top-k dropout, threshold, or weights decided elsewhere. The rule's
  picks depend on its own previous picks, not on the fills, so it decides every row at once
  (vectorised, :func:`~forecaster.portfolio.strategy.target_weights`) and hands out row ``t``.
* :class:`EnhancedPolicy`: the enhanced-index book (:mod:`forecaster.portfolio.enhanced`), one
  convex problem on each rebalance row, solved from the held weights by :func:`enhanced_day`,
  the very function ``predict --strategy enhanced`` calls (:func:`enhanced_target`): the same
  day, data and holdings give the same targets.

What the enhanced decision of a forecast row ``t`` (traded at day ``t``, decided at the close of
the signal day ``s``, the trading day before) reads is known at ``s``'s close, and is one
:class:`RebalanceContext` built by one function (:meth:`BookInputs.context`) for the backtest
and ``predict`` alike: the benchmark weights and members of day ``t`` (:func:`known_weights`,
:func:`decision_members`: an index review is announced in advance), the risk model's snapshot
and the suspensions of ``s``, the holdings after ``s``'s close, the costs of day ``t``. A held stock
that cannot trade on the signal day (suspended, no bar) is held at its current weight inside the
problem (:func:`~forecaster.portfolio.enhanced.rebalance`'s ``fixed``: in the budget, the
turnover and the cost; the diagnostics' ``fixed_weight`` and the notes count it); one the risk
model does not cover stays in the problem at a conservative risk. A rebalance whose benchmark
has no weight among the investable members keeps what is held (``rung`` ``empty``), counted
apart from the fallbacks of the optimiser (:attr:`~forecaster.portfolio.enhanced.EnhancedBook.fallbacks`).
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.portfolio.alpha import decayed_scores, holding_scores
from forecaster.portfolio.book_compiled import Compiled
from forecaster.portfolio.enhanced import (
    _RISK,
    TRADING_DAYS,
    EnhancedBook,
    _Columns,
    rebalance,
)
from forecaster.portfolio.index_weights import benchmark_weights, decision_members, known_weights
from forecaster.portfolio.industry_groups import industry_groups, industry_notes, risk_industries
from forecaster.portfolio.panel_risk import risk_model_of

log = logging.getLogger(__name__)

DIAGNOSTICS = ["date", "status", *_RISK, "turnover", "n_stocks", "missing_weight", "fixed_weight", "rung"]


@dataclass
class Holding:
    """What the book holds at the signal day's close: ``weights`` ``[stocks]`` (value / NAV,
    after lots, tolerance, blocked trades and suspensions) and ``value`` (the NAV, CNY)."""

    weights: np.ndarray
    value: float


class Policy:
    """Decides target weights ``[stocks]`` from what the book holds."""

    def targets(self, row: int, held: Holding, rebalance_day: bool) -> np.ndarray:
        """The target weights in force for forecast row ``row`` from what is ``held``;
        ``rebalance_day``: the row is a rebalance row (else the last decision holds)."""
        raise NotImplementedError


class RulePolicy(Policy):
    """A rule's weights ``[rows x stocks]`` decided at once (they do not read the fills)."""

    def __init__(self, weights: pd.DataFrame):
        self.weights = weights
        self._w = weights.to_numpy()

    def targets(self, row: int, held: Holding, rebalance_day: bool) -> np.ndarray:
        return self._w[row]


def in_force(policy: Policy, panel, row_of: np.ndarray, rebalance: np.ndarray, masked: bool,
              delisting: bool):
    """The day loop's ``targets(k, held)`` of ``policy``: the forecast row in force on calendar
    row ``k`` (``row_of``), a holding that left the universe (``masked``) or whose delisting is
    known sold at the next execution."""
    def targets(k: int, held: Holding) -> np.ndarray:
        if row_of[k] < 0:
            return np.zeros(len(panel.codes))
        w = policy.targets(int(row_of[k]), held, bool(rebalance[k]))
        if masked:
            w = w * panel.member[k]
        if delisting:
            w = w * ~panel.exclude[k]
        return w

    return targets


@dataclass(frozen=True)
class RebalanceContext:
    """Everything one enhanced rebalance decides from, built by :meth:`BookInputs.context` alike
    for the backtest (its simulated account) and ``predict`` (a holdings file): arrays over the
    same ``[stocks]``.

    Attributes:
        date: the trade's day; signal: the signal day (whose close the decision uses).
        held: the weights and value held after the signal day's close (its corporate actions in).
        bench: the benchmark weights of the trade day (:func:`known_weights`).
        investable: the trade day's members the book may hold (:func:`decision_members`,
            less a stock known to delist).
        scores: the alpha's scores (NaN: no view), at the holding horizon where decayed.
        snap: the risk model's snapshot at the signal day's close (None: too little history).
        tradable: a bar and no suspension on the signal day; no_buy: the ST rule (None: none).
        costs: the :class:`~forecaster.portfolio.rules.CostModel` (its rates on ``date``).
    """

    date: pd.Timestamp
    signal: pd.Timestamp
    held: Holding
    bench: np.ndarray
    investable: np.ndarray
    scores: np.ndarray
    snap: object | None
    tradable: np.ndarray
    no_buy: np.ndarray | None
    costs: object
    groups: np.ndarray | None = None  # [stocks] each stock's industry group (-1: none), with industries
    n_groups: int = 0


class Prefetched:
    """A risk model's snapshots computed ahead, in one background thread, for the days a run
    will ask for (:meth:`expect`): a snapshot reads only the data up to its day, never the
    book's decisions, so the next day's overlaps this day's solve (numpy and the solver leave
    the interpreter lock on their long loops: two cores, two jobs). At most ``ahead`` are held;
    a day not expected is computed when asked. :meth:`close` stops the thread."""

    def __init__(self, risk, ahead: int = 2):
        self.risk, self.ahead = risk, int(ahead)
        self._days: list[int] = []
        self._next = 0
        self._pending: OrderedDict[int, object] = OrderedDict()
        self._pool: ThreadPoolExecutor | None = None

    def expect(self, days) -> None:
        """The signal days, in order, whose snapshots will be asked for."""
        self._days = sorted({int(d) for d in days if d >= 0})
        self._next = 0
        if self._days and self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="risk-snapshot")
        self._top_up()

    def _top_up(self) -> None:
        while self._pool is not None and len(self._pending) < self.ahead and self._next < len(self._days):
            day = self._days[self._next]
            self._next += 1
            self._pending[day] = self._pool.submit(self.risk.snapshot, day)

    def snapshot(self, t: int):
        t = int(t)
        while self._pending and next(iter(self._pending)) < t:  # asked past: not needed
            self._pending.popitem(last=False)[1].cancel()
        future = self._pending.pop(t, None)
        self._top_up()
        return future.result() if future is not None else self.risk.snapshot(t)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._pending.clear()


class BookInputs:
    """The panel-wide arrays an enhanced decision reads, computed once per panel: the benchmark
    weights and members of each next day (``[days, stocks]``, row ``s`` for the decision at
    ``s``'s close), what can trade, the risk model; over ``columns`` (positions of the panel's
    stocks: the forecast's columns; None: every stock). ``next_members``: the index's members
    of the day after the panel's last (a review known in advance; default the last day's);
    ``next_day`` False: nothing decided at the last close (a backtest), its row left empty."""

    def __init__(self, panel, config, columns: np.ndarray | None = None,
                 next_members: np.ndarray | None = None, next_day: bool = True):
        cols = np.arange(panel.n_stocks) if columns is None else np.asarray(columns)
        self.bench = benchmark_weights(panel, config.benchmark_weights)
        self.known = known_weights(panel, self.bench, next_members, next_day)[:, cols]
        self.investable = decision_members(panel, next_members)[:, cols]
        self.tradable = (panel.listed & ~panel.suspended)[:, cols]
        column_of = np.full(panel.n_stocks, -1)
        column_of[cols] = np.arange(len(cols))
        industries = risk_industries(panel, config.strategy, next_members)
        self.risk_labels = None if industries is None else (industries[0][:, cols], len(industries[1]))
        self.risk = Prefetched(_Columns(risk_model_of(panel, industries), column_of))
        self.dates, self.costs = panel.dates, config.costs
        # each decision row's industry groups over the trade day's members (None: no industries)
        self.groups, self.group_names, self.group_counts = industry_groups(
            panel, decision_members(panel, next_members), config.strategy)
        if self.groups is not None:
            self.groups = self.groups[:, cols]

    def labels(self) -> tuple:
        """``(risk, groups)``: the risk model's industries and the bound's groups over the
        columns, each ``([days, stocks] int, number of labels)`` or None (the compiled problem's
        sparse patterns, :class:`~forecaster.portfolio.book_compiled.Compiled`)."""
        groups = None if self.groups is None else (self.groups, len(self.group_names))
        return self.risk_labels, groups

    def context(self, s: int, scores: np.ndarray, held: Holding, date, allowed: np.ndarray | None = None,
                no_buy: np.ndarray | None = None) -> RebalanceContext:
        """The context of the decision at row ``s``'s close (``s`` < 0: before the data, nothing
        known), traded on ``date``; ``allowed``: not known to delist (None: all)."""
        n = len(scores)
        if s >= 0:
            snap, bench, investable, tradable = (self.risk.snapshot(s), self.known[s], self.investable[s],
                                                 self.tradable[s])
        else:  # nothing is known before the data's first day: the book stays as it is
            snap, bench, investable, tradable = None, np.zeros(n), np.zeros(n, bool), np.zeros(n, bool)
        if allowed is not None:
            investable = investable & np.asarray(allowed, bool)
        groups = None if self.groups is None or s < 0 else self.groups[s]
        return RebalanceContext(pd.Timestamp(date), self.dates[max(s, 0)], held, bench, investable,
                                np.asarray(scores, float), snap, tradable, no_buy, self.costs, groups,
                                len(self.group_names))


def enhanced_day(ctx: RebalanceContext, strategy, compiled: Compiled | None = None
                 ) -> tuple[np.ndarray, dict, np.ndarray]:
    """One enhanced rebalance, the one call of the backtest and of ``predict``, from its
    :class:`RebalanceContext`. A held stock that cannot trade keeps its weight, inside the
    problem (:func:`~forecaster.portfolio.enhanced.rebalance`'s ``fixed``); what cannot trade
    is never bought. Returns the target ``[stocks]``, the diagnostics row (:data:`DIAGNOSTICS`
    less the date; ``fixed_weight``: the held weight that could not trade) and the active weights
    (NaN outside the problem). ``compiled``: the run's problem compiled once (the backtest's;
    None: compiled for this decision)."""
    weights = np.nan_to_num(np.asarray(ctx.held.weights, dtype=float))
    closed = ~np.asarray(ctx.tradable, bool)
    fixed = (weights > 0) & closed
    # what cannot trade on the signal day is never bought (a suspended member stays in the benchmark)
    no_buy = closed if ctx.no_buy is None else (np.asarray(ctx.no_buy, bool) | closed)
    new, row, active = rebalance(ctx.scores, weights, ctx.bench, ctx.snap, np.asarray(ctx.investable, bool),
                                 no_buy, strategy, ctx.costs, fixed=fixed, date=ctx.date,
                                 value=ctx.held.value, compiled=compiled, groups=ctx.groups,
                                 n_groups=ctx.n_groups)
    return new, {**row, "fixed_weight": float(weights[fixed].sum())}, active


def enhanced_target(panel, scores: np.ndarray, held: Holding, config, allowed: np.ndarray | None,
                    no_buy: np.ndarray | None, date=None, recent: np.ndarray | None = None,
                    next_members: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
    """Tomorrow's enhanced book ``[stocks]`` of the Panel ``panel`` (its stocks' order; its last
    day the signal day) from today's ``scores`` (with ``alpha_halflife`` > 0, decayed with the
    forecast rows before them, ``recent`` ``[rows, stocks]``:
    :func:`~forecaster.portfolio.alpha.holding_scores`, as the backtest's rows are) and what is
    ``held`` at its close, traded on ``date``, over the members of that day (``next_members``,
    where a review says them): the backtest's decision (:class:`BookInputs`,
    :func:`enhanced_day`); also its diagnostics row (``predicted_te`` annual)."""
    if config.strategy.alpha_halflife > 0 and recent is None:
        log.warning("alpha_halflife %g: no forecast rows before the signal day were handed in; the book "
                    "reads the signal day's scores alone", config.strategy.alpha_halflife)
    scores = holding_scores(scores, recent, config.strategy.alpha_halflife)
    inputs = BookInputs(panel, config, next_members=next_members)
    ctx = inputs.context(panel.n_days - 1, scores, held, date, allowed=allowed, no_buy=no_buy)
    new, row, _ = enhanced_day(ctx, config.strategy)
    industries = []  # (group, book, benchmark) of tomorrow's book, where industries are given
    if ctx.groups is not None:
        for g, name in enumerate(inputs.group_names):
            inside = np.asarray(ctx.groups) == g
            if inside.any():
                industries.append((str(name), float(new[inside].sum()), float(ctx.bench[inside].sum())))
    return new, {**row, "bench": ctx.bench, "industries": industries}


class EnhancedPolicy(Policy):
    """The enhanced book of ``forecast`` ``[rows x codes]`` (codes of the Panel ``data``) under
    ``config`` (:class:`~forecaster.portfolio.backtest.BacktestConfig`), decided inside the
    backtest's day loop on rebalance rows, held in between. ``allowed`` ``[rows, codes]``: not
    known to delist (None: all); ``no_buy``: the ST rule by row. :meth:`book`: what it decided."""

    def __init__(self, data, forecast: pd.DataFrame, config, allowed: np.ndarray | None,
                 no_buy: np.ndarray | None):
        index = {str(c): j for j, c in enumerate(data.codes)}
        cols = np.array([index[str(c)] for c in forecast.columns])
        # row s: the weights and members of day s + 1 (no decision at the data's last close)
        self.inputs = BookInputs(data, config, cols, next_day=False)
        self.bench = self.inputs.bench
        # at the holding horizon: each row's scores decayed over the rows before it (alpha_halflife)
        self.forecast = forecast
        self.scores = decayed_scores(forecast.to_numpy(dtype=float), config.strategy.alpha_halflife)
        self.signal_of = data.dates.get_indexer(forecast.index) - 1  # each row's signal day (data calendar)
        # the trade's day: the row's own under next_open, the signal day's close under close
        self.dates = forecast.index if config.execution == "next_open" else data.dates[np.maximum(
            self.signal_of, 0)]
        self.allowed, self.no_buy = allowed, no_buy
        self.strategy = config.strategy
        # one problem for the run, over every stock a rebalance may hold (compiled once)
        self.compiled = Compiled(self.inputs.investable.any(axis=0), self.inputs.labels())
        n_rows, n_stocks = self.scores.shape
        self.weights = np.full((n_rows, n_stocks), np.nan)
        self.active = np.full((n_rows, n_stocks), np.nan)
        self.bench_rows = np.full((n_rows, n_stocks), np.nan)  # each decision's benchmark weights
        self.sd = np.full(n_rows, np.nan)
        self.current, self.current_sd = None, math.nan
        self.diag: list[dict] = []
        self.no_history: list[bool] = []
        self.no_forecast = 0  # member-days in the benchmark without a forecast (alpha 0)

    def expect(self, rebalance: np.ndarray, panel_dates: pd.DatetimeIndex) -> None:
        """The days (``[panel days]`` True where the backtest rebalances) it will decide on:
        their risk snapshots are computed ahead (:class:`Prefetched`)."""
        rows = np.flatnonzero(rebalance[panel_dates.get_indexer(self.forecast.index)])
        self.inputs.risk.expect(self.signal_of[rows])

    def targets(self, row: int, held: Holding, rebalance_day: bool) -> np.ndarray:
        if rebalance_day or self.current is None:
            self._decide(row, held)
        self.weights[row], self.sd[row] = self.current, self.current_sd
        return self.current

    def _decide(self, row: int, held: Holding) -> None:
        s = int(self.signal_of[row])
        ctx = self.inputs.context(s, self.scores[row], held, self.dates[row],
                                  allowed=None if self.allowed is None else self.allowed[row],
                                  no_buy=None if self.no_buy is None else self.no_buy[row])
        self.no_forecast += int((ctx.investable & (ctx.bench > 0) & ~np.isfinite(ctx.scores)).sum())
        new, diag, active = enhanced_day(ctx, self.strategy, self.compiled)
        snap = ctx.snap
        self.current, self.current_sd = new, diag["predicted_te"] / math.sqrt(TRADING_DAYS)
        self.active[row] = active
        self.bench_rows[row] = ctx.bench
        self.diag.append({"date": self.forecast.index[row], **diag})
        self.no_history.append(snap is None)

    def book(self) -> EnhancedBook:
        """What the policy decided: the targets in force by forecast row (a row it was never
        asked for, the first under ``execution="close"`` when the data hold no day before it,
        carries the next one's), the diagnostics and the notes."""
        self.inputs.risk.close()
        index, columns = self.forecast.index, self.forecast.columns
        weights = pd.DataFrame(self.weights, index=index, columns=columns).bfill().fillna(0.0)
        diagnostics = pd.DataFrame(self.diag, columns=DIAGNOSTICS)
        groups = None
        if self.inputs.groups is not None:
            labels = self.inputs.groups[np.maximum(self.signal_of, 0)]
            groups = pd.DataFrame(labels, index=index, columns=columns)
        return EnhancedBook(weights, diagnostics, pd.DataFrame(self.active, index=index, columns=columns),
                            pd.Series(self.sd, index=index), [*self.bench.notes, *self._notes()],
                            groups=groups, group_names=self.inputs.group_names,
                            industry_bound=self.strategy.industry_bound,
                            bench=pd.DataFrame(self.bench_rows, index=index, columns=columns))

    def _notes(self) -> list[str]:
        """The report's lines on the rebalances: the fallbacks (held the benchmark, or the book as
        it was), the days without a benchmark apart from them, what was left out or held."""
        diag, n = self.diag, len(self.diag)
        notes = []
        empty = [d for d in diag if d.get("rung") == "empty"]
        fell = [i for i, d in enumerate(diag) if d["status"] == "benchmark" and d.get("rung") != "empty"]
        if fell:
            early = sum(self.no_history[i] for i in fell)
            bench = sum(diag[i].get("rung") != "held" for i in fell)
            what = [f"held the benchmark on {bench} of {n} rebalance(s)"] if bench else []
            if len(fell) - bench:
                what.append(f"kept the book as it was held on {len(fell) - bench}")
            notes.append(f"the optimiser {' and '.join(what)} ({early} before the risk model had enough "
                         f"history, {len(fell) - early} the solver could not solve; first: "
                         f"{pd.Timestamp(diag[fell[0]]['date']).date()})")
        if empty:
            notes.append(f"the benchmark had no weight among the investable members on {len(empty)} of {n} "
                         f"rebalance(s) (first: {pd.Timestamp(empty[0]['date']).date()}): the book kept what "
                         "it held; not counted as holding the benchmark")
        missing = [d["missing_weight"] for d in diag if d["missing_weight"] > 0]
        if missing:
            notes.append(f"on {len(missing)} of {n} rebalance(s) members without a risk estimate were in the "
                         f"book at a conservative risk: {np.mean(missing):.2%} of the benchmark weight on "
                         f"average, {max(missing):.2%} at most")
        inputs = self.inputs
        notes += industry_notes(inputs.group_counts, inputs.group_names, self.strategy.industry_level)
        if self.no_forecast:
            notes.append(f"{self.no_forecast:,} member-day(s) of the benchmark on rebalances had no forecast "
                         "(a new listing in its warm-up, a long suspension): kept in the benchmark at their "
                         "weight with alpha 0 (held toward it, never bought on a view)")
        fixed = [d["fixed_weight"] for d in diag if d["fixed_weight"] > 0]
        if fixed:
            notes.append(f"on {len(fixed)} of {n} rebalance(s) holdings that could not trade on the signal "
                         f"day (suspended, no bar) were held at their weight: {np.mean(fixed):.2%} of the "
                         f"book on average, {max(fixed):.2%} at most")
        for status, what in (("no_turnover_limit", "without the turnover limit"),
                             ("soft_style", "with the style bound as a penalty")):
            k = sum(d["status"] == status for d in diag)
            if k:
                notes.append(f"{k} rebalance(s) solved only {what}")
        return notes
