"""The null test of the minute-bar statistics: on generated random-walk bars, forecasts without
skill ("minus the previous level", "minus the last return", noise) score about zero on every
statistic a bar run's report prints (pooled IC and rank IC, the same by bar of the day, hit
rate; R^2 never above zero), while a planted per-bar signal is recovered; the within-day rank
IC the report used to print is shown biased (and so is the daily IC against the demeaned
next-bar return, which is why neither is reported)."""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from forecaster.data import Panel
from forecaster.data.minute.session import add_session_columns
from forecaster.data.synthetic.minute import bar_stamps
from forecaster.evaluation.scoring import score_run
from forecaster.evaluation.walkforward import WalkForwardConfig, WalkForwardResult
from forecaster.metrics.bars import within_day_ic

SIGNAL = 0.15  # the planted forecast's correlation with the next bar's return


def random_walk_run(bars_per_day: int, n_days: int, seed: int):
    """A random walk of ``n_days`` x ``bars_per_day`` bars and a walk-forward result holding four
    forecasts of each bar's return, made with the bars before it: ``level`` (minus the previous
    close), ``reversal`` (minus the last return), ``noise``, and ``transformer`` (the planted
    signal)."""
    rng = np.random.default_rng(seed)
    stamps = bar_stamps(pd.bdate_range("2022-01-03", periods=n_days), 240 // bars_per_day)
    r = rng.normal(0, 0.004, len(stamps))
    close = 10 * np.exp(np.cumsum(r))
    frame = pd.DataFrame({"open": np.r_[10, close[:-1]], "close": close, "volume": 1e5}, index=stamps)
    frame["high"], frame["low"] = frame[["open", "close"]].max(axis=1), frame[["open", "close"]].min(axis=1)
    frame = add_session_columns(frame).assign(code="sz.000001")
    planted = SIGNAL * r / r.std() + np.sqrt(1 - SIGNAL**2) * rng.standard_normal(len(r))
    # bar t+1's forecast from bars up to t; its outcome: bar t+1's return
    forecasts = {"level": -close[:-1], "reversal": -r[:-1], "noise": rng.standard_normal(len(r) - 1),
                 "transformer": planted[1:]}
    parts = [pd.DataFrame({"code": "sz.000001", "model": name, "fold": 0, "forecast": f, "actual": r[1:]},
                          index=pd.DatetimeIndex(stamps[1:], name="date")) for name, f in forecasts.items()]
    folds = pd.DataFrame([{"fold": 0, "train_start": stamps[0], "train_end": stamps[0],
                           "test_start": stamps[1], "test_end": stamps[-1], "n_test_days": n_days,
                           "n_stocks": 1}])
    result = WalkForwardResult(pd.concat(parts), folds, WalkForwardConfig(label="close", progress=False),
                               members={0: ["sz.000001"]})
    return result, Panel.from_frames({"sz.000001": frame})


@pytest.mark.parametrize(("bars_per_day", "n_days"), [(4, 1000), (48, 250)])
def test_forecasts_without_skill_score_about_zero_and_a_planted_signal_is_recovered(bars_per_day, n_days):
    result, panel = random_walk_run(bars_per_day, n_days, seed=bars_per_day)
    models = {name: types.SimpleNamespace() for name in ("level", "reversal", "noise", "transformer")}
    report = score_run(result, panel, models, "transformer")
    table = report.summary_table()  # what the report prints, model by model
    n = n_bars = len(result.predictions) // 4
    printed = {"pearson_ic": n_bars, "rank_ic": n_bars, "position_ic": n_days, "position_rank_ic": n_days}
    assert set(printed) <= set(table.columns)
    for name in ("level", "reversal", "noise"):
        # within 3 standard errors of zero; a level (a random walk) keeps the small-sample bias of a
        # persistent regressor, +1.4 to +2 standard errors on average (13 seeds of these sizes:
        # rank IC +0.031 at 4 x 1000 bars, +0.012 at 48 x 250), so 2 more are allowed to it
        bound = 5 if name == "level" else 3
        for stat, n in printed.items():
            assert abs(table.loc[name, stat]) < bound / np.sqrt(n), (name, stat, table.loc[name, stat])
        assert abs(table.loc[name, "hit_rate"] - 0.5) < 1.5 / np.sqrt(n_bars)
        assert table.loc[name, "r2_oos_zero"] < 0.002
    for stat in printed:
        assert table.loc["transformer", stat] > SIGNAL - 3 / np.sqrt(printed[stat]), stat
    assert table.loc["transformer", "r2_oos_zero"] < 0  # an unscaled signal: not a return forecast
    # the statistic the report used to print: ranking a day's bars against each other
    before = within_day_ic(result.predictions.reset_index())
    assert before["level"] > (0.4 if bars_per_day == 4 else 0.15)
    assert before["reversal"] > (0.2 if bars_per_day == 4 else 0.0)
    assert abs(before["noise"]) < 3 / np.sqrt(n_days)
    demeaned = within_day_ic(result.predictions.reset_index(), method="pearson", demean=True)
    assert demeaned["level"] > (0.3 if bars_per_day == 4 else 0.1)  # biased too: not reported
