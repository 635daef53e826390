"""Issue 86 (the enhanced book III): every day of the book exact, planted on the days that
break books (review days, rights issues, resumptions), and costs by date."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from test_forecaster_policy import world  # noqa: F401 (a fixture)

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


# ------------------------------------------------------------------ 5, 6: benchmark weights


def _frames(n_days=40, n_stocks=3, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    dates = pd.bdate_range("2021-01-04", periods=n_days, name="date")
    frames = {}
    for j in range(n_stocks):
        close = 10 * np.cumprod(1 + rng.normal(0, 0.01, n_days))
        pre = np.r_[10.0, close[:-1]]
        frames[f"sh.60000{j}"] = pd.DataFrame({
            "code": f"sh.60000{j}", "open": pre, "high": np.maximum(pre, close) * 1.001,
            "low": np.minimum(pre, close) * 0.999, "close": close, "preclose": pre, "volume": 1e6,
            "float_mv": close * (1e8 * (j + 1))}, index=dates)
    return frames


def test_a_member_resumes_at_its_own_weight_carried_through_a_suspension_without_rows():
    import numpy as np

    from forecaster.data.panel import Panel
    from forecaster.portfolio.index_weights import known_weights

    frames = _frames()
    stop = frames["sh.600002"].index[10:16]  # six days without a row: 'suspended', as xbx files show it
    frames["sh.600002"] = frames["sh.600002"].drop(stop)
    panel = Panel.from_frames(frames)
    panel.members = np.ones((panel.n_days, panel.n_stocks), bool)
    known = known_weights(panel, "float_mv")
    mv = panel.fields["float_mv"]
    last = mv[9, 2]  # its value at the last close before the suspension, held (no price move)
    for t in range(10, 16):
        others = mv[t, :2]
        assert known[t, 2] == pytest.approx(last / (last + others.sum()), rel=1e-12), t
    assert known[16, 2] == pytest.approx(mv[16, 2] / mv[16].sum(), rel=1e-12)  # its own value again
    median = np.median(mv[15, :2])  # the old fill: the median of the members with a value
    assert abs(known[15, 2] - median / (median + mv[15, :2].sum())) > 1e-3  # not the median


def test_benchmark_weights_drift_by_price_a_dividend_lowers_a_members_weight(tmp_path):
    from forecaster.data.panel import Panel
    from forecaster.portfolio.index_weights import benchmark_weights, known_weights

    frames = _frames(n_stocks=2)
    a, b = frames["sh.600000"], frames["sh.600001"]
    for frame in (a, b):  # no price moves, so only the dividend can move a weight
        frame[["open", "high", "low", "close", "preclose"]] = 10.0
    ex = a.index[20]
    # a 5 % cash dividend: preclose 9.5 (prices alone read a gap above 1/11 as a share issue)
    a.loc[ex:, ["open", "high", "low", "close", "preclose"]] = 9.5
    panel = Panel.from_frames(frames)
    path = tmp_path / "w.csv"
    path.write_text(f"date,code,weight\n{a.index[5].date()},sh.600000,0.5\n{a.index[5].date()},sh.600001,0.5\n")
    weights = benchmark_weights(panel, str(path)).weights
    known = known_weights(panel, str(path))
    t = panel.dates.get_loc(ex)
    after = 0.475 / 0.975  # its value fell by the dividend, the other's did not
    assert weights[t, 0] == pytest.approx(0.5) and weights[t + 1, 0] == pytest.approx(after)
    assert known[t, 0] == pytest.approx(after) and known[t - 1, 0] == pytest.approx(0.5)


# ------------------------------------------------------------------ 2: members without a forecast


def test_a_member_without_a_forecast_stays_in_the_benchmark_at_its_weight(world):  # noqa: F811
    import numpy as np
    from test_forecaster_policy import _config

    from forecaster.portfolio.backtest import run_backtest
    from forecaster.portfolio.index_weights import known_weights

    panel, forecast = world
    lacking = str(panel.codes[3])
    result = run_backtest(panel, forecast.drop(columns=[lacking]), _config())
    book = result.enhanced
    assert lacking in book.target_active.columns
    rows = book.target_active.dropna(how="all").index
    known = known_weights(panel)
    j = list(panel.codes).index(lacking)
    for day in rows[2:5]:
        s = panel.dates.get_loc(day) - 1  # the signal day
        bench = book.weights.loc[day, lacking] - book.target_active.loc[day, lacking]
        total = known[s][[list(panel.codes).index(c) for c in book.weights.columns]].sum()
        assert bench == pytest.approx(known[s, j] / total, rel=1e-9) and bench > 0
    assert any("had no forecast" in n and "alpha 0" in n for n in book.notes)
    assert np.isfinite(result.equity).all()


# ------------------------------------------------------------------ 1, 4: an index review day


def _reviewed(world, review_row):  # noqa: F811
    """The policy world's panel with a review on ``review_row``: six members leave, four join."""
    import numpy as np

    panel, forecast = world
    members = np.ones((panel.n_days, panel.n_stocks), bool)
    members[review_row:, 30:36] = False  # leavers
    members[:review_row, 36:] = False  # joiners
    reviewed = dataclasses.replace(panel, members=members, _cache={})
    return reviewed, forecast


