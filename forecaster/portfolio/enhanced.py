"""The enhanced-index book (指数增强): the index's own weights, leaned toward the forecast
under a tracking-error budget.

At each rebalance row ``t`` (a forecast known after day ``t-1``'s close, traded at day ``t``'s
execution) one convex problem is solved over the day's investable members with a benchmark
weight and every name held now (:func:`problem_inputs`), composed from small parts
(:mod:`forecaster.portfolio.book_terms`, :mod:`forecaster.portfolio.book_constraints`,
:mod:`forecaster.portfolio.book_problem`):

    maximise    h alpha' w  -  risk_aversion * h * a' V a  -  k [buy' (w - w_prev)+ + sell' (w_prev - w)+]
    subject to  sum w = 1,  w >= 0                          (long-only, fully invested)
                |a_i| <= active_bound                        (a = w - b, per stock that can trade)
                |X_style' a| <= style_bound                  (active style exposure, in sd)
                |w - w_prev|_1 / 2 <= max_turnover           (one-sided, per rebalance)
                a' V a <= tracking_error^2 / 252             (the daily active variance budget)
                w_i <= w_prev_i where stock i may not be bought (ST on the signal day; a non-member)
                w_i  = w_prev_i where stock i cannot trade today (suspended, locked at a limit)

``h``: the holding period (``rebalance_every`` days), so alpha and risk are over the same
horizon and ``risk_aversion`` means the same at every rebalance frequency; the cost is paid once,
weighed by ``k`` (``trade_aversion``).
``b``: the benchmark weights (:mod:`forecaster.portfolio.index_weights`) renormalised over the
problem's names; ``V = X F X' + diag(D)``: the point-in-time risk model's snapshot at
``t-1``'s close (:mod:`forecaster.risk`; a name it does not cover stays in at the largest
specific variance it has); ``w_prev``: the weights held now. ``alpha_i = ic * sigma_i * z_i``
(Grinold's rule, :mod:`forecaster.portfolio.alpha`: ``z`` the forecast's cross-sectional
standard score in ``alpha_shape``, by default only the top and bottom fifth's, ``sigma`` the
stock's specific daily sd, ``ic`` a stated information coefficient). ``buy``, ``sell``: the
backtest's cost model on the trade's day (:func:`trade_rates`: stamp duty by date on sells, the
minimum commission). The solver is Clarabel through cvxpy; a solution is taken only once it
keeps every constraint. The fallback ladder: the whole problem, without the turnover limit, with
the style bound soft, then the drifted book held (counted; the benchmark when nothing is held).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.portfolio.alpha import alpha_of
from forecaster.portfolio.book_compiled import Compiled, CompiledBook, bounds
from forecaster.portfolio.book_constraints import (
    ActiveBound,
    FullyInvested,
    Held,
    IndustryBound,
    LongOnly,
    NoBuy,
    Sold,
    StyleBound,
    TrackingBudget,
    TurnoverLimit,
)
from forecaster.portfolio.book_problem import RUNGS, broken, clean, relax, solve
from forecaster.portfolio.book_terms import ActiveRisk, Alpha, BenchmarkDistance, TradingCost, trade_rates

log = logging.getLogger(__name__)

TRADING_DAYS = 252
_RISK = ("predicted_te", "factor_te", "style_te", "specific_te")
CASH_LIMIT = 0.01  # the book's cash after a close stays below this unless a rule kept a buy from filling


def _drifted(bench: np.ndarray, growth: np.ndarray) -> np.ndarray:
    """``bench`` ``[rows, codes]`` (NaN: outside the book) carried through a day by each
    member's price factor ``growth`` (same shape) and renormalised to its row's total."""
    g = np.where(np.isfinite(growth) & (growth > 0), growth, 1.0)
    moved = bench * g
    with np.errstate(invalid="ignore", divide="ignore"):
        scale = np.nansum(bench, axis=1, keepdims=True) / np.nansum(moved, axis=1, keepdims=True)
    return moved * np.where(np.isfinite(scale), scale, 1.0)


@dataclass
class EnhancedBook:
    """What the enhanced policy decided in a backtest (:class:`~forecaster.portfolio.policy.EnhancedPolicy`).

    Attributes:
        weights: ``[date x code]`` target weights by forecast row (held between rebalances).
        diagnostics: one row per rebalance: ``date``, ``status`` (``optimal``,
            ``no_turnover_limit``: solved without the turnover limit, ``soft_style``: with the
            style bound a penalty, ``benchmark``: the fallback; ``rung`` says what it held: the
            benchmark, the book as ``held``, or ``empty``: the benchmark had no weight among the
            investable members), ``predicted_te`` (annual), ``factor_te``, ``style_te``,
            ``specific_te`` (annual; the active risk split: all factors, the style factors alone,
            specific), ``turnover`` (one-sided, from the weights held), ``n_stocks``,
            ``missing_weight`` (benchmark weight of members without a risk estimate),
            ``fixed_weight`` (the weight held in stocks that could not trade on the signal day).
        active: ``[date x code]`` active weights on rebalance rows: after a backtest
            (:meth:`held_after`), the weights held at that day's close less the benchmark's,
            what the book was; before, the targets' ``w - b``, what it wanted.
        predicted_sd: ``[date]`` the book's predicted daily active sd in force on each row.
        target_active: the targets' ``w - b`` once :meth:`held_after` replaced ``active``.
    """

    weights: pd.DataFrame
    diagnostics: pd.DataFrame
    active: pd.DataFrame
    predicted_sd: pd.Series
    notes: list[str] = field(default_factory=list)
    target_active: pd.DataFrame | None = None
    groups: pd.DataFrame | None = None  # [date x code] each decision row's industry group (-1 none)
    group_names: list[str] = field(default_factory=list)
    industry_bound: float = 0.0  # the strategy's (0: none), drawn in active_industries.png
    bench: pd.DataFrame | None = None  # [date x code] the benchmark weights of each decision row
    held: pd.DataFrame | None = None  # [date x code] the weights held at each decision row's close
    held_bench: pd.DataFrame | None = None  # [date x code] the benchmark's at that close (drifted)

    def industry_weights(self, decided: bool = False) -> pd.DataFrame:
        """``date, industry, book, benchmark, active`` on each rebalance row: the book's weight
        in each industry group (what it held at that close against the benchmark's there, after
        :meth:`held_after`; the targets against the decision's benchmark before it, or
        ``decided``), the benchmark's and their difference; empty without industries."""
        from forecaster.portfolio.industry_groups import COLUMNS, group_weights

        if self.groups is None or self.bench is None:
            return pd.DataFrame(columns=list(COLUMNS))
        rows = self.bench.dropna(how="all").index
        book = self.weights if self.held is None or decided else self.held
        bench = self.bench if self.held_bench is None or decided else self.held_bench
        rows = rows.intersection(book.index)
        return group_weights(book.loc[rows], bench.loc[rows], self.groups.loc[rows].to_numpy(),
                             self.group_names)

    def held_after(self, positions: np.ndarray, equity: np.ndarray, close: np.ndarray,
                   days: pd.DatetimeIndex, growth: np.ndarray | None = None) -> None:
        """Measure ``active`` on what was held, not on the targets: on each rebalance row's day,
        ``positions`` ``[days, codes]`` (shares) at ``close`` ``[days, codes]`` over ``equity``
        ``[days]``, less the benchmark weights the decision used, drifted to the same close by
        ``growth`` ``[days, codes]`` (each member's price factor over the day, as the index's
        weights drift; None: not drifted). Both sides valued at one close, as a holder reads
        the book that evening: a target the lots, limits or suspensions kept from being bought
        is no active weight of the book, and the day's moves are not read as one."""
        target = self.active
        rows = target.dropna(how="all").index.intersection(days)
        bench = self.weights.loc[rows] - target.loc[rows]  # b where the book had one (NaN: outside)
        at = days.get_indexer(rows)
        with np.errstate(invalid="ignore", divide="ignore"):
            held = positions[at] * close[at] / np.asarray(equity, float)[at][:, None]
        held = np.nan_to_num(held)
        b = bench.to_numpy(dtype=float)
        if growth is not None:
            b = _drifted(b, growth[at])
        active = np.where(np.isnan(b) & (held == 0), np.nan, held - np.nan_to_num(b))
        out = pd.DataFrame(np.nan, index=target.index, columns=target.columns)
        out.loc[rows] = active
        self.target_active, self.active = target, out
        if self.bench is not None:  # every decision row's held weights (fallbacks included)
            decided = self.bench.dropna(how="all").index.intersection(days)
            at = days.get_indexer(decided)
            with np.errstate(invalid="ignore", divide="ignore"):
                held_all = np.nan_to_num(positions[at] * close[at] / np.asarray(equity, float)[at][:, None])
            self.held = pd.DataFrame(held_all, index=decided, columns=target.columns)
            if growth is not None:
                self.held_bench = pd.DataFrame(_drifted(self.bench.loc[decided].to_numpy(float), growth[at]),
                                               index=decided, columns=target.columns)

    def note_cash(self, cash: pd.Series, trades: pd.DataFrame) -> None:
        """Count in the notes the closes where ``cash`` (``[date]``, over the book's value) was
        above :data:`CASH_LIMIT`, each with the broker's reasons (limit-up, suspended, lot size,
        ...) for the buys of that day that did not fill (``trades``: the backtest's), and those
        without any such reason."""
        over = cash[cash > CASH_LIMIT]
        if over.empty:
            return
        short = trades[(trades["side"] == "buy") & (trades["status"] != "filled")]
        reasons = short.groupby(pd.to_datetime(short["date"]).dt.normalize())["reason"].agg(
            lambda r: sorted(set(map(str, r))))
        by_reason: dict[str, int] = {}
        unexplained = []
        for day in over.index:
            why = reasons.get(pd.Timestamp(day).normalize(), [])
            for r in why:
                by_reason[r] = by_reason.get(r, 0) + 1
            if not why:
                unexplained.append(f"{pd.Timestamp(day).date()} ({over[day]:.2%})")
        words = ", ".join(f"{r} on {n} day(s)" for r, n in sorted(by_reason.items()))
        note = (f"cash above {CASH_LIMIT:.0%} of the book after {len(over)} close(s) (largest "
                f"{over.max():.2%} on {over.idxmax().date()})"
                + (f": a rule kept buys from filling: {words}" if words else ""))
        if unexplained:
            note += f"; with no rule's reason: {', '.join(unexplained[:10])}"
        self.notes.append(note)

    @property
    def fallbacks(self) -> int:
        """The rebalances the optimiser did not solve (not those without a benchmark weight)."""
        d = self.diagnostics
        if not len(d):
            return 0
        fell = d["status"] == "benchmark"
        if "rung" in d:  # a day without a benchmark weight is not a fallback of the optimiser
            fell &= d["rung"] != "empty"
        return int(fell.sum())


