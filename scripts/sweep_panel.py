"""The measurement that chose the panel Transformer's defaults.

For each configuration (``--config "loss='pairwise',window=10"``, repeatable; none = the
defaults), fit the panel Transformer on ``../shared/data/ashare`` up to each cut-off
(end of 2021, 2022, 2023) and score it on the following calendar year, with no refit, by the
mean daily rank IC and ICIR on the tradeable label (next open -> open ``horizon`` days later).
The composite factor (low volatility, low turnover, book-to-price) on the same years is
printed for reference. One torch thread per run: run configurations in parallel processes.

Prints ``config C cut YYYY-12-31 fit_s S epochs E rank_ic=+0.0000 icir=+0.000`` per cut-off
and ``config C mean_rank_ic=+0.0000 mean_icir=+0.000``.
"""

from __future__ import annotations

import argparse
import ast
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from forecaster.data import load_dir
from forecaster.data.panel import Panel
from forecaster.features.factors import factor_score
from forecaster.features.labels import by_forecast_date, tradeable_label
from forecaster.metrics import daily_ic, ic_summary
from forecaster.models.panel.model import PanelTransformer

REPO = Path(__file__).resolve().parents[1]
CUTS = ("2021-12-31", "2022-12-31", "2023-12-31")


def _parse(config: str) -> dict:
    tree = ast.parse(f"dict({config})", mode="eval").body
    return {kw.arg: ast.literal_eval(kw.value) for kw in tree.keywords}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=str(REPO.parent / "shared/data/ashare"))
    p.add_argument("--config", action="append", default=[], help="PanelTransformer keywords")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    frames, _ = load_dir(args.data)
    panel = Panel.from_frames(frames)
    for config in args.config or [""]:
        params = _parse(config)
        horizon = params.get("horizon", 1)
        label, _ = tradeable_label(panel, horizon)
        actual = pd.DataFrame(by_forecast_date(label), index=panel.dates, columns=panel.codes)
        composite = pd.DataFrame(by_forecast_date(factor_score(panel, "composite")), index=panel.dates,
                                 columns=panel.codes)
        ics, irs = [], []
        for cut in CUTS:
            start = time.perf_counter()
            model = PanelTransformer(**params).fit(panel.slice(end=cut))
            seconds = time.perf_counter() - start
            year = pd.Timestamp(cut) + pd.DateOffset(years=1)
            test = panel.slice(start=pd.Timestamp(cut) - pd.DateOffset(days=200), end=year)
            scores = model.predict(test).unstack("code")
            # Forecasts from the cut-off plus the horizon (the purge of a walk-forward).
            first = panel.dates[panel.dates.searchsorted(pd.Timestamp(cut)) + horizon]
            scores = scores.loc[scores.index > first]
            s = ic_summary(daily_ic(scores, actual))
            ref = ic_summary(daily_ic(composite.loc[scores.index], actual))
            ics.append(s["mean_ic"])
            irs.append(s["icir"])
            print(f"config {config or 'defaults'} cut {cut} fit_s {seconds:.0f} epochs "
                  f"{[len(h) for h in model.histories_]} rank_ic={s['mean_ic']:+.4f} icir={s['icir']:+.3f} "
                  f"(composite {ref['mean_ic']:+.4f})", flush=True)
        print(f"config {config or 'defaults'} mean_rank_ic={np.mean(ics):+.4f} mean_icir={np.mean(irs):+.3f}",
              flush=True)


if __name__ == "__main__":
    main()
