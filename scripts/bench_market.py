"""The default ``forecaster backtest`` on a whole market, as a new user runs it.

Runs ``forecaster backtest DATA --out OUT`` with no tuning option (default DATA:
``../shared/data/szse``, 1,294 Shenzhen stocks 2016-2022) in a child process, samples the
resident memory of its whole process tree (fold workers included) every second, then reads
the report's ``metrics.json`` and prints::

    model NAME rank_ic=+0.0000 icir=+0.000 excess_ann=+0.000
    verdict best=NAME diff=+0.0000 p=0.000
    market stocks=N wall_minutes=M peak_rss_gb=G

one ``model`` line per model (``excess_ann``: its default strategy after costs minus the
equal-weight universe, annualised), then the Newey-West test of the Transformer's daily rank
IC against the best other model (``diff`` = Transformer minus it), then size, wall time and
peak RSS; then where the time went (``phase NAME minutes=M``: loading, the Panel, the folds'
wall time, assembling the forecasts, statistics, backtests, report files; ``phase fit_predict
model NAME cpu_minutes=M``: each model's fits and forecasts summed over folds, in the
workers), then the rank IC by year and by board of every model (``year``/``board`` lines).
Targets (issue 29): the Transformer above every model with p < 0.05, rank IC >= 0.095, ICIR
>= 0.95, excess >= +0.10, under 45 minutes and 8 GB; issue 44: under 20 minutes on these 2
cores, under 5 minutes on one GPU (``--device cuda``; docs/scale.md has both runs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and all its descendants (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * page
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def _fmt(x, digits: int) -> str:
    return f"{x:+.{digits}f}" if isinstance(x, (int, float)) and math.isfinite(x) else "nan"


def run_sampled(cmd: list[str]) -> tuple[int, float, int]:
    """Run ``cmd`` (its output to this script's stderr), sampling the resident memory of its
    process tree every second: ``(exit status, wall seconds, peak bytes)``."""
    print("# " + " ".join(cmd), flush=True)
    start, peak = time.perf_counter(), 0
    child = subprocess.Popen(cmd, stdout=sys.stderr)  # this script's stdout: only its own lines
    while child.poll() is None:
        peak = max(peak, _tree_rss(child.pid))
        time.sleep(1.0)
    return child.returncode, time.perf_counter() - start, peak


def forecaster_command() -> list[str]:
    """The ``forecaster`` script beside this interpreter, or ``python -m forecaster`` where the
    package is on the path but not installed (e.g. a GPU machine given the checkout)."""
    script = Path(sys.executable).with_name("forecaster")
    return [str(script)] if script.exists() else [sys.executable, "-m", "forecaster"]


def excess_ann(backtest: dict) -> float:
    """A model's strategy after costs minus its benchmark, annualised (metrics.json's
    ``backtest`` entry of the model); NaN without one."""
    if backtest.get("strategy") and backtest.get("benchmark"):
        return backtest["strategy"]["annual_return"] - backtest["benchmark"]["annual_return"]
    return math.nan


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/szse"))
    p.add_argument("--out", default=str(REPO / "runs/bench_market"))
    p.add_argument("--device", default=None,
                   help="the Transformer's device (`--device` of the backtest: auto, cpu, cuda); default: "
                        "the backtest's own (auto)")
    p.add_argument("extra", nargs="*", help="options passed to `forecaster backtest` after `--` (none: the "
                                            "defaults), e.g. `-- --warm-start 2`")
    args = p.parse_args()
    cmd = [*forecaster_command(), "backtest", args.data, "--out", args.out,
           "--overwrite", *(["--device", args.device] if args.device else []), *args.extra]
    status, wall, peak = run_sampled(cmd)
    if status != 0:
        sys.exit(f"forecaster backtest failed with exit status {status}")
    m = json.loads((Path(args.out) / "metrics.json").read_text())
    ic, backtests = m["daily_rank_ic"], m.get("backtest", {})
    for name, s in ic.items():
        excess = excess_ann(backtests.get(name, {}))
        print(f"model {name} rank_ic={_fmt(s.get('mean_ic'), 4)} icir={_fmt(s.get('icir'), 3)} "
              f"excess_ann={_fmt(excess, 3)}")
    others = {k: v for k, v in ic.items() if k != "transformer" and v.get("mean_ic") is not None}
    best = max(others, key=lambda k: others[k]["mean_ic"]) if others else None
    test = next((t for t in m.get("rank_ic_difference_tests", []) if t.get("baseline") == best), {})
    print(f"verdict best={best} diff={_fmt(test.get('mean_diff'), 4)} "
          f"p={test['p_value']:.3f}" if test.get("p_value") is not None else
          f"verdict best={best} diff=nan p=nan")
    print(f"market stocks={m['universe'].get('used', m['universe'].get('loaded'))} "
          f"wall_minutes={wall / 60:.1f} peak_rss_gb={peak / 2**30:.2f}")
    timings = m.get("timings", {})
    for phase, seconds in timings.items():
        if phase != "models" and seconds is not None:
            print(f"phase {phase} minutes={seconds / 60:.2f}")
    for name, seconds in timings.get("models", {}).items():
        print(f"phase fit_predict model {name} cpu_minutes={seconds / 60:.2f}")
    for kind in ("ic_by_year", "ic_by_board"):
        for name, groups in m.get(kind, {}).items():
            for group, s in groups.items():
                print(f"{kind.split('_')[-1]} {group} model {name} rank_ic={_fmt(s.get('mean_ic'), 4)} "
                      f"icir={_fmt(s.get('icir'), 3)} n_days={s.get('n_days')}")


if __name__ == "__main__":
    main()
