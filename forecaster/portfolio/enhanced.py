"""The enhanced-index book (指数增强): the index's own weights, leaned toward the forecast
under a tracking-error budget.

At each rebalance row ``t`` (a forecast known after day ``t-1``'s close, traded at day ``t``'s
execution) one convex problem is solved over the day's investable members (a bar at ``t-1``, a
risk estimate, not known to delist):

    maximise    alpha' w  -  risk_aversion * a' V a  -  cost * |w - w_prev|_1
    subject to  sum w = 1,  w >= 0                          (long-only, fully invested)
                |a_i| <= active_bound                        (a = w - b, per stock)
                |X_style' a| <= style_bound                  (active style exposure, in sd)
                |w - w_prev|_1 / 2 <= max_turnover           (one-sided, per rebalance)
                a' V a <= tracking_error^2 / 252             (the daily active variance budget)
                w_i <= w_prev_i where stock i may not be bought (ST on the signal day)

``b``: the benchmark weights (:mod:`forecaster.portfolio.index_weights`) renormalised over the
investable members; ``V = X F X' + diag(D)``: the point-in-time risk model's snapshot at
``t-1``'s close (:mod:`forecaster.risk`); ``w_prev``: the previous target drifted by the
prices since. ``alpha_i = ic * sigma_i * z_i`` (Grinold's rule: ``z`` the forecast's
cross-sectional z-score winsorised at 3, ``sigma`` the stock's specific daily sd, ``ic`` a
stated information coefficient). The solver is Clarabel through cvxpy. A day it cannot solve
is solved again without the turnover limit; a day that still fails holds the benchmark ``b``
(counted, and named in the report).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

TRADING_DAYS = 252
_RISK = ("predicted_te", "factor_te", "style_te", "specific_te")
_SOLVER = "CLARABEL"


@dataclass
class EnhancedBook:
    """What :func:`enhanced_weights` decided.

    Attributes:
        weights: ``[date x code]`` target weights by forecast row (held between rebalances).
        diagnostics: one row per rebalance: ``date``, ``status`` (``optimal``,
            ``no_turnover_limit``: solved without the turnover limit, ``benchmark``: the
            fallback), ``predicted_te`` (annual), ``factor_te``, ``style_te``, ``specific_te``
            (annual; the active risk split: all factors, the style factors alone, specific),
            ``turnover`` (one-sided), ``n_stocks``, ``missing_weight`` (benchmark weight of
            members without a risk estimate or a bar, left out).
        active: ``[date x code]`` active weights ``w - b`` on rebalance rows.
        predicted_sd: ``[date]`` the book's predicted daily active sd in force on each row.
    """

    weights: pd.DataFrame
    diagnostics: pd.DataFrame
    active: pd.DataFrame
    predicted_sd: pd.Series
    notes: list[str] = field(default_factory=list)

    @property
    def fallbacks(self) -> int:
        return int((self.diagnostics["status"] == "benchmark").sum()) if len(self.diagnostics) else 0


def alpha_of(scores: np.ndarray, specific_sd: np.ndarray, ic: float) -> np.ndarray:
    """``[n]`` expected daily active returns from scores ``[n]`` (NaN: no view, alpha 0):
    ``ic * specific_sd * z`` with ``z`` the scores' z-score winsorised at +-3."""
    ok = np.isfinite(scores)
    z = np.zeros_like(scores, dtype=float)
    if ok.sum() > 1 and np.nanstd(scores[ok]) > 0:
        z[ok] = (scores[ok] - scores[ok].mean()) / scores[ok].std()
        z = np.clip(z, -3.0, 3.0)
    return ic * specific_sd * z


