"""The enhanced book's problem in parts (issue 79 item 4, issue 78 item 17): each objective term's
value against numpy, each constraint binding on a case built to make it bind, an infeasible day
held as it drifted, cost lowering turnover, a solution taken only once its constraints hold,
costs by date with the minimum commission, alpha and risk over one horizon, held names in the
problem, and a day without an investable member with a benchmark weight held, named."""

from __future__ import annotations

import math

import cvxpy as cp
import numpy as np
import pandas as pd
import pytest

from forecaster.portfolio import book_compiled, book_problem, enhanced
from forecaster.portfolio.book_constraints import (
    ActiveBound,
    FullyInvested,
    Held,
    LongOnly,
    NoBuy,
    Sold,
    StyleBound,
    TrackingBudget,
    TurnoverLimit,
)
from forecaster.portfolio.book_terms import (
    ActiveRisk,
    Alpha,
    BenchmarkDistance,
    StylePenalty,
    TradingCost,
    trade_rates,
)
from forecaster.portfolio.rules import CostModel
from forecaster.portfolio.strategy import StrategyConfig
from forecaster.risk import RiskSnapshot

N = 30
NAMES = ("market", "size", "beta", "stat_1")


def _strategy(**kw):
    rules = dict(rule="enhanced", tracking_error=0.03, active_bound=0.05, style_bound=0.5, max_turnover=0.3,
                 risk_aversion=10.0, alpha_ic=0.05, rebalance_every=1, trade_aversion=1.0)  # the cost itself
    return StrategyConfig(**{**rules, **kw})


def _case(seed=0):
    """A benchmark over ``N`` stocks, exposures (market, two styles, one statistical), a factor
    covariance, specific variances and an alpha of a plausible size."""
    rng = np.random.default_rng(seed)
    bench = rng.uniform(0.5, 1.5, N)
    bench /= bench.sum()
    x = np.column_stack([np.ones(N), rng.standard_normal((N, 3))])
    corr = np.eye(4)
    corr[1, 2] = corr[2, 1] = 0.3
    f = corr * np.outer([0.012, 0.005, 0.004, 0.004], [0.012, 0.005, 0.004, 0.004])
    d = rng.uniform(0.01, 0.03, N) ** 2
    alpha = rng.normal(0, 0.002, N)
    return bench, x, f, d, alpha


def _solve(alpha, bench, prev, x, f, d, strategy, **kw):
    return enhanced.solve_book(alpha, bench, prev, x, f, d, 3, strategy, **kw)


def _te(w, bench, x, f, d):
    a = w - bench
    return math.sqrt((a @ (x @ f @ x.T + np.diag(d)) @ a) * 252)


def _snap(x, f, d, stocks=None, date="2021-03-30"):
    stocks = np.arange(len(d)) if stocks is None else np.asarray(stocks, dtype=int)
    return RiskSnapshot(date=pd.Timestamp(date), stocks=stocks, exposures=x[stocks], factor_cov=f,
                        specific_var=d[stocks], factor_names=NAMES)


def _value_of(expr, w0):
    w = cp.Variable(len(w0))
    w.value = w0
    return float(expr(w).value)


