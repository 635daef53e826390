"""One rebalance's problem composed from its parts (:mod:`forecaster.portfolio.book_terms`,
:mod:`forecaster.portfolio.book_constraints`), solved by Clarabel through cvxpy, and the
solution checked against every constraint before it is taken.

The fallback ladder (:data:`RUNGS`, :func:`relax`): the whole problem; without the turnover
limit; also with the style bound softened into a penalty. A day none of them solves is left to
the caller, which holds the drifted book (:func:`forecaster.portfolio.enhanced.rebalance`).
"""

from __future__ import annotations

import logging

import numpy as np

from forecaster.portfolio.book_constraints import StyleBound, TurnoverLimit

log = logging.getLogger(__name__)

# Seconds spent building and compiling the problems (cvxpy's canonicalisation) and inside the
# solver, summed over every solve of this process since reset_times(): what a benchmark reads.
TIMES = {"compile_s": 0.0, "solve_s": 0.0, "solves": 0, "inaccurate": 0}


def reset_times() -> None:
    TIMES.update(compile_s=0.0, solve_s=0.0, solves=0, inaccurate=0)


def timed_solve(problem) -> None:
    """``problem.solve`` with Clarabel, its time split into :data:`TIMES`: inside the solver
    (its own count) and the rest (cvxpy's canonicalisation, and re-applying parameters); a
    solve that stopped short of the tolerances (``optimal_inaccurate``, kept if the caller's
    checks pass) counted, not warned of each time."""
    import time
    import warnings

    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Solution may be inaccurate")
            # cvxpy reads its own sparse parameters (the industries') densely while solving
            warnings.filterwarnings("ignore", message="Reading from a sparse CVXPY expression")
            problem.solve(solver=SOLVER, **SOLVER_TOLERANCES)
        TIMES["inaccurate"] += problem.status == "optimal_inaccurate"
    finally:
        total = time.perf_counter() - started
        stats = getattr(problem, "solver_stats", None)
        inside = float(getattr(stats, "solve_time", None) or 0.0) if stats is not None else 0.0
        inside = min(inside, total)
        TIMES["solves"] += 1
        TIMES["solve_s"] += inside
        TIMES["compile_s"] += total - inside

SOLVER = "CLARABEL"
# Far tighter than Clarabel's 1e-8: a nearly flat objective leaves the weights off by about the
# square root of the gap over its curvature, so at 1e-10 the run's compiled problem (the
# backtest) and the day's own (predict) could differ by a lot; at 1e-12 they give the same lots.
SOLVER_TOLERANCES = {"tol_gap_abs": 1e-12, "tol_gap_rel": 1e-12, "tol_feas": 1e-12}
DUST = 1e-6  # an interior-point solver's dust is not a position
# the ladder's rungs: (name, turnover_limit, soft_style)
RUNGS = (("optimal", True, False), ("no_turnover_limit", False, False), ("soft_style", False, True))


def compose(terms, constraints, n: int):
    """``(problem, w)``: the cvxpy problem maximising ``sum(term.sign * term.expr(w))`` over
    ``w`` ``[n]`` subject to every constraint's ``expr(w)``."""
    import cvxpy as cp

    w = cp.Variable(n)
    objective = cp.Maximize(sum(t.sign * t.expr(w) for t in terms))
    return cp.Problem(objective, [c for part in constraints for c in part.expr(w)]), w


def broken(constraints, w: np.ndarray) -> list[str]:
    """The names of the constraints weights ``w`` break by more than their tolerance."""
    return [c.name for c in constraints if c.violation(w) > c.tol]


def clean(raw: np.ndarray, prev: np.ndarray, held: np.ndarray | None) -> np.ndarray | None:
    """The solver's weights ``raw`` ``[n]`` as a book: held names exactly at ``prev``, dust
    below :data:`DUST` zeroed, the other names rescaled so the book sums to 1 (None when
    nothing is left to rescale)."""
    out = np.asarray(raw, dtype=float).copy()
    fixed = np.zeros(len(out), bool) if held is None else np.asarray(held, bool)
    out[fixed] = prev[fixed]
    free = ~fixed
    out[free & (out < DUST)] = 0.0
    rest, target = out[free].sum(), 1.0 - out[fixed].sum()
    if rest <= 0:
        return out if abs(target) < DUST else None
    out[free] *= target / rest
    return out


def solve(terms, constraints, n: int, prev: np.ndarray, held: np.ndarray | None = None) -> np.ndarray | None:
    """The weights ``[n]`` of the composed problem, or None: the solver failed, found no
    solution, or (``optimal`` or ``optimal_inaccurate`` alike) one that, cleaned
    (:func:`clean`), breaks a constraint by more than its tolerance (logged)."""
    import time

    import cvxpy as cp

    started = time.perf_counter()
    problem, w = compose(terms, constraints, n)
    TIMES["compile_s"] += time.perf_counter() - started
    try:
        timed_solve(problem)
    except cp.error.SolverError as exc:
        log.debug("solver failed: %s", exc)
        return None
    if problem.status not in ("optimal", "optimal_inaccurate") or w.value is None:
        log.debug("solver status %s", problem.status)
        return None
    out = clean(w.value, prev, held)
    if out is None:
        return None
    bad = broken(constraints, out)
    if bad:
        log.debug("solution (%s) breaks %s: not taken", problem.status, ", ".join(bad))
        return None
    return out


def relax(terms, constraints, turnover_limit: bool = True, soft_style: bool = False):
    """The terms and constraints of a rung of the ladder: without the turnover limit unless
    ``turnover_limit``; with each style bound made a penalty (its ``soften()``) if
    ``soft_style``."""
    terms, kept = list(terms), list(constraints)
    if not turnover_limit:
        kept = [c for c in kept if not isinstance(c, TurnoverLimit)]
    if soft_style:
        terms += [c.soften() for c in kept if isinstance(c, StyleBound)]
        kept = [c for c in kept if not isinstance(c, StyleBound)]
    return terms, kept
