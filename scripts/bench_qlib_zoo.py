"""Qlib's own model zoo on the folds, universe, days and label of ``bench_index``.

Runs Qlib's benchmark pipelines (LightGBM on Alpha158; MLP, GRU, ALSTM, Transformer and
Localformer on Alpha360, each with its benchmark configuration: ``scripts/qlib_zoo_worker.py``)
in a second Python with ``pyqlib`` and ``torch`` (``--qlib-python``; never this project's
environment: Qlib pins packages of its own, such as mlflow 1.27 and gym), made by one command
without this project's constraints (checked from a fresh clone: it resolves pandas 3.1.1 and
numpy 2.4.6, and Qlib reads ``../shared/data/cn_qlib`` and builds Alpha158 with them; ``ecos``
is for ``bench_enhanced.py``'s peer, whose optimiser hard-codes that solver)::

    python3 -m venv /tmp/qlibvenv && /tmp/qlibvenv/bin/pip install pyqlib==0.9.7 torch \
        scikit-learn 'protobuf<4' 'setuptools<81' ecos

on the Qlib folder and point-in-time universe of a ``bench_index`` report (``--report DIR``, a
``forecaster backtest`` report folder; without it this script runs ``bench_index.py --runs wide
-- --no-baselines`` over ``--years`` first). Qlib refits **yearly**, as its rolling benchmarks
do (our Transformer's report refits quarterly): for each forecast year Y the test segment is the
signal days of Y's forecast days (Qlib dates a score by the day it is made), the valid segment
the year before up to two trading days before the test (so its labels are known by then), the
train segment from the folder's 61st day (the first with a full 60-day window; or the last
``--train-years`` years) to the end of year Y-2. Qlib trains on its own default label
``Ref($close, -2)/Ref($close, -1) - 1``; ``forecaster score`` scores every ``pred.pkl`` on the
report's tradeable label, universe and days, beside the report's Transformer, and this script
prints, per model (our Transformer's first)::

    zoo model=NAME rank_ic=+0.0000 icir=+0.000 diff_vs_transformer=+0.0000 p=0.000 wall_minutes=M
    zoo best=NAME transformer_rank=K of N

``rank_ic``/``icir``: the daily rank IC over the forecast days of ``--years`` (the report's
Transformer on the same days); ``diff_vs_transformer``: the model's mean daily rank IC minus
the Transformer's on the days both score, ``p`` its paired Newey-West test (nan for the
Transformer itself); ``wall_minutes``: the model's fits and predictions (the Transformer's: its
fitting time in the report's run, ``timings.models.transformer``; the features each handler
computes once are printed apart on ``#`` lines). On a CPU the deep models' epochs are capped
(``--max-epochs``, 2 by default there; MLP's steps to that many passes over its training
rows); ``--device cuda`` runs them in full. The ``# qlib_NAME`` lines say per fold the epochs
run (LightGBM: boosting rounds; MLP: its validations, one every 20 steps and one at the last).
Every ``pred.pkl`` and score folder stays in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_market import REPO, _fmt, forecaster_command, run_sampled  # noqa: E402
from qlib_zoo_worker import ZOO  # noqa: E402

MAIN = "transformer"
PREFIX = "qlib_"  # the zoo's names in the score reports: qlib_transformer beside our transformer
WARM_DAYS = 60  # Alpha360's and Alpha158's longest window: training starts once it is full
LINE = re.compile(r"^zoo model=(?P<model>\S+) rank_ic=(?P<rank_ic>\S+) icir=(?P<icir>\S+) "
                  r"diff_vs_transformer=(?P<diff>\S+) p=(?P<p>\S+) wall_minutes=(?P<wall>\S+)$")
BEST = re.compile(r"^zoo best=(?P<best>\S+) transformer_rank=(?P<rank>\d+) of (?P<n>\d+)$")


def parse_models(text: str) -> list[str]:
    """``--models a,b``: names of the zoo, each once."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in ZOO]
    if bad or not names:
        raise SystemExit(f"--models {text}: {', '.join(bad) or 'none given'} not in the zoo; "
                         f"expected names among {', '.join(ZOO)}")
    if len(set(names)) < len(names):
        raise SystemExit(f"--models {text}: a name given twice")
    return names