def book_parts(alpha: np.ndarray, bench: np.ndarray, prev: np.ndarray, exposures: np.ndarray,
               factor_cov: np.ndarray, specific_var: np.ndarray, n_style: int, strategy,
               no_buy: np.ndarray | None = None, cost=0.0, held: np.ndarray | None = None,
               sell_cost=None, sold: np.ndarray | None = None, groups: np.ndarray | None = None,
               group_bench: np.ndarray | None = None) -> tuple[list, list]:
    """``(terms, constraints)`` of one rebalance (module docstring) over ``[n]`` arrays:
    alpha over the holding period, the active risk over the same horizon
    (``strategy.rebalance_every`` days), the trading cost at ``cost`` per unit bought and
    ``sell_cost`` (None: ``cost``) per unit sold (scalars or ``[n]``); the budget, long-only,
    active bounds (not on ``held`` names), style bounds, the turnover limit (when something is
    held), the tracking budget, the ST rule (``no_buy``), the ``held`` names fixed at
    ``prev`` and the ``sold`` ones (leaving the index) at 0, their sale outside the turnover
    limit (a forced sale is no choice of the book); with ``groups`` ``[n, g]`` (0/1) and
    ``strategy.industry_bound`` > 0, each group's active weight within that bound (against
    ``group_bench``'s group sums, None: ``bench``'s)."""
    risk = ActiveRisk(bench, exposures, factor_cov, specific_var, strategy.risk_aversion,
                      horizon=strategy.rebalance_every)
    aversion = strategy.trade_aversion  # the cost's weight: 1 the cost itself
    sell = cost if sell_cost is None else sell_cost
    terms = [Alpha(alpha), risk, TradingCost(prev, np.multiply(cost, aversion), np.multiply(sell, aversion))]
    free = np.ones(len(alpha), bool) if held is None else ~np.asarray(held, bool)
    constraints = [FullyInvested(), LongOnly(), ActiveBound(bench, strategy.active_bound, free),
                   TrackingBudget(risk, strategy.tracking_error / math.sqrt(TRADING_DAYS))]
    if n_style:
        constraints.append(StyleBound(exposures[:, :n_style], bench, strategy.style_bound))
    if groups is not None and strategy.industry_bound > 0:
        constraints.append(IndustryBound(groups, bench if group_bench is None else group_bench,
                                         strategy.industry_bound))
    forced = 0.0 if sold is None else float(prev[np.asarray(sold, bool)].sum())
    if prev.sum() > 0:
        constraints.append(TurnoverLimit(prev, strategy.max_turnover + forced))
    if no_buy is not None:
        constraints.append(NoBuy(no_buy, prev))
    if held is not None:
        constraints.append(Held(held, prev))
    if sold is not None and np.asarray(sold, bool).any():
        constraints.append(Sold(sold))
    return terms, constraints


