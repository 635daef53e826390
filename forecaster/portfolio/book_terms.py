"""The objective terms of the enhanced book's problem (:mod:`forecaster.portfolio.enhanced`),
each a small object, as cvxportfolio's are: ``expr(w)`` its cvxpy expression in the weights
``w`` ``[n]`` (a cvxpy variable), ``value(w)`` the same in numpy (for checks and tests), and
``sign``: ``+1`` for a reward (maximised), ``-1`` for a penalty.
:func:`forecaster.portfolio.book_problem.compose` maximises ``sum(sign * expr)``.

Alpha and risk are over the same horizon (the holding period, ``rebalance_every`` days):
alpha is the daily alpha times the horizon, the risk the daily active variance times it, so
``risk_aversion`` means the same at every rebalance frequency; the trading cost is paid once
per rebalance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _factor_root(factor_cov: np.ndarray) -> np.ndarray:
    """``L`` ``[k, k]`` with ``L L' = F``: the Cholesky factor, or (a singular ``F``) the
    eigenvalues' square roots, negative rounding clipped to 0."""
    k = len(factor_cov)
    try:
        return np.linalg.cholesky(factor_cov + 1e-12 * np.eye(k))
    except np.linalg.LinAlgError:
        vals, vecs = np.linalg.eigh((factor_cov + factor_cov.T) / 2)
        return vecs * np.sqrt(np.clip(vals, 0.0, None))


class Alpha:
    """Expected active return over the horizon: ``alpha' w`` (``alpha`` ``[n]``)."""

    sign = 1

    def __init__(self, alpha: np.ndarray):
        self.alpha = np.asarray(alpha, dtype=float)

    def expr(self, w):
        return self.alpha @ w

    def value(self, w: np.ndarray) -> float:
        return float(self.alpha @ w)


class ActiveRisk:
    """Active variance over the horizon, weighted: ``aversion * horizon * a' V a`` with
    ``a = w - bench``, ``V = X F X' + diag(D)`` (``exposures`` ``[n, k]``, ``factor_cov``
    ``[k, k]``, ``specific_var`` ``[n]``, daily). ``stack(w)``: the vector ``[L' X' a,
    sqrt(D) a]`` whose squared norm is the daily ``a' V a`` (the tracking budget reads it)."""

    sign = -1

    def __init__(self, bench: np.ndarray, exposures: np.ndarray, factor_cov: np.ndarray,
                 specific_var: np.ndarray, aversion: float, horizon: float = 1.0):
        self.bench, self.exposures = np.asarray(bench, float), np.asarray(exposures, float)
        self.factor_cov, self.specific_var = np.asarray(factor_cov, float), np.asarray(specific_var, float)
        self.aversion, self.horizon = float(aversion), float(horizon)
        self._root = _factor_root(self.factor_cov)

    def stack(self, w):
        import cvxpy as cp

        a = w - self.bench
        return cp.hstack([self._root.T @ (self.exposures.T @ a), cp.multiply(np.sqrt(self.specific_var), a)])

    def daily_variance(self, w: np.ndarray) -> float:
        """The daily active variance ``a' V a`` of weights ``w`` ``[n]``."""
        x = self.exposures.T @ (np.asarray(w, float) - self.bench)
        a = np.asarray(w, float) - self.bench
        return float(x @ self.factor_cov @ x + (a * a) @ self.specific_var)

    def expr(self, w):
        import cvxpy as cp

        return self.aversion * self.horizon * cp.sum_squares(self.stack(w))

    def value(self, w: np.ndarray) -> float:
        return self.aversion * self.horizon * self.daily_variance(w)


