"""Tomorrow's orders are the backtest's trades for the same day and book."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.portfolio.backtest import BacktestConfig, _build_panel, run_backtest
from forecaster.portfolio.orders import Book, HoldingsError, next_day_orders, read_holdings
from forecaster.portfolio.strategy import StrategyConfig, st_no_buy


def _backtest(rule: str):
    frames = synthetic_panel(n_stocks=25, n_days=160, seed=3)
    panel = Panel.from_frames(frames)
    rng = np.random.default_rng(0)
    dates = panel.dates[60:]
    forecast = pd.DataFrame(rng.normal(size=(len(dates), panel.n_stocks)), index=dates,
                            columns=list(panel.codes))
    forecast.iloc[5:, 3] = np.nan  # a stock that loses its score: the dropout rule sells it
    strategy = StrategyConfig.for_universe(25) if rule == "dropout" else StrategyConfig(rule="top_k", top_k=5)
    config = BacktestConfig(strategy=strategy, capital=3e5)
    return panel, forecast, config, run_backtest(panel, forecast, config)


@pytest.mark.parametrize("rule", ["dropout", "top_k"])
def test_orders_reproduce_the_backtests_trades(rule):
    panel, forecast, config, result = _backtest(rule)
    view = _build_panel(panel, list(forecast.columns))
    trades = result.trades
    checked = 0
    for d in range(1, len(result.positions)):
        day = result.positions.index[d]
        before = result.positions.iloc[d - 1]
        held = before.to_numpy() > 0
        if rule == "dropout" and not np.array_equal(held, result.weights.iloc[d - 1].to_numpy() > 0):
            continue  # the rule's book and the broker's differ (a blocked trade): not this test's case
        j = view.dates.get_loc(day)
        book = Book({c: int(v) for c, v in before.items() if v}, float(result.cash.iloc[d - 1]))
        orders = next_day_orders(forecast.loc[day], book, config, date=day, price=view.open[j],
                                 value_price=view.open_val[j], up=view.up[j], down=view.down[j],
                                 suspended=view.suspended[j], signal_date=day,
                                 no_buy=st_no_buy(view.st[j - 1], config.strategy))  # ST on the signal day
        done = trades[trades["date"] == day]
        want = sorted(zip(done["code"], done["side"],
                          np.where(done["status"] == "blocked", done["requested"], done["shares"]),
                          done["status"].map({"filled": "order", "partial": "partial"}).fillna("blocked"),
                          strict=True))
        got = orders[orders["side"] != "hold"]
        got = sorted(zip(got["code"], got["side"], got["shares"], got["status"], strict=True))
        assert got == want, day
        kept = orders[orders["side"] == "hold"]
        assert (kept["held_before"] == result.positions.loc[day, kept["code"]].to_numpy()).all()
        checked += len(want)
    assert checked > 20  # the comparison covered real trading, not empty days


def test_read_holdings(tmp_path):
    codes = ["sh.600000", "sz.000001"]
    path = tmp_path / "h.csv"
    path.write_text("code,shares\n600000.SH,300\ncash,5000.5\n")
    book = read_holdings(path, codes)
    assert book.shares == {"sh.600000": 300} and book.cash == 5000.5
    path.write_text("code,shares\nsz.000001,100\n")
    assert read_holdings(path, codes, capital=1e4).cash == 1e4
    with pytest.raises(HoldingsError, match="no cash given"):
        read_holdings(path, codes)
    path.write_text("code,shares\nsz.000001,1.5\n")
    with pytest.raises(HoldingsError, match=r"line 2, column shares: '1.5'"):
        read_holdings(path, codes, capital=1)
    path.write_text("code,shares\nsz.300750,100\n")
    with pytest.raises(HoldingsError, match=r"line 2, column code: 'sz.300750' is not a stock"):
        read_holdings(path, codes, capital=1)
    path.write_text("code,amount\n")
    with pytest.raises(HoldingsError, match="missing"):
        read_holdings(path, codes)
    path.write_bytes("代码,shares\n".replace("代码", "code").encode("gbk") + "sz.000001,-100\n".encode("gbk"))
    with pytest.raises(HoldingsError, match=r"line 2, column shares: '-100'"):
        read_holdings(path, codes, capital=1)
    path.write_bytes(b"code,shares\nsz.000001,100\n\x80\xff,1\n")
    with pytest.raises(HoldingsError, match=r"line 3: byte b'\\x80' at offset 26 is neither UTF-8 nor GBK"):
        read_holdings(path, codes, capital=1)
    path.write_bytes("code,shares\nsz.000001,100\ncash,500\n".encode("gbk"))
    assert read_holdings(path, codes).cash == 500


def _signal_day_panel():
    """Six synthetic stocks whose signal (last) day has: syn.000001 closed at limit-up,
    syn.000002 closed at limit-down, syn.000003 suspended; the others trade normally."""
    frames = synthetic_panel(n_stocks=6, n_days=80, seed=3)
    for code, factor in (("syn.000001", 1.1), ("syn.000002", 0.9)):
        f = frames[code]
        close = round(f["preclose"].iloc[-1] * factor + 1e-9, 2)
        f.loc[f.index[-1], "close"] = close
        f.loc[f.index[-1], ["high", "low"]] = [max(close, f["high"].iloc[-1]), min(close, f["low"].iloc[-1])]
    f = frames["syn.000003"]
    f.loc[f.index[-1], ["volume", "amount", "trade_status", "suspended"]] = [0.0, 0.0, 0.0, True]
    return Panel.from_frames(frames)


@pytest.mark.parametrize("at_limit", ["block", "limit_order"])
def test_orders_apply_the_next_days_limits(at_limit):
    from forecaster.data.market.exchange import limit_prices
    from forecaster.portfolio.orders import book_orders_for_panel

    panel = _signal_day_panel()
    # the limit-up stock is the best score; the held limit-down and suspended stocks the worst
    scores = pd.Series([3.0, -3.0, -2.0, 2.0, 1.0, 0.0], index=list(panel.codes))
    book = Book({"syn.000002": 1000, "syn.000003": 1000}, 1e6)
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=3), capital=1e6)
    orders = book_orders_for_panel(scores, panel, book, config, at_limit=at_limit).set_index("code")
    close = panel["close"][-1]
    assert (orders["signal_date"] == panel.dates[-1].date()).all()
    for i, code in enumerate(panel.codes):  # each order carries the next day's limit prices
        if code in orders.index and np.isfinite(close[i]):
            limits = (orders.loc[code, "limit_up"], orders.loc[code, "limit_down"])
            assert limits == limit_prices(close[i], 0.1)
    up, down, suspended = orders.loc["syn.000001"], orders.loc["syn.000002"], orders.loc["syn.000003"]
    assert up["side"] == "buy" and down["side"] == "sell" and suspended["side"] == "sell"
    if at_limit == "block":
        assert up["status"] == "blocked" and up["held_after"] == 0
        assert "closed at limit-up" in up["reason"]
        assert "likely to open at the limit; would queue" in up["reason"]
        assert down["status"] == "blocked" and "closed at limit-down" in down["reason"]
        assert down["held_after"] == 1000
    else:  # placed as limit orders at the limit price
        assert up["status"] == "limit_order" and up["reference_price"] == up["limit_up"] and up["shares"] > 0
        assert down["status"] == "limit_order" and down["reference_price"] == down["limit_down"]
    assert suspended["status"] == "blocked" and "suspended" in suspended["reason"]
    plain = orders.loc[["syn.000004", "syn.000005"]]
    assert plain["status"].isin(["order", "partial"]).all() and (plain["side"] == "buy").all()
    assert (plain["reference_price"].to_numpy() == close[[3, 4]]).all()


@pytest.mark.parametrize(("code", "cash", "want"), [
    ("sh.600000", 17_500, 1700),   # main board: 100-share lots (floor of 17,500 / 10 less fees)
    ("sz.300750", 17_500, 1700),   # ChiNext: 100-share lots too
    ("sh.688981", 17_500, 1748),   # STAR: at least 200, then steps of 1
    ("sh.688981", 1_500, 0),       # STAR: 149 shares affordable is below the 200 minimum
    ("bj.830799", 1_500, 149),     # Beijing: at least 100, then steps of 1
])
def test_buys_follow_each_boards_lot_rule(code, cash, want):
    """An order the exchange would reject is never placed: STAR buys are 200 shares or more in
    steps of one (a 100-share STAR order is refused), main board and ChiNext buys 100-share lots."""
    from forecaster.portfolio.broker import Broker

    broker = Broker([code], cash)
    status = broker.order("2025-04-08", 0, 10_000, 10.0)
    assert broker.shares[0] == want
    assert status == ("blocked" if want == 0 else "partial")
    if code.startswith("sh.688") and want:
        assert broker.shares[0] >= 200


def test_a_buy_of_a_stock_that_closed_at_limit_down_is_sized_at_the_close():
    """The reference price is the signal day's close (the next day's limits are columns of their
    own): a stock that closed at limit-down and is wanted is bought at about its close."""
    from forecaster.portfolio.orders import book_orders_for_panel

    panel = _signal_day_panel()
    scores = pd.Series([0.0, 3.0, -2.0, 2.0, 1.0, -1.0], index=list(panel.codes))  # 000002 best
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=2), capital=1e6)
    orders = book_orders_for_panel(scores, panel, Book({}, 1e6), config).set_index("code")
    row = orders.loc["syn.000002"]
    close = panel["close"][-1][1]
    assert row["side"] == "buy" and row["status"] == "order"
    assert row["reference_price"] == close and row["limit_down"] < close
    assert row["shares"] == np.floor(0.5e6 / close / 1.001 / 100) * 100  # half the book at the close