def solve_book(alpha: np.ndarray, bench: np.ndarray, prev: np.ndarray, exposures: np.ndarray,
               factor_cov: np.ndarray, specific_var: np.ndarray, n_style: int, strategy,
               no_buy: np.ndarray | None = None, cost: float = 0.0,
               turnover_limit: bool = True) -> np.ndarray | None:
    """The optimal weights ``[n]`` of one rebalance (module docstring), or None when the
    solver finds none. ``exposures`` ``[n, k]`` (the first ``n_style`` columns styles),
    ``factor_cov`` ``[k, k]``, ``specific_var`` ``[n]`` (daily); ``prev`` ``[n]`` the weights
    held now; ``cost``: cost per unit traded (one way)."""
    import cvxpy as cp

    n = len(alpha)
    w = cp.Variable(n)
    a = w - bench
    chol = np.linalg.cholesky(factor_cov + 1e-12 * np.eye(len(factor_cov)))
    y = chol.T @ (exposures.T @ a)
    risk = cp.hstack([y, cp.multiply(np.sqrt(specific_var), a)])
    budget = strategy.tracking_error / math.sqrt(TRADING_DAYS)
    constraints = [cp.sum(w) == 1, w >= 0, cp.abs(a) <= strategy.active_bound,
                   cp.norm(risk, 2) <= budget]
    if n_style:
        constraints.append(cp.abs(exposures[:, :n_style].T @ a) <= strategy.style_bound)
    if turnover_limit and prev.sum() > 0:
        constraints.append(cp.norm(w - prev, 1) <= 2 * strategy.max_turnover)
    if no_buy is not None and no_buy.any():
        constraints.append(w[no_buy] <= prev[no_buy])
    objective = alpha @ w - strategy.risk_aversion * cp.sum_squares(risk) - cost * cp.norm(w - prev, 1)
    problem = cp.Problem(cp.Maximize(objective), constraints)
    try:
        problem.solve(solver=_SOLVER)
    except cp.error.SolverError as exc:
        log.debug("solver failed: %s", exc)
        return None
    if problem.status not in ("optimal", "optimal_inaccurate") or w.value is None:
        return None
    out = np.asarray(w.value, dtype=float)
    out[out < 1e-6] = 0.0  # an interior-point solver's dust is not a position
    return out / out.sum() if out.sum() > 0 else None


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


def problem_inputs(scores: np.ndarray, bench: np.ndarray, snap, day: np.ndarray, strategy):
    """What one rebalance's problem is made of, over ``[stocks]`` arrays: ``idx`` the stocks in
    it (``day``'s investable members the risk model covers), their alpha over the holding
    period, benchmark weights renormalised over them, exposures ``[n, k]``, specific variances,
    the number of style columns, and the share of ``day``'s benchmark weight left out."""
    n_stocks = len(scores)
    n_style = sum(not name.startswith("stat") for name in snap.factor_names)
    cover = np.zeros(n_stocks, dtype=bool)
    cover[snap.stocks] = True
    idx = np.flatnonzero(day & cover)
    pos = np.full(n_stocks, -1)
    pos[snap.stocks] = np.arange(len(snap.stocks))
    x, dvar = np.nan_to_num(snap.exposures[pos[idx]]), snap.specific_var[pos[idx]]
    missing = float(bench[day & ~cover].sum()) / max(float(bench[day].sum()), 1e-12)
    b = bench[idx] / bench[idx].sum()
    # over the holding period: the rebalance's days of daily alpha against one trade's cost
    alpha = alpha_of(scores[idx], np.sqrt(dvar), strategy.alpha_ic) * strategy.rebalance_every
    return idx, alpha, b, x, dvar, n_style, missing


def rebalance(scores: np.ndarray, held: np.ndarray, bench: np.ndarray, snap, investable: np.ndarray,
              no_buy: np.ndarray | None, strategy, cost: float) -> tuple[np.ndarray, dict, np.ndarray]:
    """One rebalance (module docstring) over ``[stocks]`` arrays: the scores, the weights held
    now, the benchmark weights, the investable members and the ST rule's mask; ``snap``: the
    risk model's snapshot at the signal day's close, its ``stocks`` indexing these arrays (None:
    not enough history, the benchmark is held). Returns the new weights ``[stocks]``, the
    diagnostics row (:class:`EnhancedBook`) and the active weights (NaN outside the book)."""
    n_stocks = len(scores)
    day = investable & (bench > 0)
    active = np.full(n_stocks, np.nan)
    if snap is None or not day.any():
        new = np.where(day, bench, 0.0)
        new = new / new.sum() if new.sum() > 0 else new
        return new, {"status": "benchmark", **dict.fromkeys(_RISK, math.nan), "turnover": math.nan,
                     "n_stocks": int(day.sum()), "missing_weight": math.nan}, active
    idx, alpha, b, x, dvar, n_style, missing = problem_inputs(scores, bench, snap, day, strategy)
    prev = held[idx]
    nb = None if no_buy is None else no_buy[idx]
    status = "optimal"
    w = solve_book(alpha, b, prev, x, snap.factor_cov, dvar, n_style, strategy, nb, cost)
    if w is None:
        status = "no_turnover_limit"
        w = solve_book(alpha, b, prev, x, snap.factor_cov, dvar, n_style, strategy, nb, cost,
                       turnover_limit=False)
    if w is None:
        status, w = "benchmark", b.copy()
    total_te, factor_te, style_te, specific_te = _risk_split(w - b, x, snap.factor_cov, dvar, n_style)
    new = np.zeros(n_stocks)
    new[idx] = w
    active[idx] = w - b
    return new, {"status": status, "predicted_te": total_te, "factor_te": factor_te, "style_te": style_te,
                 "specific_te": specific_te, "turnover": float(np.abs(new - held).sum() / 2),
                 "n_stocks": len(idx), "missing_weight": missing}, active