def solve_book(alpha: np.ndarray, bench: np.ndarray, prev: np.ndarray, exposures: np.ndarray,
               factor_cov: np.ndarray, specific_var: np.ndarray, n_style: int, strategy,
               no_buy: np.ndarray | None = None, cost=0.0, turnover_limit: bool = True,
               soft_style: bool = False, held: np.ndarray | None = None, sell_cost=None,
               sold: np.ndarray | None = None, compiled: Compiled | None = None,
               groups: np.ndarray | None = None, group_bench: np.ndarray | None = None) -> np.ndarray | None:
    """The optimal weights ``[n]`` of one rebalance, or None when the solver finds none that
    keeps the constraints: the problem :func:`book_parts` composes, solved as the run's
    :class:`~forecaster.portfolio.book_compiled.CompiledBook` (``compiled``: the run's, over a
    fixed axis these ``n`` stocks lie on; None: one compiled for this day), the solution cleaned
    and checked against those parts (:mod:`forecaster.portfolio.book_problem`). ``exposures``
    ``[n, k]`` (the first ``n_style`` columns styles), ``factor_cov`` ``[k, k]``,
    ``specific_var`` ``[n]`` (daily); ``prev`` ``[n]`` the weights held now; ``turnover_limit``
    False: without it; ``soft_style``: the style (and industry) bounds penalties; ``groups``
    ``[n, g]``: each stock's industry group (0/1; :func:`book_parts`), bounded against
    ``group_bench`` ``[n]``'s group sums (None: ``bench``'s)."""
    if groups is not None and not strategy.industry_bound > 0:
        groups = None
    terms, constraints = book_parts(alpha, bench, prev, exposures, factor_cov, specific_var, n_style,
                                    strategy, no_buy, cost, held, sell_cost, sold, groups, group_bench)
    terms, constraints = relax(terms, constraints, turnover_limit, soft_style)
    n, k = len(alpha), exposures.shape[1]
    lo, hi = bounds(bench, prev, strategy.active_bound, no_buy, held, sold)
    buy = np.broadcast_to(np.asarray(cost, float), (n,))
    sell = buy if sell_cost is None else np.broadcast_to(np.asarray(sell_cost, float), (n,))
    forced = 0.0 if sold is None else float(prev[np.asarray(sold, bool)].sum())
    limit = strategy.max_turnover + forced if prev.sum() > 0 else 1.0  # nothing held: no limit binds
    g = 0 if groups is None else groups.shape[1]
    where = None if compiled is None else compiled.place(n, k, n_style, strategy, g)
    # a day alone (predict, a test): a problem compiled for it
    book = CompiledBook(n, k, n_style, strategy, g) if where is None else compiled.book
    args = [alpha, bench, prev, exposures, specific_var, lo, hi, buy, sell, np.zeros((n, 0)) if groups is None
            else groups]
    if where is not None:  # onto the run's axis: the stocks outside the day's problem held at 0
        args = compiled.spread(args, where)
    target = None if groups is None else groups.T @ (bench if group_bench is None else group_bench)
    raw = book.solve(*args[:4], factor_cov, *args[4:9], limit, turnover_limit, soft_style, groups=args[9],
                     group_target=target)
    if raw is None:
        return None
    raw = raw if where is None else raw[where]
    out = clean(raw, prev, held)
    if out is None or broken(constraints, out):
        return None
    return out


