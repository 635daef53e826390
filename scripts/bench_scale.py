"""Whole-market scale on one machine: the default panel walk-forward on synthetic panels.

For each size N (stocks) a fresh process generates ``forecaster.data.synthetic_panel(N,
2500 days, signal_ic=0.05)`` (the planted signal shows a broken pipeline), runs every model of
the default panel backtest with its defaults (the panel Transformer: its inputs, networks,
schedule and warm-started refits resolved from the breadth, past 500 stocks one network on the
default features and one on Alpha158; gradient boosting, LightGBM where
installed, ridge on the features, the factor scores; not the per-stock time-series baselines)
with quarterly refits over the last 1,000 days (expanding window, 16 folds), and reports one
line::

    scale stocks=N wall_s=... peak_rss_gb=... stock_days_per_s=... rank_ic=...

``wall_s``: generation (and building the :class:`~forecaster.data.panel.Panel`, which the
walk-forward is given) + walk-forward + scoring; ``peak_rss_gb``: the largest sum of the
resident memory of the size's process and all its children (joblib workers), sampled every
0.2 s from /proc; ``stock_days_per_s``: stock-days of the panel (N x days) per second of
``wall_s``; ``rank_ic``: the Transformer's mean daily rank IC on the tradeable label (the
planted signal is 0.05). Targets on 2 cores (issue 44): 5,000 stocks in under 45 minutes and
16 GB, wall time within 5.5x from 1,000 to 5,000 stocks, the planted IC recovered at every
size. ``--sizes 500,1000`` runs only those sizes; ``--set KEY=VALUE`` overrides a Transformer
parameter and ``--warm-start S`` the walk-forward's warm start.

``--backend ray --address HEAD_IP:PORT`` runs the folds as tasks of a running Ray cluster (on
this machine: docs/scale.md): ``peak_rss_gb`` then sums the run's processes and every node's
raylet tree (its fold workers and object store), and a ``# ... ray node K`` line gives each
node's own peak. A ``# ... forecasts sha1`` line digests every forecast with its model, day and
stock: two runs (local and Ray) forecast alike when their digests are equal.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _processes() -> tuple[dict[int, list[int]], dict[int, int]]:
    """``({parent: [children]}, {pid: resident bytes})`` of every process (Linux /proc)."""
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
    return children, rss


def _tree_rss(root: int, table=None) -> dict[int, int]:
    """``{pid: resident bytes}`` of ``root`` and its descendants."""
    children, rss = table or _processes()
    tree, todo = {}, [root]
    while todo:
        pid = todo.pop()
        tree[pid] = rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return tree


def _ray_nodes() -> list[list[int]]:
    """The roots of each Ray node's processes on this machine, oldest first (the head's, on a
    cluster started head first): its raylet (whose tree holds the node's fold workers and object
    store), and on the head the cluster's control store (``gcs_server``) too."""
    found, gcs = [], []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    first = f.read().split(b"\0", 1)[0]
            except OSError:
                continue
            if first.endswith(b"/raylet"):
                found.append(int(entry))
            elif first.endswith(b"/gcs_server"):
                gcs.append(int(entry))
    nodes = [[raylet] for raylet in sorted(found)]
    if nodes:
        nodes[0].extend(gcs)
    return nodes


def _plot_timeline(csv: Path, n: int) -> None:
    """``csv`` beside a PNG of the same name: resident memory over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    t = pd.read_csv(csv)
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(t["seconds"] / 60, t["tree_rss_gb"], label="RSS summed over the processes (the target)")
    ax.plot(t["seconds"] / 60, t["tree_pss_gb"], label="PSS of the processes (shared pages once)")
    ax.plot(t["seconds"] / 60, t["main_rss_gb"], label="RSS of the main process (the driver)")
    ax.set(xlabel="minutes", ylabel="GB", title=f"bench_scale: {n} stocks")
    # below the axes: inside, it covered the curves' first minutes
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=3, fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(csv.with_suffix(".png"), dpi=100)
    plt.close(fig)


def _pss(pids) -> int:
    """Proportional set size summed over ``pids``: shared pages (the memory-mapped panel every
    worker reads) counted once in all, not once per process as in the RSS sum."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += sum(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
        except OSError:
            continue
    return total


