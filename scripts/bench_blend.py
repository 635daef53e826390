"""Blends of two sets of inputs against one set, back to back on the same folds (issue 71).

Runs ``forecaster backtest DATA --no-baselines`` once per variant, one after another, each in
a child process whose resident memory (fold workers included) is sampled every second:

* ``one_set``: one set of inputs, two networks (``--blend-features ""``);
* ``1+1``: one network on the first set, one on Alpha158 (``--n-seeds 1 --blend-features alpha158``);
* ``2+1``: two on the first set, one on Alpha158 (``--blend-features alpha158 --blend-seeds 1``);
* ``2+2``: two of each (``--blend-features alpha158``).

Then it prints, for each variant::

    blend name=NAME networks=N rank_ic=+0.0000 icir=+0.000 diff=+0.0000 p=0.000 \
        book_ann=+0.000 book_diff=+0.000 book_p=0.000 wall_minutes=M cpu_minutes=M peak_rss_gb=G

(one line each; wrapped here)

``diff``/``p``: the paired Newey-West test of its daily rank IC against ``one_set``'s on the
same days; ``book_ann``: its default book (the report's strategy after costs) a year;
``book_diff``/``book_p``: the paired test of the book's daily returns against ``one_set``'s;
``cpu_minutes``: the Transformer's fits and forecasts summed over the folds. Then::

    verdict cheapest=NAME rule="not worse (p < 0.05) on rank IC or book, better (p < 0.05) on one"

the fewest networks (then the least CPU) of the variants that no paired test finds worse than
``one_set`` and at least one finds better, on this data alone (``none`` if no variant
qualifies); the issue asks for it on both data sets. ``--variants`` runs some of them,
``--reuse`` keeps a variant's finished report (its wall and peak as this script measured them;
for a report it did not run, the report's own: its phases' seconds summed, and metrics.json's
``peak_gb``, an upper bound).

Shenzhen (default data): ``python scripts/bench_blend.py``. CSI 300 point in time, 2019-2026:
``python scripts/bench_blend.py --data ../shared/data/cn_qlib --out runs/bench_blend_csi300 --
--universe csi300 --start 2019-01-01 --cache``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import _daily  # noqa: E402
from bench_market import REPO, _fmt, forecaster_command, run_sampled  # noqa: E402

from forecaster.metrics import ic_difference_test, ic_summary  # noqa: E402
from forecaster.metrics.returns import paired_return_test  # noqa: E402
from forecaster.reporting.report import read_predictions  # noqa: E402

VARIANTS = {  # name: (networks, options)
    "one_set": (2, ["--blend-features", ""]),
    "1+1": (2, ["--n-seeds", "1", "--blend-features", "alpha158"]),
    "2+1": (3, ["--blend-features", "alpha158", "--blend-seeds", "1"]),
    "2+2": (4, ["--blend-features", "alpha158"]),
}
BASE = "one_set"
MODEL = "transformer"


def _folder(name: str) -> str:
    return name.replace("+", "_")


def daily_rank_ic(report: Path) -> pd.Series:
    """The model's daily rank IC on its scored rows (the report's own label)."""
    return _daily(read_predictions(report))[MODEL]


def book_returns(report: Path) -> pd.Series:
    """The default book's daily returns after costs (``strategy_curves.csv``'s ``net``)."""
    curves = pd.read_csv(report / "strategy_curves.csv", index_col="date", parse_dates=["date"])
    net = curves["net"].astype(float)
    return net / net.shift(1, fill_value=1.0) - 1.0


def annual(returns: pd.Series) -> float:
    r = returns.dropna()
    return float(np.prod(1 + r.to_numpy()) ** (252 / len(r)) - 1) if len(r) else math.nan


def qualifies(row: dict) -> bool:
    """No paired test finds it worse than one set (p < 0.05), and one finds it better."""
    tests = [(row["diff"], row["p"]), (row["book_diff"], row["book_p"])]
    worse = any(d < 0 and p < 0.05 for d, p in tests if math.isfinite(p))
    better = any(d > 0 and p < 0.05 for d, p in tests if math.isfinite(p))
    return better and not worse


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/szse"))
    p.add_argument("--out", default=str(REPO / "runs/bench_blend"))
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, of {', '.join(VARIANTS)} ({BASE} is always run)")
    p.add_argument("--reuse", action="store_true", help="keep a variant's finished report")
    p.add_argument("extra", nargs="*", help="options passed to every `forecaster backtest` after `--`")
    args = p.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        sys.exit(f"--variants: unknown {', '.join(unknown)}; expected some of {', '.join(VARIANTS)}")
    names = [BASE, *(v for v in names if v != BASE)]
    out = Path(args.out)
    rows = {}
    for name in names:
        report = out / _folder(name)
        wall = peak = math.nan
        if not (args.reuse and (report / "metrics.json").exists()):
            cmd = [*forecaster_command(), "backtest", args.data, "--out", str(report), "--overwrite",
                   "--no-baselines", *VARIANTS[name][1], *args.extra]
            status, wall, peak = run_sampled(cmd)
            if status != 0:
                sys.exit(f"{name}: forecaster backtest failed with exit status {status}")
            (report / "bench_blend.json").write_text(json.dumps({"wall_seconds": wall, "peak_bytes": peak}))
        elif (report / "bench_blend.json").is_file():  # reused: its own run's wall and peak
            sampled = json.loads((report / "bench_blend.json").read_text())
            wall, peak = sampled["wall_seconds"], sampled["peak_bytes"]
        m = json.loads((report / "metrics.json").read_text())
        if not math.isfinite(wall):  # a report this script did not time: the run's own account
            wall = sum(v for k, v in m.get("timings", {}).items() if k != "models" and v is not None)
            peak = m.get("memory", {}).get("peak_gb", math.nan) * 2**30
        rows[name] = {"ic": daily_rank_ic(report), "book": book_returns(report), "wall": wall / 60,
                      "peak": peak / 2**30,
                      "cpu": m.get("timings", {}).get("models", {}).get(MODEL, math.nan) / 60}
    base = rows[BASE]
    for name in names:
        row = rows[name]
        s = ic_summary(row["ic"])
        ic = ic_difference_test(row["ic"], base["ic"]) if name != BASE else {}
        bk = paired_return_test(row["book"], base["book"]) if name != BASE else {}
        row.update(diff=ic.get("mean_diff", math.nan), p=ic.get("p_value", math.nan),
                   book_diff=bk.get("annual_return_diff", math.nan), book_p=bk.get("p_value", math.nan))
        print(f"blend name={name} networks={VARIANTS[name][0]} rank_ic={_fmt(s['mean_ic'], 4)} "
              f"icir={_fmt(s['icir'], 3)} diff={_fmt(row['diff'], 4)} p={row['p']:.3f} "
              f"book_ann={_fmt(annual(row['book']), 3)} book_diff={_fmt(row['book_diff'], 3)} "
              f"book_p={row['book_p']:.3f} wall_minutes={row['wall']:.1f} cpu_minutes={row['cpu']:.1f} "
              f"peak_rss_gb={row['peak']:.2f}", flush=True)
    good = [n for n in names if n != BASE and qualifies(rows[n])]
    cheapest = min(good, key=lambda n: (VARIANTS[n][0], rows[n]["cpu"])) if good else "none"
    print(f'verdict cheapest={cheapest} rule="not worse (p < 0.05) on rank IC or book, better '
          f'(p < 0.05) on one"')


if __name__ == "__main__":
    main()