def _risk_split(active, exposures, factor_cov, specific_var, n_style) -> tuple[float, float, float, float]:
    """Annual active sd: total, from all factors, from the style factors alone, specific."""
    x = exposures.T @ active
    factor = float(x @ factor_cov @ x)
    xs = x[:n_style]
    style = float(xs @ factor_cov[:n_style, :n_style] @ xs) if n_style else 0.0
    specific = float((active ** 2 * specific_var).sum())
    year = math.sqrt(TRADING_DAYS)
    return (math.sqrt(max(factor + specific, 0.0)) * year, math.sqrt(max(factor, 0.0)) * year,
            math.sqrt(max(style, 0.0)) * year, math.sqrt(specific) * year)


def problem_inputs(scores: np.ndarray, bench: np.ndarray, snap, day: np.ndarray, strategy,
                   held: np.ndarray | None = None):
    """What one rebalance's problem is made of, over ``[stocks]`` arrays: ``idx`` the stocks in
    it (``day``'s investable members with a benchmark weight, and the names ``held`` now),
    their alpha over the holding period, benchmark weights renormalised over them, exposures
    ``[n, k]``, specific variances, the number of style columns, and the share of ``day``'s
    benchmark weight without a risk estimate. A name the snapshot does not cover stays in: its
    specific variance the largest the snapshot has (conservative), its market exposure 1 and
    its other exposures 0 (the cross-sectional mean), its alpha from the median specific sd."""
    n_stocks = len(scores)
    n_style = snap.n_style
    cover = np.zeros(n_stocks, dtype=bool)
    cover[snap.stocks] = True
    inside = day if held is None else (day | (held > 0))
    idx = np.flatnonzero(inside)
    pos = np.full(n_stocks, -1)
    pos[snap.stocks] = np.arange(len(snap.stocks))
    known = cover[idx]
    x = np.zeros((len(idx), snap.exposures.shape[1]))
    x[:, 0] = 1.0  # the market factor: every stock's
    x[known] = np.nan_to_num(snap.exposures[pos[idx[known]]])
    dvar = np.full(len(idx), float(np.max(snap.specific_var)))
    dvar[known] = snap.specific_var[pos[idx[known]]]
    sd = np.sqrt(dvar)
    sd[~known] = float(np.median(np.sqrt(snap.specific_var)))
    missing = float(bench[day & ~cover].sum()) / max(float(bench[day].sum()), 1e-12)
    b = bench[idx] / bench[idx].sum()
    # over the holding period: the rebalance's days of daily alpha against one trade's cost
    alpha = alpha_of(scores[idx], sd, strategy.alpha_ic, strategy.alpha_shape) * strategy.rebalance_every
    return idx, alpha, b, x, dvar, n_style, missing


