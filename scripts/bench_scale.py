"""Whole-market scale on one machine: the default panel walk-forward on synthetic panels.

For each size N (stocks) a fresh process generates ``forecaster.data.synthetic_panel(N,
2500 days, signal_ic=0.05)`` (the planted signal shows a broken pipeline), runs the panel
Transformer, gradient boosting and the factor scores with quarterly refits over the last
1,000 days (expanding window, 16 folds), and reports one line::

    scale stocks=N wall_s=... peak_rss_gb=... stock_days_per_s=... rank_ic=...

``wall_s``: generation + walk-forward + scoring; ``peak_rss_gb``: the largest sum of the
resident memory of the size's process and all its children (joblib workers), sampled every
0.2 s from /proc; ``stock_days_per_s``: stock-days of the panel (N x days) per second of
``wall_s``; ``rank_ic``: the Transformer's mean daily rank IC on the tradeable label (the
planted signal is 0.05). Targets on 2 cores: 5,000 stocks in under 45 minutes and
12 GB, wall time within 5.5x from 1,000 to 5,000 stocks, the planted IC recovered at every
size. ``--sizes 500,1000`` runs only those sizes. The Transformer trains on a budget of
``--epoch-stock-days`` stock-days an epoch (``PanelTransformer.epoch_stock_days``), which
keeps a fold's cost bounded as N grows.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            pid, ppid, pages = int(entry), int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(pid)
        rss[pid] = pages * os.sysconf("SC_PAGE_SIZE")
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def run_size(n: int, args) -> dict:
    """One size in its own process, its memory sampled from here."""
    cmd = [sys.executable, __file__, "--child", str(n), "--days", str(args.days), "--jobs", str(args.jobs),
           "--epoch-stock-days", str(args.epoch_stock_days), "--max-epochs", str(args.max_epochs),
           "--stocks-per-batch", str(args.stocks_per_batch)] + [f"--set={kv}" for kv in args.set]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    peak = [0]

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_rss(proc.pid))
            time.sleep(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, _ = proc.communicate()
    thread.join()
    if proc.returncode:
        raise SystemExit(f"size {n} failed (exit {proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    result.update(wall_s=time.perf_counter() - start, peak_rss_gb=peak[0] / 2**30)
    return result


def child(n: int, args) -> None:
    from forecaster.data import synthetic_panel
    from forecaster.metrics import daily_ic, ic_summary
    from forecaster.presets import panel_models
    from forecaster.walkforward import WalkForwardConfig, walk_forward

    overrides = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in args.set)}
    t0 = time.perf_counter()
    frames = synthetic_panel(n, args.days, signal_ic=0.05, seed=0)
    t_gen = time.perf_counter() - t0
    models = {k: v for k, v in panel_models(time_series=False, epoch_stock_days=args.epoch_stock_days,
                                            max_epochs=args.max_epochs,
                                            stocks_per_batch=args.stocks_per_batch or None,
                                            **overrides).items()
              if k in ("transformer", "gbm", "low_vol_20d", "low_turnover_20d", "reversal_5d", "composite")}
    config = WalkForwardConfig(train_days=args.days - 1000, retrain_every=63, n_jobs=args.jobs,
                               progress=False)
    result = walk_forward(frames, models, config)
    pred = result.predictions
    ics = {}
    for name, g in pred.groupby("model"):
        f = g.pivot_table(index="date", columns="code", values="forecast", aggfunc="first")
        a = g.pivot_table(index="date", columns="code", values="actual", aggfunc="first")
        ics[name] = ic_summary(daily_ic(f, a))["mean_ic"]
    model_s = {}
    for (_, name), sec in result.seconds.items():
        model_s[name] = model_s.get(name, 0.0) + sec
    print(json.dumps({"stocks": n, "days": args.days, "folds": len(result.folds), "generate_s": t_gen,
                      "walk_forward_s": time.perf_counter() - t0 - t_gen, "rank_ic": ics,
                      "model_s": model_s}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="500,1000,2000,5000")
    p.add_argument("--days", type=int, default=2500)
    p.add_argument("--jobs", type=int, default=-1)
    p.add_argument("--epoch-stock-days", type=int, default=200_000)
    p.add_argument("--max-epochs", type=int, default=20)
    p.add_argument("--stocks-per-batch", type=int, default=0,
                   help="PanelTransformer.stocks_per_batch (0: every stock of a batch's days)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="another PanelTransformer parameter (repeatable), e.g. --set days_per_batch=32")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        child(args.child, args)
        return
    print(f"# synthetic panels x {args.days} days, planted rank IC 0.05, quarterly refits over the last "
          f"1000 days, epoch budget {args.epoch_stock_days} stock-days, stocks per batch "
          f"{args.stocks_per_batch or 'all'}, jobs {args.jobs}" + "".join(f", {kv}" for kv in args.set),
          flush=True)
    walls = {}
    for n in (int(s) for s in args.sizes.split(",")):
        r = run_size(n, args)
        walls[n] = r["wall_s"]
        others = " ".join(f"{k}={v:+.4f}" for k, v in sorted(r["rank_ic"].items()) if k != "transformer")
        ic = r["rank_ic"]["transformer"]
        print(f"scale stocks={n} wall_s={r['wall_s']:.0f} peak_rss_gb={r['peak_rss_gb']:.2f} "
              f"stock_days_per_s={n * args.days / r['wall_s']:.0f} rank_ic={ic:+.4f}")
        print(f"# {n} stocks: planted 0.05; generate {r['generate_s']:.0f} s, walk-forward "
              f"{r['walk_forward_s']:.0f} s, {r['folds']} folds; other models {others}", flush=True)
        spent = ", ".join(f"{k} {v:.0f}" for k, v in sorted(r["model_s"].items(), key=lambda kv: -kv[1]))
        print(f"# {n} stocks: fit + forecast seconds summed over folds (worker time): {spent}", flush=True)
    if 1000 in walls and 5000 in walls:
        print(f"scale_ratio_5000_vs_1000 {walls[5000] / walls[1000]:.2f} (target <= 5.5)")


if __name__ == "__main__":
    main()
