"""The enhanced book's problem compiled once a run, as cvxportfolio's policies are: the same
problem as :func:`~forecaster.portfolio.enhanced.book_parts` composes, written with
``cp.Parameter``\\ s for what changes from day to day (the alpha, the benchmark, the weights
held, the risk model's exposures and variances, the cost rates, each stock's bounds, the
turnover allowance) over a fixed axis of stocks, so cvxpy canonicalises it once (it is DPP:
:meth:`CompiledBook.problem` ``.is_dpp()``) and each rebalance only sets the parameters. What a
strategy fixes for the run (the risk aversion and horizon, the trade aversion, the tracking
budget, the style bound, the active bound) is built in as constants.

Every per-stock rule is one pair of bounds ``lo <= w <= hi``: long-only and the active bound
``[max(b - bound, 0), b + bound]``; a name that may not be bought (the ST rule, a non-member)
``hi <= prev``; a held name that cannot trade ``lo = hi = prev`` (outside the active bound); a
leaver ``hi = 0``; a stock outside the day's problem ``lo = hi = 0``. The trading cost and the
turnover read the size of each trade ``t >= |w - prev|``: a cost of ``buy`` on buys and ``sell``
on sales is ``(buy + sell) / 2 . t + (buy - sell) / 2 . (w - prev)`` (its last part's ``prev`` a
constant of the day, left out). The risk reads the active factor exposure ``y = L' X' (w - b)``
and specific part ``z = sd (w - b)`` as variables, used by the objective and the tracking
budget alike: fewer variables and rows than the problem the terms compose, and a sparser one.

Industry factors and groups are 0/1 columns: as dense parameters they would be dense rows of
the solver's matrix (every entry kept), which made each solve many times slower with 60 groups.
So the exposures' 0/1 columns (after the market and styles) and the industry groups are sparse
parameters ``H`` and ``G`` (cvxpy's ``sparsity``: only the entries of a pattern), ``L' [Xd'; H]
w`` the factor part (``Xd`` the other columns, ``L'`` ``[k, k]``). The pattern is every (class,
stock) the run's labels give (``seed``) and any a day adds: a day whose stocks that may hold
weight read a class outside it widens it and compiles the problem again (rare: the run's
labels seed it); a stock whose bounds hold it at 0 may read any class.
The solution is cleaned and checked against the day's constraints (numpy) by the caller exactly
as before (:func:`~forecaster.portfolio.book_problem.clean`, ``broken``).
"""

from __future__ import annotations

import math

import numpy as np

from forecaster.metrics import TRADING_DAYS
from forecaster.portfolio.book_terms import _factor_root

STYLE_PENALTY = 10.0  # the soft style bound's weight, as book_terms.StylePenalty's


