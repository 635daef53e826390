"""A point-in-time universe of a market's most traded stocks, as a Qlib instruments file.

Each day, the ``--top`` stocks by mean traded value (unadjusted close x volume) over the last
``--window`` trading days up to and including that day (nothing later is read) are members;
a stock's member days are written as spans ``CODE<TAB>start<TAB>end``. It is a training
universe between the whole market and an index's members (issue 43: ``forecaster backtest
DATA --universe csi300 --train-universe FILE``), near CSI 800 in spirit with ``--top 800``:
the largest, most liquid stocks, which CSI 300's members resemble.

    python scripts/liquid_universe.py ../shared/data/cn_qlib runs/top800.txt --top 800
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.panel import Panel
from forecaster.data.qlib.reader import read_qlib
from forecaster.portfolio.index_series import split_indices


def liquid_mask(panel: Panel, top: int, window: int) -> np.ndarray:
    """``[days, stocks]`` bool: the stock is among the ``top`` by trailing mean traded value
    (days a stock has no bar count as missing, not as zero; at least ``window // 2`` bars)."""
    value = pd.DataFrame(panel["close"] * panel["volume"])
    mean = value.rolling(window, min_periods=max(1, window // 2)).mean()
    rank = mean.rank(axis=1, ascending=False, method="first")
    return (rank <= top).to_numpy()


def spans(mask: np.ndarray, dates: pd.DatetimeIndex, codes) -> list[str]:
    """Qlib instruments lines: one per run of consecutive member days of a stock."""
    lines = []
    padded = np.vstack([np.zeros((1, mask.shape[1]), bool), mask, np.zeros((1, mask.shape[1]), bool)])
    edges = np.diff(padded.astype(np.int8), axis=0)  # +1 where a run starts, -1 after it ends
    for j, code in enumerate(codes):
        starts, ends = np.flatnonzero(edges[:, j] == 1), np.flatnonzero(edges[:, j] == -1) - 1
        qlib_code = str(code).replace(".", "").upper()
        lines += [f"{qlib_code}\t{dates[a].date()}\t{dates[b].date()}"
                  for a, b in zip(starts, ends, strict=True)]
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", type=Path, help="a Qlib data folder")
    p.add_argument("out", type=Path, help="the instruments file to write")
    p.add_argument("--top", type=int, default=800)
    p.add_argument("--window", type=int, default=60)
    args = p.parse_args()
    if args.out.exists():
        sys.exit(f"{args.out} exists; not written over")
    load = read_qlib(args.data, cache=True)
    stocks, _ = split_indices(load.frames)  # an index series is not a stock to train on
    panel = Panel.from_frames(stocks)
    mask = liquid_mask(panel, args.top, args.window)
    lines = spans(mask, panel.dates, panel.codes)
    args.out.write_text("\n".join(lines) + "\n")
    per_day = mask.sum(axis=1)
    print(f"{args.out}: {len(lines)} spans of {int(mask.any(axis=0).sum())} stocks; members a day "
          f"{per_day.min()}/{int(np.median(per_day))}/{per_day.max()}")


if __name__ == "__main__":
    main()