def test_each_terms_value_is_its_numpy_formula():
    bench, x, f, d, alpha = _case()
    rng = np.random.default_rng(1)
    w0 = rng.dirichlet(np.ones(N))
    prev = rng.dirichlet(np.ones(N))
    a = w0 - bench
    v = x @ f @ x.T + np.diag(d)
    buy, sell = rng.uniform(0, 0.002, N), rng.uniform(0, 0.003, N)
    styles = x[:, 1:3]
    expected = {
        "alpha": (Alpha(alpha), alpha @ w0),
        "risk": (ActiveRisk(bench, x, f, d, aversion=7.0, horizon=5), 7.0 * 5 * a @ v @ a),
        "cost": (TradingCost(prev, buy, sell),
                 buy @ np.maximum(w0 - prev, 0) + sell @ np.maximum(prev - w0, 0)),
        "style": (StylePenalty(styles, bench, 0.05, weight=3.0),
                  3.0 * np.maximum(np.abs(styles.T @ a) - 0.05, 0).sum()),
    }
    for name, (term, want) in expected.items():
        assert want != 0, name
        assert term.value(w0) == pytest.approx(want, rel=1e-9), name
        assert _value_of(term.expr, w0) == pytest.approx(want, rel=1e-6), name
    assert [t.sign for t, _ in expected.values()] == [1, -1, -1, -1]
    risk = expected["risk"][0]
    assert _value_of(lambda w: cp.sum_squares(risk.stack(w)), w0) == pytest.approx(a @ v @ a, rel=1e-6)


def test_each_constraints_violation_agrees_with_cvxpy():
    bench, x, f, d, _ = _case()
    prev = bench.copy()
    mask = np.zeros(N, bool)
    mask[:3] = True
    inside = bench.copy()
    outside = bench.copy()
    outside[0] += 0.2
    outside[1] -= bench[1] + 0.01  # below 0
    outside = outside / outside.sum()
    risk = ActiveRisk(bench, x, f, d, 1.0)
    parts = [FullyInvested(), LongOnly(), ActiveBound(bench, 0.05), StyleBound(x[:, 1:3], bench, 0.1),
             TurnoverLimit(prev, 0.05), TrackingBudget(risk, 0.001), NoBuy(mask, prev), Held(mask, prev)]
    for part in parts:
        assert part.violation(inside) == 0.0, part.name
        w = cp.Variable(N)
        w.value = inside
        assert all(c.value() for c in part.expr(w)), part.name
    broken = book_problem.broken(parts, outside)
    assert set(broken) == {p.name for p in parts} - {"budget"}, broken
    assert ActiveBound(bench, 0.05).violation(outside) == pytest.approx(
        np.abs(outside - bench).max() - 0.05)
    assert TurnoverLimit(prev, 0.05).violation(outside) == pytest.approx(
        np.abs(outside - prev).sum() / 2 - 0.05)
    sold = Sold(mask)  # the leavers at 0: kept; at their benchmark weight: broken by the largest
    w = cp.Variable(N)
    w.value = np.where(mask, 0.0, inside)
    assert sold.violation(w.value) == 0.0 and all(c.value() for c in sold.expr(w))
    w.value = inside
    assert sold.violation(inside) == pytest.approx(inside[:3].max())
    assert not all(c.value() for c in sold.expr(w))


@pytest.mark.parametrize("which", ["active_bound", "long_only", "style_bound", "turnover", "tracking_budget",
                                   "no_buy", "held", "sold"])
