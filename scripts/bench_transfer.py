"""Does breadth help? Fit on a wide market, score a narrower universe later.

Fits the panel Transformer (its defaults) and scikit-learn's gradient boosting on every day of
``--fit`` (default ``../shared/data/szse``, 1,294 Shenzhen stocks) up to ``--fit-end``, then
scores ``--score`` (default ``../shared/data/ashare``, 60 CSI 300 stocks) from ``--score-start``
on, where neither model has seen a day: daily rank IC on the tradeable label. Prints::

    transfer model=NAME rank_ic=+0.0000 icir=+0.000 n_days=N

Compare with the same models walked forward on the narrow universe alone
(``scripts/bench_walkforward.py``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from forecaster.data import Panel, load_dir
from forecaster.features.labels import by_forecast_date, tradeable_label
from forecaster.metrics import daily_ic, ic_summary
from forecaster.models.panel.baselines import FeatureRegressor
from forecaster.models.panel.model import PanelTransformer

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fit", default=str(REPO.parent / "shared/data/szse"))
    p.add_argument("--fit-end", default="2021-12-31")
    p.add_argument("--score", default=str(REPO.parent / "shared/data/ashare"))
    p.add_argument("--score-start", default="2022-01-01")
    args = p.parse_args()
    wide = Panel.from_frames(load_dir(args.fit).frames)
    wide = wide.rows(wide.dates <= pd.Timestamp(args.fit_end))
    narrow = Panel.from_frames(load_dir(args.score).frames)
    label, _ = tradeable_label(narrow, 1, "next_open")
    actual = pd.DataFrame(by_forecast_date(label), index=narrow.dates, columns=list(narrow.codes))
    after = narrow.dates[narrow.dates >= pd.Timestamp(args.score_start)]
    for name, model in (("transformer", PanelTransformer()), ("gbm", FeatureRegressor("gbm"))):
        start = time.perf_counter()
        model.fit(wide)
        scores = model.predict(narrow).unstack("code").reindex(index=after, columns=list(narrow.codes))
        s = ic_summary(daily_ic(scores, actual.reindex(after)))
        print(f"transfer model={name} rank_ic={s['mean_ic']:+.4f} icir={s['icir']:+.3f} n_days={s['n_days']} "
              f"# fit on {wide.n_stocks} stocks to {wide.dates[-1].date()}, "
              f"{(time.perf_counter() - start) / 60:.1f} min", flush=True)


if __name__ == "__main__":
    main()
