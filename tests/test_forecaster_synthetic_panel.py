"""The synthetic panel: canonical frames that round-trip through baostock CSVs, A-share price
conventions, and a planted signal with the requested rank IC that a stock's own volume reveals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data import load_csv, load_dir, synthetic_panel, write_synthetic_panel
from forecaster.data.market.exchange import limit_matrix

BAOSTOCK_HEADER = ("date,code,open,high,low,close,preclose,volume,amount,adjustflag,turn,tradestatus,"
                   "pctChg,isST,peTTM,pbMRQ,psTTM")


@pytest.fixture(scope="module")
def small():
    return synthetic_panel(n_stocks=12, n_days=120, signal_ic=0.05, seed=7, return_signal=True)


@pytest.fixture(scope="module")
def planted():
    return synthetic_panel(n_stocks=300, n_days=400, signal_ic=0.1, seed=11, return_signal=True)


def wide(frames: dict[str, pd.DataFrame], column: str, index: pd.DatetimeIndex) -> pd.DataFrame:
    return pd.DataFrame({code: f[column] for code, f in frames.items()}).reindex(index)


def daily_rank_ic(x: pd.DataFrame, y: pd.DataFrame) -> pd.Series:
    """Cross-sectional Spearman correlation per day over the stocks where both are finite."""
    both = x.notna() & y.notna()
    return x.where(both).rank(axis=1).corrwith(y.where(both).rank(axis=1), axis=1).dropna()


def open_to_open(frames, index) -> pd.DataFrame:
    """The label at day t: log(open[t+2] / open[t+1])."""
    opens = wide(frames, "open", index)
    return np.log(opens.shift(-2) / opens.shift(-1))


def test_arguments_are_validated():
    for kwargs in ({"n_stocks": 0}, {"n_days": 1}, {"signal_ic": 0.5}, {"signal_ic": -0.7},
                   {"signal_ic": float("nan")}, {"start": "not a date"}, {"n_stocks": 2.5}):
        with pytest.raises(ValueError):
            synthetic_panel(**kwargs)
    frames = synthetic_panel(n_stocks=1, n_days=2)
    assert list(frames) == ["syn.000001"] and len(frames["syn.000001"]) == 2


def test_shapes_codes_and_columns(small):
    frames, signal = small
    assert list(frames) == [f"syn.{i:06d}" for i in range(1, 13)] == sorted(frames)
    calendar = pd.bdate_range("2018-01-02", periods=120)
    for code, f in frames.items():
        assert isinstance(f.index, pd.DatetimeIndex) and f.index.name == "date"
        assert f.index.is_monotonic_increasing and f.index.isin(calendar).all()
        assert len(f) >= 2 and (f["code"] == code).all()
        assert f.index[-1] == calendar[-1] or f["close"].iloc[-20:].lt(1.0).all()  # delisted
        assert f["suspended"].dtype == bool
    union = frames["syn.000001"].index
    for f in frames.values():
        union = union.union(f.index)
    assert signal.shape == (len(union), 12) and list(signal.columns) == list(frames)
    assert signal.index.equals(union) and signal.index.name == "date"


def test_columns_and_dtypes_match_a_real_baostock_export(small, ashare_dir):
    real, _ = load_csv(ashare_dir / "sh.600000.csv")
    expected = real.drop(columns=[c for c in real.columns if c == "pcf_ncf_ttm"])
    for f in small[0].values():
        pd.testing.assert_series_equal(f.dtypes, expected.dtypes)
        assert f.index.dtype == real.index.dtype and f.index.name == real.index.name


def test_csv_round_trip(small, tmp_path):
    paths = write_synthetic_panel(tmp_path / "panel", n_stocks=12, n_days=120, signal_ic=0.05, seed=7)
    assert [p.name for p in paths] == [f"syn.{i:06d}.csv" for i in range(1, 13)]
    assert paths[0].read_text().splitlines()[0] == BAOSTOCK_HEADER
    loaded, reports = load_dir(tmp_path / "panel")
    frames, _ = small
    assert list(loaded) == list(frames)
    for code, f in frames.items():
        assert reports[code].format == "baostock"
        pd.testing.assert_frame_equal(loaded[code], f)


def test_deterministic_given_seed(small):
    frames, signal = small
    again, signal_again = synthetic_panel(n_stocks=12, n_days=120, signal_ic=0.05, seed=7, return_signal=True)
    for code in frames:
        pd.testing.assert_frame_equal(again[code], frames[code])
    pd.testing.assert_frame_equal(signal_again, signal)
    other = synthetic_panel(n_stocks=12, n_days=120, signal_ic=0.05, seed=8)
    assert not np.allclose(other["syn.000001"]["close"].iloc[:5], frames["syn.000001"]["close"].iloc[:5])
    # Another signal_ic changes only the planted term: the same volumes, signal and first day.
    null, null_signal = synthetic_panel(n_stocks=12, n_days=120, signal_ic=0.0, seed=7, return_signal=True)
    pd.testing.assert_frame_equal(null_signal, signal)
    for code, f in frames.items():
        pd.testing.assert_series_equal(null[code]["volume"], f["volume"])
        pd.testing.assert_frame_equal(null[code].iloc[:1], f.iloc[:1])
    assert not null["syn.000001"]["close"].equals(frames["syn.000001"]["close"])


def test_price_conventions(planted):
    frames, signal = planted
    index = signal.index
    get = {col: wide(frames, col, index).to_numpy()
           for col in ("open", "high", "low", "close", "preclose", "volume", "amount", "trade_status",
                       "is_st", "suspended", "pct_chg", "pe_ttm")}
    has = ~np.isnan(get["close"])
    up, down = limit_matrix(list(frames), index, get["preclose"], get["is_st"])
    for col in ("open", "high", "low", "close"):
        price = get[col][has]
        assert (price > 0).all()
        assert np.allclose(price * 100, np.round(price * 100), atol=1e-6)  # 0.01 ticks
        assert (price <= up[has] + 1e-9).all() and (price >= down[has] - 1e-9).all()
    assert (get["high"][has] >= np.maximum(get["open"], get["close"])[has]).all()
    assert (get["low"][has] <= np.minimum(get["open"], get["close"])[has]).all()
    # Limit days happen, on both sides, and ST stocks use the 5% band.
    assert np.sum(get["close"][has] == up[has]) > 10 and np.sum(get["close"][has] == down[has]) > 10
    st = (get["is_st"] == 1) & has
    move = np.abs(get["close"] - get["preclose"])[st]
    assert st.any() and (move <= 0.05 * get["preclose"][st] + 0.005 + 1e-9).all()
    # preclose is the previous close; no gaps inside a stock's listed span.
    for f in frames.values():
        assert (f["preclose"].to_numpy()[1:] == f["close"].to_numpy()[:-1]).all()
        assert len(f) == len(index[(index >= f.index[0]) & (index <= f.index[-1])])
    # Suspended days: flat bar at preclose, no volume, status 0, no signal.
    halt = (get["suspended"] == 1) & has
    assert 0.002 < halt.sum() / has.sum() < 0.01
    assert (get["trade_status"][halt] == 0).all() and (get["volume"][halt] == 0).all()
    assert (get["amount"][halt] == 0).all() and (get["pct_chg"][halt] == 0).all()
    for col in ("open", "high", "low", "close"):
        assert (get[col][halt] == get["preclose"][halt]).all()
    assert np.isnan(signal.to_numpy()[halt]).all() and np.isnan(signal.to_numpy()[~has]).all()
    assert (get["volume"][has & ~halt] > 0).all()
    # Late listings, valuation with gaps and loss makers.
    late = sum(f.index[0] > index[0] for f in frames.values())
    assert 0.08 * len(frames) < late < 0.25 * len(frames)
    pe = get["pe_ttm"][has]
    assert np.isnan(pe).any() and (pe < 0).any() and (pe > 0).mean() > 0.6


def test_planted_rank_ic_and_recovery_from_volume(planted):
    frames, signal = planted
    label = open_to_open(frames, signal.index)
    ic = daily_rank_ic(signal, label)
    assert len(ic) > 350
    assert abs(ic.mean() - 0.1) < 0.02
    # The signal is in each stock's own bars: volume against its trailing 20-day mean.
    volume = wide(frames, "volume", signal.index)
    volume = volume.where(volume > 0)
    feature = np.log(volume / volume.shift(1).rolling(20, min_periods=20).mean())
    assert daily_rank_ic(feature, label).mean() > 0.05


def test_null_panel_has_no_signal():
    frames, signal = synthetic_panel(n_stocks=300, n_days=250, signal_ic=0.0, seed=3, return_signal=True)
    ic = daily_rank_ic(signal, open_to_open(frames, signal.index))
    assert abs(ic.mean()) < 0.015
    flipped, flipped_signal = synthetic_panel(n_stocks=150, n_days=250, signal_ic=-0.2, seed=3,
                                              return_signal=True)
    ic = daily_rank_ic(flipped_signal, open_to_open(flipped, flipped_signal.index))
    assert abs(ic.mean() + 0.2) < 0.03