def test_each_constraint_binds_on_a_case_built_for_it(which):
    bench, x, f, d, alpha = _case()
    prev, kw = np.zeros(N), {}
    s = _strategy(tracking_error=0.5, active_bound=1.0, style_bound=10.0, max_turnover=1.0, risk_aversion=0.0)
    if which == "active_bound":
        s, alpha = _strategy(active_bound=0.01, tracking_error=0.5), alpha * 0 + np.r_[0.05, np.zeros(N - 1)]
    elif which == "long_only":
        s = _strategy(active_bound=0.2, tracking_error=0.5)
        alpha = alpha * 0 + np.r_[-0.05, np.zeros(N - 1)]
    elif which == "style_bound":
        s, alpha = _strategy(style_bound=0.05, active_bound=0.2, tracking_error=0.5), 0.01 * x[:, 1]
    elif which == "turnover":
        s, prev = _strategy(max_turnover=0.02, active_bound=0.2, tracking_error=0.5), bench.copy()
    elif which == "tracking_budget":
        s = _strategy(tracking_error=0.01, active_bound=0.5, style_bound=10.0, risk_aversion=0.0)
    elif which in ("no_buy", "held"):
        s, prev = _strategy(active_bound=0.2, tracking_error=0.5), bench.copy()
        alpha = alpha * 0 + np.r_[0.05 if which == "no_buy" else -0.05, np.zeros(N - 1)]
        mask = np.r_[True, np.zeros(N - 1, bool)]
        kw = {"no_buy": mask} if which == "no_buy" else {"held": mask}
    elif which == "sold":  # a leaver the alpha likes, under a tight turnover limit: sold all the same
        s, prev = _strategy(active_bound=0.2, tracking_error=0.5, max_turnover=0.001), bench.copy()
        alpha = alpha * 0 + np.r_[0.05, np.zeros(N - 1)]
        kw = {"sold": np.r_[True, np.zeros(N - 1, bool)]}
    w = _solve(alpha, bench, prev, x, f, d, s, **kw)
    assert w is not None and w.sum() == pytest.approx(1.0) and (w >= 0).all()
    if which == "active_bound":
        assert w[0] - bench[0] == pytest.approx(0.01, abs=1e-6)
    elif which == "long_only":
        assert w[0] == 0.0
    elif which == "style_bound":
        assert (x[:, 1] @ (w - bench)) == pytest.approx(0.05, abs=1e-5)
    elif which == "turnover":
        assert np.abs(w - prev).sum() / 2 == pytest.approx(0.02, abs=1e-5)
    elif which == "tracking_budget":
        assert _te(w, bench, x, f, d) == pytest.approx(0.01, rel=1e-3)
    elif which == "sold":  # its proceeds spent in the same solve, the limit raised by the forced sale
        assert w[0] == pytest.approx(0.0, abs=1e-7)
        assert np.abs(w - prev).sum() / 2 <= prev[0] + 0.001 + 1e-6
    else:
        assert w[0] == pytest.approx(prev[0], abs=1e-7)


def test_the_composed_problem_solves_as_the_former_single_problem():
    """The former ``solve_book`` (one problem written out, symmetric cost, daily risk) on a normal
    case with ``rebalance_every = 1``: the composed parts find the same book."""
    bench, x, f, d, alpha = _case(3)
    s = _strategy(tracking_error=0.02, active_bound=0.02, style_bound=0.3, max_turnover=0.05)
    prev = 0.8 * bench + 0.2 * np.random.default_rng(4).dirichlet(np.ones(N) * 5)
    cost, nb = 0.0015, np.r_[np.zeros(N - 2, bool), True, True]

    w = cp.Variable(N)
    a = w - bench
    risk = cp.hstack([np.linalg.cholesky(f + 1e-12 * np.eye(4)).T @ (x.T @ a), cp.multiply(np.sqrt(d), a)])
    constraints = [cp.sum(w) == 1, w >= 0, cp.abs(a) <= s.active_bound,
                   cp.norm(risk, 2) <= 0.02 / math.sqrt(252),
                   cp.abs(x[:, :3].T @ a) <= s.style_bound, cp.norm(w - prev, 1) <= 2 * s.max_turnover,
                   w[nb] <= prev[nb]]
    cp.Problem(cp.Maximize(alpha @ w - s.risk_aversion * cp.sum_squares(risk) - cost * cp.norm(w - prev, 1)),
               constraints).solve(solver="CLARABEL")
    former = np.asarray(w.value)
    former[former < 1e-6] = 0
    former /= former.sum()
    new = _solve(alpha, bench, prev, x, f, d, s, no_buy=nb, cost=cost)
    assert np.abs(new - former).max() < 1e-4
    assert np.abs(new - prev).sum() / 2 == pytest.approx(0.05, abs=1e-5)  # a case where the limit binds


