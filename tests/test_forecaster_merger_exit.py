"""A stock whose bars stop without a ``退`` delisting period (a merger, or a long suspension) and
is still held at its last close -- bought at that day's open, so T+1 blocks the sale -- is
valued at its last close, not written down to zero; the ``退`` path still writes down (issue 57,
cases 2 and 3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data import synthetic_panel
from forecaster.data.market.exchange import round_price
from forecaster.data.panel import Panel
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.delisted import VALUED_LAST, WRITTEN_OFF, delisting_notes, exit_text
from forecaster.portfolio.next_day import delisting_reasons
from forecaster.portfolio.strategy import StrategyConfig

N_DAYS, LAST = 160, 120  # the stopped stock's last bar: 39 trading days before the data end
HELD = "syn.000001"


def _frames(limit_down: bool = False, period: int = 0):
    """``HELD``'s bars stop after row ``LAST``, traded on each of its last 15 days; with
    ``limit_down`` its last bar closes at limit-down; its last ``period`` bars carry a ``退``
    name. No ST marks (the ST rule is another test's)."""
    frames = {c: f.assign(is_st=0.0, delisting=0.0)
              for c, f in synthetic_panel(n_stocks=8, n_days=N_DAYS, seed=5).items()}
    frame = frames[HELD].iloc[:LAST + 1].copy()
    col = frame.columns.get_loc
    tail = slice(len(frame) - 15, len(frame))
    frame.iloc[tail, col("suspended")] = False
    frame.iloc[tail, col("trade_status")] = 1.0
    frame.iloc[tail, col("volume")] = np.maximum(frame["volume"].iloc[tail], 1e6)
    pre = frame["close"].iloc[-2]
    frame.iloc[-1, col("preclose")] = pre
    frame.iloc[-1, [col("open"), col("high")]] = round_price(pre * 1.02)
    close = round_price(pre * 0.9) if limit_down else round_price(pre * 1.05)
    frame.iloc[-1, [col("close"), col("low")]] = [close, min(close, round_price(pre * 1.02))]
    if period:
        frame.iloc[-period:, col("delisting")] = 1.0
    frames[HELD] = frame
    return frames


def _run(frames, ends: dict | None = None):
    """HELD ranks worst but on the row of its last day, where it ranks best: bought at that open
    (a place freed by selling the third name), and not sellable at that close (T+1)."""
    panel = Panel.from_frames(frames)
    panel.ends = ends
    dates = panel.dates[20:]
    forecast = pd.DataFrame(np.tile(np.arange(panel.n_stocks, 0, -1.0), (len(dates), 1)), index=dates,
                            columns=list(panel.codes))
    forecast[HELD] = -1.0
    forecast.loc[panel.dates[LAST], HELD] = 100.0
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=3), capital=1e6)
    return panel, run_backtest(panel, forecast, config)


def _bought_on_the_last_day(panel, result, why: str = "t_plus_1") -> int:
    trades = result.trades[result.trades["code"] == HELD]
    buy = trades[(trades["side"] == "buy") & (trades["status"] != "blocked")]
    assert buy["date"].tolist() == [panel.dates[LAST]]
    sell = trades[trades["side"] == "sell"]
    assert sell[["date", "status", "reason"]].values.tolist() == [[panel.dates[LAST], "blocked", why]]
    return int(buy["shares"].iloc[0])


@pytest.mark.parametrize("ends", [None, "instruments"])
def test_a_stop_without_a_delisting_period_is_valued_at_its_last_close(ends):
    frames = _frames()
    day = frames[HELD].index[-1]
    panel, result = _run(frames, {HELD: day} if ends else None)
    shares = _bought_on_the_last_day(panel, result)
    close = float(frames[HELD]["close"].iloc[-1])
    exits = result.delisted_exits
    assert exits["how"].tolist() == [VALUED_LAST]
    row = exits.iloc[0]
    assert (row["date"], row["shares"], row["price"]) == (day, shares, close)
    assert row["value"] == pytest.approx(shares * close)
    assert row["loss"] == pytest.approx(row["cost"] - shares * close) and row["loss"] < 0  # +5 % on the day
    # the shares are cash at that close: the book holds none after it and the equity keeps their value
    assert (result.positions.loc[result.positions.index >= day, HELD] == 0).all()
    closes = pd.Series(panel["close"][LAST], index=panel.codes)
    others = result.positions.loc[day].drop(HELD) @ closes.drop(HELD)
    assert result.equity.loc[day] == pytest.approx(result.cash.loc[day] + others)
    assert result.metrics["delisting_loss"] == pytest.approx(row["loss"])
    reason = result.delisted.set_index("code").loc[HELD, "reason"]
    text = exit_text(exits)
    assert (f"{HELD} {day.date()}: stopped without a 退 period (merger or long suspension): valued at its "
            "last close") in text
    if ends:  # the instruments end confirms a delisting: named delisted
        assert reason == f"instruments end {day.date()}"
        assert delisting_notes({"m": result}, "m")[0].startswith(f"delisted stocks (not suspended): {HELD}")
    else:  # nothing confirms it: suspended or delisted, everywhere it is named
        assert reason == f"suspended or delisted (no bar since {day.date()})"
        assert delisting_notes({"m": result}, "m")[0].startswith("suspended or delisted (")
        assert delisting_reasons(panel)[0] == f"suspended or delisted (no bar since {day.date()})"


def test_a_last_close_at_limit_down_is_written_down_unless_only_suspended_or_delisted():
    frames = _frames(limit_down=True)
    day = frames[HELD].index[-1]
    panel, result = _run(frames, {HELD: day})  # delisted by the instruments end
    _bought_on_the_last_day(panel, result, "limit_down")
    assert result.delisted_exits["how"].tolist() == [WRITTEN_OFF]
    panel, result = _run(frames)  # suspended or delisted: never written down
    assert result.delisted_exits["how"].tolist() == [VALUED_LAST]
    assert result.delisted_exits["value"].iloc[0] > 0


def test_a_holding_bought_on_the_last_day_of_a_delisting_period_is_written_down():
    # a one-day 退 period: unknown on the signal day, bought at its open, T+1 at its close
    panel, result = _run(_frames(period=1))
    _bought_on_the_last_day(panel, result)
    exits = result.delisted_exits
    assert exits["how"].tolist() == [WRITTEN_OFF] and exits["value"].iloc[0] == 0
    assert exits["loss"].iloc[0] == pytest.approx(exits["cost"].iloc[0])
