"""Qlib's EnhancedIndexingOptimizer on inputs ``bench_enhanced.py`` wrote (runs in the side venv
with pyqlib, never this project's; see that script). Reads ``IN/inputs.npz`` and writes
``IN/qlib_weights.npz``: one book a rebalance, each from the previous one drifted by prices.

Per rebalance ``k`` the inputs hold the stocks' codes, expected returns ``r``, factor exposures
``F``, factor covariance, specific variances, benchmark weights and each stock's price growth
since the previous rebalance; the optimiser's own settings come on the command line.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import numpy as np


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

    logging.getLogger("qlib").setLevel(logging.ERROR)
    data = np.load(Path(args.folder) / "inputs.npz", allow_pickle=False)
    n = int(data["n"])
    held: dict[str, float] = {}
    out, failed = {}, 0
    for k in range(n):
        codes = data[f"codes_{k}"]
        growth = data[f"growth_{k}"]
        w0 = np.array([held.get(c, 0.0) for c in codes]) * growth
        # a new book starts from the index (Qlib's optimiser returns the holdings when it fails:
        # from cash a first failure would keep the book in cash)
        w0 = w0 / w0.sum() if w0.sum() > 0 else data[f"wb_{k}"].copy()
        F = data[f"F_{k}"]
        f_dev = None
        if args.f_dev is not None:  # bound the style factors only
            f_dev = np.where(np.arange(F.shape[1]) < args.n_style, args.f_dev, 1e6)
        opt = EnhancedIndexingOptimizer(lamb=args.lamb, delta=args.delta,
                                        b_dev=args.b_dev, f_dev=f_dev)
        w = opt(data[f"r_{k}"], F, data[f"cov_{k}"], data[f"var_{k}"], w0, data[f"wb_{k}"])
        if w is w0 or np.allclose(w, w0):
            failed += 1
        held = dict(zip(codes.tolist(), np.asarray(w, dtype=float).tolist(), strict=True))
        out[f"w_{k}"] = np.asarray(w, dtype=float)
    np.savez(Path(args.folder) / "qlib_weights.npz", failed=failed, **out)
    print(f"qlib optimiser: {n} rebalances, {failed} returned the holdings unchanged", file=sys.stderr)


if __name__ == "__main__":
    main()