def enhanced_weights(forecast: pd.DataFrame, rows_of: np.ndarray, bench: np.ndarray, risk, growth: np.ndarray,
                     strategy, investable: np.ndarray, no_buy: np.ndarray | None = None,
                     cost: float = 0.0) -> EnhancedBook:
    """The enhanced book of ``forecast`` ``[rows x stocks]`` (module docstring).

    Args:
        forecast: scores by forecast row, the panel's stocks as columns.
        rows_of: ``[rows]`` each forecast row's index in the panel's calendar.
        bench: ``[days, stocks]`` benchmark weights (row ``t`` held over day ``t``).
        risk: a fitted :class:`forecaster.risk.RiskModel` of the panel (``snapshot(t)``).
        growth: ``[days, stocks]`` price return factors (drifting the held weights).
        strategy: the :class:`~forecaster.portfolio.strategy.StrategyConfig` (rule ``enhanced``).
        investable: ``[rows, stocks]`` bool, the members a book may hold on each forecast row.
        no_buy: ``[rows, stocks]`` bool, not to be bought on that row (held ones may stay).
        cost: cost per unit traded one way (:func:`one_way_cost`).
    """
    from forecaster.portfolio.strategy import rebalance_rows

    f = forecast.to_numpy(dtype=float)
    n_rows, n_stocks = f.shape
    decide = np.zeros(n_rows, dtype=bool)
    decide[np.unique(rebalance_rows(n_rows, strategy.rebalance_every))] = True
    out = np.zeros_like(f)
    active_rows = np.full_like(f, np.nan)
    sd = np.full(n_rows, np.nan)
    held = np.zeros(n_stocks)
    diag, missing_risk = [], 0
    for i in range(n_rows):
        t = int(rows_of[i])
        if i:  # the previous row's book drifted by the prices of the day it was held
            held = held * growth[int(rows_of[i - 1])]
            held = held / held.sum() if held.sum() > 0 else held
        if not decide[i]:
            out[i], sd[i] = held, sd[i - 1] if i else np.nan
            continue
        snap = risk.snapshot(t - 1) if t >= 1 else None
        missing_risk += snap is None
        held, row, active = rebalance(f[i], held, bench[t], snap, investable[i],
                                      None if no_buy is None else no_buy[i], strategy, cost)
        diag.append({"date": forecast.index[i], **row})
        active_rows[i] = active
        out[i], sd[i] = held, row["predicted_te"] / math.sqrt(TRADING_DAYS)
    notes = []
    fallbacks = [d for d in diag if d["status"] == "benchmark"]
    if fallbacks:
        notes.append(f"the optimiser held the benchmark on {len(fallbacks)} of {len(diag)} rebalance(s) "
                     f"({missing_risk} before the risk model had enough history, "
                     f"{len(fallbacks) - missing_risk} the solver could not solve; first: "
                     f"{pd.Timestamp(fallbacks[0]['date']).date()})")
    missing = [d["missing_weight"] for d in diag if d["missing_weight"] > 0]
    if missing:  # members without a risk estimate (too little history) are left out of the book
        notes.append(f"on {len(missing)} of {len(diag)} rebalance(s) members without a risk estimate were "
                     f"left out of the book: {np.mean(missing):.2%} of the benchmark weight on average, "
                     f"{max(missing):.2%} at most")
    relaxed = sum(d["status"] == "no_turnover_limit" for d in diag)
    if relaxed:
        notes.append(f"{relaxed} rebalance(s) solved only without the turnover limit")
    index, columns = forecast.index, forecast.columns
    columns_of_diag = ["date", "status", *_RISK, "turnover", "n_stocks", "missing_weight"]
    diagnostics = pd.DataFrame(diag, columns=columns_of_diag)
    return EnhancedBook(pd.DataFrame(out, index=index, columns=columns), diagnostics,
                        pd.DataFrame(active_rows, index=index, columns=columns), pd.Series(sd, index=index),
                        notes)


