"""Issue 87, item 6: is a forecast compared within its industry better than as it is?

From a walk-forward report's forecasts (``--report DIR``: ``predictions.csv``, the model
``--model``) and an industries file (``--industries FILE``), each day's cross-section of
forecasts is demeaned within the industry groups of the forecast's stocks that day (at each
``--levels`` level, groups under 3 stocks merged as the book's are:
:func:`forecaster.data.daily.industries.groups`), and both are scored on the report's actual
(the return a strategy can earn). One line per variant::

    ic name=raw level=0 mean=0.0512 icir=0.412 days=1779
    ic name=industry_neutral level=1 mean=0.0498 icir=0.455 days=1779 diff=-0.0014 t=-1.21 p=0.23

``mean``/``icir``: the daily rank IC's mean and mean over sd; ``diff``/``t``/``p``: the paired
Newey-West test of the daily rank IC against the raw forecast's (two-sided). With ``--write
DIR`` each neutral variant's predictions are written to ``DIR/level_L/predictions.csv`` (the
report's rows, the forecast column replaced), a report folder ``scripts/bench_enhanced.py
--report`` reads to measure the book on them.

With ``--baseline DIR`` (another report on the same days, e.g. the run without the industry
inputs) one more line, the report's raw forecast against the baseline's (paired, the same way)::

    ic name=against_baseline level=0 mean=0.0540 icir=0.36 days=1778 diff=-0.0031 t=-1.10 p=0.27

A null check first (``--null``): the same on forecasts drawn at random, which must read an IC
of about zero whichever way it is demeaned.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forecaster.data.daily.industries import groups, read_industries  # noqa: E402
from forecaster.metrics.cross_section import daily_ic, ic_difference_test, ic_summary  # noqa: E402
from forecaster.reporting.report import read_predictions  # noqa: E402


def neutral(forecast: pd.DataFrame, labels: np.ndarray) -> pd.DataFrame:
    """``forecast`` ``[dates, codes]`` less each day's mean of its group (``labels`` ``[dates,
    codes]``, -1 where there is no forecast)."""
    f = forecast.to_numpy(dtype=float)
    n_groups = int(labels.max()) + 1
    ok = labels >= 0
    cell = (np.arange(len(f))[:, None] * n_groups + labels)[ok]
    total = np.bincount(cell, weights=f[ok], minlength=len(f) * n_groups)
    count = np.bincount(cell, minlength=len(f) * n_groups)
    mean = np.full(len(f) * n_groups, np.nan)
    np.divide(total, count, out=mean, where=count > 0)
    out = np.full(f.shape, np.nan)
    out[ok] = f[ok] - mean[cell]
    return pd.DataFrame(out, index=forecast.index, columns=forecast.columns)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--report", required=True, help="a walk-forward report folder (predictions.csv)")
    p.add_argument("--industries", required=True, help="an industries file (--industries of forecaster)")
    p.add_argument("--model", default="transformer")
    p.add_argument("--levels", default="1,2")
    p.add_argument("--null", action="store_true", help="score random forecasts instead (reads ~0)")
    p.add_argument("--write", default="", help="write each neutral variant's predictions under DIR")
    p.add_argument("--baseline", default="", help="a report on the same days to test the forecast against")
    args = p.parse_args(argv)
    pred = read_predictions(args.report)
    pred = pred[pred["model"] == args.model]
    forecast = pred.pivot_table(index=pred.index, columns="code", values="forecast", aggfunc="first")
    forecast = forecast.sort_index()
    actual = pred.pivot_table(index=pred.index, columns="code", values="actual", aggfunc="first")
    actual = actual.reindex(index=forecast.index, columns=forecast.columns)
    if args.null:
        rng = np.random.default_rng(0)
        forecast = forecast.where(forecast.isna(), rng.standard_normal(forecast.shape))
    industries = read_industries(args.industries, list(forecast.columns))
    dates = pd.DatetimeIndex(forecast.index)
    print("# " + " | ".join([industries.describe(dates), *industries.notes]), flush=True)
    classes = industries.classes(dates, list(forecast.columns))
    raw = daily_ic(forecast, actual)
    s = ic_summary(raw)
    print(f"ic name=raw level=0 mean={s['mean_ic']:.4f} icir={s['icir']:.3f} days={s['n_days']}", flush=True)
    if args.baseline:
        other = read_predictions(args.baseline)
        other = other[other["model"] == args.model]
        base_f = other.pivot_table(index=other.index, columns="code", values="forecast", aggfunc="first")
        base_a = other.pivot_table(index=other.index, columns="code", values="actual", aggfunc="first")
        base = daily_ic(base_f.sort_index(), base_a)
        b, test = ic_summary(base), ic_difference_test(raw, base)
        print(f"ic name=against_baseline level=0 mean={b['mean_ic']:.4f} icir={b['icir']:.3f} "
              f"days={b['n_days']} diff={test['mean_diff']:+.4f} t={test['t_stat']:.2f} "
              f"p={test['p_value']:.3f}  # the baseline's figures; diff: raw minus baseline", flush=True)
    for level in (int(v) for v in args.levels.split(",")):
        labels, names, counts = groups(classes, forecast.notna().to_numpy(), level, 3)
        adjusted = neutral(forecast, labels)
        ic = daily_ic(adjusted, actual)
        s, test = ic_summary(ic), ic_difference_test(ic, raw)
        print(f"ic name=industry_neutral level={level} mean={s['mean_ic']:.4f} icir={s['icir']:.3f} "
              f"days={s['n_days']} diff={test['mean_diff']:+.4f} t={test['t_stat']:.2f} "
              f"p={test['p_value']:.3f}"
              f"  # {len(names)} groups, {counts['unclassified']:,} stock-days unclassified", flush=True)
        if args.write:
            out = Path(args.write) / f"level_{level}"
            out.mkdir(parents=True, exist_ok=True)
            long = adjusted.stack().rename("forecast")
            rows = pred.set_index("code", append=True).drop(columns="forecast")
            rows = rows.join(long.rename_axis(rows.index.names), how="inner").reset_index("code")
            rows[["code", "model", "fold", "forecast", "actual", *[c for c in rows.columns if c not in
                  ("code", "model", "fold", "forecast", "actual")]]].to_csv(out / "predictions.csv",
                                                                          index_label="date")
            print(f"# wrote {out / 'predictions.csv'}", flush=True)


if __name__ == "__main__":
    main()