@pytest.mark.parametrize("every", [1, 5])
def test_leavers_are_sold_and_reinvested_in_the_review_days_decision(world, every):  # noqa: F811
    import numpy as np
    from test_forecaster_policy import N_DAYS, TEST_DAYS

    from forecaster.portfolio.backtest import BacktestConfig, run_backtest
    from forecaster.portfolio.index_weights import known_weights
    from forecaster.portfolio.strategy import StrategyConfig

    review = N_DAYS - TEST_DAYS + 12  # inside the test days, not a scheduled rebalance for every=5
    panel, forecast = _reviewed(world, review)
    day = panel.dates[review]
    strategy = StrategyConfig(rule="enhanced", tracking_error=0.03, rebalance_every=every, active_bound=0.03)
    config = BacktestConfig(strategy=strategy, capital=1e8)
    result = run_backtest(panel, forecast, config)
    leavers = [str(c) for c in panel.codes[30:36]]
    held_before = result.positions.loc[:day].iloc[-2][leavers]
    assert (held_before > 0).any()  # the book held leavers before the review
    assert (result.positions.loc[day, leavers] == 0).all()  # sold on the review day's open
    held = result.holdings()  # what holdings.csv holds
    cash = held[held["code"] == "CASH"].set_index("date")["weight"]
    assert cash.max() < 0.01, cash.nlargest(3)
    assert not any(n.startswith("cash above") for n in result.enhanced.notes)
    assert np.allclose(held.groupby("date")["weight"].sum(), 1.0)
    # the decision for the review day was made with the review's members and weights
    known = known_weights(panel)
    assert (known[review - 1, 30:36] == 0).all() and (known[review - 1, 36:] > 0).all()
    assert known[review - 1].sum() == pytest.approx(1.0)
    joiners = [str(c) for c in panel.codes[36:]]
    assert np.isfinite(result.enhanced.target_active.loc[day, joiners]).all()


def test_the_weights_of_a_review_day_are_over_that_days_members_exactly(world):  # noqa: F811
    import numpy as np

    from forecaster.portfolio.index_weights import benchmark_weights, known_weights

    review = 200
    panel, _ = _reviewed(world, review)
    for spec in ("float_mv", "equal"):
        weights = benchmark_weights(panel, spec).weights
        known = known_weights(panel, spec)
        for t in (review - 1, review, review + 1):
            holding = weights[t] > 0
            seen = panel.listed.cumsum(axis=0)[t].astype(bool)
            np.testing.assert_array_equal(holding, panel.members[t] & seen)
            np.testing.assert_array_equal(known[t - 1] > 0, holding)


# ------------------------------------------------------------------ 3: a rights issue is no dividend

BAOSTOCK_DIV = ("code,dividPreNoticeDate,dividAgmPumDate,dividPlanAnnounceDate,dividPlanDate,"
                "dividRegistDate,dividOperateDate,dividPayDate,dividStockMarketDate,dividCashPsBeforeTax,"
                "dividCashPsAfterTax,dividStocksPs,dividCashStock,dividReserveToStockPs\n")


def _rights_panel():
    """Two stocks at a flat 10.0: A has a rights issue on day 20 (preclose 9.1, a 9 % gap that
    prices alone read as a dividend) and a 0.2 cash dividend on day 30 (9.1 to 8.9)."""
    frames = _frames(n_stocks=2)
    a = frames["sh.600000"]
    for frame in frames.values():
        frame[["open", "high", "low", "close", "preclose"]] = 10.0
    a.loc[a.index[20]:, ["open", "high", "low", "close", "preclose"]] = 9.1  # the rights issue
    a.loc[a.index[30]:, ["open", "high", "low", "close", "preclose"]] = 8.9  # a 0.2 dividend
    from forecaster.data.panel import Panel

    return Panel.from_frames(frames), a.index