class CompiledBook:
    """The enhanced problem over ``n`` stocks, ``k`` risk factors (the first ``n_style`` of
    them styles) under ``strategy``; each rung of the ladder (``turnover_limit``,
    ``soft_style``) compiled on its first use and re-solved with new parameters after."""

    def __init__(self, n: int, k: int, n_style: int, strategy, n_groups: int = 0,
                 seed: tuple[np.ndarray | None, np.ndarray | None] = (None, None)):
        self.n, self.k, self.n_style, self.strategy = int(n), int(k), int(n_style), strategy
        self.n_groups = int(n_groups)
        self._rungs: dict[tuple[bool, bool], tuple] = {}
        # the patterns of H (the 0/1 exposure columns, ``classes``) and G: [rows, n] bool; the
        # seed's (each ``[labels, n]`` bool: the classes and groups the run's labels give)
        self.seed = seed
        self.classes = np.zeros(0, dtype=int)
        self.h = np.zeros((0, self.n), bool)
        self.g = self._seeded(1, self.n_groups)
        self.compiles = 0

    def _seeded(self, which: int, rows: int) -> np.ndarray:
        given = self.seed[which]
        ok = given is not None and np.shape(given) == (rows, self.n)
        return np.array(given, bool) if ok else np.zeros((rows, self.n), bool)

    def sync(self, exposures: np.ndarray, groups: np.ndarray | None, live: np.ndarray) -> None:
        """Widen the patterns of ``H`` and ``G`` to a day's (``exposures`` ``[n, k]``, ``groups``
        ``[n, n_groups]``) on its ``live`` stocks ``[n]`` (those that may hold weight); drop the
        compiled rungs when they change."""
        x = np.asarray(exposures, float)
        tail = x[:, self.n_style:]
        zero_one = ((tail == 0) | (tail == 1)).all(axis=0)  # an industry without a stock today too
        classes = self.n_style + np.flatnonzero(zero_one)
        same = np.array_equal(classes, self.classes)
        h = self.h if same else self._seeded(0, len(classes))
        need_h = np.zeros_like(h)
        need_h[:, live] = x[live][:, classes].T != 0
        need_g = np.zeros_like(self.g)
        if self.n_groups:
            need_g[:, live] = np.asarray(groups, float)[live].T != 0
        if not same or (need_h & ~h).any() or (need_g & ~self.g).any():
            self.classes, self.h, self.g, self._rungs = classes, h | need_h, self.g | need_g, {}

    def fits(self, n: int, k: int, n_style: int, strategy, n_groups: int = 0) -> bool:
        """Whether a day of this shape and strategy can reuse this problem."""
        return ((n, k, n_style, n_groups) == (self.n, self.k, self.n_style, self.n_groups)
                and strategy == self.strategy)

    def problem(self, turnover_limit: bool = True, soft_style: bool = False):
        """``(problem, w, params)`` of a rung (built and cached on first use)."""
        key = (bool(turnover_limit), bool(soft_style))
        if key not in self._rungs:
            self._rungs[key] = self._build(*key)
        return self._rungs[key]

    def _build(self, turnover_limit: bool, soft_style: bool):
        import cvxpy as cp

        n, k, s, st = self.n, self.k, self.n_style, self.strategy
        self.compiles += 1
        kd = k - len(self.classes)
        p = {name: cp.Parameter(n) for name in ("alpha", "lo", "hi", "prev", "sd_b", "cost_side")}
        p.update(dense=cp.Parameter((kd, n)), root=cp.Parameter((k, k)), root_b=cp.Parameter(k),
                 turnover=cp.Parameter(nonneg=True),
                 **{name: cp.Parameter(n, nonneg=True) for name in ("sd", "cost_size")})
        if s:
            p["styles"], p["styles_b"] = cp.Parameter((s, n)), cp.Parameter(s)
        if self.n_groups:
            p["groups_b"] = cp.Parameter(self.n_groups)
        w, t = cp.Variable(n), cp.Variable(n)  # the weights and each trade's size
        factor, specific = cp.Variable(k), cp.Variable(n)  # L' X' (w - b) and sd (w - b)
        loads = cp.Variable(k)  # X' w, the 0/1 columns last: a variable keeps L' X' w DPP
        given = p["dense"] @ w
        if len(self.classes):
            p["classes"] = _sparse_parameter(self.h)
            given = cp.hstack([given, p["classes"] @ w])
        horizon = float(st.rebalance_every)
        aversion = float(st.trade_aversion)
        objective = (p["alpha"] @ w
                     - st.risk_aversion * horizon * (cp.sum_squares(factor) + cp.sum_squares(specific))
                     - aversion * (p["cost_size"] @ t + p["cost_side"] @ w))
        budget = st.tracking_error / math.sqrt(TRADING_DAYS)
        constraints = [cp.sum(w) == 1, w >= p["lo"], w <= p["hi"], t >= w - p["prev"], t >= p["prev"] - w,
                       loads == given, factor == p["root"] @ loads - p["root_b"],
                       specific == cp.multiply(p["sd"], w) - p["sd_b"],
                       cp.norm(cp.hstack([factor, specific]), 2) <= budget]
        if turnover_limit:
            constraints.append(cp.sum(t) <= 2 * p["turnover"])
        if s:
            exposure = p["styles"] @ w - p["styles_b"]
            if soft_style:
                objective = objective - STYLE_PENALTY * cp.sum(cp.pos(cp.abs(exposure) - st.style_bound))
            else:
                constraints.append(cp.abs(exposure) <= st.style_bound)
        if self.n_groups:  # each industry group's active weight, a variable: its dense rows once
            exposure = cp.Variable(self.n_groups)
            p["groups"] = _sparse_parameter(self.g)
            constraints.append(exposure == p["groups"] @ w - p["groups_b"])
            if soft_style:
                objective = objective - STYLE_PENALTY * cp.sum(cp.pos(cp.abs(exposure) - st.industry_bound))
            else:
                constraints.append(cp.abs(exposure) <= st.industry_bound)
        return cp.Problem(cp.Maximize(objective), constraints), w, p

    def solve(self, alpha, bench, prev, exposures, factor_cov, specific_var, lo, hi, buy, sell,
              turnover: float, turnover_limit: bool = True, soft_style: bool = False,
              groups: np.ndarray | None = None, group_target: np.ndarray | None = None) -> np.ndarray | None:
        """The solver's weights ``[n]`` of one day (not yet cleaned or checked), or None when
        it finds none; arrays over this problem's ``n`` stocks (``exposures`` ``[n, k]``,
        ``groups`` ``[n, n_groups]`` 0/1 industry groups, bounded within the strategy's bound of
        ``group_target`` ``[n_groups]``, None: the groups' sums of ``bench``)."""
        import cvxpy as cp

        from forecaster.portfolio import book_problem

        x = np.asarray(exposures, float)
        self.sync(x, groups, np.asarray(hi, float) > 0)
        problem, w, p = self.problem(turnover_limit, soft_style)
        b = np.asarray(bench, float)
        order = np.r_[np.setdiff1d(np.arange(self.k), self.classes), self.classes]  # the 0/1 last
        root = _factor_root(np.asarray(factor_cov, float)[np.ix_(order, order)]).T  # [k, k]
        sd = np.sqrt(np.asarray(specific_var, float))
        buy, sell = np.broadcast_to(buy, (self.n,)), np.broadcast_to(sell, (self.n,))
        values = {"alpha": alpha, "lo": lo, "hi": hi, "prev": prev, "root": root,
                  "dense": x[:, order[: self.k - len(self.classes)]].T, "root_b": root @ (x[:, order].T @ b),
                  "sd": sd, "sd_b": sd * b, "cost_size": (buy + sell) / 2, "cost_side": (buy - sell) / 2,
                  "turnover": max(float(turnover), 0.0)}
        if self.n_style:
            styles = x[:, : self.n_style].T
            values["styles"], values["styles_b"] = styles, styles @ b
        if self.n_groups:
            values["groups_b"] = (np.asarray(groups, float).T @ b if group_target is None
                                  else np.asarray(group_target, float))
        for name, value in values.items():
            p[name].value = np.asarray(value, float)
        if "classes" in p:
            _set_sparse(p["classes"], x[:, self.classes].T)
        if "groups" in p:
            _set_sparse(p["groups"], np.asarray(groups, float).T)
        try:
            book_problem.timed_solve(problem)
        except cp.error.SolverError:
            return None
        if problem.status not in ("optimal", "optimal_inaccurate") or w.value is None:
            return None
        return np.asarray(w.value, float)