class TradingCost:
    """The cost of moving from ``prev`` to ``w``, as fractions of the book: ``buy' (w -
    prev)+ + sell' (prev - w)+`` with per-stock rates ``buy``, ``sell`` ``[n]`` (or scalars;
    :func:`trade_rates`: the backtest's cost model on the day)."""

    sign = -1

    def __init__(self, prev: np.ndarray, buy, sell):
        self.prev = np.asarray(prev, float)
        self.buy = np.broadcast_to(np.asarray(buy, float), self.prev.shape)
        self.sell = np.broadcast_to(np.asarray(sell, float), self.prev.shape)

    def expr(self, w):
        import cvxpy as cp

        # (d)+ = (|d| + d) / 2 and (-d)+ = (|d| - d) / 2: one absolute value, not two parts
        d = w - self.prev
        return (self.buy + self.sell) / 2 @ cp.abs(d) + (self.buy - self.sell) / 2 @ d

    def value(self, w: np.ndarray) -> float:
        d = np.asarray(w, float) - self.prev
        return float(self.buy @ np.clip(d, 0, None) + self.sell @ np.clip(-d, 0, None))


class BenchmarkDistance:
    """How far the book is from the benchmark, each stock's gap relative to its weight:
    ``sum((w - b)**2 / max(b, floor))``. Without a risk model the book tracks the benchmark by
    it: a weight the rules forbid is spread over the others in proportion to theirs."""

    sign = -1

    def __init__(self, bench: np.ndarray, floor: float = 1e-4):
        self.bench = np.asarray(bench, float)
        self.scale = 1.0 / np.sqrt(np.maximum(self.bench, floor))

    def expr(self, w):
        import cvxpy as cp

        return cp.sum_squares(cp.multiply(self.scale, w - self.bench))

    def value(self, w: np.ndarray) -> float:
        return float(((self.scale * (np.asarray(w, float) - self.bench)) ** 2).sum())


class StylePenalty:
    """The style bound made soft (the ladder's third rung): ``weight * sum((|S' a| - bound)+)``
    over the style exposures ``S`` ``[n, s]``, the active exposure past the bound penalised."""

    sign = -1

    def __init__(self, styles: np.ndarray, bench: np.ndarray, bound: float, weight: float = 10.0):
        self.styles, self.bench = np.asarray(styles, float), np.asarray(bench, float)
        self.bound, self.weight = float(bound), float(weight)

    def expr(self, w):
        import cvxpy as cp

        return self.weight * cp.sum(cp.pos(cp.abs(self.styles.T @ (w - self.bench)) - self.bound))

    def value(self, w: np.ndarray) -> float:
        excess = np.abs(self.styles.T @ (np.asarray(w, float) - self.bench)) - self.bound
        return self.weight * float(np.clip(excess, 0, None).sum())


def trade_rates(cost, date, prev: np.ndarray, bench: np.ndarray, active_bound: float,
                value: float | None = None) -> tuple[np.ndarray | float, np.ndarray | float]:
    """``(buy, sell)``: cost per unit of the book bought and sold, by stock ``[n]`` (or
    scalars). ``cost`` a number: that rate either way. ``cost`` a
    :class:`~forecaster.portfolio.rules.CostModel` (the backtest's): commission, transfer fee
    and slippage both ways, the stamp duty in force on ``date`` on each side; with the book's
    ``value`` (CNY) the commission's minimum per trade too, as the convex envelope of the
    commission over the trades the bounds allow: a stock's largest trade ``T`` (``prev`` to
    the edge of ``bench +- active_bound``) pays at least ``min_commission / (value * T)`` per
    unit, a smaller one is charged as if it paid that rate (the least a convex cost can say of a
    fixed minimum)."""
    if not hasattr(cost, "stamp_duty_rate"):
        return float(cost), float(cost)
    when = pd.Timestamp.today() if date is None or pd.isna(date) else date
    commission = np.full(len(prev), float(cost.commission_rate))
    if value is not None and value > 0 and cost.min_commission > 0:
        largest = np.maximum(bench + active_bound - prev, prev - np.maximum(bench - active_bound, 0.0))
        largest = np.clip(largest, 1e-12, 1.0)
        commission = np.maximum(commission, cost.min_commission / (value * largest))
    both = commission + cost.transfer_fee_rate + cost.slippage_bps / 1e4
    buy_duty, sell_duty = cost.stamp_duty_rates(when)
    return both + buy_duty, both + sell_duty
