"""What breadth buys on an index: train on the whole market, score and trade the day's members.

Runs ``forecaster backtest DATA --universe U`` twice on the same folds (default DATA:
``../shared/data/cn_qlib``, the whole A-share market in Qlib's format, U ``csi300``, forecasts
2019-01-01..2026-12-31), each in a child process whose resident memory (fold workers
included) is sampled every second:

* ``wide``: every model trained on every stock of the data (the default);
* ``narrow``: the same with ``--train-universe U``: models learn only the labels of the day's
  members (suffix ``_narrow``; the factors, which learn nothing, are shown once).

Then, from both reports' predictions (the day's members only), it prints::

    model NAME rank_ic=+0.0000 icir=+0.000 excess_ann=+0.000
    verdict best=NAME diff=+0.0000 p=0.000
    index universe=csi300 members=N wall_minutes=M peak_rss_gb=G

one ``model`` line per model of both runs (``excess_ann``: its default strategy after costs
minus the equal-weight universe of the day's members, annualised), then the Newey-West test
of the wide Transformer's daily rank IC against the best other model of either run (``diff`` =
Transformer minus it), then the universe (``members``: distinct member stocks scored), wall
time and peak RSS of both runs; then ``coverage members_per_day=MIN/MEDIAN/MAX
members_without_data=N stocks=N``; then ``pair NAME wide_minus_narrow diff=... p=...`` for each
model trained both ways, and the rank IC by year of every model (``year`` lines).

Targets (issue 43): on CSI 300 members the wide Transformer above every model with p < 0.05,
rank IC >= 0.065, ICIR >= 0.45, excess >= +0.08; wide above narrow. A whole-market run takes
hours on two cores: develop on a few hundred stocks (``--stocks``) and a year or two.
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
from bench_market import REPO, _fmt, excess_ann, forecaster_command, run_sampled  # noqa: E402

from forecaster.evaluation.scoring import ic_by_year  # noqa: E402
from forecaster.metrics import daily_ic, ic_difference_test, ic_summary  # noqa: E402
from forecaster.reporting.report import read_predictions  # noqa: E402

TRAINED = ("transformer", "gbm", "lightgbm", "ridge_features")  # learn the panel labels: run both ways


def _subset(data: Path, universe: str, n: int, out: Path, start: str, end: str) -> Path:
    """A Qlib folder of ``n`` stocks of ``data`` (links, not copies) for development runs: up
    to half of them members of ``universe`` during ``start..end``, then other stocks."""
    from forecaster.data.market.universe import resolve_universe

    period = resolve_universe(universe, data).members_between(start, end)
    members = [c.replace(".", "").upper() for c in period]
    have = {p.name.upper(): p for p in (data / "features").iterdir()}
    chosen = [c for c in members if c in have][: n // 2]
    chosen += [c for c in sorted(have) if c not in chosen][: n - len(chosen)]
    folder = out / f"data_{n}_{start}_{end}"
    for name in ("features", "instruments"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    if not (folder / "calendars").exists():
        (folder / "calendars").symlink_to((data / "calendars").resolve())
    for market in (data / "instruments").glob("*.txt"):
        if market.name != "all.txt" and not (folder / "instruments" / market.name).exists():
            (folder / "instruments" / market.name).symlink_to(market.resolve())
    lines = (data / "instruments" / "all.txt").read_text().splitlines()
    keep = set(chosen)
    (folder / "instruments" / "all.txt").write_text(
        "\n".join(line for line in lines if line.split("\t")[0].upper() in keep) + "\n")
    for code in chosen:
        link = folder / "features" / have[code].name
        if not link.exists():
            link.symlink_to(have[code].resolve())
    return folder


def _p(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) and np.isfinite(value) else "nan"


def _daily(pred: pd.DataFrame) -> dict[str, pd.Series]:
    """Each model's daily rank IC over the scored rows of a report's predictions."""
    pred = pred.reset_index()
    pred = pred[pred["actual"].notna()]
    actual = pred.pivot_table(index="date", columns="code", values="actual", aggfunc="first")
    out = {}
    for name, g in pred.groupby("model"):
        f = g.pivot_table(index="date", columns="code", values="forecast", aggfunc="first")
        out[name] = daily_ic(f, actual, method="spearman")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/cn_qlib"))
    p.add_argument("--universe", default="csi300")
    p.add_argument("--start", default="2019-01-01", help="first forecast day")
    p.add_argument("--end", default="2026-12-31", help="last forecast day")
    p.add_argument("--out", default=str(REPO / "runs/bench_index"))
    p.add_argument("--stocks", type=int, default=0,
                   help="develop on this many stocks (half of them members, linked into OUT/data_N)")
    p.add_argument("--runs", choices=("both", "wide", "narrow"), default="both")
    p.add_argument("--reuse", action="store_true",
                   help="read a run whose report OUT/RUN already holds (wall time and memory: the runs made)")
    p.add_argument("extra", nargs="*", help="options passed to both `forecaster backtest` runs")
    args = p.parse_args()
    out, data = Path(args.out), Path(args.data)
    out.mkdir(parents=True, exist_ok=True)
    if args.stocks:
        data = _subset(data, args.universe, args.stocks, out, args.start, args.end)
    base = [*forecaster_command(), "backtest", str(data), "--universe", args.universe, "--start", args.start,
            "--end", args.end, "--cache", "--overwrite"]
    runs = ["wide", "narrow"] if args.runs == "both" else [args.runs]
    wall = peak = 0.0
    ran = False  # a run made here (else the wall time and memory are not this call's: nan)
    daily, metrics, names = {}, {}, {}
    for run in runs:
        extra = ["--train-universe", args.universe] if run == "narrow" else []
        done = out / run / "metrics.json"
        if args.reuse and done.exists():  # a finished run: read, not run again (its wall time not counted)
            print(f"# reused {out / run}", flush=True)
        else:
            status, seconds, rss = run_sampled([*base, "--out", str(out / run), *extra, *args.extra])
            if status != 0:
                sys.exit(f"forecaster backtest ({run}) failed with exit status {status}")
            wall, peak, ran = wall + seconds, max(peak, rss), True
        metrics[run] = json.loads(done.read_text())
        for name, series in _daily(read_predictions(out / run)).items():
            if run == "narrow" and name not in TRAINED and "wide" in runs:
                continue  # a factor learns nothing: the same in both runs
            key = f"{name}_narrow" if run == "narrow" else name
            daily[key], names[key] = series, (run, name)
    main_model = "transformer" if "transformer" in daily else "transformer_narrow"
    for key, series in daily.items():
        run, name = names[key]
        s = ic_summary(series)
        excess = excess_ann(metrics[run].get("backtest", {}).get(name, {}))
        print(f"model {key} rank_ic={_fmt(s['mean_ic'], 4)} icir={_fmt(s['icir'], 3)} "
              f"excess_ann={_fmt(excess, 3)}")
    others = {k: ic_summary(v)["mean_ic"] for k, v in daily.items() if k != main_model}
    others = {k: v for k, v in others.items() if np.isfinite(v)}
    best = max(others, key=others.get) if others else None
    test = ic_difference_test(daily[main_model], daily[best]) if best else {}
    print(f"verdict best={best} diff={_fmt(test.get('mean_diff'), 4)} p={_p(test.get('p_value'))}")
    cov = metrics[runs[0]].get("index_universe", {})
    scored = pd.Index(read_predictions(out / runs[0])["code"].unique())
    d = cov.get("members_per_day", {})
    print(f"index universe={args.universe} members={len(scored)} "
          f"wall_minutes={wall / 60 if ran else math.nan:.1f} "
          f"peak_rss_gb={peak / 2**30 if ran else math.nan:.2f}")
    print(f"coverage members_per_day={d.get('min')}/{d.get('median')}/{d.get('max')} "
          f"members_without_data={cov.get('members_without_data')} "
          f"stocks={metrics[runs[0]]['universe'].get('loaded')}")
    for name in TRAINED:
        if name in daily and f"{name}_narrow" in daily:
            t = ic_difference_test(daily[name], daily[f"{name}_narrow"])
            diff = _fmt(t.get("mean_diff"), 4)
            print(f"pair {name} wide_minus_narrow diff={diff} p={_p(t.get('p_value'))}")
    for key, series in daily.items():
        for row in ic_by_year(series).itertuples():
            print(f"year {row.year} model {key} rank_ic={_fmt(row.mean_ic, 4)} icir={_fmt(row.icir, 3)} "
                  f"n_days={row.n_days}")


if __name__ == "__main__":
    main()
