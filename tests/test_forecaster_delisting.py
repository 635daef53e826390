"""Delisted stocks are closed out by the backtest's rule, never carried at their last price:
a delisting planted in a held stock of a synthetic panel."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data import synthetic_panel
from forecaster.data.market.delisting import decide, instrument_ends, name_status
from forecaster.data.market.exchange import round_price
from forecaster.data.panel import Panel
from forecaster.features.labels import tradeable_label
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.delisted import SOLD_IN_PERIOD, SOLD_LAST, WRITTEN_OFF, delisting_notes
from forecaster.portfolio.strategy import StrategyConfig

N_DAYS, LAST, PERIOD = 160, 120, 10  # the planted stock's last bar, and its 退 days before it
HELD = "syn.000001"


def _planted(period: int = PERIOD, limit_down_days: int = 0):
    """A synthetic panel where ``HELD`` stops after row ``LAST`` (40 days before the end), its
    last ``period`` bars in the delisting period (``delisting`` = 1, as a ``退`` name gives);
    the first ``limit_down_days`` of them open and close at limit-down (sells blocked), and
    where that leaves the last day, it opens at limit-down and closes above it."""
    frames = synthetic_panel(n_stocks=8, n_days=N_DAYS, seed=5)
    frame = frames[HELD].iloc[:LAST + 1].copy()
    frame["delisting"] = 0.0
    col = frame.columns.get_loc
    tail = slice(len(frame) - 15, len(frame))  # trading every day near the end
    frame.iloc[tail, col("suspended")] = False
    frame.iloc[tail, col("trade_status")] = 1.0
    frame.iloc[tail, col("volume")] = np.maximum(frame["volume"].iloc[tail], 1e6)
    first = len(frame) - period
    if period:
        frame.iloc[first:, col("delisting")] = 1.0
    for k in range(first, first + limit_down_days + (limit_down_days == period - 1)):
        pre = frame["close"].iloc[k - 1]
        down = round_price(pre * (1 - (0.05 if frame["is_st"].iloc[k] == 1 else 0.10)))
        frame.iloc[k, [col("open"), col("low")]] = down
        frame.iloc[k, [col("high"), col("close")]] = down if k < first + limit_down_days else pre
        frame.iloc[k, col("preclose")] = pre
    if first + limit_down_days < len(frame):  # the bar after them returns from their close
        after = first + limit_down_days
        frame.iloc[after, col("preclose")] = frame["close"].iloc[after - 1]
    frames[HELD] = frame
    return frames


def _run(frames, **strategy):
    panel = Panel.from_frames(frames)
    dates = panel.dates[20:]
    forecast = pd.DataFrame(np.tile(np.arange(panel.n_stocks, 0, -1.0), (len(dates), 1)), index=dates,
                            columns=list(panel.codes))  # HELD (the first code) always ranks best
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=3, **strategy), capital=1e6)
    return panel, run_backtest(panel, forecast, config)


def test_name_status_reads_st_delisting_and_day_marks():
    names = pd.Series(["*ST保千", "ST康美", "退市保千", "乐视退", "XD浦发", "XDST某", "N中芯", "C宁德",
                       "S深发展",
                       "SST华新", "S*ST某", "G茅台", "南京中达", "PT水仙", "DR*ST某"])
    s = name_status(names)
    assert s["is_st"].tolist() == [1, 1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1]
    assert s["delisting"].tolist() == [0, 0, 1, 1] + [0] * 11
    assert s["ex_mark"].tolist() == [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    assert s["new_listing"].tolist() == [0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0]


def test_decide_tells_delisted_from_suspended():
    dates = pd.bdate_range("2020-01-01", periods=60)
    listed = np.ones((60, 4), dtype=bool)
    listed[45:, 0] = False  # stops 15 days before the end, no mark: cannot tell yet
    listed[30:, 1] = False  # stops 30 days before the end: delisted
    listed[30:40, 2] = False  # a long suspension that resumes: not delisted
    period = np.zeros((60, 4))
    listed[50:, 3] = False
    period[45:50, 3] = 1.0  # 退 days, then no bar: delisted though only 10 days before the end
    gone = decide(dates, ["a", "b", "c", "d"], listed, period)
    assert gone.table["code"].tolist() == ["b", "d"]
    assert gone.last.tolist() == [-1, 29, -1, 49]
    d = gone.table.set_index("code")
    assert d.loc["d", "known_from"] == dates[45] and d.loc["b", "known_from"] == dates[29]
    assert "'退' name from" in d.loc["d", "reason"]
    # a long stop with neither a 退 name nor an instruments end: named as what the data show
    assert d.loc["b", "reason"] == f"suspended or delisted (no bar since {dates[29].date()})"
    assert gone.quiet.tolist() == [False, True, False, False]
    assert gone.in_period.tolist() == [False, False, False, True]
    assert gone.known[45:, 3].all() and not gone.known[:45, 3].any()
    assert gone.known[29:, 1].all() and not gone.known[:29, 1].any()
    assert not gone.known[:, [0, 2]].any()


def test_a_position_is_sold_at_the_open_after_the_delisting_name_appears():
    panel, result = _run(_planted())
    known = panel.dates[LAST - PERIOD + 1]  # the first 退 day: known at its close
    sale_day = panel.dates[LAST - PERIOD + 2]
    exits = result.delisted_exits
    assert len(exits) == 1
    row = exits.iloc[0]
    assert (row["code"], row["how"], row["date"]) == (HELD, SOLD_IN_PERIOD, sale_day)
    trades = result.trades[result.trades["code"] == HELD]
    buys = trades[(trades["side"] == "buy") & (trades["status"] != "blocked")]
    sell = trades[(trades["side"] == "sell") & (trades["date"] == sale_day)].iloc[0]
    assert sell["reason"] == "delisting" and sell["shares"] == row["shares"] == buys["shares"].sum()
    fees = ["commission", "stamp_duty", "transfer_fee"]
    cost = float((buys["value"] + buys[fees].sum(axis=1)).sum())
    value = float(sell["value"] - sell[fees].sum())
    assert row["cost"] == pytest.approx(cost) and row["value"] == pytest.approx(value)
    assert row["loss"] == pytest.approx(cost - value)
    assert result.metrics["delisted_exits"] == 1
    assert result.metrics["delisting_loss"] == pytest.approx(cost - value)
    # no buy once the name said 退, and nothing held after the sale
    assert not ((trades["side"] == "buy") & (trades["date"] > known)).any()
    assert (result.weights.loc[result.weights.index > known, HELD] == 0).all()
    assert (result.positions.loc[result.positions.index >= sale_day, HELD] == 0).all()
    assert result.delisted["code"].tolist() == [HELD] and bool(result.delisted["delisted"].iloc[0])


def test_sells_blocked_at_limit_down_end_in_a_sale_at_the_last_close_or_a_write_down():
    # limit-down through the period but the last day: sold at the last close
    panel, result = _run(_planted(limit_down_days=PERIOD - 1))
    exits = result.delisted_exits
    assert exits["how"].tolist() == [SOLD_LAST] and exits["date"].iloc[0] == panel.dates[LAST]
    assert exits["price"].iloc[0] == pytest.approx(panel["close"][LAST, 0] * (1 - 5e-4))
    blocked = result.trades[(result.trades["code"] == HELD) & (result.trades["status"] == "blocked")]
    assert (blocked["reason"] == "limit_down").sum() == PERIOD - 1
    # limit-down to the end: written down to zero, the whole cost lost, no cash in
    panel, result = _run(_planted(limit_down_days=PERIOD))
    exits = result.delisted_exits
    assert exits["how"].tolist() == [WRITTEN_OFF] and exits["value"].iloc[0] == 0
    assert exits["loss"].iloc[0] == pytest.approx(exits["cost"].iloc[0]) and exits["cost"].iloc[0] > 0
    day = panel.dates[LAST]
    assert result.positions.loc[day, HELD] == 0
    before = result.equity.loc[panel.dates[LAST - 1]]
    held_value = result.positions.loc[panel.dates[LAST - 1], HELD] * panel["close"][LAST - 1, 0]
    assert result.equity.loc[day] < before - 0.5 * held_value  # the position's value is gone


def test_bars_that_stop_without_warning_are_sold_at_the_last_close():
    panel, result = _run(_planted(period=0))
    exits = result.delisted_exits
    assert exits["how"].tolist() == [SOLD_LAST] and exits["date"].iloc[0] == panel.dates[LAST]
    after = result.positions.index > panel.dates[LAST]
    assert (result.positions.loc[after, HELD] == 0).all()
    trades = result.trades
    assert not ((trades["code"] == HELD) & (trades["date"] > panel.dates[LAST])).any()
    lines = delisting_notes({"transformer": result}, "transformer")
    last = panel.dates[LAST].date()
    assert lines[0].startswith("suspended or delisted (more than 20 trading days without a bar at the data's "
                               f"end, no '退' name, no instruments end): {HELD} (no bar since {last}); ")
    assert "(never written down)" in lines[0]
    assert lines[1].startswith("transformer's backtest: 1 exit(s) by delisting, loss ")
    masked = {"delisting known on the signal day": 1, "delisted before the exit": 1, "other": 5}
    assert "; 2 labels masked (1 with the delisting known on the signal day, 1 delisted before the exit)" in (
        delisting_notes({"transformer": result}, "transformer", masked)[0])


def test_a_panel_without_delistings_trades_as_before():
    frames = synthetic_panel(n_stocks=8, n_days=N_DAYS, seed=5)
    panel, result = _run(frames)
    assert len(result.delisted_exits) == 0 and len(result.delisted) == 0
    assert result.metrics["delisted_exits"] == 0 and delisting_notes({"m": result}, "m") == []


def test_labels_of_a_known_delisting_are_masked_and_counted():
    panel = Panel.from_frames(_planted())
    label, report = tradeable_label(panel, 1)
    j = LAST - PERIOD + 1
    # bought at the first 退 day's open (not known yet), sold at the next open: a label
    assert np.isfinite(label[j - 1, 0]) and np.isnan(label[j:, 0]).all()
    assert report.masked["delisting known on the signal day"] == PERIOD
    assert report.masked["delisted before the exit"] == 0
    # bars that stop without warning: the last day's label (no exit after it) is counted as such
    label, report = tradeable_label(Panel.from_frames(_planted(period=0)), 1)
    assert report.masked["delisted before the exit"] == 1
    assert report.masked["delisting known on the signal day"] == 1


def test_ranked_list_never_offers_a_delisting_stock():
    from forecaster.portfolio.next_day import ranked_list

    class Model:
        window = 1

        def predict_next(self, panel):
            return pd.Series(np.arange(panel.n_stocks, 0, -1.0), index=panel.codes)

    frames = _planted()
    panel = Panel.from_frames(frames)
    table = ranked_list(Model(), panel).set_index("code")
    assert not table.loc[HELD, "buyable"] and table.loc[HELD, "reason"].startswith("delisted (last day")
    cut = {c: f.loc[: panel.dates[LAST - 3]] for c, f in frames.items()}  # the data end in its 退 days
    table = ranked_list(Model(), Panel.from_frames(cut)).set_index("code")
    assert not table.loc[HELD, "buyable"]
    assert table.loc[HELD, "reason"].startswith("in its delisting period ('退' name from")


def test_instrument_ends(tmp_path):
    (tmp_path / "instruments").mkdir()
    (tmp_path / "instruments" / "all.txt").write_text("SH600074\t2005-01-04\t2020-05-26\n"
                                                     "SZ000001\t2005-01-04\t2026-05-08\n")
    assert instrument_ends(tmp_path) == {"sh.600074": pd.Timestamp("2020-05-26"),
                                         "sz.000001": pd.Timestamp("2026-05-08")}
    assert instrument_ends(tmp_path / "none") == {}


def test_tomorrows_orders_sell_a_holding_in_its_delisting_period_and_buy_none():
    from forecaster.portfolio.orders import Book, book_orders_for_panel

    frames = _planted()
    day = Panel.from_frames(frames).dates[LAST - 3]
    panel = Panel.from_frames({c: f.loc[:day] for c, f in frames.items()})
    scores = pd.Series(np.arange(panel.n_stocks, 0, -1.0), index=panel.codes)  # HELD the best
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=3))
    orders = book_orders_for_panel(scores, panel, Book({HELD: 1000}, 1e6), config).set_index("code")
    assert orders.loc[HELD, "side"] == "sell" and orders.loc[HELD, "shares"] == 1000
    assert orders.loc[HELD, "reason"].startswith("in its delisting period ('退' name from")
    assert (orders["side"] == "buy").sum() == 3 and HELD not in orders.index[orders["side"] == "buy"]


def test_the_equal_weight_benchmark_sells_a_known_delisting_and_writes_off_a_dead_last_bar():
    from types import SimpleNamespace

    from forecaster.portfolio.benchmark import equal_weight_benchmark

    def view(known_from: int, last_suspended: bool, in_period: bool = True):
        has_bar = np.ones((5, 2), dtype=bool)
        has_bar[3:, 1] = False  # B's last bar is day 2
        suspended = np.zeros((5, 2), dtype=bool)
        suspended[2, 1] = last_suspended
        known = np.zeros((5, 2), dtype=bool)
        known[known_from:, 1] = True
        prices = np.where(has_bar, 10.0, np.nan)
        return SimpleNamespace(codes=["A", "B"], has_bar=has_bar, suspended=suspended, known=known,
                               first_bar=np.zeros((5, 2), dtype=bool), member=np.ones((5, 2), dtype=bool),
                               last=np.array([-1, 2]), close=prices, preclose=prices, open=prices,
                               close_val=np.full((5, 2), 10.0), down=np.full((5, 2), 9.0),
                               in_period=np.array([False, in_period]), quiet=np.array([False, not in_period]))

    # bars that stop on a suspended day after a 退 period: B's half is written down to zero, not carried
    assert equal_weight_benchmark(view(2, True), 0, 4, 100.0, False).tolist() == [100, 100, 50, 50, 50]
    # ... and without one (suspended or delisted): B's half is cash at its last close
    assert equal_weight_benchmark(view(2, True, in_period=False), 0, 4, 100.0, False).tolist() == [100] * 5
    # a 退 name from day 1: B is sold at that close, A holds everything
    assert equal_weight_benchmark(view(1, True), 0, 4, 100.0, False).tolist() == [100] * 5
    # bars that stop on a traded day: sold at the last close
    assert equal_weight_benchmark(view(2, False), 0, 4, 100.0, False).tolist() == [100] * 5


def test_a_qlib_folders_instrument_end_makes_a_recent_stop_a_delisting(tmp_path):
    """Bars that stop 5 days before the data end are too recent for the 20-day rule; the Qlib
    folder's ``instruments/all.txt`` ending there says the stock is delisted, in the whole
    panel, its slices and the copy fold workers open."""
    from forecaster.app.pipeline import DataConfig, load_data
    from forecaster.data.qlib.writer import write_qlib

    frames = synthetic_panel(n_stocks=6, n_days=120, seed=3)
    frames[HELD] = frames[HELD].iloc[:-5]
    assert not Panel.from_frames(frames).delistings().delisted.any()  # CSV-like: no end dates
    write_qlib(frames, tmp_path / "q")
    panel = load_data(DataConfig(path=str(tmp_path / "q"))).panel
    gone = panel.delistings()
    assert gone.delisted.tolist() == [c == HELD for c in panel.codes]
    assert gone.table["reason"].tolist() == [f"instruments end {frames[HELD].index[-1].date()}"]
    assert panel.slice(end=panel.dates[-3]).delistings().delisted.sum() == 1
    early = panel.slice(end=frames[HELD].index[-1])  # the end is the slice's last day: not yet gone
    assert not early.delistings().delisted.any()
    (tmp_path / "files").mkdir()
    opened = panel.to_files(tmp_path / "files").open()
    assert opened.delistings().delisted.tolist() == gone.delisted.tolist()
