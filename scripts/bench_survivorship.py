"""Survivorship bias, measured: the default whole-market walk-forward with and without the
stocks that died.

Runs ``forecaster backtest DATA`` twice on the same folds (same calendar, same ``--start`` and
``--end``; default DATA ``../shared/data/cn_qlib``, forecasts 2018-01-01..2022-01-10, the years
its 62 delisted stocks span): ``with`` on the folder as it is, ``without`` on a linked copy
that leaves out every stock of ``instruments/delisted.txt`` -- the folder most users hold,
today's survivors only. Then it prints, for each model::

    survivorship model=NAME rank_ic_with=+0.0000 rank_ic_without=+0.0000 \
        excess_with=+0.000 excess_without=+0.000

on one line (daily rank IC over the run's scored stock-days; ``excess``: the model's default
strategy after costs minus the equal-weight universe, annualised), and::

    survivorship benchmark with=+0.000 without=+0.000

the equal-weight universe's annual return in each run (the survivors-only universe looks
better: the stocks that died are gone from it), then ``survivorship delisted stocks=N
in_data=N`` and the wall time. A whole-market run takes an hour or more on two cores:
``--stocks N`` develops on N stocks (every delisted stock and N - 62 others).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_index import _daily  # noqa: E402
from bench_market import REPO, _fmt, excess_ann, forecaster_command, run_sampled  # noqa: E402

from forecaster.metrics import ic_summary  # noqa: E402
from forecaster.reporting.report import read_predictions  # noqa: E402


def _linked(data: Path, out: Path, drop: set[str], keep_only: int = 0) -> Path:
    """A Qlib folder of ``data``'s stocks less ``drop`` (links, not copies); ``keep_only``: at
    most that many stocks, the dropped ones' complement taken in code order."""
    folder = out / ("data_without" if drop else "data_with")
    for name in ("features", "instruments"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    if not (folder / "calendars").exists():
        (folder / "calendars").symlink_to((data / "calendars").resolve())
    lines = [line for line in (data / "instruments" / "all.txt").read_text().splitlines() if line.strip()]
    codes = [line.split("\t")[0].upper() for line in lines]
    chosen = [c for c in codes if c not in drop]
    if keep_only:
        dead = [c for c in codes if c in _delisted(data)]
        alive = [c for c in chosen if c not in dead][:keep_only - len(dead)]
        chosen = [c for c in chosen if c in dead] + alive
    keep = set(chosen)
    (folder / "instruments" / "all.txt").write_text(
        "\n".join(line for line in lines if line.split("\t")[0].upper() in keep) + "\n")
    have = {p.name.upper(): p for p in (data / "features").iterdir()}
    for code in (c for c in chosen if c in have):
        link = folder / "features" / have[code].name
        if not link.exists():
            link.symlink_to(have[code].resolve())
    return folder


def _delisted(data: Path) -> set[str]:
    path = data / "instruments" / "delisted.txt"
    if not path.is_file():
        sys.exit(f"{path}: no such file (the folder's delisted stocks, CODE<TAB>start<TAB>end)")
    return {line.split("\t")[0].upper() for line in path.read_text().splitlines() if line.strip()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/cn_qlib"))
    p.add_argument("--start", default="2018-01-01", help="first forecast day")
    p.add_argument("--end", default="2022-01-10", help="last forecast day (the last delisting in the data)")
    p.add_argument("--out", default=str(REPO / "runs/bench_survivorship"))
    p.add_argument("--stocks", type=int, default=0,
                   help="develop on this many stocks (the delisted included)")
    p.add_argument("--reuse", action="store_true",
                   help="read the reports OUT/with and OUT/without already hold")
    p.add_argument("extra", nargs="*", help="options passed to both `forecaster backtest` runs")
    args = p.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dead = _delisted(data)
    folders = {"with": _linked(data, out, set(), args.stocks),
               "without": _linked(data, out, dead, args.stocks)}
    if args.stocks:  # "without" is "with" less the dead: the same survivors in both
        survivors = (folders["with"] / "instruments" / "all.txt").read_text().splitlines()
        (folders["without"] / "instruments" / "all.txt").write_text(
            "\n".join(s for s in survivors if s.split("\t")[0].upper() not in dead) + "\n")
    wall = 0.0
    daily, metrics = {}, {}
    for run, folder in folders.items():
        report = out / run
        if not (args.reuse and (report / "metrics.json").exists()):
            cmd = [*forecaster_command(), "backtest", str(folder), "--start", args.start, "--end", args.end,
                   "--out", str(report), "--overwrite", *args.extra]
            status, seconds, _ = run_sampled(cmd)
            if status != 0:
                sys.exit(f"forecaster backtest ({run}) failed with exit status {status}")
            wall += seconds
        metrics[run] = json.loads((report / "metrics.json").read_text())
        daily[run] = _daily(read_predictions(report))
    for name in sorted(set(daily["with"]) & set(daily["without"])):
        ic = {run: ic_summary(daily[run][name])["mean_ic"] for run in daily}
        ex = {run: excess_ann(metrics[run].get("backtest", {}).get(name, {})) for run in daily}
        print(f"survivorship model={name} rank_ic_with={_fmt(ic['with'], 4)} "
              f"rank_ic_without={_fmt(ic['without'], 4)} excess_with={_fmt(ex['with'], 3)} "
              f"excess_without={_fmt(ex['without'], 3)}")
    bench = {}
    for run in daily:
        tests = metrics[run].get("backtest", {})
        entry = next((v for v in tests.values() if isinstance(v, dict) and v.get("benchmark")), {})
        bench[run] = entry.get("benchmark", {}).get("annual_return", math.nan)
    print(f"survivorship benchmark with={_fmt(bench['with'], 3)} without={_fmt(bench['without'], 3)}")
    codes = set(pd.Index(read_predictions(out / "with")["code"].unique()).str.replace(".", "").str.upper())
    print(f"survivorship delisted stocks={len(dead)} in_data={len(dead & codes)} "
          f"wall_minutes={wall / 60:.1f}")


if __name__ == "__main__":
    main()
