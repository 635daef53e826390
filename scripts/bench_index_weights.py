"""How closely the members at each source of benchmark weights follow the index (issue 79).

On CSI 300's point-in-time members in ``../shared/data/cn_qlib`` and its own series
``SH000300`` (a price index), the members are held at float market value (``float_mv``,
carried by price past 2022-01-14), equal, and ``fitted`` weights (monthly constrained least
squares of the index's returns on the members' over a trailing ``window``, shrunk by
``shrink`` toward float_mv: :mod:`forecaster.portfolio.fitted_weights`), and their daily
returns compared with the index's out of sample, one line per source, window, shrinkage and
period::

    weights source=fitted window=120 shrink=0 period=2017-2022 te=0.0127 corr=0.9978 drift=+0.0285 \
        dividends_ann=0.0221 te_tr=0.0123 seconds=33.3 regress=levels

``te``: annualised sd of the daily difference; ``corr``: daily correlation; ``drift``: the
annualised mean difference (the members' returns include dividends, the index's do not);
``dividends_ann``: the members' dividends at those weights a year (from the data's adjustment:
:mod:`forecaster.portfolio.total_return`), what an estimated total-return index adds to the
price index; ``te_tr``: the tracking error against that estimate. ``seconds``: the fit.

    .venv/bin/python scripts/bench_index_weights.py            # the table in docs/results.md

The data hold only stocks delisted before 2022-01-10 (later ones are missing, 13 members).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from forecaster.data.market.universe import resolve_universe  # noqa: E402
from forecaster.data.panel import Panel  # noqa: E402
from forecaster.data.qlib.conventions import qlib_code  # noqa: E402
from forecaster.data.qlib.reader import read_qlib  # noqa: E402
from forecaster.portfolio.fitted_weights import attach_index_series, fit_to_index, index_series_of  # noqa: E402
from forecaster.portfolio.index_series import INDEX_OF, split_indices  # noqa: E402
from forecaster.portfolio.index_weights import (  # noqa: E402
    benchmark_weights,
    growth,
    weighted_returns,
    weights_tracking,
)
from forecaster.portfolio.total_return import dividend_returns, weighted_dividends  # noqa: E402

PERIODS = {"2017-2022": ("2017-01-01", "2022-01-14"), "2022-2026": ("2022-01-17", "2026-05-08")}


def load(data: str, universe: str) -> Panel:
    """The universe's members (those the folder holds) and its index series, as one panel."""
    members = resolve_universe(universe, data)
    have = {p.name.lower() for p in (Path(data) / "features").iterdir()}
    codes = [c for c in members.codes if qlib_code(c).lower() in have]
    index = INDEX_OF[universe]
    frames = read_qlib(data, [*codes, index], cache=True).frames
    stocks, indices = split_indices(frames)
    panel = Panel.from_frames(stocks)
    panel.members = members.mask(panel.dates, panel.codes)
    attach_index_series(panel, index, indices[index])
    print(f"# {panel.n_stocks} stocks x {panel.n_days} days; {len(members.codes) - len(codes)} members the "
          f"folder lacks; index {index}", flush=True)
    return panel


def line(panel: Panel, weights: np.ndarray, index: pd.Series, head: str, seconds: float, tail: str = ""
         ) -> None:
    members = pd.Series(weighted_returns(panel, weights), index=panel.dates)
    per_day = pd.Series(weighted_dividends(panel, weights), index=panel.dates)
    for period, (lo, hi) in PERIODS.items():
        days = (panel.dates >= lo) & (panel.dates <= hi)
        s = weights_tracking(members[days], index[days])
        tr = weights_tracking(members[days], index[days] + per_day[days])
        print(f"weights {head} period={period} te={s['te']:.4f} corr={s['corr']:.4f} drift={s['drift']:+.4f} "
              f"dividends_ann={per_day[days].mean() * 252:.4f} te_tr={tr['te']:.4f} seconds={seconds:.1f}"
              + tail, flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "cn_qlib"))
    parser.add_argument("--universe", default="csi300")
    parser.add_argument("--windows", default="60,120,250")
    parser.add_argument("--shrinks", default="0,0.1,1,10")
    parser.add_argument("--regress", default="levels",
                        help="levels (weights drift within the window, the default fit), returns (held "
                        "fixed: the issue's first measure), or both, comma-separated")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    panel = load(args.data, args.universe)
    index_close = pd.Series(index_series_of(panel).close, index=panel.dates)
    index = index_close / index_close.shift(1) - 1
    dividends = dividend_returns(panel)
    print(f"# loaded in {time.perf_counter() - started:.0f} s; " + "; ".join(dividends.notes), flush=True)
    prior = None
    for source in ("float_mv", "equal"):
        t0 = time.perf_counter()
        bw = benchmark_weights(panel, source)
        prior = bw if source == "float_mv" else prior
        line(panel, bw.weights, index, f"source={source} window=- shrink=-", time.perf_counter() - t0)
    g = growth(panel)
    for regress in args.regress.split(","):
        for window in (int(w) for w in args.windows.split(",")):
            for shrink in (float(s) for s in args.shrinks.split(",")):
                t0 = time.perf_counter()
                weights, _, _, notes = fit_to_index(panel, prior.weights, prior.source, g, window, shrink,
                                                    levels=regress == "levels")
                line(panel, weights, index, f"source=fitted window={window} shrink={shrink:g}",
                     time.perf_counter() - t0, f" regress={regress}")
    print("# " + " | ".join(notes), flush=True)


if __name__ == "__main__":
    main()
