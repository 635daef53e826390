"""The panel data layer, tradeable labels, features and processors: known values, masks,
causality and the training-segment rule."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from forecaster.data.panel import Panel
from forecaster.features.factors import FEATURES, factor_score, feature, feature_tensor
from forecaster.features.labels import by_forecast_date, close_to_close, normalise_per_day, tradeable_label
from forecaster.features.processors import CrossSectionalRank, RobustZScore, processor_from_state


def bars(code, opens, closes, start="2024-01-01", **extra):
    """A canonical frame; preclose = previous close (first: the open)."""
    opens, closes = np.asarray(opens, float), np.asarray(closes, float)
    dates = pd.bdate_range(start, periods=len(opens), name="date")
    pre = np.concatenate([[opens[0]], closes[:-1]])
    frame = pd.DataFrame({"code": code, "open": opens, "high": np.maximum(opens, closes) + 0.01,
                          "low": np.minimum(opens, closes) - 0.01, "close": closes, "preclose": pre,
                          "volume": 1e6, "amount": 1e6 * closes, "turnover": 1.0}, index=dates)
    for column, values in extra.items():
        frame[column] = values
    frame["suspended"] = frame["volume"] == 0
    return frame


@pytest.fixture
def two():
    a = bars("sh.600001", [10, 10.5, 11, 11.5, 12, 12.5], [10.2, 10.8, 11.2, 11.7, 12.2, 12.4])
    b = bars("sz.000002", [20, 21, 20, 22], [20.5, 20.8, 21, 21.5], start="2024-01-03")
    return {"sz.000002": b, "sh.600001": a}


def test_union_calendar_and_masks(two):
    p = Panel.from_frames(two)
    assert list(p.codes) == ["sh.600001", "sz.000002"] and p.n_days == 6
    assert p.listed[:, 0].all() and list(p.listed[:, 1]) == [False, False, True, True, True, True]
    assert np.isnan(p["close"][0, 1]) and p["close"][2, 1] == 20.5
    np.testing.assert_allclose(p.slice("2024-01-03", "2024-01-04")["open"], [[11, 20], [11.5, 21]])
    assert list(p.take(["sz.000002"]).codes) == ["sz.000002"]


def test_adjusted_prices_bridge_an_ex_dividend_day():
    # Day 3 goes ex with preclose 9.0 although the previous close was 10.0: no real loss.
    f = bars("sh.600001", [10, 10, 9.1, 9.2], [10, 10, 9.2, 9.3])
    f.loc[f.index[2], "preclose"] = 9.0
    p = Panel.from_frames(f)
    lc, lo = p.log_adjusted("close")[:, 0], p.log_adjusted("open")[:, 0]
    np.testing.assert_allclose(np.diff(lc), np.log([10 / 10, 9.2 / 9.0, 9.3 / 9.2]))
    np.testing.assert_allclose(lo[2] - lc[1], np.log(9.1 / 9.0))  # the open against the preclose


def test_tradeable_label_next_open_and_close(two):
    p = Panel.from_frames(two)
    y, report = tradeable_label(p, horizon=2)
    a_open = np.array([10, 10.5, 11, 11.5, 12, 12.5])
    # Signal day t: bought at open t+1, sold at open t+3.
    np.testing.assert_allclose(y[:3, 0], np.log(a_open[3:6] / a_open[1:4]))
    assert np.isnan(y[3:, 0]).all()  # exits beyond the data
    assert np.isnan(y[:2, 1]).all()  # no bar on the signal day: no signal, no label
    np.testing.assert_allclose(y[2, 1], np.log(22 / 21))  # listed from day 2: open 21 -> 22
    yc, _ = tradeable_label(p, horizon=1, execution="close")
    a_close = np.array([10.2, 10.8, 11.2, 11.7, 12.2, 12.4])
    np.testing.assert_allclose(yc[:5, 0], np.log(a_close[1:] / a_close[:-1]))
    assert report.valid == int(np.isfinite(y).sum())
    shifted = by_forecast_date(y)
    assert np.isnan(shifted[0]).all() and shifted[1, 0] == y[0, 0]
    np.testing.assert_allclose(close_to_close(p, 1)[:5, 0], np.log(a_close[1:] / a_close[:-1]))


def test_tradeable_label_masks_suspensions_and_limit_up():
    opens = [10, 10, 11, 11, 11, 11]
    closes = [10, 10, 11, 11, 11, 11]
    f = bars("sh.600001", opens, closes, volume=[1e6, 1e6, 1e6, 0, 1e6, 1e6])
    f.loc[f.index[2], ["open", "high", "low", "close"]] = [11.0, 11.0, 11.0, 11.0]  # limit-up open
    f.loc[f.index[3], ["open", "high", "low", "close"]] = [11.0, 11.0, 11.0, 11.0]  # suspended
    p = Panel.from_frames(f)
    assert p.at_limit_up("open")[2, 0] and p.suspended[3, 0]
    y, report = tradeable_label(p, horizon=1)
    assert np.isnan(y[1, 0])  # entry at day 2's open is at limit-up: the buy does not fill
    assert np.isnan(y[2, 0])  # entry on a suspended day
    assert np.isfinite(y[3, 0])  # entry day 4, exit day 5
    assert report.masked["limit-up at entry"] == 1 and report.masked["no entry bar or suspended"] == 1


def test_label_normalisation_per_day():
    y = np.array([[0.03, -0.01, np.nan, 0.02], [1.0, 1.0, 2.0, 3.0]])
    r = normalise_per_day(y, "rank")
    assert np.isnan(r[0, 2]) and r[0, 0] > r[0, 3] > r[0, 1]
    np.testing.assert_allclose(np.nansum(r, axis=1), 0, atol=1e-12)
    z = normalise_per_day(y, "zscore")
    np.testing.assert_allclose(np.nanmean(z, axis=1), 0, atol=1e-12)
    np.testing.assert_allclose(np.nanstd(z, axis=1), 1)
    cut = normalise_per_day(np.arange(40.0)[None], "zscore", drop_tails=0.05)
    assert np.isnan(cut[0, [0, 1, 38, 39]]).all() and np.isfinite(cut[0, 2:38]).all()


def test_features_are_causal_and_keep_cross_sectional_levels():
    rng = np.random.default_rng(0)
    n = 120
    calm = 10 * np.exp(np.cumsum(rng.normal(0, 0.005, n)))
    wild = 10 * np.exp(np.cumsum(rng.normal(0, 0.03, n)))
    frames = {"sh.600001": bars("sh.600001", calm, calm), "sh.600002": bars("sh.600002", wild, wild)}
    p = Panel.from_frames(frames)
    X = feature_tensor(p)
    # Volatility is a level across stocks: the calm stock stays calmer after pooled scaling.
    vol = X[:, :, list(FEATURES).index("volatility_20d")]
    assert (vol[30:, 0] < vol[30:, 1]).all()
    z = RobustZScore().fit(X, p.dates).transform(X)[..., list(FEATURES).index("volatility_20d")]
    assert (z[30:, 0] < z[30:, 1]).all()
    # Perturb every bar from day 80 on: features of days before 80 do not change.
    later = {c: f.copy() for c, f in frames.items()}
    for f in later.values():
        f.iloc[80:, f.columns.get_indexer(["open", "high", "low", "close"])] *= 1.7
    X2 = feature_tensor(Panel.from_frames(later))
    np.testing.assert_array_equal(np.isnan(X[:80]), np.isnan(X2[:80]))
    np.testing.assert_allclose(np.nan_to_num(X[:80]), np.nan_to_num(X2[:80]), rtol=1e-6)
    assert factor_score(p, "low_vol_20d")[40, 0] > factor_score(p, "low_vol_20d")[40, 1]
    assert np.isnan(feature(p, "return_60d")[:60]).all()


def test_processors_see_only_rows_up_to_the_cut():
    rng = np.random.default_rng(1)
    dates = pd.bdate_range("2024-01-01", periods=100)
    X = rng.normal(size=(100, 30, 3)).astype(np.float32)
    proc = RobustZScore().fit(X, dates, up_to=dates[59])
    X2 = X.copy()
    X2[60:] *= 100  # the future changes wildly
    again = RobustZScore().fit(X2, dates, up_to=dates[59])
    np.testing.assert_array_equal(proc.center_, again.center_)
    np.testing.assert_array_equal(proc.scale_, again.scale_)
    out = proc.transform(X2)
    assert np.abs(out).max() <= 3.0 and not np.isnan(out).any()
    restored = processor_from_state(proc.state())
    np.testing.assert_array_equal(restored.transform(X), proc.transform(X))
    ranks = CrossSectionalRank().transform(X)
    assert ranks.min() >= -1 and ranks.max() <= 1
    np.testing.assert_array_equal(np.argsort(ranks[5, :, 0]), np.argsort(X[5, :, 0]))
    # In place (what the panel models do to save a copy of the feature tensor) is the same.
    for processor in (proc, CrossSectionalRank()):
        expected, inplace = processor.transform(X2), X2.copy()
        assert processor.transform(inplace, out=inplace) is inplace
        np.testing.assert_array_equal(inplace, expected)


def test_feature_tensor_padding_and_panel_files(two, tmp_path):
    panel = Panel.from_frames(two)
    names = ("ret_1d", "range")
    plain = feature_tensor(panel, names)
    # Not left on the panel: caching every feature held twice the tensor again, in float64.
    assert not any(key[0] == "feature" for key in panel._cache)
    padded = feature_tensor(panel, names, front=3)
    assert padded.shape == (3 + panel.n_days, panel.n_stocks, 2) and padded.dtype == np.float32
    assert not padded[:3].any()
    np.testing.assert_array_equal(padded[3:], plain)
    np.testing.assert_array_equal(plain[..., 0], feature(panel, "ret_1d").astype(np.float32))
    files = panel.to_files(tmp_path)
    assert len(pickle.dumps(files)) < 2_000  # what each task receives: names, not arrays
    shared = pickle.loads(pickle.dumps(files)).open()
    assert isinstance(shared["close"], np.memmap) and isinstance(shared.listed, np.memmap)
    for name in panel.fields:
        np.testing.assert_array_equal(shared[name], panel[name])
    for attr in ("listed", "suspended", "st", "limit_up", "limit_down"):
        np.testing.assert_array_equal(getattr(shared, attr), getattr(panel, attr))
    part = shared.slice(end=panel.dates[3]).take(["sz.000002"])  # a fold's slice: in memory
    assert not isinstance(part["close"], np.memmap)
    np.testing.assert_array_equal(part["close"][:, 0], panel["close"][:4, 1])


def test_panel_fingerprint_follows_the_values(two):
    """A run resumed from a built Panel is refused when any value changed."""
    from forecaster.evaluation.fold_store import data_fingerprint

    first = data_fingerprint(Panel.from_frames(two))
    assert data_fingerprint(Panel.from_frames(two)) == first
    changed = {c: f.copy() for c, f in two.items()}
    code = sorted(changed)[1]
    changed[code].iloc[3, changed[code].columns.get_loc("close")] += 0.01
    assert data_fingerprint(Panel.from_frames(changed)) != first
    assert data_fingerprint(two) != first  # frames and a Panel are fingerprinted apart


def test_distribution_and_price_volume_features_match_their_definitions():
    from scipy import stats

    rng = np.random.default_rng(3)
    n = 80
    z = rng.normal(0, 0.02, n)  # one common factor
    own = rng.normal(0, 0.01, n)
    closes = {"sh.600001": 10 * np.exp(np.cumsum(z)), "sh.600002": 10 * np.exp(np.cumsum(2 * z)),
              "sh.600003": 10 * np.exp(np.cumsum(z + own))}
    volume = rng.uniform(1e5, 1e6, n)
    turnover = np.r_[np.ones(n - 5), 2 * np.ones(5)]
    frames = {c: bars(c, v, v, volume=volume, turnover=turnover) for c, v in closes.items()}
    p = Panel.from_frames(frames)
    ret, last = p.returns(), slice(n - 20, n)
    # Skewness: scipy's bias-corrected sample skewness of the last 20 returns.
    np.testing.assert_allclose(feature(p, "skewness_20d")[-1],
                               stats.skew(ret[last], axis=0, bias=False), rtol=1e-6)
    # Idiosyncratic volatility: the std of the residuals of a regression on the universe's
    # equal-weight return.
    market = ret[last].mean(axis=1)
    for j in range(3):
        slope, intercept = np.polyfit(market, ret[last, j], 1)
        resid = ret[last, j] - slope * market - intercept
        np.testing.assert_allclose(feature(p, "idio_volatility_20d")[-1, j], resid.std(ddof=1), atol=1e-9)
    ivol = feature(p, "idio_volatility_20d")[-1]
    assert ivol[2] > 2 * ivol[0]  # its own noise
    # Price-volume correlation: log close against log volume over 20 days.
    logp = p.log_adjusted("close")[last, 0]
    np.testing.assert_allclose(feature(p, "price_volume_corr_20d")[-1, 0],
                               np.corrcoef(logp, np.log(volume[last]))[0, 1], rtol=1e-6)
    # Abnormal turnover: the last 5 days at twice the turnover of the 55 before.
    np.testing.assert_allclose(feature(p, "abnormal_turnover")[-1], np.log(2 / (65 / 60)), rtol=1e-9)
    np.testing.assert_allclose(feature(p, "abnormal_turnover")[-6], 0.0, atol=1e-12)
    assert np.isnan(feature(p, "abnormal_turnover")[:44]).all()  # fewer than 45 of 60 days
