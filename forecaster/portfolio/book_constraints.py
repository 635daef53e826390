"""The constraints of the enhanced book's problem (:mod:`forecaster.portfolio.enhanced`), each
a small object: ``expr(w)`` its cvxpy constraints in the weights ``w`` ``[n]``,
``violation(w)`` (numpy) by how much weights ``w`` break it (0: kept), ``tol`` the violation
a solution may show and still count as keeping it, ``name`` what a diagnostic calls it.
"""

from __future__ import annotations

import numpy as np

from forecaster.portfolio.book_terms import ActiveRisk, StylePenalty

WEIGHT_TOL = 1e-5  # weights are fractions of the book: a thousandth of a basis point


class FullyInvested:
    """``sum w = 1``."""

    name, tol = "budget", WEIGHT_TOL

    def expr(self, w):
        import cvxpy as cp

        return [cp.sum(w) == 1]

    def violation(self, w: np.ndarray) -> float:
        return abs(float(np.sum(w)) - 1.0)


class LongOnly:
    """``w >= 0``."""

    name, tol = "long_only", WEIGHT_TOL

    def expr(self, w):
        return [w >= 0]

    def violation(self, w: np.ndarray) -> float:
        return float(max(0.0, -np.min(w))) if len(w) else 0.0


class ActiveBound:
    """``|w_i - b_i| <= bound`` for every stock of ``mask`` ``[n]`` (None: all)."""

    name, tol = "active_bound", WEIGHT_TOL

    def __init__(self, bench: np.ndarray, bound: float, mask: np.ndarray | None = None):
        self.bench, self.bound = np.asarray(bench, float), float(bound)
        self.mask = np.ones(len(self.bench), bool) if mask is None else np.asarray(mask, bool)

    def expr(self, w):
        import cvxpy as cp

        if self.mask.all():
            return [cp.abs(w - self.bench) <= self.bound]
        return [cp.abs(w[self.mask] - self.bench[self.mask]) <= self.bound] if self.mask.any() else []

    def violation(self, w: np.ndarray) -> float:
        if not self.mask.any():
            return 0.0
        gap = np.abs(np.asarray(w)[self.mask] - self.bench[self.mask])
        return float(max(0.0, np.max(gap) - self.bound))


class StyleBound:
    """``|S' (w - b)| <= bound`` for each style column of ``styles`` ``[n, s]`` (in
    cross-sectional sd). :meth:`soften` gives the penalty that stands for it on the ladder's
    third rung."""

    name, tol = "style_bound", 1e-4

    def __init__(self, styles: np.ndarray, bench: np.ndarray, bound: float):
        self.styles, self.bench = np.asarray(styles, float), np.asarray(bench, float)
        self.bound = float(bound)

    def expr(self, w):
        import cvxpy as cp

        return [cp.abs(self.styles.T @ (w - self.bench)) <= self.bound]

    def violation(self, w: np.ndarray) -> float:
        x = self.styles.T @ (np.asarray(w, float) - self.bench)
        return float(max(0.0, np.max(np.abs(x)) - self.bound)) if len(x) else 0.0

    def soften(self) -> StylePenalty:
        return StylePenalty(self.styles, self.bench, self.bound)


class IndustryBound(StyleBound):
    """``|G' (w - b)| <= bound`` for each industry group, ``groups`` ``[n, g]`` 0/1 (a stock in
    one group): the book's weight in each group within ``bound`` of the benchmark's. Softened
    on the ladder's third rung as the style bound is."""

    name, tol = "industry_bound", 1e-6


class TurnoverLimit:
    """``|w - prev|_1 / 2 <= limit`` (one-sided turnover of one rebalance)."""

    name, tol = "turnover", WEIGHT_TOL

    def __init__(self, prev: np.ndarray, limit: float):
        self.prev, self.limit = np.asarray(prev, float), float(limit)

    def expr(self, w):
        import cvxpy as cp

        return [cp.norm(w - self.prev, 1) <= 2 * self.limit]

    def violation(self, w: np.ndarray) -> float:
        return max(0.0, float(np.abs(np.asarray(w) - self.prev).sum()) / 2 - self.limit)


class TrackingBudget:
    """``sqrt(a' V a) <= budget`` (the daily active sd; ``risk`` the
    :class:`~forecaster.portfolio.book_terms.ActiveRisk` that holds ``V``)."""

    name = "tracking_budget"

    def __init__(self, risk: ActiveRisk, budget: float):
        self.risk, self.budget = risk, float(budget)
        self.tol = 1e-3 * self.budget  # a thousandth of the budget

    def expr(self, w):
        import cvxpy as cp

        return [cp.norm(self.risk.stack(w), 2) <= self.budget]

    def violation(self, w: np.ndarray) -> float:
        return max(0.0, float(np.sqrt(max(self.risk.daily_variance(w), 0.0))) - self.budget)


class NoBuy:
    """``w_i <= prev_i`` where ``mask`` ``[n]`` (may not be bought: the ST rule)."""

    name, tol = "no_buy", WEIGHT_TOL

    def __init__(self, mask: np.ndarray, prev: np.ndarray):
        self.mask, self.prev = np.asarray(mask, bool), np.asarray(prev, float)

    def expr(self, w):
        return [w[self.mask] <= self.prev[self.mask]] if self.mask.any() else []

    def violation(self, w: np.ndarray) -> float:
        if not self.mask.any():
            return 0.0
        return float(max(0.0, np.max(np.asarray(w)[self.mask] - self.prev[self.mask])))


class Sold:
    """``w_i = 0`` where ``mask`` ``[n]``: a holding that leaves the index with this rebalance
    (a review day) is sold inside the same decision, its proceeds spent by the same solve."""

    name, tol = "sold", WEIGHT_TOL

    def __init__(self, mask: np.ndarray):
        self.mask = np.asarray(mask, bool)

    def expr(self, w):
        return [w[self.mask] == 0] if self.mask.any() else []

    def violation(self, w: np.ndarray) -> float:
        return float(np.max(np.abs(np.asarray(w)[self.mask]))) if self.mask.any() else 0.0


class Held:
    """``w_i = prev_i`` where ``mask`` ``[n]``: names that cannot trade today (suspended,
    locked at a price limit) stay at their current weight, in the budget, the turnover and the
    risk."""

    name, tol = "held", WEIGHT_TOL

    def __init__(self, mask: np.ndarray, prev: np.ndarray):
        self.mask, self.prev = np.asarray(mask, bool), np.asarray(prev, float)

    def expr(self, w):
        return [w[self.mask] == self.prev[self.mask]] if self.mask.any() else []

    def violation(self, w: np.ndarray) -> float:
        if not self.mask.any():
            return 0.0
        return float(np.max(np.abs(np.asarray(w)[self.mask] - self.prev[self.mask])))