def test_a_rights_issue_is_listed_from_prices_and_no_dividend_once_a_file_says_so(tmp_path):
    from forecaster.portfolio.total_return import attach_dividends, dividend_returns

    panel, days = _rights_panel()
    read = dividend_returns(panel)
    assert read.returns[20, 0] == pytest.approx(0.09, abs=1e-9)  # prices alone: a 9 % "dividend"
    assert list(read.large["code"]) == ["sh.600000"] and read.large["date"].iloc[0] == days[20]
    assert any("listed in dividends.csv" in n for n in read.notes)
    path = tmp_path / "div.csv"
    path.write_text(BAOSTOCK_DIV + f"sh.600000,,,,,,{days[30].date()},,,0.2,0.18,,,\n"
                    f"sh.600000,,,,,,,,,0.5,0.45,,,\n")  # a plan without an ex-date: left out
    notes = attach_dividends(panel, path)
    read = dividend_returns(panel)
    assert read.returns[20, 0] == 0.0  # the rights issue: no dividend
    assert read.returns[30, 0] == pytest.approx(0.2 / 9.1)
    assert (read.returns[:, 0][[t for t in range(40) if t != 30]] == 0).all()
    assert read.large.empty or "sh.600000" not in set(read.large["code"])
    assert any("1 row(s) of div.csv without an ex-date" in n for n in notes)


@pytest.mark.parametrize("body, message", [
    ("sh.600009,,,,,,2021-01-20,,,0.2,,,,\n", "line 2, column code: 'sh.600009' is no stock of the data"),
    ("sh.600000,,,,,,2021-01-20,,,-0.2,,,,\n",
     "line 2, column dividCashPsBeforeTax: '-0.2' is not an amount"),
    ("sh.600000,,,,,,2021-02-01,,,0.2,,,,\nsh.600000,,,,,,2021-01-20,,,0.1,,,,\n",
     "line 3, column dividOperateDate: sh.600000's ex-date 2021-01-20 does not come after line 2's"),
    (None, "expected the columns of a dividend export"),
    (b"\xff\xfe", "is neither UTF-8 nor GBK text"),
])
def test_a_bad_dividend_file_is_one_line_naming_its_line_and_column(tmp_path, body, message):
    from forecaster.data import DataError
    from forecaster.portfolio.total_return import attach_dividends

    panel, _ = _rights_panel()
    path = tmp_path / "div.csv"
    if body is None:
        path.write_text("code,date,cash\nsh.600000,2021-01-20,0.2\n")
    elif isinstance(body, bytes):
        path.write_bytes(BAOSTOCK_DIV.encode() + b"sh.600000,,,,,,2021-01-20,,,0.2,,,," + body + b"\n")
    else:
        path.write_text(BAOSTOCK_DIV + body)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        attach_dividends(panel, path)
    assert "\n" not in str(err.value) and "div.csv" in str(err.value)


def test_tushares_dividend_export_reads_alike(tmp_path):
    from forecaster.portfolio.total_return import attach_dividends, dividend_returns

    panel, days = _rights_panel()
    path = tmp_path / "div.csv"
    path.write_text("ts_code,end_date,ann_date,div_proc,stk_div,cash_div,cash_div_tax,ex_date\n"
                    f"600000.SH,20201231,20210301,实施,0,0.18,0.2,{days[30]:%Y%m%d}\n", encoding="gbk")
    attach_dividends(panel, path)
    assert dividend_returns(panel).returns[30, 0] == pytest.approx(0.2 / 9.1)


