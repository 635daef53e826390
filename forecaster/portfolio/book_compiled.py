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

Industry factors and groups are 0/1 columns: as parameters they would be dense rows of the
solver's matrix (a cvxpy parameter keeps every entry), which made each solve many times slower
with 60 groups. So the exposures' 0/1 columns (after the market and styles) and the industry
groups are constant sparse matrices ``H`` and ``G`` of the compiled problem, ``L' [Xd'; H] w``
the factor part (``Xd`` the other columns, ``L'`` ``[k, k]`` parameters). A stock whose bounds
hold it at 0 may read any class, so a day reuses the problem when its stocks that may hold
weight read the classes compiled; otherwise the problem is compiled again (a class changed:
rarely, with a snapshot of classes).
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

    def __init__(self, n: int, k: int, n_style: int, strategy, n_groups: int = 0):
        self.n, self.k, self.n_style, self.strategy = int(n), int(k), int(n_style), strategy
        self.n_groups = int(n_groups)
        self._rungs: dict[tuple[bool, bool], tuple] = {}
        # the 0/1 exposure columns (sparse H) and the groups' matrix G as compiled
        self.classes = np.zeros(0, dtype=int)
        self.h = np.zeros((0, self.n))
        self.g = np.zeros((self.n_groups, self.n))
        self.compiles = 0

    def sync(self, exposures: np.ndarray, groups: np.ndarray | None, live: np.ndarray) -> None:
        """Make the compiled ``H`` and ``G`` those of a day (``exposures`` ``[n, k]``, ``groups``
        ``[n, n_groups]``) on its ``live`` stocks ``[n]`` (those that may hold weight), keeping
        the others' rows; drop the compiled rungs when they change."""
        x = np.asarray(exposures, float)
        tail = x[:, self.n_style:]
        zero_one = ((tail == 0) | (tail == 1)).all(axis=0) & (tail == 1).any(axis=0)
        classes = self.n_style + np.flatnonzero(zero_one)
        h = self.h if np.array_equal(classes, self.classes) else np.zeros((len(classes), self.n))
        g = self.g
        new_h = h.copy()
        new_h[:, live] = x[live][:, classes].T
        new_g = g.copy()
        if self.n_groups:
            new_g[:, live] = np.asarray(groups, float)[live].T
        if (not np.array_equal(classes, self.classes) or not np.array_equal(new_h, self.h)
                or not np.array_equal(new_g, self.g)):
            self.classes, self.h, self.g, self._rungs = classes, new_h, new_g, {}

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
        from scipy import sparse

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
            given = cp.hstack([given, sparse.csr_matrix(self.h) @ w])
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
            constraints.append(exposure == sparse.csr_matrix(self.g) @ w - p["groups_b"])
            if soft_style:
                objective = objective - STYLE_PENALTY * cp.sum(cp.pos(cp.abs(exposure) - st.industry_bound))
            else:
                constraints.append(cp.abs(exposure) <= st.industry_bound)
        return cp.Problem(cp.Maximize(objective), constraints), w, p

    def solve(self, alpha, bench, prev, exposures, factor_cov, specific_var, lo, hi, buy, sell,
              turnover: float, turnover_limit: bool = True, soft_style: bool = False,
              groups: np.ndarray | None = None) -> np.ndarray | None:
        """The solver's weights ``[n]`` of one day (not yet cleaned or checked), or None when
        it finds none; arrays over this problem's ``n`` stocks (``exposures`` ``[n, k]``,
        ``groups`` ``[n, n_groups]`` 0/1 industry groups)."""
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
            styles = np.asarray(exposures, float)[:, : self.n_style].T
            values["styles"], values["styles_b"] = styles, styles @ b
        if self.n_groups:
            values["groups_b"] = np.asarray(groups, float).T @ b
        for name, value in values.items():
            p[name].value = np.asarray(value, float)
        try:
            book_problem.timed_solve(problem)
        except cp.error.SolverError:
            return None
        if problem.status not in ("optimal", "optimal_inaccurate") or w.value is None:
            return None
        return np.asarray(w.value, float)


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