def run_size(n: int, args) -> dict:
    """One size in its own process, its memory sampled from here."""
    cmd = [sys.executable, __file__, "--child", str(n), "--days", str(args.days), "--jobs", str(args.jobs),
           "--warm-start", str(args.warm_start), "--backend", args.backend, "--address", args.address
           ] + [f"--set={kv}" for kv in args.set]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    peak = [0, 0]
    # On a cluster (--address) the fold workers are the nodes' processes, not this run's
    # children: each node's tree is sampled too, and the peak is of their sum with the driver's.
    nodes = _ray_nodes() if args.address else []
    node_peak = {tuple(roots): [0, 0] for roots in nodes}
    # PSS walks the page tables: once a second is enough, once in 5 s on a cluster (its
    # processes map the object store: 30 % of a core for this sampler, taken from the run)
    pss_every = 25 if nodes else 5
    log = open(args.rss_log.with_name(f"{args.rss_log.stem}_{n}.csv"), "w") if args.rss_log else None
    if log:
        log.write("seconds,tree_rss_gb,main_rss_gb,tree_pss_gb,processes\n")

    def sample():
        ticks = 0
        while proc.poll() is None:
            table = _processes()
            tree = _tree_rss(proc.pid, table)
            driver = dict(tree)
            for roots, node_max in node_peak.items():
                node = {pid: b for root in roots for pid, b in _tree_rss(root, table).items()}
                tree.update(node)
                node_max[0] = max(node_max[0], sum(node.values()))
                if ticks % pss_every == 0:
                    node_max[1] = max(node_max[1], _pss(node))
            peak[0] = max(peak[0], sum(tree.values()))
            if ticks % pss_every == 0:
                pss = _pss(tree)
                peak[1] = max(peak[1], pss)
                if log:
                    log.write(f"{time.perf_counter() - start:.1f},{sum(tree.values()) / 2**30:.3f},"
                              f"{driver.get(proc.pid, 0) / 2**30:.3f},{pss / 2**30:.3f},{len(tree)}\n")
                    log.flush()
            ticks += 1
            time.sleep(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    out, _ = proc.communicate()
    thread.join()
    if log:
        log.close()
        _plot_timeline(Path(log.name), n)
    if proc.returncode:
        raise SystemExit(f"size {n} failed (exit {proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    result.update(wall_s=time.perf_counter() - start, peak_rss_gb=peak[0] / 2**30,
                  peak_pss_gb=peak[1] / 2**30,
                  nodes=[(roots[0], rss / 2**30, pss / 2**30) for roots, (rss, pss) in node_peak.items()])
    return result


def _own_rss_gb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30


def _phase(name: str, t0: float) -> None:
    """A marker on stderr, to read the memory timeline (``--rss-log``) against."""
    print(f"# phase {name} at {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)


def child(n: int, args) -> None:
    import numpy as np
    import pandas as pd

    from forecaster.data import synthetic_panel
    from forecaster.data.panel import Panel
    from forecaster.evaluation.assembly import positions
    from forecaster.evaluation.backends import release_freed_heap
    from forecaster.evaluation.memory import memory_summary
    from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
    from forecaster.metrics import daily_ic, groups_of, ic_summary
    from forecaster.models.presets import panel_models

    overrides = {k: ast.literal_eval(v) for k, v in (s.split("=", 1) for s in args.set)}
    t0 = time.perf_counter()
    # The panel built once, the frames dropped: they are as large as the panel (1.6 GB at 5,000).
    panel = Panel.from_frames(synthetic_panel(n, args.days, signal_ic=0.05, seed=0))
    t_gen = time.perf_counter() - t0
    before = _own_rss_gb()
    release_freed_heap()  # the generator's frames: 5,000 x 17 small blocks glibc would keep
    print(f"# resident memory after building the panel {before:.2f} GB, {_own_rss_gb():.2f} GB once the "
          "generator's freed heap is handed back", file=sys.stderr, flush=True)
    _phase("generated", t0)
    # Every model `forecaster backtest` runs on a panel of this breadth, with its defaults; the
    # per-stock time-series baselines are left out at every size (off past 500 stocks by
    # default, and their cost grows with stocks, not with the panel's machinery).
    models = panel_models(time_series=False, **overrides)
    warm = None if args.warm_start < 0 else args.warm_start
    config = WalkForwardConfig(train_days=args.days - 1000, retrain_every=63, n_jobs=args.jobs,
                               warm_start=warm, progress=False, backend=args.backend, address=args.address)
    result = walk_forward(panel, models, config)
    _phase("walk-forward done", t0)
    pred, result.predictions = result.predictions, None  # one reference: it goes once scored
    # The frame carries each forecast's label: scoring needs only the panel's axes, so its
    # fields (2.25 GB at 5,400 x 3,900) go before the scoring's own working memory comes.
    dates, codes, n_stocks = panel.dates, panel.codes, panel.n_stocks
    del panel
    release_freed_heap()
    code_index = pd.Index(codes)
    ics, n_rows = {}, len(pred)
    digest = hashlib.sha1("\n".join(map(str, [*dates, *codes])).encode())  # the positions' axes
    # A model at a time (the frame is in model order: slices, no copy), its [days, stocks]
    # tables filled by position (a pivot table hashes 5 M rows per model).
    for name, rows in groups_of(pred, "model"):
        day, col = dates.get_indexer(rows.index), positions(code_index, rows["code"])
        days = np.unique(day)
        at = np.searchsorted(days, day)
        tables = []
        for column in ("forecast", "actual"):
            table = np.full((len(days), n_stocks), np.nan)
            table[at, col] = rows[column].to_numpy()
            tables.append(pd.DataFrame(table, index=dates[days], columns=codes))
        ics[str(name)] = ic_summary(daily_ic(*tables))["mean_ic"]
        # every forecast, where it sits and what it reads: one run's against another's (ray, local)
        for part in (str(name).encode(), day.astype(np.int32), col.astype(np.int32),
                     np.ascontiguousarray(rows["forecast"].to_numpy(np.float64))):
            digest.update(part)
    del pred, rows
    _phase("scored", t0)
    model_s = {}
    for (_, name), sec in result.seconds.items():
        model_s[name] = model_s.get(name, 0.0) + sec
    memory = memory_summary(result.memory["main_process_gb"], result.memory["fold_worker_gb"],
                            result.memory["workers"])
    print(json.dumps({"stocks": n, "days": args.days, "folds": len(result.folds), "generate_s": t_gen,
                      "walk_forward_s": time.perf_counter() - t0 - t_gen, "rank_ic": ics,
                      "forecasts_sha1": digest.hexdigest(), "rows": n_rows, "model_s": model_s,
                      "memory": memory}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="500,1000,2000,5000")
    p.add_argument("--days", type=int, default=2500)
    p.add_argument("--jobs", type=int, default=-1)
    p.add_argument("--warm-start", type=int, default=-1,
                   help="WalkForwardConfig.warm_start (-1: the default, resolved from the breadth)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a PanelTransformer parameter (repeatable), e.g. --set n_seeds=1 "
                        "--set epoch_stock_days=200000 (the rows of docs/scale.md before the defaults)")
    p.add_argument("--backend", choices=("local", "ray"), default="local",
                   help="WalkForwardConfig.backend: the folds in local processes or as Ray tasks")
    p.add_argument("--address", default="",
                   help="with --backend ray: a running cluster's HEAD_IP:PORT (its nodes' memory sampled "
                        "per node); empty: a Ray instance the run starts itself")
    p.add_argument("--rss-log", type=Path, default=None, metavar="CSV",
                   help="write a memory timeline per size (CSV_N.csv: tree RSS, the size process's "
                        "RSS, tree PSS, processes; once a second) and its plot (CSV_N.png)")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child is not None:
        child(args.child, args)
        return
    print(f"# synthetic panels x {args.days} days, planted rank IC 0.05, quarterly refits over the last "
          f"1000 days, every default (warm start {'by breadth' if args.warm_start < 0 else args.warm_start}"
          f"), jobs {args.jobs}, backend {args.backend}{' at ' + args.address if args.address else ''}"
          + "".join(f", {kv}" for kv in args.set), flush=True)
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
        print(f"# {n} stocks: peak PSS {r['peak_pss_gb']:.2f} GB (shared pages counted once; "
              f"peak RSS sums them per process)", flush=True)
        print(f"# {n} stocks: fit + forecast seconds summed over folds (worker time): {spent}", flush=True)
        for k, (raylet, rss, pss) in enumerate(r["nodes"], 1):
            print(f"# {n} stocks: ray node {k}{' (head, with gcs_server)' if k == 1 else ''} (raylet "
                  f"{raylet}, its workers and object store) peak RSS {rss:.2f} GB, peak PSS {pss:.2f} GB",
                  flush=True)
        print(f"# {n} stocks: forecasts sha1 {r['forecasts_sha1']} over {r['rows']} rows (equal across "
              "backends and runs when the forecasts are)", flush=True)
        m = r.get("memory") or {}
        if m:
            main = ", ".join(f"{k} {v:.2f}" for k, v in m["main_process_gb"].items())
            print(f"# {n} stocks: walk-forward memory (GB): main process by phase {main}; largest fold "
                  f"worker {m.get('fold_worker_peak_gb', float('nan')):.2f} (fold "
                  f"{m.get('fold_of_worker_peak', '-')}); peak in {m['peak_phase']} (upper bound "
                  f"{m['peak_gb']:.2f})", flush=True)
    if 1000 in walls and 5000 in walls:
        print(f"scale_ratio_5000_vs_1000 {walls[5000] / walls[1000]:.2f} (target <= 5.5)")


if __name__ == "__main__":
    main()
