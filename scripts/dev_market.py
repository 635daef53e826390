"""Develop the panel Transformer on a whole market, one refit at a time.

Fits each variant of ``PanelTransformer`` (and scikit-learn's gradient boosting on the same
features, the baseline to beat) on every day up to a cut-off and scores the following
``--test-days`` trading days by daily rank IC on the tradeable label, the variants in
parallel processes (each with one fold of :func:`forecaster.evaluation.walkforward.walk_forward`,
so nothing sees past its cut-off). Prints one line per variant and cut-off::

    dev cut=2019-12-31 variant=NAME rank_ic=+0.0000 icir=+0.000 n_days=N minutes=M

Example: ``scripts/dev_market.py --cut 2018-12-28 --cut 2019-12-31 --variant base
--variant wide:epoch_stock_days=600000`` (a variant is ``NAME[:key=value,...]``; ``gbm`` is
the baseline).
"""

from __future__ import annotations

import argparse
import ast
import re
import time
from pathlib import Path

import pandas as pd
from joblib import Parallel, delayed

from forecaster.data import Panel, load_dir
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.metrics import daily_ic, ic_summary
from forecaster.models.panel.baselines import FeatureRegressor
from forecaster.models.panel.model import PanelTransformer

REPO = Path(__file__).resolve().parents[1]


def _variant(text: str):
    name, _, rest = text.partition(":")
    pairs = re.split(r",(?=\w+=)", rest)  # a value may hold commas: aux_horizons=(5,10)
    params = {k: ast.literal_eval(v) for k, v in (p.split("=", 1) for p in pairs if p)}
    return name, params


def _one(panel: Panel, name: str, params: dict, cut: pd.Timestamp, test_days: int):
    model = FeatureRegressor("gbm") if name == "gbm" else PanelTransformer(**params)
    cut_at = panel.dates.searchsorted(cut, side="right")
    config = WalkForwardConfig(train_days=int(cut_at), retrain_every=test_days, n_jobs=1, margin_days=130,
                               end=panel.dates[min(cut_at + test_days, panel.n_days) - 1])
    start = time.perf_counter()
    result = walk_forward(panel, {name: model}, config, panel=panel)
    minutes = (time.perf_counter() - start) / 60
    pred = result.predictions
    first = result.folds.iloc[0]
    scores = pred.pivot_table(index="date", columns="code", values="forecast")
    actual = pred.pivot_table(index="date", columns="code", values="actual")
    s = ic_summary(daily_ic(scores, actual))
    return (f"dev cut={pd.Timestamp(first['train_end']).date()} variant={name} rank_ic={s['mean_ic']:+.4f} "
            f"icir={s['icir']:+.3f} n_days={s['n_days']} minutes={minutes:.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/szse"))
    p.add_argument("--cut", action="append", default=[], help="training cut-off (repeatable)")
    p.add_argument("--test-days", type=int, default=244)
    p.add_argument("--variant", action="append", default=[], help="NAME[:key=value,...] (repeatable)")
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args()
    panel = Panel.from_frames(load_dir(args.data).frames)
    jobs = [(name, params, pd.Timestamp(cut)) for cut in (args.cut or ["2019-12-31"])
            for name, params in map(_variant, args.variant or ["base", "gbm"])]
    for line in Parallel(n_jobs=args.jobs, return_as="generator")(
            delayed(_one)(panel, name, params, cut, args.test_days) for name, params, cut in jobs):
        print(line, flush=True)


if __name__ == "__main__":
    main()