class Compiled:
    """A run's :class:`~forecaster.portfolio.book_compiled.CompiledBook` over a fixed axis: the
    stocks of ``on_axis`` ``[stocks]`` (the union of those a run's rebalances may hold), and
    where each day's problem lies on it (:meth:`at`, set by :func:`rebalance`)."""

    def __init__(self, on_axis: np.ndarray, labels: tuple = (None, None)):
        on_axis = np.asarray(on_axis, bool)
        self.size, self.book, self.where = int(on_axis.sum()), None, None
        self.axis_of = np.where(on_axis, np.cumsum(on_axis) - 1, -1)
        # the sparse patterns' seed (CompiledBook): which classes of the risk model and which
        # groups of the bound each stock on the axis holds some day; labels: (risk, groups),
        # each None or ([days, stocks] int, -1 none; the number of labels)
        self.seed = tuple(None if got is None else _pattern(got[0][:, on_axis], got[1]) for got in labels)

    def at(self, idx: np.ndarray) -> None:
        """The day's problem is over the stocks ``idx``: on the axis if they all lie on it."""
        pos = self.axis_of[idx]
        self.where = pos if (pos >= 0).all() else None

    def place(self, n: int, k: int, n_style: int, strategy, n_groups: int = 0) -> np.ndarray | None:
        """Where a day's ``n`` stocks lie on the axis (None: it cannot reuse the run's problem)."""
        if self.where is None or len(self.where) != n:
            return None
        if self.book is None or not self.book.fits(self.size, k, n_style, strategy, n_groups):
            self.book = CompiledBook(self.size, k, n_style, strategy, n_groups, self.seed)
        return self.where

    def spread(self, args: list, where: np.ndarray) -> list:
        """The day's ``[n]`` (and ``[n, k]``) arrays on the axis: 0 off the day's stocks (their
        bounds 0, so they hold nothing), a specific variance of 1 there (any positive value)."""
        out = []
        for i, a in enumerate(args):
            a = np.asarray(a, float)
            full = np.zeros((self.size, *a.shape[1:])) if i != 4 else np.ones(self.size)
            full[where] = a
            out.append(full)
        return out


