"""The index's weights (issue 72): float market value, equal, a vendor's file; the float
market value carried past its last day; bad files refused in one line; the weighted members
follow an index built from the same weights."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.data.sources import DataError
from forecaster.portfolio.index_weights import (
    benchmark_weights,
    growth,
    weighted_returns,
    weights_tracking,
)


@pytest.fixture(scope="module")
def panel():
    frames = synthetic_panel(n_stocks=8, n_days=120, seed=3)
    for k, (_, frame) in enumerate(sorted(frames.items())):
        # float shares fixed per stock, so the value moves with the price alone
        frame["float_mv"] = frame["close"] * (1e8 * (k + 1))
    p = Panel.from_frames(frames)
    p.members = np.ones((len(p.dates), p.n_stocks), dtype=bool)
    p.members[:60, -1] = False  # the last stock joins on day 60
    return p


def test_float_mv_weights_are_yesterdays_values_over_todays_members(panel):
    bw = benchmark_weights(panel)  # the default where the data carry float_mv
    assert bw.source == "float_mv"
    w = bw.weights
    members = panel.members & panel.listed
    assert np.allclose(w.sum(axis=1)[members.any(axis=1)], 1.0)
    assert (w[~members] == 0).all()
    t = 80
    mv = panel.fields["float_mv"][t - 1]
    expect = np.where(members[t], mv, 0.0)
    assert np.allclose(w[t], expect / expect.sum())


def test_past_its_last_day_the_float_value_moves_with_the_price(panel):
    cut = Panel.from_frames({c: f.assign(float_mv=f["float_mv"].where(f.index < panel.dates[90]))
                             for c, f in _frames(panel).items()})
    cut.members = panel.members
    full, carried = benchmark_weights(panel).weights, benchmark_weights(cut)
    assert carried.carried_from == panel.dates[90]
    assert any("float market values end on" in n and str(panel.dates[89].date()) in n for n in carried.notes)
    assert np.allclose(carried.weights[91:], full[91:])  # fixed float shares: carried exactly


def _frames(panel):
    out = {}
    for j, code in enumerate(panel.codes):
        bar = panel.listed[:, j]
        out[str(code)] = pd.DataFrame({k: v[bar, j] for k, v in panel.fields.items()},
                                      index=panel.dates[bar]).assign(code=str(code))
    return out


def test_a_weights_file_and_the_float_mv_proxy_agree(panel, tmp_path):
    ref = benchmark_weights(panel).weights
    every = np.flatnonzero(panel.listed.all(axis=1))
    first, second = int(every[every > 5][0]), int(every[every > 65][0])  # days every stock trades
    rows = []
    for t in (first, second):
        mv = np.where(panel.members[t + 1], panel.fields["float_mv"][t], 0.0)
        rows += [(panel.dates[t].date(), str(panel.codes[j]), mv[j] / mv.sum()) for j in np.flatnonzero(mv)]
    path = tmp_path / "w.csv"
    pd.DataFrame(rows, columns=["date", "code", "weight"]).to_csv(path, index=False)
    got = benchmark_weights(panel, str(path))
    assert got.source == f"file {path}"
    # between its dates a file's weights drift with prices, as fixed float shares' values do;
    # a stock that joins (day 60) has no file weight until the file's next date
    for lo, hi in ((first + 1, 60), (second + 1, len(panel.dates))):
        assert np.allclose(got.weights[lo:hi], ref[lo:hi], atol=1e-12)
    assert (got.weights[: first + 1] == 0).all() and any("no weights before" in n for n in got.notes)
    assert got.weights[61:second + 1, -1].max() == 0 < ref[61:second + 1, -1].min()


@pytest.mark.parametrize("rows, message", [
    ([("2018-03-01", "syn.000001", 60.0), ("2018-03-01", "syn.000002", 40.0)],
     "sum to 100.0000, expected 1 (within 0.02) (percentages? give fractions)"),
    ([("2018-03-01", "syn.000001", 0.5), ("2018-03-01", "sh.600000", 0.5)],
     "1 code(s) the data do not hold: sh.600000"),
    ([("2030-03-01", "syn.000001", 1.0)], "2030-03-01 is outside the data's days"),
    ([("2018-03-01", "syn.000001", "x")], "line 2, column weight: 'x' is not a weight >= 0"),
    ([("2018-03-01", "syn.000001", 0.5), ("2018-03-01", "SYN.000001", 0.5)],
     "2 rows weight a stock twice on one date, e.g. syn.000001 on 2018-03-01 (line 2)"),
])
def test_a_bad_weights_file_gets_one_line(panel, tmp_path, rows, message):
    path = tmp_path / "bad.csv"
    pd.DataFrame(rows, columns=["date", "code", "weight"]).to_csv(path, index=False)
    with pytest.raises(DataError, match=None) as err:
        benchmark_weights(panel, str(path))
    assert message in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)


def test_equal_weights_and_the_tracking_check(panel):
    w = benchmark_weights(panel, "equal").weights
    members = panel.members & panel.listed
    assert np.allclose(w[members], (1 / members.sum(axis=1, keepdims=True) * members)[members])
    r = pd.Series(weighted_returns(panel, w), index=panel.dates)
    assert np.allclose(r.iloc[1:], ((growth(panel) - 1) * w).sum(axis=1)[1:])
    same = weights_tracking(r, r)
    assert same["te"] == 0 and same["corr"] == pytest.approx(1.0)
    noisy = r + np.random.default_rng(0).normal(0, 0.01, len(r))
    check = weights_tracking(r, noisy)
    assert check["te"] == pytest.approx(0.01 * np.sqrt(252), rel=0.2) and check["n_days"] == len(r)


def test_data_without_market_values_default_to_equal():
    frames = synthetic_panel(n_stocks=3, n_days=30)
    p = Panel.from_frames({c: f.drop(columns="float_mv") for c, f in frames.items()})
    assert benchmark_weights(p).source == "equal"
    with pytest.raises(DataError, match="carry no float market value"):
        benchmark_weights(p, "float_mv")
