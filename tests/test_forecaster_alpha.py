"""Qlib's Alpha158 and Alpha360 (forecaster.features.alpha): Qlib's expressions, its values on
real stocks (a fixture pyqlib 0.9.7 computed: scripts/make_alpha_fixture.py), the adjustment and
operator semantics, and the named sets chosen as a model's features, end to end."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, shared_path

from forecaster import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.features.alpha import ALPHA158, ALPHA360, alpha_feature, expression
from forecaster.features.factors import (
    check_available,
    check_feature_names,
    feature_tensor,
    features_note,
    lookback,
    resolve_features,
)

DATA = REPO / "tests" / "data"
FIXTURE = DATA / "qlib_alpha_features.csv.gz"
# Features whose value on a zero-volume bar is x / 1e-12 (Qlib's eps): its size is Qlib's
# volume unit, which a panel does not carry (only ratios of volumes are comparable).
PER_VOLUME = ("VMA", "VSTD", "VOLUME")


def test_names_and_expressions_are_qlibs():
    stored = pd.read_csv(DATA / "qlib_alpha_expressions.tsv.gz", sep="\t")
    assert len(ALPHA158) == 158 and len(ALPHA360) == 360
    assert list(stored["name"]) == [*ALPHA158, *ALPHA360]
    assert [expression(n) for n in stored["name"]] == list(stored["expression"])


@pytest.fixture(scope="module")
def qlib_values():
    cn_qlib = shared_path("cn_qlib")
    from forecaster.data.qlib.conventions import from_qlib_code
    from forecaster.data.qlib.reader import load_qlib

    fixture = pd.read_csv(FIXTURE, parse_dates=["datetime"])
    # history enough for the 60-day windows (and their day of change) before the first row
    panel = load_qlib(cn_qlib, sorted(fixture["instrument"].unique()), start="2019-12-01", end="2020-12-04")
    rows = panel.dates.get_indexer(fixture["datetime"])
    cols = pd.Index(panel.codes).get_indexer(fixture["instrument"].map(from_qlib_code))
    assert (rows >= 0).all() and (cols >= 0).all()
    return panel, fixture, rows, cols


def test_agrees_with_qlib_on_real_stocks(qlib_values):
    """Every Alpha158 column and Alpha360's (days 0, 1, 2, 5, 10, 20, 30, 59) on four stocks,
    every other day of 118 (ex-dates; 10 of those rows without a bar, 5 with zero volume):
    within 1e-4 of Qlib (relative above 1), NaN where Qlib's is. Two exceptions, both from
    Qlib's volume unit: PER_VOLUME on a zero-volume bar, and a correlation with
    Log($volume+1) over a window holding a zero-volume bar (within 0.02)."""
    panel, fixture, rows, cols = qlib_values
    bar = panel.listed[rows, cols]
    volume = panel["volume"][rows, cols]
    zero_volume = bar & (volume == 0)
    assert (~bar).sum() == 10 and zero_volume.sum() == 5  # the suspensions the fixture holds
    worst = {}
    for name in fixture.columns[2:]:
        if name.startswith("VWAP"):  # cn_qlib has no amount: Qlib's $vwap is NaN, ours left out
            assert fixture[name].isna().all()
            continue
        ours, theirs = alpha_feature(panel, name)[rows, cols][bar], fixture[name].to_numpy()[bar]
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs), err_msg=name)
        keep = ~np.isnan(theirs)
        if name.startswith(PER_VOLUME):
            huge = zero_volume[bar] & keep & (theirs > 1e9)  # else 0 / 1e-12: compared below
            assert (ours[huge] > 1e9).all()
            keep &= ~huge
        if name.startswith("CORR"):
            days = int(name[4:])
            window = pd.DataFrame(panel["volume"] == 0).rolling(days, min_periods=1).max().to_numpy()
            touched = window[rows, cols][bar] > 0
            assert np.abs(ours - theirs)[touched & keep].max() < 0.02
            keep &= ~touched
        error = np.abs(ours - theirs)[keep] / np.maximum(np.abs(theirs[keep]), 1.0)
        worst[name] = error.max()
    assert len(worst) == 158 - 1 + 6 * 8 - 4 - 7  # every column but the VWAP ones
    assert max(worst.values()) < 1e-4, sorted(worst.items(), key=lambda kv: -kv[1])[:5]


def test_sets_on_data_without_amount(qlib_values):
    """A set's name stands for the columns the data allow, and the run says which it left
    out; a column named alone must be computable."""
    panel = qlib_values[0]
    names = resolve_features(panel, ("alpha158", "ret_1d"))
    assert len(names) == 158 and "VWAP0" not in names and names[-1] == "ret_1d"
    assert len(resolve_features(panel, ("alpha360",))) == 300
    assert features_note(panel, ("alpha158",)) == ("features: 157 of 158 computed; left out, the data "
                                                   "lacking their columns: VWAP0 (amount)")
    with pytest.raises(ValueError, match=r"VWAP0 \(needs amount\)"):
        check_available(panel, ("VWAP0",))
    assert lookback(("alpha158",)) == 61 and lookback(("alpha360",)) == 59


def _frame(close, preclose=None, volume=None, amount=None, start="2021-01-04"):
    close = np.asarray(close, dtype=float)
    index = pd.bdate_range(start, periods=len(close), name="date")
    frame = pd.DataFrame({"open": close, "high": close * 1.01, "low": close * 0.99, "close": close,
                          "volume": 1e6 if volume is None else volume}, index=index)
    frame["preclose"] = np.r_[close[0], close[:-1]] if preclose is None else preclose
    if amount is not None:
        frame["amount"] = amount
    return frame


def test_prices_adjusted_across_an_ex_date_and_vwap():
    """A 2:1 split is no move (Qlib's prices are adjusted); VWAP is amount / volume."""
    close = np.r_[np.full(10, 10.0), np.full(10, 5.0)]
    preclose = np.r_[10.0, close[:-1]]
    preclose[10] = 5.0  # the ex-rights previous close
    amount = close * 1e6 * np.r_[np.full(10, 1.002), np.full(10, 0.998)]
    panel = Panel.from_frames({"a": _frame(close, preclose, amount=amount)})
    assert alpha_feature(panel, "ROC5")[12, 0] == pytest.approx(1.0)
    assert alpha_feature(panel, "CNTN10")[19, 0] == 0.0  # no down day
    assert alpha_feature(panel, "VWAP0")[12, 0] == pytest.approx(0.998)
    assert alpha_feature(panel, "VWAP5")[12, 0] == pytest.approx(1.002)  # 10.02 / (5 x 2)


def test_qlib_operator_semantics():
    """IdxMax: the 1-based position in the window, a NaN counting as the largest; a stock's
    windows start at its first bar; Rank: percentile of the last value, ties averaged; every
    feature NaN on a day without a bar."""
    late = _frame([5.0, 6.0, 4.0, 4.0, 3.0, 4.0], start="2021-01-06")
    early = _frame(np.linspace(10, 11, 8))
    panel = Panel.from_frames({"a": early, "b": late})
    high = panel["high"][:, 1]
    assert np.isnan(high[:2]).all()
    imax = alpha_feature(panel, "IMAX5")[:, 1] * 5
    # windows of b: [5], [5,6], [5,6,4], [5,6,4,4], [5,6,4,4,3], [6,4,4,3,4]
    np.testing.assert_array_equal(imax[2:], [1, 2, 2, 2, 2, 1])
    rank = alpha_feature(panel, "RANK5")[:, 1]
    np.testing.assert_allclose(rank[2:], [1.0, 1.0, 1 / 3, 1.5 / 4, 1 / 5, 3 / 5])
    gap = _frame([5.0, 6.0, 7.0, 4.0, 3.0])
    gap.loc[gap.index[2], ["open", "high", "low", "close"]] = np.nan
    panel = Panel.from_frames({"a": gap.dropna(), "b": early})  # "a" has no bar on day 2
    imax = alpha_feature(panel, "IMAX5")[:, 0] * 5
    assert np.isnan(imax[2]) and imax[3] == 3  # the NaN of day 2 wins in Qlib's window
    assert np.isnan(alpha_feature(panel, "RSQR5")[2, 0])


def test_causal():
    """A day's features use bars up to that day only: later bars changed or cut, the earlier
    features are the same to the bit."""
    frames = synthetic_panel(n_stocks=6, n_days=150, seed=2)
    later = {code: frame.copy() for code, frame in frames.items()}
    for frame in later.values():
        frame.loc[frame.index[100:], ["open", "high", "low", "close", "volume", "amount"]] *= 1.3
    panel = Panel.from_frames(frames)
    whole = feature_tensor(panel, ("alpha158", "alpha360"))
    cut = panel.slice(end=panel.dates[99])
    np.testing.assert_array_equal(feature_tensor(cut, ("alpha158", "alpha360")), whole[:100])
    changed = feature_tensor(Panel.from_frames(later), ("alpha158", "alpha360"))
    np.testing.assert_array_equal(changed[:100], whole[:100])
    assert not np.allclose(changed[100:], whole[100:], equal_nan=True)


def test_feature_names_checked():
    check_feature_names(("alpha158", "alpha360", "KMID", "ret_1d"))
    with pytest.raises(ValueError, match=r"unknown features \['alpha999'\]; choose from .*'alpha158'"):
        check_feature_names(("alpha999",))


@pytest.fixture(scope="module")
def small_panel():
    return Panel.from_frames(synthetic_panel(n_stocks=12, n_days=160, signal_ic=0.1, seed=5))


def test_alpha158_fits_and_predicts(small_panel, one_thread):
    """``features=("alpha158",)``: the set's 158 columns (VWAP0 too: the synthetic data have
    amount) reach the models, processed by the robust z-score fitted on training days."""
    from forecaster.models.panel.baselines import FeatureRegressor
    from forecaster.models.panel.model import PanelTransformer

    train, test = small_panel.slice(end=small_panel.dates[119]), small_panel
    X = feature_tensor(train, ("alpha158",))
    assert X.shape == (120, 12, 158) and X.dtype == np.float32
    ridge = FeatureRegressor("ridge", features=("alpha158",)).fit(train)
    assert ridge.features_ == ALPHA158
    assert ridge.predict(test).notna().sum() > 12 * 30
    net = PanelTransformer(features=("alpha158",), window=5, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                           max_epochs=1, days_per_batch=8, random_state=0).fit(train)
    assert net.features_ == ALPHA158 and net.processor_.center_.shape == (158,)
    scores = net.predict(test)
    assert scores.notna().all() and scores.index.get_level_values("date").max() > train.dates[-1]


def test_experiment_accepts_a_set():
    from forecaster.app.experiment import ConfigError, build_models, resolve

    exp = resolve({"features": {"names": ["alpha158"]}}, n_stocks=30, source="exp.toml")
    assert build_models(exp)["transformer"].features == ("alpha158",)
    with pytest.raises(ConfigError, match=r"exp.toml: \[features\] names: unknown features \['alpha9'\]"):
        build_models(resolve({"features": {"names": ["alpha9"]}}, n_stocks=30, source="exp.toml"))


def test_a_column_computed_a_block_of_stocks_at_a_time_equals_the_whole_at_once():
    """Every operator reads one stock's series: blocks of stocks (which bound the memory of a
    whole market's column) give the same bits as the whole panel in one block."""
    import dataclasses

    panel = Panel.from_frames(synthetic_panel(n_stocks=23, n_days=300, seed=4))
    for name in ("KMID", "OPEN0", "VOLUME3", "IMXD60", "CORD5", "RSQR20", "RESI10", "RANK20", "QTLU30",
                 "WVMA5", "CNTD10"):
        whole = alpha_feature(dataclasses.replace(panel, _cache={}), name)
        blocks = alpha_feature(dataclasses.replace(panel, _cache={}), name, chunk_bytes=8 * 300 * 5)
        assert np.isfinite(whole).sum() > 1000, name
        np.testing.assert_array_equal(blocks, whole, err_msg=name)