def parse_years(text: str) -> list[int]:
    """``--years 2025`` or ``--years 2019-2026``."""
    m = re.fullmatch(r"(\d{4})(?:-(\d{4}))?", text.strip())
    if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
        raise SystemExit(f"--years {text}: expected a year (2025) or a span of years (2019-2026)")
    first = int(m.group(1))
    return list(range(first, int(m.group(2) or first) + 1))


def zoo_folds(calendar: list[str], years: list[int], train_years: int = 0) -> list[dict]:
    """One yearly fold per forecast year (see the module docstring); dates as ``YYYY-MM-DD``."""
    folds = []
    for year in years:
        days = [i for i, d in enumerate(calendar) if d.startswith(f"{year}-")]
        before = [i for i, d in enumerate(calendar) if d.startswith(f"{year - 1}-")]
        if not days or not before or days[0] == 0:
            raise SystemExit(f"--years: {year} and the year before need trading days in the folder's "
                             f"calendar ({calendar[0]}..{calendar[-1]})")
        test = [calendar[days[0] - 1], calendar[days[-1] - 1]]  # signal days: the day before each
        valid = [calendar[before[0]], calendar[days[0] - 3]]  # its last label, close(t+2)/close(t+1), known
        if train_years:
            first = next((i for i, d in enumerate(calendar) if int(d[:4]) >= year - 1 - train_years), 0)
        else:
            first = WARM_DAYS
        if before[0] - 1 < max(first, WARM_DAYS):
            raise SystemExit(f"--years: {year} leaves no training days (the folder's calendar starts "
                             f"{calendar[0]}, training on its {WARM_DAYS + 1}st day at the earliest, "
                             f"ends with year {year - 2})")
        train = [calendar[max(first, WARM_DAYS)], calendar[before[0] - 1]]
        folds.append({"year": year, "train": train, "valid": valid, "test": test})
    return folds


def zoo_line(name: str, rank_ic: float, icir: float, diff: float, p: float, wall_minutes: float) -> str:
    p_text = f"{p:.3f}" if isinstance(p, (int, float)) and math.isfinite(p) else "nan"
    wall = f"{wall_minutes:.1f}" if math.isfinite(wall_minutes) else "nan"
    return (f"zoo model={name} rank_ic={_fmt(rank_ic, 4)} icir={_fmt(icir, 3)} "
            f"diff_vs_transformer={_fmt(diff, 4)} p={p_text} wall_minutes={wall}")


def best_line(rank_ics: dict[str, float], main: str = MAIN) -> str:
    """The model of the highest rank IC, and the Transformer's place among all N (1 = best; a
    model without a rank IC counts below every other)."""
    value = {k: (v if math.isfinite(v) else -math.inf) for k, v in rank_ics.items()}
    best = max(value, key=value.get)
    rank = 1 + sum(v > value[main] for k, v in value.items() if k != main)
    return f"zoo best={best} transformer_rank={rank} of {len(value)}"


def features_line(handler: str, account: dict, wall_minutes: float) -> str:
    """A ``#`` line: what the handler computed, and the columns it left empty (counted, not dropped)."""
    empty = account["all_nan_columns"]
    names = f" ({empty[0]}..{empty[-1]})" if len(empty) > 1 else f" ({empty[0]})" if empty else ""
    return (f"# features {handler} rows={account['rows']} stocks={account['instruments']} "
            f"columns={account['columns']} all_nan_columns={len(empty)}{names} "
            f"wall_minutes={wall_minutes:.1f}")


def parse_lines(text: str) -> tuple[list[dict], dict | None]:
    """The ``zoo`` lines of this script's output read back: ``model`` lines as dicts of floats
    (``nan`` kept), and the ``best`` line."""
    models, best = [], None
    for line in text.splitlines():
        if m := LINE.match(line):
            models.append({"model": m["model"], **{k: float(m[k]) for k in ("rank_ic", "icir", "diff", "p",
                                                                          "wall")}})
        elif m := BEST.match(line):
            best = {"best": m["best"], "rank": int(m["rank"]), "n": int(m["n"])}
    return models, best