def test_backtest_score_and_predict_take_a_dividend_file_and_refuse_a_bad_one_before_writing(tmp_path):
    from test_forecaster_trust import QUICK, _invoke

    from forecaster.data import write_synthetic_panel

    data = tmp_path / "data"
    write_synthetic_panel(data, n_stocks=6, n_days=260, seed=4)
    code = sorted(p.name[:-4] for p in data.glob("*.csv"))[0]
    day = pd.read_csv(data / f"{code}.csv")["date"].iloc[200]
    good, bad = tmp_path / "div.csv", tmp_path / "bad.csv"
    good.write_text(BAOSTOCK_DIV + f"{code},,,,,,{day},,,0.1,,,,\n")
    bad.write_text(BAOSTOCK_DIV + f"sh.688999,,,,,,{day},,,0.1,,,,\n")
    res = _invoke("backtest", data, "--out", tmp_path / "bad_rep", "--dividend-data", bad, *QUICK)
    assert res.exit_code == 1 and "is no stock of the data" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "bad_rep").exists()
    res = _invoke("backtest", data, "--out", tmp_path / "rep", "--dividend-data", good, *QUICK)
    assert res.exit_code == 0, res.output
    assert f"dividends of 1 stock(s) from {good}" in res.output
    pred = pd.read_csv(tmp_path / "rep" / "predictions.csv")
    pred = pred[["date", "code", "forecast"]].rename(columns={"forecast": "score"})
    pred.to_csv(tmp_path / "p.csv", index=False)
    res = _invoke("score", tmp_path / "p.csv", data, "--out", tmp_path / "sc", "--dates", "target",
                  "--dividend-data", good)
    assert res.exit_code in (0, 1) and "Traceback" not in res.output, res.output
    assert f"dividends of 1 stock(s) from {good}" in res.output
    res = _invoke("train", data, "--out", tmp_path / "run", *QUICK[:8])
    assert res.exit_code == 0, res.output
    run = ["predict", "--run", tmp_path / "run", data, "--dividend-data"]
    res = _invoke(*run, good, "--out", tmp_path / "n.csv")
    assert res.exit_code == 0 and f"dividends of 1 stock(s) from {good}" in res.output, res.output
    res = _invoke(*run, bad, "--out", tmp_path / "m.csv")
    assert res.exit_code == 1 and "is no stock of the data" in res.output
    assert not (tmp_path / "m.csv").exists()


def test_a_dividend_file_is_recorded_by_its_path_and_digest_and_a_changed_one_refused(tmp_path):
    from forecaster.app.experiment import read_toml
    from forecaster.app.fields import ConfigError
    from forecaster.app.weights_record import read_weights_record, record_weights

    path = tmp_path / "div.csv"
    path.write_text(BAOSTOCK_DIV + "sh.600000,,,,,,2021-02-01,,,0.2,,,,\n")
    recorded = record_weights({"capital": 1e6, "dividend_data": str(path), "benchmark_weights": "fitted"})
    assert list(recorded)[:3] == ["capital", "dividend_data", "dividend_data_sha256"]
    toml = tmp_path / "e.toml"
    toml.write_text(f'[backtest]\ndividend_data = "{path}"\ndividend_data_sha256 = '
                    f'"{recorded["dividend_data_sha256"]}"\n')
    raw = read_toml(toml)
    assert raw["backtest"]["dividend_data"] == str(path) and "dividend_data_sha256" not in raw["backtest"]
    path.write_text(BAOSTOCK_DIV + "sh.600000,,,,,,2021-02-01,,,0.3,,,,\n")
    with pytest.raises(ConfigError, match="dividend_data = .* has changed since the run"):
        read_weights_record({"dividend_data": str(path),
                             "dividend_data_sha256": recorded["dividend_data_sha256"]}, toml)


# ------------------------------------------------------------------ 9: one decision, backtest and predict


def _parity(panel, forecast, r, config, next_members=None):
    """The backtest's trades of rebalance row ``r`` against predict's orders from the book the
    backtest held the day before, on the panel cut at the signal day (execution at the close)."""
    from forecaster.portfolio.backtest import run_backtest
    from forecaster.portfolio.orders import Book, book_orders_for_panel

    result = run_backtest(panel, forecast, config)
    s = panel.dates.get_loc(forecast.index[r]) - 1
    before = result.positions.loc[panel.dates[s - 1]]
    book = Book({c: int(n) for c, n in before.items() if n}, float(result.cash.loc[panel.dates[s - 1]]))
    cut = panel.rows(panel.dates <= panel.dates[s])
    orders = book_orders_for_panel(forecast.iloc[r], cut, book, config, trade_date=forecast.index[r],
                                   next_members=next_members)
    placed = orders[orders["status"].isin(["order", "partial"])]
    traded = result.trades[(result.trades["date"] == panel.dates[s]) & (result.trades["shares"] > 0)]
    ours = sorted(zip(placed["code"], placed["side"], placed["shares"], strict=True))
    theirs = sorted(zip(traded["code"], traded["side"], traded["shares"], strict=True))
    return ours, theirs, result