def test_alpha_and_risk_are_over_one_horizon():
    """``rebalance_every = 5``: alpha five days' and risk five days', so without costs the book is
    that of one day (the former daily risk term made the 5-day book five times bolder in risk)."""
    bench, x, f, d, alpha = _case(5)
    one = _solve(alpha, bench, np.zeros(N), x, f, d, _strategy(risk_aversion=2000.0, rebalance_every=1))
    five = _solve(alpha * 5, bench, np.zeros(N), x, f, d, _strategy(risk_aversion=2000.0, rebalance_every=5))
    assert _te(one, bench, x, f, d) < 0.029  # the risk term, not the budget, decides
    assert np.abs(one - five).max() < 1e-4


def test_cost_lowers_turnover():
    bench, x, f, d, alpha = _case(6)
    prev = np.random.default_rng(7).dirichlet(np.ones(N) * 5)
    s = _strategy(max_turnover=1.0)
    turnover = [np.abs(_solve(alpha, bench, prev, x, f, d, s, cost=c) - prev).sum() / 2
                for c in (0.0, 0.001, 0.01)]
    assert turnover[0] > turnover[1] > turnover[2], turnover
    # sells pay the stamp duty: a sell-only rate lowers turnover as well
    sells = np.abs(_solve(alpha, bench, prev, x, f, d, s, cost=0.0, sell_cost=0.01) - prev).sum() / 2
    assert sells < turnover[0]


def test_costs_come_from_the_cost_model_by_date():
    costs = CostModel()
    before, after = pd.Timestamp("2023-01-03"), pd.Timestamp("2023-09-01")
    assert enhanced.one_way_cost(costs, before) == pytest.approx(0.00025 + 0.00001 + 0.0005 + 0.0005)
    assert enhanced.one_way_cost(costs, after) == pytest.approx(0.00025 + 0.00001 + 0.0005 + 0.00025)
    bench = np.full(4, 0.25)
    prev = np.array([0.25, 0.25, 0.5, 0.0])
    buy, sell = trade_rates(costs, before, prev, bench, 0.02)
    assert np.allclose(sell - buy, 0.001) and np.allclose(buy, 0.00025 + 0.00001 + 0.0005)
    assert np.allclose(trade_rates(costs, after, prev, bench, 0.02)[1] - buy, 0.0005)
    # the minimum commission on a 100,000 CNY book: the largest trade of stock 0 is 2 % of it
    # (2,000 CNY), whose 5 CNY minimum is 25 bp; stock 2's is 50 % less 23 % (27,000 CNY): the rate
    buy, _ = trade_rates(costs, after, prev, bench, 0.02, value=1e5)
    assert buy[0] == pytest.approx(5 / 2000 + 0.00001 + 0.0005)
    assert buy[2] == pytest.approx(0.00025 + 0.00001 + 0.0005)
    assert trade_rates(0.002, after, prev, bench, 0.02) == (0.002, 0.002)


def test_an_inaccurate_solution_is_taken_only_once_its_constraints_hold(monkeypatch):
    bench, x, f, d, alpha = _case(8)
    s = _strategy()
    answer = {}

    def fake_solve(self, *args, **kwargs):
        self._status = "optimal_inaccurate"
        self.variables()[0].value = answer["w"]

    monkeypatch.setattr(cp.Problem, "solve", fake_solve)
    answer["w"] = bench.copy()  # keeps every constraint
    assert np.allclose(_solve(alpha, bench, np.zeros(N), x, f, d, s), bench)
    far = bench.copy()
    far[0] += 0.2
    answer["w"] = far / far.sum()  # breaks the active bound (and the budget once cleaned, rescaled)
    assert _solve(alpha, bench, np.zeros(N), x, f, d, s) is None


