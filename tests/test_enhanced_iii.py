"""Issue 86 (the enhanced book III): every day of the book exact, planted on the days that
break books (review days, rights issues, resumptions), and costs by date."""

from __future__ import annotations

import pandas as pd
import pytest

from forecaster.portfolio.rules import CostModel

# ------------------------------------------------------------------ 7: stamp duty by date


@pytest.mark.parametrize("day, buy, sell", [
    ("2004-06-01", 0.002, 0.002),
    ("2005-01-24", 0.001, 0.001),
    ("2007-05-29", 0.001, 0.001),
    ("2007-05-30", 0.003, 0.003),
    ("2008-04-23", 0.003, 0.003),
    ("2008-04-24", 0.001, 0.001),
    ("2008-09-18", 0.001, 0.001),
    ("2008-09-19", 0.0, 0.001),
    ("2023-08-25", 0.0, 0.001),
    ("2023-08-28", 0.0, 0.0005),
])
def test_each_trade_pays_the_stamp_duty_of_its_day(day, buy, sell):
    costs = CostModel()
    value = 1_000_000.0
    assert costs.fees("buy", value, day)["stamp_duty"] == pytest.approx(buy * value)
    assert costs.fees("sell", value, day)["stamp_duty"] == pytest.approx(sell * value)


def test_a_backtest_over_2007_2008_charges_each_day_its_schedule():
    import numpy as np

    from forecaster import synthetic_panel
    from forecaster.portfolio.backtest import BacktestConfig, run_backtest
    from forecaster.portfolio.strategy import StrategyConfig

    frames = synthetic_panel(n_stocks=6, n_days=480, seed=3)
    days = pd.bdate_range("2007-03-01", periods=480, name="date")
    for frame in frames.values():
        frame.index = days[-len(frame):]
    codes = sorted(frames)
    flip = np.tile([[1.0, 1.0, 0.0, 0.0, 0.5, 0.5], [0.0, 0.0, 1.0, 1.0, 0.5, 0.5]], (240, 1))
    forecast = pd.DataFrame(flip, index=days, columns=codes).iloc[30:]  # other stocks each day
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=2, rebalance_every=1), capital=1e6)
    result = run_backtest(frames, forecast, config)
    trades = result.trades[result.trades["status"] != "blocked"].copy()
    trades["date"] = pd.to_datetime(trades["date"])
    costs = CostModel()
    for row in trades.itertuples():
        buy, sell = costs.stamp_duty_rates(row.date)
        rate = sell if row.side == "sell" else buy
        assert row.stamp_duty == pytest.approx(rate * abs(row.value), abs=0.011), row
    spans = pd.cut(trades["date"], pd.DatetimeIndex(["2000-01-01", "2007-05-30", "2008-04-24", "2008-09-19",
                                                     "2030-01-01"]), right=False)
    assert trades.groupby([spans, trades["side"]], observed=True).size().shape[0] == 8  # each side, span
    assert (trades.loc[(trades["side"] == "buy") & (trades["date"] >= "2008-09-19"), "stamp_duty"] == 0).all()
