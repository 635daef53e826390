"""The day tomorrow's list and orders trade on: the exchange's next trading day (XSHG,
holidays included; past the calendar's known years the next weekday, with a note), and the
signal date of every row of trades.csv and orders.csv: the day whose close the decision used."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from test_forecaster_delisting import HELD, LAST, _planted, _run
from test_forecaster_orders import _backtest

import forecaster.data.market.calendar as calendar
from forecaster.data.market.calendar import next_trading_day
from forecaster.data.panel import Panel
from forecaster.portfolio.backtest import run_backtest


@pytest.mark.parametrize("signal, trade", [
    ("2025-01-27", "2025-02-05"),  # the Spring Festival: closed 01-28 to 02-04
    ("2025-03-11", "2025-03-12"),  # a plain Tuesday -> Wednesday
    ("2025-01-24", "2025-01-27"),  # Friday -> Monday
    ("2025-09-30", "2025-10-09"),  # National Day week
    (pd.Timestamp("2025-04-03 15:00"), "2025-04-07"),  # a time of day is ignored; Qingming 04-04
])
def test_the_next_trading_day_skips_weekends_and_the_exchanges_holidays(signal, trade):
    day = next_trading_day(signal)
    assert day == (pd.Timestamp(trade), "")


def test_past_the_calendars_known_years_it_is_the_next_weekday_with_a_note(monkeypatch):
    last = calendar._calendar()[0].last_session
    after = last + pd.offsets.BDay(60)
    day = next_trading_day(after)
    assert day.date == after + pd.offsets.BDay(1) and day.date.weekday() < 5
    assert f"records no holidays after {last.date()}" in day.note and str(day.date.date()) in day.note
    monkeypatch.setattr(calendar, "_calendar", lambda: (None, "the exchange-calendars package is not "
                                                                "installed"))
    day = next_trading_day("2025-01-24")  # no calendar at all: the weekday, said so
    assert day.date == pd.Timestamp("2025-01-27") and "not installed" in day.note


def test_orders_and_the_ranked_list_carry_the_exchanges_trade_date():
    from forecaster.data import synthetic_panel
    from forecaster.portfolio.backtest import BacktestConfig
    from forecaster.portfolio.next_day import ranked_list
    from forecaster.portfolio.orders import Book, book_orders_for_panel
    from forecaster.portfolio.strategy import StrategyConfig

    frames = synthetic_panel(n_stocks=6, n_days=80, seed=3)
    panel = Panel.from_frames({c: f.loc[:"2018-02-14"] for c, f in frames.items()})  # eve of the holiday
    assert panel.dates[-1] == pd.Timestamp("2018-02-14")
    scores = pd.Series(range(6), index=list(panel.codes), dtype=float)

    class Model:
        window = 1

        def predict_next(self, grid):
            return scores

    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=2), capital=1e6)
    orders = book_orders_for_panel(scores, panel, Book({}, 1e6), config)
    table = ranked_list(Model(), panel)
    for frame in (orders, table):  # the Spring Festival of 2018: closed 02-15 to 02-21
        assert (frame["trade_date"] == pd.Timestamp("2018-02-22").date()).all()
        assert (frame["signal_date"] == pd.Timestamp("2018-02-14").date()).all()
    assert list(orders.columns[:2]) == ["signal_date", "trade_date"]


@pytest.mark.parametrize("execution", ["next_open", "close"])
def test_a_trades_signal_date_is_the_close_its_decision_used(execution):
    panel, forecast, config, _ = _backtest("top_k")
    result = run_backtest(panel, forecast, dataclasses.replace(config, execution=execution))
    trades = result.trades
    assert len(trades) > 20 and trades["signal_date"].notna().all()
    if execution == "next_open":  # the trading day before the trade, on the data's calendar
        before = pd.Series(panel.dates[:-1], index=panel.dates[1:])
        assert (trades["signal_date"] == trades["date"].map(before)).all()
    else:  # at the close: the very close it used
        assert (trades["signal_date"] == trades["date"]).all()


def test_a_delisting_close_out_carries_the_day_before_as_its_signal_date():
    panel, result = _run(_planted(period=0))
    sold = result.trades[(result.trades["code"] == HELD) & (result.trades["date"] == panel.dates[LAST])]
    assert len(sold) and (sold["signal_date"] == panel.dates[LAST - 1]).all()