def test_an_infeasible_day_holds_the_drifted_book():
    """A held name that cannot trade sits 25 % over its benchmark weight, far past a 1 % budget:
    no rung solves, the book is held as it is (not the benchmark), counted as a fallback."""
    bench, x, f, d, _ = _case(9)
    held = bench * 0.7
    held[0] += 0.3
    stuck = np.r_[True, np.zeros(N - 1, bool)]
    scores = np.random.default_rng(2).standard_normal(N)
    new, row, _ = enhanced.rebalance(scores, held, bench, _snap(x, f, d), np.ones(N, bool), None,
                                     _strategy(tracking_error=0.01), 0.001, fixed=stuck)
    assert row["status"] == "benchmark" and row["rung"] == "held"
    assert np.allclose(new, held)
    assert row["turnover"] == 0.0


def test_held_names_are_in_the_problem():
    """A suspended holding keeps its weight, inside the budget; a holding that left the index is
    sold by the problem (counted in turnover), never bought; a member without a risk estimate
    stays in, at a conservative specific risk."""
    bench, x, f, d, _ = _case(10)
    investable = np.ones(N, bool)
    investable[1] = False  # left the index: no benchmark weight to track
    bench = np.where(investable, bench, 0.0)
    bench /= bench.sum()
    held = bench.copy() * 0.9
    held[1] = 0.1
    stuck = np.zeros(N, bool)
    stuck[0] = True
    scores = np.random.default_rng(3).standard_normal(N)
    scores[1] = 10.0  # a strong view does not buy a non-member
    snap = _snap(x, f, d, stocks=np.arange(3, N))  # stocks 0-2 without a risk estimate
    new, row, active = enhanced.rebalance(scores, held, bench, snap, investable, None,
                                          _strategy(max_turnover=0.5), 0.001, fixed=stuck)
    assert row["status"] == "optimal"
    assert new[0] == pytest.approx(held[0]) and new.sum() == pytest.approx(1.0)
    assert new[1] <= 0.05 + 1e-6  # sold down to its active bound (5 %) at least
    assert new[2] > 0 and np.isfinite(active[2])  # no risk estimate, still in the book
    assert row["missing_weight"] == pytest.approx(bench[[0, 2]].sum())
    assert row["turnover"] == pytest.approx(np.abs(new - held).sum() / 2)


def test_a_day_without_an_investable_member_with_a_benchmark_weight_holds_the_book():
    """Issue 78 item 17: no exception (it was cvxpy's 'Cannot combine empty list of tensors'),
    the book held, the day named."""
    bench, x, f, d, _ = _case(11)
    held = np.random.default_rng(5).dirichlet(np.ones(N))
    scores = np.zeros(N)
    investable = np.zeros(N, bool)
    investable[:5] = True
    only_others = np.where(investable, 0.0, bench)
    new, row, _ = enhanced.rebalance(scores, held, only_others, _snap(x, f, d), investable, None, _strategy(),
                                     0.001, date="2021-03-31")
    assert np.allclose(new, held) and row["rung"] == "empty" and row["turnover"] == 0.0
    assert "2021-03-31: no investable member with a benchmark weight; the book is held" == row["note"]
    # members with a weight the risk model covers none of: in the problem at a conservative risk
    new, row, _ = enhanced.rebalance(scores, np.zeros(N), bench, _snap(x, f, d, stocks=[]), np.ones(N, bool),
                                     None, _strategy(), 0.001)
    assert row["rung"] == "benchmark" and np.allclose(new, bench)
    covered_none = _snap(x, f, d, stocks=np.arange(5, N))
    new, row, _ = enhanced.rebalance(scores, np.zeros(N), np.where(investable, bench, 0.0), covered_none,
                                     investable, None, _strategy(active_bound=0.5), 0.001)
    assert row["status"] == "optimal" and new[:5].sum() == pytest.approx(1.0)


def test_with_nothing_held_the_last_rung_starts_from_the_benchmark_the_st_rule_allows(monkeypatch):
    bench, x, f, d, _ = _case(12)
    monkeypatch.setattr(enhanced, "solve_book", lambda *a, **k: None)
    no_buy = np.zeros(N, bool)
    no_buy[4] = True
    new, row, _ = enhanced.rebalance(np.zeros(N), np.zeros(N), bench, _snap(x, f, d), np.ones(N, bool),
                                     no_buy, _strategy(), 0.001)
    assert (row["status"], row["rung"]) == ("benchmark", "benchmark")
    assert new[4] == 0.0 and np.allclose(new[~no_buy], bench[~no_buy] / bench[~no_buy].sum())