def one_way_cost(costs) -> float:
    """Cost per unit of value traded one way: commission, transfer fee, slippage and half the
    current stamp duty (paid on sells)."""
    return float(costs.commission_rate + costs.transfer_fee_rate + costs.slippage_bps / 1e4
                 + costs.stamp_duty_after / 2)


def risk_model_of(data):
    """The point-in-time risk model of the Panel ``data`` (fitted once per panel): style
    exposures from its prices, volumes and (carried) float market values over the day's
    members, the daily regressions and their residuals (:mod:`forecaster.risk`)."""
    from forecaster.portfolio.index_weights import carried_float_mv, growth
    from forecaster.risk import RiskModel, style_exposures

    def fit():
        returns = np.where(data.listed, growth(data) - 1.0, np.nan)
        mv = carried_float_mv(data)
        universe = data.listed if data.members is None else (data.members & data.listed)
        x = style_exposures(returns, data.fields["close"], data.fields.get("volume", np.ones_like(returns)),
                            mv, universe)
        return RiskModel().fit(returns, x, universe, data.dates, weights=mv)

    return data.derived(("risk_model",), fit)


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


def enhanced_for_backtest(data, forecast: pd.DataFrame, config, investable: np.ndarray,
                          no_buy: np.ndarray | None) -> tuple[EnhancedBook, object]:
    """The enhanced book of ``forecast`` (columns: codes of the Panel ``data``) under
    ``config`` (:class:`~forecaster.portfolio.backtest.BacktestConfig`), with ``investable``
    and ``no_buy`` ``[rows, codes]`` as the backtest decides them; also the benchmark weights
    (:class:`~forecaster.portfolio.index_weights.BenchmarkWeights`) on the panel's stocks."""
    from forecaster.portfolio.index_weights import benchmark_weights, growth

    bench = benchmark_weights(data, config.benchmark_weights)
    index = {str(c): j for j, c in enumerate(data.codes)}
    cols = np.array([index[str(c)] for c in forecast.columns])
    column_of = np.full(len(data.codes), -1)
    column_of[cols] = np.arange(len(cols))
    rows_of = data.dates.get_indexer(forecast.index)
    listed_before = np.zeros((len(rows_of), len(cols)), dtype=bool)
    ok = rows_of >= 1
    listed_before[ok] = data.listed[rows_of[ok] - 1][:, cols]
    investable = investable & listed_before
    cost = one_way_cost(config.costs)
    risk = _Columns(risk_model_of(data), column_of)
    book = enhanced_weights(forecast, rows_of, bench.weights[:, cols], risk, growth(data)[:, cols],
                            config.strategy, investable, no_buy, cost)
    book.notes[0:0] = bench.notes
    return book, bench


def enhanced_target(panel, scores: np.ndarray, held: np.ndarray, config, investable: np.ndarray,
                    no_buy: np.ndarray | None) -> tuple[np.ndarray, dict]:
    """Tomorrow's enhanced book ``[stocks]`` of the Panel ``panel`` (its stocks' order) from
    today's ``scores`` and the weights ``held`` now: the benchmark weights for the next day,
    the risk model at the last close, one :func:`rebalance`; also its diagnostics row
    (``predicted_te`` annual)."""
    from forecaster.portfolio.index_weights import next_weights

    bench = next_weights(panel, config.benchmark_weights)
    snap = risk_model_of(panel).snapshot(panel.n_days - 1)
    new, row, _ = rebalance(np.asarray(scores, float), held, bench, snap, investable, no_buy, config.strategy,
                            one_way_cost(config.costs))
    return new, row
