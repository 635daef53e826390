"""Backtest engine: costs and A-share rules on hand-made price paths, with exact numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from forecaster.data.market.exchange import board, limit_matrix, limit_prices, price_limit, round_price
from forecaster.portfolio.backtest import (
    TRADE_COLUMNS,
    BacktestConfig,
    Broker,
    performance_metrics,
    run_backtest,
)
from forecaster.portfolio.rules import CostModel, MarketRules
from forecaster.portfolio.strategy import StrategyConfig, target_weights

NO_SLIP = CostModel(slippage_bps=0.0)
FREE = CostModel(commission_rate=0.0, min_commission=0.0, stamp_duty_before=0.0, stamp_duty_after=0.0,
                 transfer_fee_rate=0.0, slippage_bps=0.0)


def bars(dates, open_, close, code="sh.600000", preclose=None, suspended=None, is_st=0.0):
    """A canonical frame from explicit prices; preclose defaults to the previous close."""
    open_, close = np.asarray(open_, float), np.asarray(close, float)
    if preclose is None:
        preclose = np.concatenate([[open_[0]], close[:-1]])
    frame = pd.DataFrame(
        {"open": open_, "high": np.maximum(open_, close), "low": np.minimum(open_, close), "close": close,
         "preclose": np.asarray(preclose, float), "volume": 1e6, "is_st": is_st, "code": code},
        index=pd.DatetimeIndex(pd.to_datetime(dates), name="date"),
    )
    frame["suspended"] = np.zeros(len(frame), bool) if suspended is None else np.asarray(suspended, bool)
    frame.loc[frame["suspended"], "volume"] = 0.0
    return frame


def signal(dates, values, code="sh.600000"):
    return pd.DataFrame({code: values}, index=pd.DatetimeIndex(pd.to_datetime(dates)))


def filled(result):
    return result.trades[result.trades["status"] != "blocked"]


# ---------------------------------------------------------------- costs


def test_fees_commission_minimum_and_both_stamp_duty_regimes():
    c = CostModel()
    assert c.fees("buy", 10_000.0, "2023-08-25") == {"commission": 5.0, "stamp_duty": 0.0,
                                                     "transfer_fee": 0.1}
    assert c.fees("sell", 11_000.0, "2023-08-25") == {"commission": 5.0, "stamp_duty": 11.0,
                                                      "transfer_fee": 0.11}
    assert c.fees("sell", 11_000.0, "2023-08-28") == {"commission": 5.0, "stamp_duty": 5.5,
                                                      "transfer_fee": 0.11}
    assert c.fees("buy", 500_000.0, "2024-01-02")["commission"] == 125.0  # above the minimum
    assert c.fill_price("buy", 10.0) == pytest.approx(10.005)
    assert c.fill_price("sell", 10.0) == pytest.approx(9.995)
    with pytest.raises(ValueError, match="commission_rate"):
        CostModel(commission_rate=-0.1)
    with pytest.raises(ValueError, match="stamp_duty_change"):
        CostModel(stamp_duty_change="not a date")
    with pytest.raises(ValueError, match="side"):
        c.fees("short", 1.0, "2024-01-02")


@pytest.mark.parametrize("sell_day, stamp", [("2023-08-25", 11.00), ("2023-08-28", 5.50)])
def test_round_trip_exact_cash_with_minimum_commission(sell_day, stamp):
    broker = Broker(["sh.600000"], 100_000.0, NO_SLIP)
    assert broker.order("2023-08-24", 0, 1_000, 10.00) == "filled"
    # 10,000 + commission 5.00 (2.50 is below the minimum) + transfer 0.10
    assert broker.cash == pytest.approx(100_000 - 10_000 - 5.00 - 0.10, abs=1e-9)
    assert broker.cash == pytest.approx(89_994.90, abs=1e-9)
    broker.new_day()
    assert broker.order(sell_day, 0, -1_000, 11.00) == "filled"
    # 11,000 - commission 5.00 - stamp duty (0.1% or 0.05%) - transfer 0.11
    assert broker.cash == pytest.approx(89_994.90 + 11_000 - 5.00 - stamp - 0.11, abs=1e-9)
    assert broker.cash == pytest.approx({11.00: 100_978.79, 5.50: 100_984.29}[stamp], abs=1e-9)
    trades = broker.trades_frame()
    assert list(trades.columns) == TRADE_COLUMNS
    assert trades["stamp_duty"].tolist() == [0.0, stamp]
    assert trades["shares"].tolist() == [1_000, 1_000]


@pytest.mark.parametrize("sell_day, final", [("2023-08-25", 1_049_177.00), ("2023-08-28", 1_049_452.00)])
def test_big_round_trip_commission_above_minimum(sell_day, final):
    broker = Broker(["sh.600000"], 1_000_000.0, NO_SLIP)
    broker.order("2023-08-24", 0, 50_000, 10.00)
    assert broker.cash == pytest.approx(1_000_000 - 500_000 - 125.00 - 5.00, abs=1e-9)  # 0.025% = 125
    broker.new_day()
    broker.order(sell_day, 0, -50_000, 11.00)
    # 550,000 - commission 137.50 - stamp 550 / 275 - transfer 5.50
    assert broker.cash == pytest.approx(final, abs=1e-9)


def test_slippage_moves_the_fill_and_is_reported():
    broker = Broker(["sh.600000"], 100_000.0, CostModel(slippage_bps=10.0))
    broker.order("2024-01-02", 0, 1_000, 10.00)
    row = broker.trades_frame().iloc[0]
    assert row["price"] == pytest.approx(10.01)
    assert row["slippage_cost"] == pytest.approx(10.0)
    assert broker.cash == pytest.approx(100_000 - 10_010 - 5.00 - 0.10)


def test_round_trip_through_run_backtest_exact_equity():
    days = ["2023-08-23", "2023-08-24", "2023-08-25", "2023-08-28"]
    frame = bars(days, [10.0, 10.0, 11.0, 11.0], [10.0, 11.0, 11.0, 11.0])
    # close execution: row 08-24 (buy) trades at 08-23's close, row 08-25 (sell) at 08-24's close
    forecast = signal(days[1:], [0.01, -0.01, -0.01])
    config = BacktestConfig(capital=10_010.0, execution="close", costs=NO_SLIP)
    result = run_backtest({"sh.600000": frame}, forecast, config)
    trades = filled(result)
    assert trades["side"].tolist() == ["buy", "sell"]
    assert trades["shares"].tolist() == [1_000, 1_000]
    assert trades["date"].tolist() == [pd.Timestamp("2023-08-23"), pd.Timestamp("2023-08-24")]
    # 10,010 - 10,005.10 = 4.90; + 11,000 - 5 - 11 - 0.11
    assert result.equity.tolist() == pytest.approx([10_004.90, 10_988.79, 10_988.79, 10_988.79], abs=1e-9)
    assert result.cash.iloc[-1] == pytest.approx(10_988.79, abs=1e-9)
    assert result.metrics["costs_paid"] == pytest.approx(5.10 + 16.11)
    assert result.metrics["n_trades"] == 2


# ---------------------------------------------------------------- price limits


def test_price_limit_by_board_date_and_st():
    assert board("sh.688981") == "star" and board("sz.300750") == board("sz.301001") == "chinext"
    assert board("sh.600000") == "main" and board("sz.000001") == "main" and board("bj.830799") == "bse"
    assert price_limit("sh.600000", "2021-01-04", False) == 0.10
    assert price_limit("sh.600000", "2021-01-04", True) == 0.05
    assert price_limit("sz.000792", "2025-07-07", True) == 0.10  # main-board ST moved to 10%
    assert price_limit("sz.300750", "2020-08-21", False) == 0.10
    assert price_limit("sz.300750", "2020-08-21", True) == 0.05
    assert price_limit("sz.300750", "2020-08-24", False) == 0.20
    assert price_limit("sz.300750", "2020-08-24", True) == 0.20  # ST on ChiNext keeps 20%
    assert price_limit("sh.688981", "2020-01-02", True) == 0.20
    assert price_limit("bj.830799", "2024-01-02", False) == 0.30


@pytest.mark.parametrize("preclose, limit, expected", [
    (10.05, 0.10, (11.06, 9.05)),   # 11.055 and 9.045 round up
    (10.10, 0.05, (10.61, 9.60)),   # 9.595 is 9.5949999... in binary: round() would give 9.59
    (10.15, 0.10, (11.17, 9.14)),   # 9.135 -> 9.14 (round() gives 9.13)
    (3.05, 0.10, (3.36, 2.75)),     # 3.355 -> 3.36 (round() gives 3.35)
    (12.34, 0.20, (14.81, 9.87)),
])
def test_limit_prices_round_half_up(preclose, limit, expected):
    assert limit_prices(preclose, limit) == expected
    assert (round_price(preclose * (1 + limit)), round_price(preclose * (1 - limit))) == expected


def test_limit_matrix_frees_days_outside_the_band():
    dates = pd.DatetimeIndex(["2021-07-22", "2021-07-23"])
    pre = np.array([[21.49], [61.11]])
    up, down = limit_matrix(["sh.688303"], dates, pre, np.zeros((2, 1)),
                            high=np.array([[82.0], [65.0]]), low=np.array([[60.0], [58.0]]))
    assert up[0, 0] == math.inf and down[0, 0] == 0.0  # listing day: no limit
    assert (up[1, 0], down[1, 0]) == limit_prices(61.11, 0.20)


LIMIT_DAYS = ["2021-03-01", "2021-03-02", "2021-03-03", "2021-03-04"]


def test_buy_at_limit_up_is_blocked_then_fills():
    # preclose 10.00 -> limit-up 11.00; day 2 opens at 11.00, day 3 opens below its 12.10 limit
    frame = bars(LIMIT_DAYS, [10.0, 11.0, 11.5, 11.6], [10.0, 11.0, 11.6, 11.6])
    result = run_backtest({"sh.600000": frame}, signal(LIMIT_DAYS[1:], [0.01, 0.01, 0.01]),
                          BacktestConfig(capital=100_000.0, costs=NO_SLIP))
    first = result.trades.iloc[0]
    assert (first["date"], first["status"], first["reason"], first["shares"]) == (
        pd.Timestamp("2021-03-02"), "blocked", "limit_up", 0)
    assert result.positions.iloc[0, 0] == 0
    second = result.trades.iloc[1]
    assert (second["date"], second["status"], second["price"]) == (pd.Timestamp("2021-03-03"), "filled", 11.5)
    assert result.positions.iloc[1, 0] == 8_600  # floor(100,000 / (11.5 * 1.00026) / 100) lots
    assert len(result.trades) == 2


def test_sell_at_limit_down_is_blocked_then_fills():
    frame = bars(LIMIT_DAYS, [10.0, 10.0, 9.0, 9.0], [10.0, 10.0, 9.0, 9.2])
    result = run_backtest({"sh.600000": frame}, signal(LIMIT_DAYS[1:], [0.01, -0.01, -0.01]),
                          BacktestConfig(capital=100_000.0, costs=NO_SLIP))
    assert result.trades[["side", "status", "reason"]].values.tolist() == [
        ["buy", "filled", ""], ["sell", "blocked", "limit_down"], ["sell", "filled", ""]]
    assert result.positions.iloc[:, 0].tolist() == [9_900, 9_900, 0]


def test_st_main_board_has_a_five_percent_limit():
    frame = bars(LIMIT_DAYS, [10.0, 10.5, 10.6, 10.6], [10.0, 10.5, 10.6, 10.6], is_st=1.0)
    allowed = StrategyConfig(exclude_st=False)  # ST stocks bought (by default they are not)
    result = run_backtest({"sh.600000": frame}, signal(LIMIT_DAYS[1:2], [0.01]),
                          BacktestConfig(strategy=allowed, capital=100_000.0, costs=NO_SLIP))
    assert result.trades["reason"].tolist() == ["limit_up"]
    plain = run_backtest({"sh.600000": frame.assign(is_st=0.0)}, signal(LIMIT_DAYS[1:2], [0.01]),
                         BacktestConfig(capital=100_000.0, costs=NO_SLIP))
    assert plain.trades["status"].tolist() == ["filled"]


@pytest.mark.parametrize("code, days, open_up, blocked", [
    ("sz.300750", ["2020-08-20", "2020-08-21"], 11.0, True),    # ChiNext before the reform: 10%
    ("sz.300750", ["2020-08-21", "2020-08-24"], 11.0, False),   # from 2020-08-24: 20%
    ("sz.300750", ["2020-08-21", "2020-08-24"], 12.0, True),
    ("sh.688981", ["2020-08-20", "2020-08-21"], 11.0, False),   # STAR: 20%
    ("sh.688981", ["2020-08-20", "2020-08-21"], 12.0, True),
])
def test_board_limits_in_the_engine(code, days, open_up, blocked):
    frame = bars(days, [10.0, open_up], [10.0, open_up], code=code)
    result = run_backtest({code: frame}, signal(days[1:], [0.01], code=code),
                          BacktestConfig(capital=100_000.0, costs=NO_SLIP))
    assert result.trades["status"].iloc[0] == ("blocked" if blocked else "filled")
    assert result.trades["reason"].iloc[0] == ("limit_up" if blocked else "")


# ---------------------------------------------------------------- T+1, suspension, lots


def test_t_plus_1_no_sale_on_the_day_of_purchase():
    broker = Broker(["sh.600000"], 100_000.0, NO_SLIP)
    broker.order("2024-01-02", 0, 1_000, 10.0)
    assert broker.order("2024-01-02", 0, -1_000, 10.2) == "blocked"  # bought today
    assert broker.shares[0] == 1_000
    assert broker.cash == pytest.approx(89_994.90)
    broker.new_day()
    broker.order("2024-01-03", 0, 500, 10.1)  # yesterday's 1,000 are sellable, today's 500 are not
    assert broker.order("2024-01-03", 0, -1_500, 10.2) == "partial"
    assert broker.shares[0] == 500
    trades = broker.trades_frame()
    assert trades[["status", "reason"]].values.tolist() == [
        ["filled", ""], ["blocked", "t_plus_1"], ["filled", ""], ["partial", "t_plus_1"]]
    assert trades["shares"].tolist() == [1_000, 0, 500, 1_000]


def test_buy_then_sell_on_consecutive_days_works_with_close_execution():
    days = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
    frame = bars(days, [10.0] * 4, [10.0, 10.2, 10.1, 10.1])
    result = run_backtest({"sh.600000": frame}, signal(days[1:], [0.01, -0.01, 0.01]),
                          BacktestConfig(capital=100_000.0, execution="close", costs=NO_SLIP))
    assert result.trades[["date", "side", "status"]].values.tolist() == [
        [pd.Timestamp("2024-01-02"), "buy", "filled"],
        [pd.Timestamp("2024-01-03"), "sell", "filled"],
        [pd.Timestamp("2024-01-04"), "buy", "filled"]]
    sold = result.trades.iloc[1]
    assert sold["shares"] == result.trades.iloc[0]["shares"] == 9_900
    # the purchase date never carries a sale
    per_day = result.trades.groupby("date")["side"].agg(set)
    assert all(sides in ({"buy"}, {"sell"}) for sides in per_day)


def test_suspended_day_skips_and_trades_the_next_day():
    days = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
    frame = bars(days, [10.0, 10.0, 10.3, 10.4], [10.0, 10.0, 10.4, 10.5], suspended=[0, 1, 0, 0])
    result = run_backtest({"sh.600000": frame}, signal(days[1:], [0.01, 0.01, 0.01]),
                          BacktestConfig(capital=100_000.0, costs=NO_SLIP))
    assert result.trades[["date", "status", "reason"]].values.tolist() == [
        [pd.Timestamp("2024-01-03"), "blocked", "suspended"],
        [pd.Timestamp("2024-01-04"), "filled", ""]]
    assert result.positions.iloc[:, 0].tolist() == [0, 9_700, 9_700]


def test_suspended_holding_cannot_be_sold():
    days = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
    frame = bars(days, [10.0, 10.0, 10.0, 10.2], [10.0, 10.0, 10.0, 10.2], suspended=[0, 0, 1, 0])
    result = run_backtest({"sh.600000": frame}, signal(days[1:], [0.01, -0.01, -0.01]),
                          BacktestConfig(capital=100_000.0, costs=NO_SLIP))
    assert result.trades[["side", "status", "reason"]].values.tolist() == [
        ["buy", "filled", ""], ["sell", "blocked", "suspended"], ["sell", "filled", ""]]


def test_lots_floor_a_fractional_target():
    days = ["2024-01-02", "2024-01-03"]
    frame = bars(days, [10.0, 10.0], [10.0, 10.0])
    result = run_backtest({"sh.600000": frame}, signal(days[1:], [0.01]),
                          BacktestConfig(capital=12_345.0, costs=FREE))  # 1,234.5 shares wanted
    assert result.positions.iloc[0, 0] == 1_200
    assert result.cash.iloc[0] == pytest.approx(345.0)


def test_target_below_one_lot_is_reported():
    days = ["2024-01-02", "2024-01-03"]
    frame = bars(days, [500.0, 500.0], [500.0, 500.0], code="sh.688169")
    result = run_backtest({"sh.688169": frame}, signal(days[1:], [0.01], code="sh.688169"),
                          BacktestConfig(capital=30_000.0, costs=NO_SLIP))
    assert result.trades[["status", "reason", "requested"]].values.tolist() == [["blocked", "lot_size", 60]]


def test_cash_limits_a_buy_after_a_blocked_sell():
    days = ["2024-01-02", "2024-01-03", "2024-01-04"]
    a = bars(days, [10.0, 10.0, 9.0], [10.0, 10.0, 9.0], code="sh.600000")
    b = bars(days, [10.0, 10.0, 10.0], [10.0, 10.0, 10.0], code="sh.600016")
    forecast = pd.DataFrame({"sh.600000": [0.02, -0.01], "sh.600016": [0.01, 0.02]},
                            index=pd.DatetimeIndex(days[1:]))
    config = BacktestConfig(capital=100_000.0, strategy=StrategyConfig(top_k=1), costs=NO_SLIP)
    result = run_backtest({"sh.600000": a, "sh.600016": b}, forecast, config)
    # day 3: the sale of sh.600000 is blocked at limit-down, so there is no cash for sh.600016
    day3 = result.trades[result.trades["date"] == pd.Timestamp("2024-01-04")]
    assert day3[["code", "side", "status", "reason"]].values.tolist() == [
        ["sh.600000", "sell", "blocked", "limit_down"], ["sh.600016", "buy", "blocked", "cash"]]
    assert (result.cash >= 0).all()


# ---------------------------------------------------------------- timing


def test_next_open_first_day_earns_open_to_close():
    days = ["2024-01-02", "2024-01-03", "2024-01-04"]
    frame = bars(days, [10.3, 10.0, 10.5], [10.4, 10.5, 10.5])
    forecast = signal(days[1:], [0.01, 0.01])
    opened = run_backtest({"sh.600000": frame}, forecast, BacktestConfig(capital=100_000.0, costs=FREE))
    assert opened.equity.index[0] == pd.Timestamp("2024-01-03")
    assert opened.returns.iloc[0] == pytest.approx(10.5 / 10.0 - 1)  # not 10.5 / 10.4 - 1
    assert opened.trades["price"].iloc[0] == 10.0
    closed = run_backtest({"sh.600000": frame}, forecast,
                          BacktestConfig(capital=100_000.0, execution="close", costs=FREE))
    assert closed.equity.index[0] == pd.Timestamp("2024-01-02")  # bought at that close
    assert closed.trades["price"].iloc[0] == 10.4
    # 9,600 shares at 10.40 and 160 cash earn the close-to-close move of 2024-01-03
    assert closed.returns.iloc[1] == pytest.approx((160 + 9_600 * 10.5) / 100_000 - 1)


def test_benchmark_single_stock_is_buy_and_hold():
    days = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
    frame = bars(days, [10.0, 10.0, 10.2, 10.4], [10.0, 10.1, 10.3, 10.2])
    result = run_backtest({"sh.600000": frame}, signal(days[1:], [-0.01, -0.01, -0.01]),
                          BacktestConfig(capital=100_000.0, costs=FREE))
    assert result.equity.tolist() == [100_000.0] * 3  # always flat
    assert result.benchmark_equity.tolist() == pytest.approx([101_000.0, 103_000.0, 102_000.0])
    assert "buy-and-hold" in result.benchmark


def test_benchmark_panel_is_equal_weight_of_trading_stocks():
    days = ["2024-01-02", "2024-01-03", "2024-01-04", "2024-01-05"]
    a = bars(days, [10.0, 10.0, 11.0, 12.1], [10.0, 11.0, 12.1, 12.1], code="sh.600000")
    b = bars(days, [10.0] * 4, [10.0, 10.0, 10.0, 11.0], code="sh.600016", suspended=[0, 0, 1, 0])
    forecast = pd.DataFrame(0.0, index=pd.DatetimeIndex(days[1:]), columns=["sh.600000", "sh.600016"])
    result = run_backtest({"sh.600000": a, "sh.600016": b}, forecast, BacktestConfig(capital=100.0))
    # day 2: 50/50 from the open, a +10% -> 105, rebalanced to 52.5 each; day 3: a +10%, b suspended
    # (frozen at 52.5) -> 110.25, only a rebalances (57.75); day 4: b resumes +10% -> 115.5
    assert result.benchmark_equity.tolist() == pytest.approx([105.0, 110.25, 115.5])
    assert math.isnan(result.benchmark_metrics["costs_paid"])


# ---------------------------------------------------------------- weights, shorts, corporate actions


def test_target_weights_top_k_threshold_and_rebalance():
    idx = pd.DatetimeIndex(["2024-01-02", "2024-01-03", "2024-01-04"])
    f = pd.DataFrame({"a": [0.3, -0.1, 0.5], "b": [0.2, 0.2, np.nan], "c": [-0.4, 0.1, 0.1]}, index=idx)
    w = target_weights(f, StrategyConfig(top_k=2))
    assert w.values.tolist() == [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]
    w = target_weights(f, StrategyConfig(top_k=2, threshold=0.15))
    assert w.values.tolist() == [[0.5, 0.5, 0.0], [0.0, 0.5, 0.0], [0.5, 0.0, 0.0]]
    w = target_weights(f, StrategyConfig(top_k=1, mode="long_short"))
    assert w.values.tolist() == [[1.0, 0.0, -1.0], [-1.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    w = target_weights(f, StrategyConfig(top_k=1, rebalance_every=2))
    assert w.values.tolist() == [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    single = target_weights(f[["a"]], StrategyConfig(mode="long_short", threshold=0.2))
    assert single["a"].tolist() == [1.0, 0.0, 1.0]
    assert target_weights(f[["c"]], StrategyConfig(mode="long_short"))["c"].tolist() == [-1.0, 1.0, 1.0]


def test_long_short_single_stock_goes_short():
    days = ["2024-01-02", "2024-01-03", "2024-01-04"]
    frame = bars(days, [10.0, 10.0, 9.5], [10.0, 9.5, 9.5])
    result = run_backtest({"sh.600000": frame}, signal(days[1:], [-0.01, -0.01]),
                          BacktestConfig(capital=100_000.0, strategy=StrategyConfig(mode="long_short"),
                                         costs=FREE))
    assert result.positions.iloc[0, 0] == -10_000
    assert result.equity.iloc[0] == pytest.approx(105_000.0)


@pytest.mark.parametrize("how", ["shares", "cash"])
def test_corporate_action_keeps_value(how):
    # 10-for-10 bonus issue: preclose halves on the ex-date
    days = ["2024-06-03", "2024-06-04", "2024-06-05"]
    frame = bars(days, [20.0, 10.0, 10.0], [20.0, 10.0, 10.0], preclose=[20.0, 10.0, 10.0])
    result = run_backtest({"sh.600000": frame}, signal(days, [0.01, 0.01, 0.01]),
                          BacktestConfig(capital=200_000.0, costs=FREE,
                                         market=MarketRules(corporate_actions=how),
                                         rebalance_tolerance=math.inf))
    assert result.equity.tolist() == pytest.approx([200_000.0] * 3)
    assert result.positions.iloc[:, 0].tolist() == ([10_000, 20_000, 20_000] if how == "shares"
                                                    else [10_000] * 3)


# ---------------------------------------------------------------- metrics and validation


def test_performance_metrics_by_hand():
    short = performance_metrics(pd.Series([100.0, 110.0, 99.0, 121.0]))
    assert short["total_return"] == pytest.approx(0.21) and math.isnan(short["annual_return"])  # 3 days
    r = np.tile([0.10, -0.10, 121.0 / 99.0 - 1], 8)  # 24 days: annualised
    equity = pd.Series(100.0 * np.cumprod(np.concatenate([[1.0], 1 + r])))
    m = performance_metrics(equity)
    assert m["total_return"] == pytest.approx(1.21 ** 8 - 1)
    assert m["annual_return"] == pytest.approx(1.21 ** (252 / 3) - 1)
    assert m["max_drawdown"] == pytest.approx(0.10)  # 110 -> 99
    assert m["sharpe"] == pytest.approx(r.mean() / r.std(ddof=1) * math.sqrt(252))
    assert m["sortino"] == pytest.approx(r.mean() / math.sqrt(0.01 / 3) * math.sqrt(252))
    assert m["annual_volatility"] == pytest.approx(r.std(ddof=1) * math.sqrt(252))
    assert m["calmar"] == pytest.approx(m["annual_return"] / 0.10)
    assert math.isnan(m["turnover"]) and m["n_days"] == 24
    m = performance_metrics(pd.Series([90.0, 99.0]), capital=100.0)
    assert m["total_return"] == pytest.approx(-0.01)
    assert m["max_drawdown"] == pytest.approx(0.10)


@pytest.mark.parametrize("cls, kwargs, match", [
    (BacktestConfig, {"execution": "vwap"}, "execution"),
    (BacktestConfig, {"capital": 0.0}, "capital"),
    (BacktestConfig, {"costs": {"slippage_bps": 1}}, "CostModel"),
    (StrategyConfig, {"mode": "short_only"}, "mode"),
    (StrategyConfig, {"top_k": 0}, "top_k"),
    (StrategyConfig, {"rebalance_every": 1.5}, "rebalance_every"),
    (StrategyConfig, {"threshold": -0.1}, "threshold"),
    (StrategyConfig, {"rule": "dropout"}, "needs top_k"),
    (StrategyConfig, {"rule": "dropout", "top_k": 2, "n_drop": 3}, "cannot exceed"),
    (StrategyConfig, {"weighting": "cap"}, "weighting"),
    (MarketRules, {"lot_size": 0}, "lot_size"),
    (MarketRules, {"corporate_actions": "ignore"}, "corporate_actions"),
])
def test_config_validation(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_forecast_columns_need_frames():
    frame = bars(["2024-01-02", "2024-01-03"], [10.0, 10.0], [10.0, 10.0])
    with pytest.raises(ValueError, match="without a price frame"):
        run_backtest({"sh.600000": frame}, signal(["2024-01-03"], [0.1], code="sz.000001"))


# ---------------------------------------------------------------- real data


@pytest.mark.parametrize("how", ["shares", "cash"])
def test_real_files_run_clean(ashare_dir, how):
    from forecaster.data import load_csv

    frames = {}
    for name in ("sh.600000.csv", "sz.000792.csv"):  # a blue chip; a long-suspended ST stock
        frame, _ = load_csv(ashare_dir / name)
        frames[str(frame["code"].iloc[0])] = frame
    dates = frames["sh.600000"].index.union(frames["sz.000792"].index)
    rng = np.random.default_rng(0)
    forecast = pd.DataFrame(rng.normal(size=(len(dates), 2)), index=dates, columns=list(frames))
    result = run_backtest(frames, forecast, BacktestConfig(strategy=StrategyConfig(top_k=1),
                                                            market=MarketRules(corporate_actions=how)))
    assert (result.cash >= 0).all()
    assert np.isfinite(result.equity).all() and np.isfinite(result.benchmark_equity).all()
    buys = filled(result)[filled(result)["side"] == "buy"]
    assert (buys["shares"] % 100 == 0).all() and (buys["shares"] > 0).all()
    if how == "cash":
        assert (result.positions % 100 == 0).all().all()
    assert (result.positions >= 0).all().all()
    assert set(result.trades["reason"]) <= {"", "suspended", "limit_up", "limit_down", "cash", "lot_size"}
    assert (result.trades.loc[result.trades["reason"] == "suspended", "shares"] == 0).all()
    assert result.metrics["n_trades"] > 100 and result.metrics["costs_paid"] > 0