def test_the_ladder_softens_the_style_bound_after_dropping_the_turnover_limit(monkeypatch):
    bench, x, f, d, _ = _case(13)
    calls = []
    solve = enhanced.solve_book

    def hard_styles_fail(*args, turnover_limit=True, soft_style=False, **kwargs):
        calls.append((turnover_limit, soft_style))
        if not soft_style:
            return None
        return solve(*args, turnover_limit=turnover_limit, soft_style=soft_style, **kwargs)

    monkeypatch.setattr(enhanced, "solve_book", hard_styles_fail)
    scores = np.random.default_rng(6).standard_normal(N)
    new, row, _ = enhanced.rebalance(scores, bench.copy(), bench, _snap(x, f, d), np.ones(N, bool), None,
                                     _strategy(), 0.001)
    assert calls == [(True, False), (False, False), (False, True)]
    assert row["status"] == row["rung"] == "soft_style" and new.sum() == pytest.approx(1.0)


def test_without_a_risk_model_the_book_goes_toward_the_benchmark_within_the_rules():
    """No snapshot yet: from nothing, the benchmark less the ST names (their weight spread in
    proportion); from a book far from it, as close as the turnover limit allows, no ST name
    bought, a suspended holding kept (the former last rung jumped to the benchmark)."""
    bench, *_ = _case(14)
    term = BenchmarkDistance(bench)
    w0 = np.random.default_rng(0).dirichlet(np.ones(N))
    assert term.value(w0) == pytest.approx(((w0 - bench) ** 2 / bench).sum())
    assert _value_of(term.expr, w0) == pytest.approx(term.value(w0), rel=1e-6)
    no_buy = np.zeros(N, bool)
    no_buy[:2] = True
    s = _strategy(max_turnover=0.1, active_bound=0.05)
    new, row, _ = enhanced.rebalance(np.zeros(N), np.zeros(N), bench, None, np.ones(N, bool), no_buy, s,
                                     0.001)
    assert (row["status"], row["rung"]) == ("benchmark", "benchmark")
    assert np.allclose(new[:2], 0) and np.allclose(new[2:], bench[2:] / bench[2:].sum(), atol=1e-6)
    held = np.random.default_rng(1).dirichlet(np.ones(N))
    held[0] = 0.0
    held /= held.sum()
    stuck = np.zeros(N, bool)
    stuck[5] = True
    new, row, _ = enhanced.rebalance(np.zeros(N), held, bench, None, np.ones(N, bool), no_buy, s, 0.001,
                                     fixed=stuck)
    assert row["rung"] == "benchmark" and new.sum() == pytest.approx(1.0)
    assert np.abs(new - held).sum() / 2 == pytest.approx(0.1, abs=1e-5)  # the limit binds
    assert new[0] == 0.0 and new[1] <= held[1] + 1e-9 and new[5] == pytest.approx(held[5])
    assert term.value(new) < term.value(held)


# ------------------------------------------------------------------ compiled once (issue 86 item 11)


@pytest.mark.parametrize("turnover_limit, soft_style", [(True, False), (False, False), (False, True)])
def test_each_rung_of_the_compiled_problem_is_dpp(turnover_limit, soft_style):
    from forecaster.portfolio.book_compiled import CompiledBook

    problem, _, params = CompiledBook(N, 4, 2, _strategy()).problem(turnover_limit, soft_style)
    assert problem.is_dpp()
    assert {"alpha", "lo", "hi", "prev", "root", "sd", "cost_size", "cost_side"} <= set(params)