def scored_values(metrics: dict, name: str) -> tuple[float, float, float, float]:
    """``(rank_ic, icir, diff_vs_transformer, p)`` of ``name`` in a ``forecaster score`` report's
    metrics.json; the stored test is the Transformer minus the model, the line the reverse."""
    ic = metrics["daily_rank_ic"][name]
    test = next((t for t in metrics.get("rank_ic_difference_tests", []) if t["baseline"] == name), {})

    def num(x):
        return float(x) if x is not None else math.nan

    return num(ic.get("mean_ic")), num(ic.get("icir")), -num(test.get("mean_diff")), num(test.get("p_value"))


def _check_report(report: Path) -> dict:
    needed = [report / "metrics.json", report / "experiment.toml"]
    lacking = [p.name for p in needed if not p.is_file()]
    if lacking:
        raise SystemExit(f"--report {report}: no {' or '.join(lacking)} (a `forecaster backtest` report "
                         "folder, e.g. bench_index's OUT/wide, was expected)")
    return tomllib.loads((report / "experiment.toml").read_text())


def _check_qlib(python: str) -> None:
    if not Path(python).is_file():
        raise SystemExit(f"--qlib-python {python}: no such file (a Python with pyqlib and torch; see --help)")
    need = "import qlib, torch, lightgbm, sklearn"
    out = subprocess.run([python, "-c", need], capture_output=True, text=True)
    if out.returncode:
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        raise SystemExit(f"--qlib-python {python}: cannot import qlib, torch, lightgbm and sklearn ({last})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--report", help="a bench_index report folder (its OUT/wide) to score beside; default: "
                   "run bench_index.py --runs wide -- --no-baselines over --years into OUT/bench_index")
    p.add_argument("--data", default=str(REPO.parent / "shared/data/cn_qlib"),
                   help="the Qlib folder when bench_index is run here (else the report's)")
    p.add_argument("--universe", default="csi300", help="when bench_index is run here (else the report's)")
    p.add_argument("--qlib-python", default="/tmp/qlibvenv/bin/python", help="a Python with pyqlib and torch")
    p.add_argument("--models", default=",".join(ZOO), help=f"a subset of {','.join(ZOO)}")
    p.add_argument("--years", default=None,
                   help="forecast years, 2025 or 2019-2026 (default: the report's, or 2019-2026)")
    p.add_argument("--train-years", type=int, default=0,
                   help="train on this many years before the valid year (0: all from the folder's start)")
    p.add_argument("--max-epochs", type=int, default=None,
                   help="cap on the deep models' epochs (default: 2 on a CPU, the benchmark's on CUDA)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--threads", type=int, default=1, help="threads of each Qlib fit (see the worker)")
    p.add_argument("--out", default=str(REPO / "runs/bench_qlib_zoo"))
    p.add_argument("--reuse", action="store_true", help="keep features and predictions OUT already holds")
    args = p.parse_args()
    models = parse_models(args.models)
    if args.max_epochs is not None and args.max_epochs < 1:
        raise SystemExit(f"--max-epochs {args.max_epochs}: expected a whole number >= 1")
    if args.train_years < 0:
        raise SystemExit(f"--train-years {args.train_years}: expected 0 (all) or more years")
    _check_qlib(args.qlib_python)
    out = Path(args.out)
    from bench_index import _daily

    from forecaster.metrics import ic_summary
    from forecaster.reporting.report import read_predictions

    if args.report:
        report = Path(args.report)
        exp = _check_report(report)
    else:
        years = parse_years(args.years or "2019-2026")
        report = out / "bench_index" / "wide"
        status, _, _ = run_sampled([sys.executable, str(REPO / "scripts/bench_index.py"),
                                          "--data", args.data, "--universe", args.universe,
                                          "--start", f"{years[0]}-01-01", "--end", f"{years[-1]}-12-31",
                                          "--runs", "wide", "--out", str(out / "bench_index"),
                                          "--", "--no-baselines"])
        if status:
            sys.exit(f"bench_index.py failed with exit status {status}")
        exp = _check_report(report)
    data, universe = Path(exp["data"]["path"]), exp["data"]["universe"]
    if not (data / "calendars/day.txt").is_file() or not (data / f"instruments/{universe}.txt").is_file():
        raise SystemExit(f"--report {report}: its data {data} is not a Qlib folder with instruments/"
                         f"{universe or '<universe>'}.txt (Qlib's handlers read the universe from it)")
    pred = read_predictions(report)
    pred = pred[pred["model"] == MAIN]
    have = sorted({d.year for d in pred.index})
    years = parse_years(args.years) if args.years else have
    missing = [y for y in years if y not in have]
    if missing:
        raise SystemExit(f"--years {args.years}: the report forecasts {have[0]}..{have[-1]}, not "
                         f"{', '.join(map(str, missing))}")
    timings = json.loads((report / "metrics.json").read_text()).get("timings", {})
    main_wall = timings.get("models", {}).get(MAIN, math.nan) / 60  # its fits, summed over the folds
    calendar = (data / "calendars/day.txt").read_text().split()
    folds = zoo_folds(calendar, years, args.train_years)
    out.mkdir(parents=True, exist_ok=True)
    (out / "folds.json").write_text(json.dumps(folds, indent=1))
    span = (min(f["train"][0] for f in folds), max(f["test"][1] for f in folds))
    worker = [args.qlib_python, str(REPO / "scripts/qlib_zoo_worker.py")]
    common = ["--data", str(data), "--threads", str(args.threads)]
    features = {}
    for handler in dict.fromkeys(ZOO[m][0] for m in models):
        path = out / f"features_{handler}_{span[0]}_{span[1]}.pkl"
        seconds = math.nan
        if args.reuse and path.is_file() and path.with_suffix(".json").is_file():
            print(f"# reused {path}", flush=True)
        else:
            status, seconds, _ = run_sampled([*worker, "features", "--handler", handler, "--start", span[0],
                                              "--end", span[1], "--instruments", universe, "--out", str(path),
                                              *common])
            if status:
                sys.exit(f"the Qlib worker failed computing {handler} (exit status {status})")
        print(features_line(handler, json.loads(path.with_suffix(".json").read_text()), seconds / 60),
              flush=True)
        features[handler] = path
    walls = {}
    for name in models:
        pkl = out / f"pred_{name}.pkl"
        if args.reuse and pkl.is_file() and pkl.with_suffix(".json").is_file():
            print(f"# reused {pkl}", flush=True)
            walls[name] = sum(f["seconds"] for f in json.loads(pkl.with_suffix(".json").read_text())["folds"])
        else:
            cap = [] if args.max_epochs is None else ["--max-epochs", str(args.max_epochs)]
            status, walls[name], _ = run_sampled([
                *worker, "fit", "--model", name, "--features", str(features[ZOO[name][0]]),
                "--folds", str(out / "folds.json"), "--out", str(pkl), "--device", args.device,
                *cap, *common])
            if status:
                sys.exit(f"the Qlib worker failed fitting {name} (exit status {status})")
        done = json.loads(pkl.with_suffix(".json").read_text())
        epochs = "/".join(str(f["epochs_run"]) for f in done["folds"])
        seconds = "/".join(f"{f['seconds']:.0f}" for f in done["folds"])
        print(f"# {PREFIX}{name} device={done['device']} max_epochs={done['max_epochs'] or 'benchmark'} "
              f"epochs_run={epochs} seconds_per_fold={seconds}", flush=True)
    # our Transformer on the forecast days of the years run
    days = pred.index[np.isin(pred.index.year, years)].unique()
    main_ic = _daily(pred[pred.index.isin(days)].assign(model=MAIN))[MAIN]
    s = ic_summary(main_ic)
    lines = [zoo_line(MAIN, s["mean_ic"], s["icir"], 0.0, math.nan, main_wall)]
    rank_ics = {MAIN: s["mean_ic"]}
    for name in models:
        folder = out / f"score_{name}"
        status, _, _ = run_sampled([*forecaster_command(), "score", str(out / f"pred_{name}.pkl"),
                                    "--report", str(report), "--out", str(folder), "--name", PREFIX + name,
                                    "--overwrite"])
        if status:
            sys.exit(f"forecaster score failed on {out / f'pred_{name}.pkl'} (exit status {status})")
        metrics = json.loads((folder / "metrics.json").read_text())
        rank_ic, icir, diff, p_value = scored_values(metrics, PREFIX + name)
        rank_ics[PREFIX + name] = rank_ic
        lines.append(zoo_line(PREFIX + name, rank_ic, icir, diff, p_value, walls[name] / 60))
    print("\n".join([*lines, best_line(rank_ics)]), flush=True)


if __name__ == "__main__":
    main()