def test_backtest_and_predict_give_the_same_orders_on_a_review_day(world):  # noqa: F811
    from test_forecaster_policy import N_DAYS, TEST_DAYS, _config

    review = N_DAYS - TEST_DAYS + 21  # row 21 is the review's trade day; rows every 1
    panel, forecast = _reviewed(world, review)
    config = _config(capital=5e7, execution="close")
    config.strategy.rebalance_every = 1
    r = forecast.index.get_loc(panel.dates[review])
    ours, theirs, result = _parity(panel, forecast, r, config, next_members=panel.members[review])
    leavers = {str(c) for c in panel.codes[30:36]}
    assert len(ours) > 5 and ours == theirs
    assert any(code in leavers and side == "sell" for code, side, _ in ours)  # the leavers sold that day
    assert any(code in {str(c) for c in panel.codes[36:]} and side == "buy" for code, side, _ in ours)


def test_backtest_and_predict_give_the_same_orders_the_day_after_a_resumption(world):  # noqa: F811
    from test_forecaster_policy import SUSPENDED, _config

    panel, forecast = world
    config = _config(capital=5e7, execution="close")
    config.strategy.rebalance_every = 1
    r = forecast.index.get_loc(panel.dates[SUSPENDED + 2])  # decided at the close of the day it resumed
    ours, theirs, _ = _parity(panel, forecast, r, config)
    assert len(ours) > 0 and ours == theirs


def test_a_weights_files_member_days_missed_and_added_against_the_universe_are_counted(world, tmp_path):  # noqa: F811
    from forecaster.portfolio.index_weights import benchmark_weights

    review = 280
    panel, _ = _reviewed(world, review)
    day = panel.dates[review - 5]
    codes = [str(c) for c in panel.codes[:36]]  # the members before the review
    path = tmp_path / "w.csv"
    path.write_text("date,code,weight\n" + "".join(f"{day.date()},{c},{1 / 36}\n" for c in codes))
    notes = benchmark_weights(panel, str(path)).notes
    after = panel.n_days - review
    line = next(n for n in notes if "against the universe's members" in n)
    assert f"{4 * after:,} member-day(s) without a weight" in line  # the joiners
    assert f"{6 * after:,} day(s) of weight on stocks that were no members" in line  # the leavers


# ------------------------------------------------------------------ 1: cash a rule kept, counted


def test_cash_above_one_percent_is_counted_with_the_rule_that_kept_the_buy():
    import pandas as pd

    from forecaster.portfolio.enhanced import EnhancedBook

    days = pd.bdate_range("2021-06-07", periods=5)
    cash = pd.Series([0.002, 0.017, 0.004, 0.013, 0.011], index=days)
    trades = pd.DataFrame({
        "date": [days[1], days[1], days[3], days[2]],
        "side": ["buy", "buy", "buy", "buy"],
        "status": ["blocked", "filled", "partial", "blocked"],
        "reason": ["suspended", "", "limit_up", "limit_up"]})
    book = EnhancedBook(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.Series(dtype=float))
    book.note_cash(cash, trades)
    (note,) = book.notes
    assert note.startswith("cash above 1% of the book after 3 close(s) (largest 1.70% on 2021-06-08)")
    assert "limit_up on 1 day(s), suspended on 1 day(s)" in note  # day 3's blocked buy is no over-day
    assert note.endswith("with no rule's reason: 2021-06-11 (1.10%)")
    quiet = EnhancedBook(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), pd.Series(dtype=float))
    quiet.note_cash(cash.clip(upper=0.009), trades)
    assert quiet.notes == []


# ------------------------------------------------------------------ 11: snapshots computed ahead


def test_risk_snapshots_are_computed_ahead_in_one_thread_and_equal_those_asked_for():
    import threading
    import time

    from forecaster.portfolio.policy import Prefetched

    class Risk:
        def __init__(self):
            self.calls = []

        def snapshot(self, t):
            self.calls.append((t, threading.current_thread().name))
            time.sleep(0.01)
            return ("snap", t)

    risk = Risk()
    pre = Prefetched(risk, ahead=2)
    pre.expect([7, 3, 5, 9, -1])  # in any order; a day before the data is never asked ahead
    assert pre.snapshot(3) == ("snap", 3)
    assert pre.snapshot(4) == ("snap", 4)  # not expected: computed when asked
    assert pre.snapshot(7) == ("snap", 7)  # 5 was never asked for: dropped
    assert pre.snapshot(9) == ("snap", 9)
    pre.close()
    ahead = {t for t, name in risk.calls if name.startswith("risk-snapshot")}
    assert {3, 7, 9} <= ahead and (4, threading.current_thread().name) in risk.calls
    assert -1 not in ahead and len(risk.calls) <= 5
    assert pre.snapshot(2) == ("snap", 2)  # after close: computed when asked