@pytest.mark.parametrize("which", ["plain", "held", "no_buy", "sold", "turnover", "soft_style"])
def test_a_day_solved_compiled_and_composed_gives_the_same_weights(which):
    """The compiled problem (parameters) against the problem composed from the terms and
    constraints (the former path), on days built to make each rule bind."""
    bench, x, f, d, alpha = _case(3)
    prev = bench.copy()
    prev[:4] *= 1.5
    prev /= prev.sum()
    s = _strategy(max_turnover=0.05 if which == "turnover" else 0.3,
                  style_bound=0.02 if which == "soft_style" else 0.5)
    mask = np.r_[True, True, np.zeros(N - 2, bool)]
    kw = {"held": {"held": mask}, "no_buy": {"no_buy": mask}, "sold": {"sold": mask}}.get(which, {})
    soft = which == "soft_style"
    parts = enhanced.book_parts(alpha * 5, bench, prev, x, f, d, 3, s, cost=0.001, sell_cost=0.002,
                                **{k: v for k, v in kw.items()})
    terms, constraints = book_problem.relax(*parts, turnover_limit=not soft, soft_style=soft)
    composed = book_problem.solve(terms, constraints, N, prev, kw.get("held"))
    compiled = _solve(alpha * 5, bench, prev, x, f, d, s, cost=0.001, sell_cost=0.002,
                      turnover_limit=not soft, soft_style=soft, **kw)
    assert composed is not None and compiled is not None
    # (the composed cost is |w - prev|'s kink, the compiled one buys and sells apart: 1e-5)
    np.testing.assert_allclose(compiled, composed, atol=1e-5)


def test_the_runs_problem_is_compiled_once_and_solves_each_day_on_its_axis():
    """Days of different stocks on one run's axis reuse one compiled problem; each day's weights
    equal those of the day's own problem."""
    bench, x, f, d, alpha = _case(4)
    s = _strategy()
    run = book_compiled.Compiled(np.ones(N + 5, bool))  # an axis wider than any day's problem
    built = []
    for idx in (np.arange(N), np.arange(2, N), np.r_[np.arange(N - 3), N + 2]):
        n = len(idx)
        b = bench[: n] / bench[: n].sum()
        run.at(idx)
        w_run = _solve(alpha[: n], b, b, x[: n], f, d[: n], s, compiled=run)
        w_own = _solve(alpha[: n], b, b, x[: n], f, d[: n], s)
        np.testing.assert_allclose(w_run, w_own, atol=1e-6)
        built.append(run.book.problem(True, False)[0])
    assert built[0] is built[1] is built[2]


def _industry_case(seed=6):
    """``_case`` with three industries: 0/1 exposure columns after the styles (their own
    factor variances) and the same classes as the bound's groups ``[N, 3]``."""
    bench, x, f, d, alpha = _case(seed)
    groups = np.eye(3)[np.arange(N) % 3]
    x = np.column_stack([x[:, :3], groups, x[:, 3:]])
    full = np.zeros((7, 7))
    keep = [0, 1, 2, 6]
    full[np.ix_(keep, keep)] = f
    full[3:6, 3:6] = np.diag([0.006, 0.008, 0.005]) ** 2
    alpha = alpha + np.where(np.arange(N) % 3 == 0, 0.004, 0.0)  # a bet on the first industry
    return bench, x, full, d, alpha, groups


