"""One ST rule (``StrategyConfig.exclude_st``, on by default) read by the ranked list, tomorrow's
orders, the backtest and the report: an ST stock on the signal day is not bought; a holding that
becomes ST is kept while the rule still wants it, never added to (issue 57, case 1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.app.signal_day import orders_line
from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.next_day import ranked_list
from forecaster.portfolio.orders import Book, book_orders_for_panel
from forecaster.portfolio.strategy import ST_BLOCK, StrategyConfig, st_note

N_DAYS = 120
ST = "syn.000001"  # the best score every day


def _frames(st_rows: slice):
    """A synthetic panel without ST marks but on ``st_rows`` of ``ST``'s bars."""
    frames = {c: f.assign(is_st=0.0) for c, f in synthetic_panel(n_stocks=8, n_days=N_DAYS, seed=4).items()}
    frame = frames[ST]
    frame.iloc[st_rows, frame.columns.get_loc("is_st")] = 1.0
    return frames


class _Model:
    window = 1

    def predict_next(self, panel):
        return pd.Series(np.arange(panel.n_stocks, 0, -1.0), index=panel.codes)  # ST first


def _backtest(frames, rule="top_k", **strategy):
    panel = Panel.from_frames(frames)
    dates = panel.dates[20:]
    forecast = pd.DataFrame(np.tile(np.arange(panel.n_stocks, 0, -1.0), (len(dates), 1)), index=dates,
                            columns=list(panel.codes))
    top = {"rule": rule, "top_k": 3} | ({"n_drop": 1} if rule == "dropout" else {})
    config = BacktestConfig(strategy=StrategyConfig(**top, **strategy), capital=1e6)
    return panel, run_backtest(panel, forecast, config)


def test_the_list_and_the_orders_buy_no_st_stock_by_default():
    panel = Panel.from_frames(_frames(slice(-5, None)))  # ST on the signal day
    table = ranked_list(_Model(), panel).set_index("code")
    assert not table.loc[ST, "buyable"] and table.loc[ST, "reason"] == "ST (special treatment)"
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=3))
    scores = table["score"]
    orders = book_orders_for_panel(scores, panel, Book({}, 1e6), config)
    buys = orders[orders["side"] == "buy"]
    assert ST not in set(buys["code"]) and len(buys) == 3  # its place goes to the next name
    assert orders.attrs["st_skipped"] == [ST]
    assert "(1 ST stock(s) not bought, ST on the signal day: syn.000001; --no-exclude-st to allow)" in (
        orders_line(orders, "orders.csv"))
    # the option turns the rule off in both
    allowed = StrategyConfig(rule="top_k", top_k=3, exclude_st=False)
    assert ranked_list(_Model(), panel, strategy=allowed).set_index("code").loc[ST, "buyable"]
    orders = book_orders_for_panel(scores, panel, Book({}, 1e6), BacktestConfig(strategy=allowed))
    assert ST in set(orders.loc[orders["side"] == "buy", "code"]) and orders.attrs["st_skipped"] == []


def test_tomorrows_orders_keep_a_holding_that_became_st_and_add_nothing():
    panel = Panel.from_frames(_frames(slice(-5, None)))
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=3))
    scores = pd.Series(np.arange(panel.n_stocks, 0, -1.0), index=panel.codes)
    orders = book_orders_for_panel(scores, panel, Book({ST: 100}, 1e6), config).set_index("code")
    # far below its third of the book: the top-up is blocked, the 100 shares stay
    assert orders.loc[ST, "side"] == "buy" and orders.loc[ST, "status"] == "blocked"
    assert orders.loc[ST, "reason"] == "ST (special treatment) on the signal day: not bought"
    assert orders.loc[ST, "held_after"] == 100
    assert not ((orders["side"] == "sell") & (orders.index == ST)).any()


@pytest.mark.parametrize("rule", ["top_k", "dropout"])
def test_the_backtest_buys_no_st_stock_and_counts_the_skipped_buys(rule):
    frames = _frames(slice(0, 80))  # ST through row 79, then not
    panel, result = _backtest(frames, rule)
    trades = result.trades
    bought = trades[(trades["code"] == ST) & (trades["side"] == "buy") & (trades["status"] != "blocked")]
    # day 80 is the first signal day without the mark: bought at the next open
    assert bought["date"].min() == panel.dates[81]
    assert (result.positions.loc[result.positions.index <= panel.dates[80], ST] == 0).all()
    # each forecast row (day 20 on) whose signal day, the day before, has the mark: one pick skipped
    skipped = 80 - 20 + 1
    assert result.metrics["st_buys_skipped"] == skipped
    # the report says so
    note = st_note({"transformer": result.metrics["st_buys_skipped"]}, StrategyConfig())
    assert note.startswith("ST stocks (special treatment on the signal day) are not bought "
                           f"(--no-exclude-st to allow): buys skipped for it: transformer {skipped}; ")
    # with the rule off the stock is bought from the first day, and nothing is counted
    _, free = _backtest(frames, rule, exclude_st=False)
    assert free.positions[ST].iloc[0] > 0 and free.metrics["st_buys_skipped"] == 0
    assert st_note({"transformer": 0}, StrategyConfig()) == ""


@pytest.mark.parametrize("rule", ["top_k", "dropout"])
def test_a_holding_that_becomes_st_is_kept_and_never_added_to(rule):
    panel, result = _backtest(_frames(slice(60, None)), rule)  # ST from row 60 to the end
    held = result.positions[ST]
    assert (held > 0).all()  # bought on the first day, never forced out
    after = held.index > panel.dates[60]  # trades on signal days with the mark
    assert (np.diff(held[after].to_numpy()) <= 0).all()
    trades = result.trades
    later = trades[(trades["code"] == ST) & (trades["signal_date"] >= panel.dates[60])]
    assert not ((later["side"] == "buy") & (later["status"] != "blocked")).any()
    assert set(later.loc[later["side"] == "buy", "reason"]) <= {ST_BLOCK}
    assert result.metrics["st_buys_skipped"] == int((later["side"] == "buy").sum())
