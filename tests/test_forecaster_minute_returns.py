"""Minute bars' suspensions, volume units and overnight returns: all-zero and flat zero-volume
bars are suspensions (counted, never targets); lots are told from shares by the amount; an
ex-rights gap is flagged and left out of targets, or corrected by the daily preclose of a daily
file beside the bars or paired by --intraday; a folder of mixed bar lengths is refused; the
real files of ../shared/data/minute load with their known facts."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest
from conftest import shared_path

from forecaster.data import (
    attach_intraday,
    daily_bars,
    load_csv,
    load_dir,
    synthetic_intraday,
    write_minute_csv,
)
from forecaster.data.fetch import adjustment_note
from forecaster.evaluation.assembly import actuals
from forecaster.features.series import mask_suspended

PRICES = ["open", "high", "low", "close"]


@pytest.fixture(scope="module")
def bars():
    frame = synthetic_intraday(n_stocks=1, n_days=4, bar_minutes=60, seed=11)["syn.000001"]
    return frame.assign(code="sz.000001")


def test_suspended_bars_are_counted_and_never_targets(bars, tmp_path):
    frame = bars.copy()
    columns = [frame.columns.get_loc(c) for c in (*PRICES, "volume", "amount")]
    frame.iloc[4:8, columns] = 0.0  # day 2, as baostock writes a suspended stock's bars
    frame.iloc[13, [frame.columns.get_loc(c) for c in PRICES]] = frame["close"].iloc[12]  # no trade, flat
    frame.iloc[13, [frame.columns.get_loc(c) for c in ("volume", "amount")]] = 0.0
    path = tmp_path / "sz.000001.csv"
    write_minute_csv(frame, path)
    loaded, report = load_csv(path)
    assert report.suspended_bars == 5 and report.zero_price_bars == 4 and report.suspended_days == 1
    summary = report.summary()
    assert "5 suspended bar(s) (1 whole day(s); 4 of all-zero prices given the previous close" in summary
    assert (loaded[PRICES].iloc[4:8].to_numpy() == frame["close"].iloc[3]).all()  # the previous close
    target = mask_suspended(np.log(loaded["close"] / loaded["preclose"]), loaded)
    assert target.isna().to_numpy().nonzero()[0].tolist() == [4, 5, 6, 7, 13]
    assert np.isfinite(target.iloc[8])  # the first bar after the suspension returns from the last close


def _ex_rights(bars: pd.DataFrame, factor: float = 0.7, day: int = 2) -> pd.DataFrame:
    """The bars with every price from the ``day``-th day on scaled by ``factor`` (bonus shares)."""
    out = bars.copy()
    later = out["day"] >= out["day"].unique()[day]
    out.loc[later, PRICES] = (out.loc[later, PRICES] * factor).round(2)
    return out


def test_an_ex_rights_gap_is_flagged_and_no_target(bars, tmp_path):
    path = tmp_path / "sz.000001.csv"
    write_minute_csv(_ex_rights(bars), path)
    loaded, report = load_csv(path)
    assert report.gaps == ["2024-01-04"]
    summary = report.summary()
    assert "1 overnight gap(s) beyond the board's price limit flagged as likely corporate actions" in summary
    gap = loaded["gap_excluded"].to_numpy().nonzero()[0].tolist()
    assert gap == [8] and loaded["preclose"].iloc[8] == loaded["open"].iloc[8]  # its return from its open
    actual = actuals({"sz.000001": loaded})
    assert actual.isna().sum() == 1 and np.isnan(actual.iloc[8])
    # ChiNext's 20 % limit explains a 15 % gap; an index has no limit to check
    write_minute_csv(_ex_rights(bars, 0.85).assign(code="sz.300001"), tmp_path / "sz.300001.csv")
    assert load_csv(tmp_path / "sz.300001.csv")[1].gaps == []
    write_minute_csv(_ex_rights(bars).assign(code="sh.000300"), tmp_path / "sh.000300.csv")
    report = load_csv(tmp_path / "sh.000300.csv")[1]
    assert report.gaps == [] and "not checked: sh.000300 is an index" in report.summary()


def _daily_file(bars: pd.DataFrame, path, factor: float = 0.7, day: int = 2, scale: float = 1.0) -> None:
    """A baostock daily export of the bars' days whose preclose is adjusted for the ex-rights."""
    daily = daily_bars(_ex_rights(bars, factor, day))
    pre = daily["preclose"].to_numpy().copy()
    pre[day] = round(pre[day] * factor, 2)
    out = pd.DataFrame({"date": daily.index.strftime("%Y-%m-%d"), "code": "sz.000001",
                        **{c: daily[c].to_numpy() * scale for c in PRICES}, "preclose": pre * scale,
                        "volume": daily["volume"].to_numpy(), "amount": daily["amount"].to_numpy()})
    out.to_csv(path, index=False)