def test_industries_compile_sparse_and_recompile_only_on_a_class_change_of_a_live_stock():
    """Industry columns and groups enter the compiled problem as constant sparse matrices: a day
    whose industry bound binds gives the composed problem's weights; the run's next day reuses
    the problem when only a stock held at 0 (a leaver) reads another class, and compiles it
    anew when a stock that may hold weight does, each day's weights those of its own problem."""
    bench, x, f, d, alpha, groups = _industry_case()
    s = _strategy(industry_bound=0.01, style_bound=0.5, industries="classes.csv")
    parts = enhanced.book_parts(alpha * 5, bench, bench, x, f, d, 3, s, cost=0.001, groups=groups)
    composed = book_problem.solve(*parts, N, bench)
    compiled = _solve(alpha * 5, bench, bench, x, f, d, s, cost=0.001, groups=groups)
    np.testing.assert_allclose(compiled, composed, atol=1e-5)
    active = groups.T @ (compiled - bench)
    assert abs(active[0]) == pytest.approx(0.01, abs=1e-6)  # the bound binds
    unbound = _solve(alpha * 5, bench, bench, x, f, d, _strategy(style_bound=0.5), cost=0.001)
    assert (groups.T @ (unbound - bench))[0] > 0.02

    sold = np.r_[True, np.zeros(N - 1, bool)]  # stock 0 leaves: held at 0 whatever its class
    labels = np.arange(N) % 3
    moved = labels.copy()
    moved[1] = (labels[1] - 1) % 3  # the class the move below gives it
    for seed, expected in ((None, [1, 1, 2]), (np.vstack([labels, moved]), [1, 1, 1])):
        # without a seed the pattern widens when a live stock reads a new class; the run's
        # labels (both of stock 1's classes) seed it so that no day compiles again
        given = (None, None) if seed is None else ((seed, 3), (seed, 3))
        run, compiles = book_compiled.Compiled(np.ones(N, bool), given), []
        for move in (None, 0, 1):  # no change, the leaver's class, a live stock's class
            xs, gs = x.copy(), groups.copy()
            if move is not None:
                xs[move, 3:6], gs[move] = xs[move, [4, 5, 3]], gs[move, [1, 2, 0]]
            run.at(np.arange(N))
            kw = dict(cost=0.001, groups=gs, sold=sold)
            w_run = _solve(alpha * 5, bench, bench, xs, f, d, s, compiled=run, **kw)
            np.testing.assert_allclose(w_run, _solve(alpha * 5, bench, bench, xs, f, d, s, **kw), atol=1e-6)
            compiles.append(run.book.compiles)
        assert compiles == expected


def test_the_industry_bound_is_against_the_whole_indexs_group_weight():
    """A member outside the day's problem (not investable, not held) keeps its group's weight
    in the index: the book's group weight is bounded against the whole index's group weight, not
    against the problem's benchmark renormalised without it."""
    bench, x, f, d, alpha, groups = _industry_case()
    names = ("market", "size", "beta", "industry:a", "industry:b", "industry:c", "stat_1")
    snap = RiskSnapshot(date=pd.Timestamp("2021-03-30"), stocks=np.arange(N), exposures=x, factor_cov=f,
                        specific_var=d, factor_names=names)
    bench = bench.copy()
    bench[0] = 0.15  # stock 0 (group 0) a large member the book cannot trade today
    bench /= bench.sum()
    investable = np.r_[False, np.ones(N - 1, bool)]
    labels = np.arange(N) % 3
    labels[-1] = -1  # a member in no group: its weight is spread over none of them
    s = _strategy(industry_bound=0.01, style_bound=0.5, industries="classes.csv")
    new, row, _ = enhanced.rebalance(alpha * 5, np.zeros(N), bench, snap, investable, None, s, 0.001,
                                     groups=labels, n_groups=3)
    assert row["status"] == "optimal" and new[0] == 0
    grouped = labels >= 0
    whole = np.bincount(labels[grouped], weights=bench[grouped], minlength=3)
    active = np.bincount(labels[grouped], weights=new[grouped], minlength=3) - whole
    assert np.abs(active).max() <= 0.01 + 1e-6
    assert active[0] == pytest.approx(0.01, abs=1e-6)  # the view on group 0 binds at the bound
    # the problem's benchmark without stock 0 puts group 0 far lower: bounded against it, the
    # book would be 0.09 under the index in group 0
    assert whole[0] - (whole[0] - bench[0]) / (1 - bench[0]) > 0.05
