"""Qlib's EnhancedIndexingOptimizer on inputs ``bench_enhanced.py`` wrote (runs in the side venv
with pyqlib, never this project's; see that script). Reads ``IN/inputs.npz`` and writes
``IN/qlib_weights.npz``: one book a rebalance, each from the previous one drifted by prices.

Per rebalance ``k`` the inputs hold the stocks' codes, expected returns ``r``, factor exposures
``F``, factor covariance, specific variances, benchmark weights and each stock's price growth
since the previous rebalance, all in this project's units (daily returns as decimals); the
optimiser's own settings come on the command line.

Units: Qlib's risk models work in percent (``RiskModel.predict`` multiplies the returns by 100
before it estimates anything, ``scale_return=True``), so the optimiser's ``lamb`` = 1 is meant
for a covariance in percent squared. Handed decimals, its risk term is 10,000 times smaller and
the (rescaled) alpha 100 times smaller: the risk aversion would be 100 times weaker than Qlib
intends. :func:`to_percent` converts: returns x 100, factor covariance and specific variances
x 10,000; exposures, weights, turnover and the bounds are unitless and stay.

Qlib's optimiser tries twice: trial 1 with every constraint, trial 2 without the turnover limit
``delta``; failing both it returns the holdings. It says which only in its log, so the worker
reads the log (:class:`TrialLog`) and writes per rebalance which trial solved it (``trial``: 1,
2, or 0 for the holdings returned) and counts of each (``trial1``, ``trial2``, ``failed``); it
says on stderr the solver's statuses trial 1 failed with (ECOS' ``optimal_inaccurate`` fails
trial 1, which wants ``optimal``, and passes trial 2).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

PERCENT = 100.0
LOGGER = "qlib.EnhancedIndexingOptimizer"  # Qlib's get_module_logger("EnhancedIndexingOptimizer")


def to_percent(r: np.ndarray, cov: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(r, cov_b, var_u)`` in Qlib's units: ``r`` ``[n]`` decimal returns -> percent;
    ``cov`` ``[k, k]`` and ``var`` ``[n]`` decimal variances -> percent squared."""
    return r * PERCENT, cov * PERCENT ** 2, var * PERCENT ** 2


def factor_limits(F: np.ndarray, n_style: int, style_bound: float | None) -> np.ndarray | None:
    """``[k]`` Qlib's ``f_dev`` (a bound on each active exposure ``|(w - wb) @ F|``): the first
    ``n_style`` (style) columns at ``style_bound``, the others (statistical factors, unbounded
    in this project's book) at ``2 x max |F[:, j]|`` and a little more, a bound no fully
    invested long-only book can reach (``sum |w - wb| <= 2``). Not 1e6: a bound that far off
    scale leaves ECOS at ``optimal_inaccurate``, which fails Qlib's first trial. None without
    ``style_bound``."""
    if style_bound is None:
        return None
    reach = 2.0 * np.abs(F).max(axis=0) * 1.01 + 1e-6
    return np.where(np.arange(F.shape[1]) < n_style, style_bound, reach)


class TrialLog(logging.Handler):
    """Collects what Qlib's optimiser logs during one call: ``trial1_failed`` (and the
    solver's status then, ``trial1_status``) and ``gave_up`` (it returned the holdings)."""

    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.reset()

    def reset(self) -> None:
        self.trial1_failed = False
        self.trial1_status = ""  # the solver's status when trial 1 failed ("infeasible", ...)
        self.gave_up = False

    def emit(self, record: logging.LogRecord) -> None:
        msg = str(record.msg)
        if msg.startswith("trial 1 failed"):
            self.trial1_failed = True
            found = re.search(r"\(status: ([^)]*)\)", msg)
            self.trial1_status = found.group(1) if found else "unknown"
        elif msg.startswith("optimization failed"):
            self.gave_up = True

    def trial(self, returned_holdings: bool) -> int:
        """Which trial solved the call just made: 1, 2, or 0 (none: the holdings returned)."""
        if self.gave_up or returned_holdings:
            return 0
        return 2 if self.trial1_failed else 1


def capture_trials() -> TrialLog:
    """A :class:`TrialLog` on Qlib's optimiser logger, its messages kept off stderr (a daily
    book logs a warning a rebalance)."""
    handler = TrialLog()
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    logger.propagate = False
    return handler


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("folder")
    p.add_argument("--lamb", type=float, default=1.0)
    p.add_argument("--delta", type=float, default=0.2)
    p.add_argument("--b-dev", type=float, default=0.01)
    p.add_argument("--f-dev", type=float, default=None)
    p.add_argument("--n-style", type=int, default=0)
    args = p.parse_args()
    from qlib.contrib.strategy.optimizer import EnhancedIndexingOptimizer

    logging.getLogger("qlib").setLevel(logging.ERROR)  # its other modules' notes
    log = capture_trials()
    data = np.load(Path(args.folder) / "inputs.npz", allow_pickle=False)
    n = int(data["n"])
    held: dict[str, float] = {}
    out, trials, why = {}, [], Counter()
    for k in range(n):
        codes = data[f"codes_{k}"]
        growth = data[f"growth_{k}"]
        w0 = np.array([held.get(c, 0.0) for c in codes]) * growth
        # a new book starts from the index (Qlib's optimiser returns the holdings when it fails:
        # from cash a first failure would keep the book in cash)
        w0 = w0 / w0.sum() if w0.sum() > 0 else data[f"wb_{k}"].copy()
        F = data[f"F_{k}"]
        f_dev = factor_limits(F, args.n_style, args.f_dev)  # exposures are unitless: no conversion
        r, cov, var = to_percent(data[f"r_{k}"], data[f"cov_{k}"], data[f"var_{k}"])
        opt = EnhancedIndexingOptimizer(lamb=args.lamb, delta=args.delta, b_dev=args.b_dev, f_dev=f_dev)
        log.reset()
        w = opt(r, F, cov, var, w0, data[f"wb_{k}"])
        trials.append(log.trial(w is w0))
        if log.trial1_failed:
            why[log.trial1_status] += 1
        held = dict(zip(codes.tolist(), np.asarray(w, dtype=float).tolist(), strict=True))
        out[f"w_{k}"] = np.asarray(w, dtype=float)
    trials = np.array(trials, dtype=int)
    counts = {"trial1": int((trials == 1).sum()), "trial2": int((trials == 2).sum()),
              "failed": int((trials == 0).sum())}
    np.savez(Path(args.folder) / "qlib_weights.npz", trial=trials, **counts, **out)
    print(f"qlib optimiser: {n} rebalances, {counts['trial1']} solved by trial 1 (all limits), "
          f"{counts['trial2']} by trial 2 (no turnover limit), {counts['failed']} returned the holdings "
          "unchanged", file=sys.stderr)
    if why:
        print("qlib optimiser: trial 1 failed with the solver's status " +
              ", ".join(f"{status} {count}" for status, count in why.most_common()), file=sys.stderr)


if __name__ == "__main__":
    main()
