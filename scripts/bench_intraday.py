"""Minute bars, measured in one run (synthetic bars with planted effects; see
:mod:`forecaster.data.synthetic.minute`). Prints::

    load stocks=100 days=244 bars=1171200 cold_seconds=S cached_seconds=S
    bars model=NAME ic=+0.000 rank_ic=+0.000 position_rank_ic=+0.000 planted=+0.000
    panel model=NAME without=+0.0000 with=+0.0000 planted=+0.000

``load``: a folder of 100 stocks x one year of 5-minute bars written as baostock exports, read
by ``load_dir`` cold (building the cache) and again from the cache. ``bars``: the single-stock
walk-forward on one stock's 5-minute bars (monthly refits by trading day), per-bar IC over
every bar and the mean over the day's bar positions of each position's rank IC across days
(:mod:`forecaster.metrics.bars`), against the planted within-day AR coefficient
(bars 2.. of a day; the first two are unpredictable). ``panel``: the panel models' daily rank
IC on the tradeable label without and with the intraday features (``--intraday``), the
planted daily signal hidden in the last half hour.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from forecaster.data import attach_intraday, daily_bars, load_dir, synthetic_intraday, write_minute_csv
from forecaster.evaluation.walkforward import WalkForwardConfig, walk_forward
from forecaster.metrics import daily_ic, ic_summary
from forecaster.metrics.bars import bar_positions, position_summary
from forecaster.models.panel.baselines import FeatureRegressor
from forecaster.models.panel.model import PanelTransformer
from forecaster.models.presets import single_stock_transformer
from forecaster.models.stock.baselines import default_baselines


def bench_load(n_stocks: int, n_days: int) -> None:
    frames = synthetic_intraday(n_stocks, n_days, seed=1)
    with tempfile.TemporaryDirectory() as folder:
        for code, frame in frames.items():
            write_minute_csv(frame, Path(folder) / f"{code}.csv")
        start = time.perf_counter()
        cold = load_dir(folder, cache=True).frames
        mid = time.perf_counter()
        load_dir(folder, cache=True)
        end = time.perf_counter()
    print(f"load stocks={len(cold)} days={n_days} bars={sum(len(f) for f in cold.values())} "
          f"cold_seconds={mid - start:.1f} cached_seconds={end - mid:.1f}", flush=True)


def bench_bars(n_days: int, bar_ic: float) -> None:
    frame = synthetic_intraday(1, n_days, bar_ic=bar_ic, seed=3)["syn.000001"]
    models = {"transformer": single_stock_transformer(), **default_baselines(seed=False)}
    config = WalkForwardConfig(train_days=n_days // 2, retrain_every=21, n_jobs=-1, label="close",
                               progress=False)
    pred = walk_forward(frame, models, config).predictions
    by_position = position_summary(bar_positions(pred.reset_index())).set_index("model")
    for name, g in pred.groupby("model"):
        if g["forecast"].nunique() <= 1:
            continue
        ic = g["forecast"].corr(g["actual"])
        rank = g["forecast"].corr(g["actual"], method="spearman")
        print(f"bars model={name} ic={ic:+.3f} rank_ic={rank:+.3f} "
              f"position_rank_ic={by_position.loc[name, 'position_rank_ic']:+.3f} planted={bar_ic:+.3f}",
              flush=True)


def bench_panel(n_stocks: int, n_days: int, signal_ic: float) -> None:
    bars = synthetic_intraday(n_stocks, n_days, bar_ic=0.0, signal_ic=signal_ic, seed=2)
    daily = {c: daily_bars(f) for c, f in bars.items()}
    joined, _ = attach_intraday(daily, bars)
    config = WalkForwardConfig(train_days=n_days // 2, retrain_every=63, n_jobs=-1, progress=False)
    ics = {}
    for label, frames in (("without", daily), ("with", joined)):
        models = {"transformer": PanelTransformer(), "gbm": FeatureRegressor("gbm"),
                  "ridge_features": FeatureRegressor("ridge")}
        pred = walk_forward(frames, models, config).predictions
        for name, g in pred.groupby("model"):
            scores = g.pivot_table(index="date", columns="code", values="forecast")
            actual = g.pivot_table(index="date", columns="code", values="actual")
            summary = ic_summary(daily_ic(scores, actual, method="spearman"))
            ics.setdefault(name, {})[label] = summary["mean_ic"]
    for name, v in ics.items():
        print(f"panel model={name} without={v['without']:+.4f} with={v['with']:+.4f} "
              f"planted={signal_ic:+.3f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stocks", type=int, default=100)
    p.add_argument("--days", type=int, default=244)
    p.add_argument("--bar-ic", type=float, default=0.1)
    p.add_argument("--signal-ic", type=float, default=0.1)
    args = p.parse_args()
    bench_load(args.stocks, args.days)
    bench_bars(args.days // 2, args.bar_ic)
    bench_panel(args.stocks, 2 * args.days, args.signal_ic)


if __name__ == "__main__":
    main()