def _empty_row(new: np.ndarray, held: np.ndarray, n_stocks: int, rung: str, note: str = "") -> dict:
    """The diagnostics of a rebalance decided without the optimiser (no risk figures)."""
    return {"status": "benchmark", **dict.fromkeys(_RISK, math.nan),
            "turnover": float(np.abs(new - held).sum() / 2), "n_stocks": n_stocks, "missing_weight": math.nan,
            "rung": rung, "note": note}


def _fallback(held: np.ndarray, bench: np.ndarray, may_buy: np.ndarray) -> tuple[np.ndarray, str]:
    """The last rung: the book held as it drifted (``"held"``); with nothing held, the
    benchmark over the names that may be bought (``"benchmark"``)."""
    if held.sum() > 0:
        return held.copy(), "held"
    new = np.where(may_buy, bench, 0.0)
    return (new / new.sum() if new.sum() > 0 else new), "benchmark"


def _toward_benchmark(held, bench, day, no_buy, stuck, strategy, may_buy) -> tuple[np.ndarray, str]:
    """Without a risk model: the book closest to the benchmark (:class:`BenchmarkDistance`)
    that the rules allow (the turnover limit, the ST rule, held names that cannot trade; the
    objective, not the active bounds, keeps it near), ``"benchmark"``; solved without the
    turnover limit if need be; else the last rung (:func:`_fallback`)."""
    idx = np.flatnonzero(day | (held > 0))
    b, prev = bench[idx] / bench[idx].sum(), held[idx]
    nb = (~day[idx]) | (False if no_buy is None else np.asarray(no_buy, bool)[idx])
    hold = stuck[idx] if stuck[idx].any() else None
    constraints = [FullyInvested(), LongOnly(), NoBuy(nb, prev)]
    if prev.sum() > 0:
        constraints.append(TurnoverLimit(prev, strategy.max_turnover))
    if hold is not None:
        constraints.append(Held(hold, prev))
    for turnover_limit in (True, False):
        w = solve(*relax([BenchmarkDistance(b)], constraints, turnover_limit), len(idx), prev, hold)
        if w is not None:
            new = np.zeros(len(held))
            new[idx] = w
            return new, "benchmark"
    return _fallback(held, bench, may_buy)