def _pattern(labels: np.ndarray, n_labels: int) -> np.ndarray:
    """``[n_labels, stocks]`` bool: the labels each stock holds on some day of ``labels``
    ``[days, stocks]`` (-1: none)."""
    out = np.zeros((int(n_labels), labels.shape[1]), bool)
    day, stock = np.nonzero(labels >= 0)
    out[labels[day, stock], stock] = True
    return out


def _sparse_parameter(pattern: np.ndarray):
    """A ``cp.Parameter`` of ``pattern``'s shape holding entries only where it is True (one
    entry at least: cvxpy wants a pattern)."""
    import cvxpy as cp

    rows, cols = np.nonzero(pattern)
    if not len(rows):
        rows, cols = np.array([0]), np.array([0])
    return cp.Parameter(pattern.shape, sparsity=(rows, cols))


def _set_sparse(param, dense: np.ndarray) -> None:
    """Set a sparse parameter from ``dense`` at its pattern's entries (a day's nonzeros lie in
    it for the stocks that may hold weight, :meth:`CompiledBook.sync`)."""
    from scipy import sparse

    rows, cols = param.sparse_idx
    param.value_sparse = sparse.coo_array((dense[rows, cols], (rows, cols)), shape=param.shape)


def bounds(bench: np.ndarray, prev: np.ndarray, active_bound: float, no_buy: np.ndarray | None,
           held: np.ndarray | None, sold: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` ``[n]``: each stock's bounds (module docstring) from the day's rules."""
    b, prev = np.asarray(bench, float), np.asarray(prev, float)
    lo, hi = np.maximum(b - active_bound, 0.0), b + active_bound
    if no_buy is not None:
        nb = np.asarray(no_buy, bool)
        hi = np.where(nb, np.minimum(hi, prev), hi)
    if held is not None:
        fixed = np.asarray(held, bool)
        lo, hi = np.where(fixed, prev, lo), np.where(fixed, prev, hi)
    if sold is not None:
        gone = np.asarray(sold, bool)
        lo, hi = np.where(gone, 0.0, lo), np.where(gone, 0.0, hi)
    return lo, hi
