"""Which industry level the enhanced book with industries uses by default, by issue 88's rule.

Reads the daily returns ``scripts/bench_enhanced.py --industries FILE --industry-level L --out
DIR`` wrote (``DIR/books_daily.csv``: the book ``enhanced_industries`` and the index's
``total_return``) for each index and level, cuts them into the protocol's cells (an index and a
period, :data:`~forecaster.evaluation.default_choice.PERIODS`) and applies its verdict: the
candidate level replaces the incumbent only if it leads in 3 of the 4 cells and the pooled
daily difference favours it at p < 0.10 (Newey-West, one-sided)::

    python scripts/industry_level_cells.py --run csi300:1=runs/b300_l1 --run csi300:2=runs/b300_l2 \\
        --run csi500:1=runs/b500_l1 --run csi500:2=runs/b500_l2

prints ``cell index=... period=... name=level_L excess_ann=... te=... ir=...`` for each cell and
``verdict name=level_2 against=level_1 leads=N of 4 t=... p=... replaces=yes|no``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from forecaster.evaluation.default_choice import PERIODS, verdict, verdict_line
from forecaster.metrics.returns import active_stats

BOOK = "enhanced_industries"


def cells_of(daily: pd.DataFrame) -> dict[str, dict]:
    """``{period: {excess, te, ir}}`` of the book with industries against the total-return index."""
    out = {}
    for label, first, last in PERIODS:
        part = daily.loc[first:last]
        s = active_stats(part[BOOK], part["total_return"])
        out[label] = {"excess": s["excess_annual_return"], "te": s["tracking_error"],
                      "ir": s["information_ratio"]}
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", action="append", required=True, metavar="INDEX:LEVEL=DIR",
                   help="a bench_enhanced.py --industries output folder of one index and level")
    p.add_argument("--incumbent", type=int, default=1, help="the level in force (1)")
    args = p.parse_args(argv)
    runs: dict[int, dict[str, pd.DataFrame]] = {}
    for item in args.run:
        key, sep, folder = item.partition("=")
        index, colon, level = key.partition(":")
        path = Path(folder) / "books_daily.csv"
        if not (sep and colon and level.isdigit()):
            p.error(f"--run {item}: expected INDEX:LEVEL=DIR")
        if not path.is_file():
            p.error(f"--run {item}: {path} not found (a bench_enhanced.py --industries --out folder)")
        runs.setdefault(int(level), {})[index] = pd.read_csv(path, index_col="date", parse_dates=True)
    if args.incumbent not in runs or len(runs) < 2:
        p.error(f"expected the incumbent level {args.incumbent} and another, each on the same indices")
    cells, returns = {}, {}
    for level, by_index in sorted(runs.items()):
        cells[level] = {(i, period): f for i, d in by_index.items() for period, f in cells_of(d).items()}
        returns[level] = {i: d[BOOK] for i, d in by_index.items()}
        for (index, period), f in cells[level].items():
            print(f"cell index={index} period={period} name=level_{level} excess_ann={f['excess']:+.4f} "
                  f"te={f['te']:.4f} ir={f['ir']:.2f}")
    for level in sorted(runs):
        if level != args.incumbent:
            v = verdict(cells[level], cells[args.incumbent], returns[level], returns[args.incumbent])
            print(verdict_line(f"level_{level}", f"level_{args.incumbent}", v))


if __name__ == "__main__":
    main()