def rebalance(scores: np.ndarray, held: np.ndarray, bench: np.ndarray, snap, investable: np.ndarray,
              no_buy: np.ndarray | None, strategy, cost, *, fixed: np.ndarray | None = None,
              date=None, value: float | None = None, compiled: Compiled | None = None,
              groups: np.ndarray | None = None, n_groups: int = 0) -> tuple[np.ndarray, dict, np.ndarray]:
    """One rebalance (module docstring) over ``[stocks]`` arrays: the scores, the weights held
    now, the benchmark weights, the investable members and the ST rule's mask; ``snap``: the
    risk model's snapshot at the signal day's close, its ``stocks`` indexing these arrays (None:
    not enough history). ``cost``: a :class:`~forecaster.portfolio.rules.CostModel` (its rates
    on ``date``, the trade's day, default the snapshot's; the minimum commission on a book of
    ``value`` CNY, :func:`trade_rates`) or a number (per unit traded either way). ``fixed``:
    names that cannot trade today (suspended, locked at a limit): held ones stay at their
    weight, in the budget, the turnover and the cost. Every held name is in the problem (sold
    by the problem, never by omission). ``compiled``: the run's problem over its fixed axis
    (:class:`Compiled`), re-solved with this day's parameters; None: compiled for the day.
    ``groups``: ``[stocks]`` each stock's industry group ``0 .. n_groups - 1`` (-1: none), for
    ``strategy.industry_bound``.

    The ladder: the whole problem, without the turnover limit, with the style bound soft, then
    the drifted book held (the benchmark when nothing is held). Without a snapshot: the book
    closest to the benchmark the rules allow (:func:`_toward_benchmark`). A day
    without an investable member with a benchmark weight holds the book and says so (``note``).
    Returns the new weights ``[stocks]``, the diagnostics row (:class:`EnhancedBook`, and
    ``rung``: which rung decided, ``note``) and the active weights (NaN outside the book)."""
    n_stocks = len(scores)
    held = np.asarray(held, dtype=float)
    day = investable & (bench > 0)
    active = np.full(n_stocks, np.nan)
    stuck = np.zeros(n_stocks, bool) if fixed is None else np.asarray(fixed, bool)
    may_buy = day & ~stuck & (True if no_buy is None else ~np.asarray(no_buy, bool))
    when = pd.Timestamp(date if date is not None else (snap.date if snap is not None else "NaT"))
    if not day.any():
        note = (f"{'the rebalance' if pd.isna(when) else when.date()}: no investable member with a benchmark "
                "weight; the book is held")
        log.warning("enhanced book: %s", note)
        return held.copy(), _empty_row(held, held, 0, "empty", note), active
    if snap is None or len(snap.stocks) == 0:
        new, rung = _toward_benchmark(held, bench, day, no_buy, stuck, strategy, may_buy)
        return new, _empty_row(new, held, int(day.sum()), rung), active
    idx, alpha, b, x, dvar, n_style, missing = problem_inputs(scores, bench, snap, day, strategy, held)
    prev = held[idx]
    nb = (~day[idx]) | (False if no_buy is None else np.asarray(no_buy, bool)[idx])  # non-members: sold only
    hold = stuck[idx] if stuck[idx].any() else None
    # a holding that is no member on the trade day (it left at a review) and can trade: sold here,
    # its proceeds spent in this solve rather than left as cash until the next rebalance
    sold = ~np.asarray(investable, bool)[idx] & (prev > 0) & ~stuck[idx]
    buy, sell = trade_rates(cost, when, prev, b, strategy.active_bound, value)
    onehot = group_bench = None
    if groups is not None and n_groups and strategy.industry_bound > 0:
        labels = np.asarray(groups)
        label = labels[idx]
        onehot = np.zeros((len(idx), n_groups))
        onehot[np.flatnonzero(label >= 0), label[label >= 0]] = 1.0
        # the bound is against the index's own group weights as fractions of the whole index
        # (members outside the day's problem included, a weight on a stock in no group spread
        # over none): the problem's benchmark scaled to them group by group
        member = (labels >= 0) & (bench > 0)
        whole = np.bincount(labels[member], weights=bench[member], minlength=n_groups)
        whole /= max(float(bench[bench > 0].sum()), 1e-12)
        inside = onehot.T @ b
        group_bench = b * (onehot @ np.divide(whole, inside, out=np.ones(n_groups), where=inside > 0))
    if compiled is not None:
        compiled.at(idx)
    status = w = None
    for rung, turnover_limit, soft_style in RUNGS:
        w = solve_book(alpha, b, prev, x, snap.factor_cov, dvar, n_style, strategy, nb, buy,
                       turnover_limit=turnover_limit, soft_style=soft_style, held=hold, sell_cost=sell,
                       sold=sold if sold.any() else None, compiled=compiled, groups=onehot,
                       group_bench=group_bench)
        if w is not None:
            status = rung
            break
    if w is None:
        status = "benchmark"  # the optimiser did not solve: counted by EnhancedBook.fallbacks
        fallback, rung = _fallback(held, bench, may_buy)
        w = fallback[idx]
    total_te, factor_te, style_te, specific_te = _risk_split(w - b, x, snap.factor_cov, dvar, n_style)
    new = np.zeros(n_stocks)
    new[idx] = w
    active[idx] = w - b
    return new, {"status": status, "predicted_te": total_te, "factor_te": factor_te, "style_te": style_te,
                 "specific_te": specific_te, "turnover": float(np.abs(new - held).sum() / 2),
                 "n_stocks": len(idx), "missing_weight": missing, "rung": rung, "note": ""}, active


def one_way_cost(costs, date=None) -> float:
    """Cost per unit of value traded one way, a buy and a sell averaged: commission, transfer
    fee, slippage and the stamp duty of the two sides halved, in force on ``date`` (None: today's,
    the rate a trade placed now pays). :func:`trade_rates` gives a buy's and a sell's apart."""
    when = pd.Timestamp.today() if date is None else date
    return float(costs.commission_rate + costs.transfer_fee_rate + costs.slippage_bps / 1e4
                 + sum(costs.stamp_duty_rates(when)) / 2)


class _Columns:
    """A risk model whose snapshots name the forecast's columns (not the panel's stocks)."""

    def __init__(self, model, column_of: np.ndarray):
        self.model, self.column_of = model, column_of

    def snapshot(self, t: int):
        snap = self.model.snapshot(t)
        if snap is None:
            return None
        cols = self.column_of[snap.stocks]
        keep = cols >= 0
        return dataclasses.replace(snap, stocks=cols[keep], exposures=snap.exposures[keep],
                                   specific_var=snap.specific_var[keep])
