"""The benchmark weights on every index review day of a Qlib folder (issue 86 item 4).

On each day CSI 300's members change (``instruments/csi300.txt``), 2019 on: the stocks holding a
benchmark weight against the list's members of that day (that have traded by then), for each
source of weights, and the decision's weights known at the close before (``known_weights``).
Prints one line a source::

    review source=float_mv days=16 mismatched=0 outside_members=0 members_at_zero_max=0

``mismatched``: review days whose weighted stocks are not exactly the members; ``outside_members``:
days with a weight on a stock that is no member; ``members_at_zero_max``: the most members held
at a weight of exactly 0 on one review day (a fit's zeros).

    python scripts/check_review_days.py --data ../shared/data/cn_qlib
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forecaster.data.market.universe import resolve_universe  # noqa: E402
from forecaster.data.panel import Panel  # noqa: E402
from forecaster.data.qlib.reader import read_qlib  # noqa: E402
from forecaster.portfolio.fitted_weights import attach_index_series  # noqa: E402
from forecaster.portfolio.index_weights import benchmark_weights, known_weights  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/cn_qlib"))
    p.add_argument("--universe", default="csi300")
    p.add_argument("--index", default="SH000300")
    p.add_argument("--from", dest="start", default="2019-01-01")
    args = p.parse_args(argv)
    folder = Path(args.data)
    lines = (folder / "instruments" / f"{args.universe}.txt").read_text().splitlines()
    listed = {line.split("\t")[0] for line in lines if line.strip()}
    codes = sorted(c for c in listed if (folder / "features" / c.lower() / "open.day.bin").is_file())
    frames = read_qlib(folder, [*codes, args.index], start="2018-06-01", cache=True).frames
    index = frames.pop(args.index.lower()[:2] + "." + args.index[2:])
    panel = Panel.from_frames(frames)
    panel.members = resolve_universe(args.universe, str(folder)).mask(panel.dates, panel.codes)
    attach_index_series(panel, args.index.lower()[:2] + "." + args.index[2:], index, panel.members)
    seen = np.maximum.accumulate(panel.listed, axis=0)
    held_by_list = panel.members & seen
    change = np.r_[False, (panel.members[1:] != panel.members[:-1]).any(axis=1)]
    days = np.flatnonzero(change & (panel.dates >= args.start))
    print(f"# {len(codes)} of {len(listed)} members with data; {len(days)} review days from {args.start}")
    for spec in ("fitted", "float_mv", "equal"):
        weights = benchmark_weights(panel, spec).weights
        known = known_weights(panel, spec, next_day=False)
        mismatched = sum(not np.array_equal(weights[t] > 0, held_by_list[t]) or
                         not np.array_equal(known[t - 1] > 0, weights[t] > 0) for t in days)
        outside = sum(bool(((weights[t] > 0) & ~held_by_list[t]).any()) for t in days)
        zeros = max(int(((weights[t] == 0) & held_by_list[t]).sum()) for t in days)
        print(f"review source={spec} days={len(days)} mismatched={mismatched} outside_members={outside} "
              f"members_at_zero_max={zeros}")


if __name__ == "__main__":
    main()
