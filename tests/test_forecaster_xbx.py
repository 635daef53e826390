"""The '邢不行' (xbx) layout, read from the real files of ../shared/data/xbx: a title line, the
name of each day (ST, 退, XD marks), market values, and its three delisted stocks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import shared_path

from forecaster.data import load_csv, load_dir
from forecaster.data.panel import Panel
from forecaster.features.factors import DEFAULT_FEATURES, MARKET_FEATURES, check_available, feature
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.strategy import StrategyConfig

DELISTED = {"sh.600074": "2020-05-26", "sz.000511": "2018-07-17", "sz.300104": "2020-07-20"}


@pytest.fixture(scope="module")
def xbx():
    return load_dir(shared_path("xbx"))


def test_one_file_reads_with_its_status_from_the_names():
    frame, report = load_csv(shared_path("xbx", "sh600074.csv"))
    assert report.format == "xbx" and report.rows_read == report.rows_kept == 4719
    assert frame.index[0] == pd.Timestamp("1997-06-23") and frame.index[-1] == pd.Timestamp("2020-05-26")
    assert (frame["code"] == "sh.600074").all()
    assert report.st_days == 667 and report.delisting_days == 30  # *ST / ST names; 退市保千
    assert frame["delisting"].iloc[-30:].eq(1).all() and frame["delisting"].iloc[:-30].eq(0).all()
    # *ST to 2019-04-25, suspended for a year (no rows), then 30 days as 退市保千
    assert frame.index[-31] == pd.Timestamp("2019-04-25") and frame.index[-30] == pd.Timestamp("2020-04-10")
    assert frame["is_st"].iloc[-31] == 1 and frame["is_st"].iloc[-30:].eq(0).all()
    last = frame.iloc[-1]
    assert (last["open"], last["close"], last["preclose"], last["volume"]) == (0.18, 0.17, 0.18, 51930437.0)
    assert last["float_mv"] == pytest.approx(174429032.44) and last["total_mv"] == pytest.approx(414440628.33)
    # turnover in percent, as baostock's turn: 100 x volume x close / float market value
    assert last["turnover"] == pytest.approx(100 * 51930437.0 * 0.17 / 174429032.44)
    assert "30 delisting-period days" in report.summary()


def test_ex_dividend_marks_are_not_st_and_gbk_or_no_title_read_the_same(tmp_path):
    path = shared_path("xbx", "sh600000.csv")
    frame, report = load_csv(path)
    assert report.format == "xbx" and len(frame) == 5259 and report.st_days == 0
    assert frame.loc["2006-05-25", "is_st"] == 0  # XDG浦发: an ex-dividend day
    text = path.read_text(encoding="utf-8-sig")
    (tmp_path / "sh600000.csv").write_bytes(text.encode("gbk"))
    gbk, gbk_report = load_csv(tmp_path / "sh600000.csv")
    assert gbk_report.encoding == "gbk"
    pd.testing.assert_frame_equal(gbk, frame)
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "sh600000.csv").write_text(text.split("\n", 1)[1], encoding="utf-8")
    plain, _ = load_csv(tmp_path / "plain" / "sh600000.csv")
    pd.testing.assert_frame_equal(plain, frame)


def test_the_folder_its_delisted_stocks_and_boards(xbx):
    assert sorted(xbx.frames) == ["sh.600000", "sh.600074", "sh.600519", "sh.688981", "sz.000001",
                                  "sz.000511", "sz.300104", "sz.300750"]
    assert sum(len(f) for f in xbx.frames.values()) == 30704
    # Saturdays before the five-day week (1995-05-01) were trading days
    assert pd.Timestamp("1991-12-28") in xbx.frames["sz.000001"].index
    panel = Panel.from_frames(xbx.frames)
    assert panel.dates[-1] == pd.Timestamp("2022-01-14")
    table = panel.delistings().table.set_index("code")
    assert {c: str(d.date()) for c, d in table["last_day"].items()} == DELISTED
    assert table["delisted"].all() and table["reason"].str.contains("'退' name from").all()
    assert str(table.loc["sh.600074", "known_from"].date()) == "2020-04-10"
    # STAR and ChiNext (after the reform) trade under 20 % limits
    j = panel.dates.get_loc(pd.Timestamp("2021-06-01"))
    i = {c: k for k, c in enumerate(panel.codes)}
    for code in ("sh.688981", "sz.300750"):
        assert panel.limit_up[j, i[code]] == pytest.approx(round(panel["preclose"][j, i[code]] * 1.2, 2))


def test_size_features_are_there_by_name_only(xbx):
    panel = Panel.from_frames(xbx.frames)
    assert "log_float_mv" not in DEFAULT_FEATURES and "log_float_mv" not in MARKET_FEATURES
    check_available(panel, ["log_float_mv", "log_total_mv"])
    size = feature(panel, "log_float_mv")
    j, i = panel.dates.get_loc(pd.Timestamp("2022-01-14")), list(panel.codes).index("sh.600519")
    assert size[j, i] == pytest.approx(np.log(2345321292600.0))
    assert np.isnan(size[~panel.listed]).all()


def test_a_backtest_holding_a_delisting_stock_exits_it(xbx):
    panel = Panel.from_frames(xbx.frames)
    dates = panel.dates[(panel.dates >= "2020-01-02") & (panel.dates <= "2020-12-31")]
    scores = pd.DataFrame(0.0, index=dates, columns=list(panel.codes))
    scores["sh.600074"] = 1.0  # always the best: held from the first day
    scores["sz.300104"] = 0.5
    # both are *ST before their 退 period: bought only where ST stocks are allowed
    config = BacktestConfig(strategy=StrategyConfig(rule="top_k", top_k=2, exclude_st=False), capital=1e6)
    result = run_backtest(panel, scores, config)
    exits = result.delisted_exits.set_index("code")
    assert sorted(exits.index) == ["sh.600074", "sz.300104"]
    assert set(result.delisted["code"]) == set(DELISTED)
    for code, row in exits.iterrows():
        known = result.delisted.set_index("code").loc[code, "known_from"]
        trades = result.trades[(result.trades["code"] == code) & (result.trades["status"] != "blocked")]
        assert not ((trades["side"] == "buy") & (trades["date"] > known)).any()
        assert row["date"] > known and row["loss"] > 0
        assert (result.positions.loc[result.positions.index >= row["date"], code] == 0).all()
    assert result.metrics["delisted_exits"] == 2
    assert result.metrics["delisting_loss"] == pytest.approx(exits["loss"].sum())


def test_baostock_files_give_the_float_market_value_from_turnover():
    """baostock has ``turn`` but no market value: close x volume x 100 / turn is the float
    market value at the close. The float shares it implies change only when the share count
    does, so on a real file they are flat from day to day (within the rounding of ``turn`` to
    four decimals) and the size feature is there by name."""
    frame, _ = load_csv(shared_path("ashare", "sh.600000.csv"))
    traded = frame[frame["turnover"] > 0]
    assert frame["float_mv"].notna().sum() == len(traded) > 1000
    shares = traded["float_mv"] / traded["close"]
    step = shares.pct_change().abs().dropna()
    assert step.median() < 1e-3 and (step < 0.01).mean() > 0.99  # turn's rounding; share changes
    # SPDB's float market value: about 29.35 billion shares x 12.47 CNY on 2020-01-02
    first = traded.iloc[0]
    assert first["float_mv"] == pytest.approx(100 * 51629079 * 12.47 / 0.1837)
    assert 2.8e10 < first["float_mv"] / first["close"] < 3.0e10
    panel = Panel.from_frames({"sh.600000": frame})
    assert np.isfinite(feature(panel, "log_float_mv")).sum() == len(traded)