def test_a_daily_file_beside_the_bars_gives_the_first_bars_their_preclose(bars, tmp_path):
    path = tmp_path / "sz.000001_60min.csv"
    write_minute_csv(_ex_rights(bars), path)
    _daily_file(bars, tmp_path / "sz.000001.csv")
    loaded, report = load_csv(path)
    assert report.gaps == [] and report.daily_file.endswith("sz.000001.csv")
    assert report.preclose_days == 4 and report.exrights_days == 1
    summary = report.summary()
    assert "from the daily preclose of sz.000001.csv on 4 day(s) (1 ex-rights day(s) corrected)" in summary
    first = loaded.iloc[8]  # the ex-rights day's first bar: its true return
    assert first["preclose"] == pytest.approx(round(bars["close"].iloc[7] * 0.7, 2))
    assert not loaded["gap_excluded"].any()
    # a daily file of another adjustment (its closes are not the bars') is not used, and said so
    _daily_file(bars, tmp_path / "sz.000001.csv", scale=1.5)
    _, report = load_csv(path)
    assert report.gaps == ["2024-01-04"] and "closes differ from the bars' last closes on 4 of 4 days" in (
        report.summary())


def test_volume_units_are_checked_against_the_amount(bars, tmp_path, caplog):
    path = tmp_path / "sz.000001.csv"
    write_minute_csv(bars.assign(volume=bars["volume"] / 100), path)  # lots under baostock's header
    loaded, report = load_csv(path)
    assert report.volume_unit == "lots of 100 shares, converted to shares"
    np.testing.assert_allclose(loaded["volume"], bars["volume"])
    write_minute_csv(bars.assign(amount=bars["amount"] / 1e4), path)  # amount in 10,000 CNY: neither
    with caplog.at_level(logging.WARNING):
        loaded, report = load_csv(path)
    assert report.volume_unit.startswith("unknown") and str(path) in caplog.text
    assert "amount / (volume x close) is 0.0001, expected about 1 (shares) or 100" in caplog.text
    np.testing.assert_allclose(loaded["volume"], bars["volume"])  # kept as baostock writes it
    write_minute_csv(bars.assign(code="sz.000002", volume=bars["volume"] / 100), tmp_path / "sz.000002.csv")
    summary = load_dir(tmp_path).summary()  # a folder's summary names the files
    assert "minute bars of 60 minutes, 0 suspended bar(s)" in summary
    assert "volume in lots converted to shares in 1 file(s): sz.000002.csv" in summary
    assert "volume unit unknown in 1 file(s): sz.000001.csv" in summary


def test_intraday_folders_of_one_bar_length_with_features_in_minutes(bars):
    daily = {"sz.000001": daily_bars(bars), "sz.000002": daily_bars(bars).assign(code="sz.000002")}
    five = synthetic_intraday(n_stocks=1, n_days=4, seed=2)["syn.000001"].assign(code="sz.000002")
    with pytest.raises(ValueError, match=r"different bar lengths \(5-minute bars: 1 file\(s\), e.g. "
                                         r"sz.000002; 60-minute bars: 1 file\(s\), e.g. sz.000001\)"):
        attach_intraday(daily, {"sz.000001": bars, "sz.000002": five})
    joined, line = attach_intraday(daily, {"sz.000001": bars, "sz.000002": bars.assign(code="sz.000002")})
    assert "from 60-minute bars" in line and "8 first bars' returns from the daily files' preclose" in line
    assert ("last30_return, open_volume_share, close_volume_share left empty: 60-minute bars do not close "
            "at 10:00 and 14:30") in line
    features = joined["sz.000001"]
    assert features["last30_return"].isna().all() and features["intraday_vol"].notna().all()


def test_fetch_says_what_the_adjustment_means_for_minute_returns():
    note = adjustment_note("5", "3")
    assert note.startswith("5-minute bars, unadjusted (adjustflag 3)") and "has no preclose" in note
    assert "returns come from preclose" in adjustment_note("d", "3")
    assert "returns across ex-rights days are right" in adjustment_note("5", "2")


# The real files: (file, bars, bars a day, suspended bars, flagged gaps, volume unit).
REAL = [("baostock_60min/sh.603612.csv", 2404, 4, 0, [], "shares"),
        ("baostock_60min/sh.605077.csv", 2404, 4, 20, ["2024-05-28"], "shares"),
        ("baostock_60min/sz.000155.csv", 2404, 4, 0, [], "shares"),
        ("baostock_60min/sz.002381.csv", 2404, 4, 0, [], "shares"),
        ("baostock_60min/sz.300015.csv", 2404, 4, 0, ["2023-06-08"], "shares"),
        ("baostock_60min/sz.300363.csv", 2404, 4, 0, [], "shares"),
        ("tdx_5min/SZ#000665#5min.csv", 15984, 48, 0, [], "shares"),
        ("timestamps_5min/300708_5min.csv", 11520, 48, 0, ["2025-08-15"], "shares")]


@pytest.mark.parametrize(("name", "n", "per_day", "suspended", "gaps", "unit"), REAL,
                         ids=[r[0] for r in REAL])
def test_the_real_minute_files_load_with_their_known_facts(name, n, per_day, suspended, gaps, unit):
    frame, report = load_csv(shared_path("minute", *name.split("/")))
    assert len(frame) == n and 240 // report.bar_minutes == per_day and report.suspended_bars == suspended
    assert report.gaps == gaps and report.volume_unit == unit, report.summary()
