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


# ---------------------------------------------------------------- issue 78: dates, age, coverage


def _weights_file(path, panel, days):
    """A weights file of equal weights over every stock on each of ``days`` (panel rows or dates)."""
    rows = [(pd.Timestamp(d).date(), str(c), 1 / panel.n_stocks) for d in days for c in panel.codes]
    pd.DataFrame(rows, columns=["date", "code", "weight"]).to_csv(path, index=False)
    return path


def test_a_weights_row_on_a_non_trading_day_is_refused_not_moved(panel, tmp_path):
    days = pd.date_range(panel.dates[0], panel.dates[-1])
    closed = days[~days.isin(panel.dates)][3]  # a weekend inside the data's span
    path = _weights_file(tmp_path / "w.csv", panel, [panel.dates[5]])
    rows = path.read_text().splitlines()
    rows.insert(2, f"{closed.date()},{panel.codes[0]},0.5")  # line 3
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(DataError) as err:
        benchmark_weights(panel, str(path))
    text = str(err.value)
    assert (f"--benchmark-weights {path}: line 3, column date: {closed.date()} is not a trading day of the "
            "data") in text
    assert "weights are dated by the close they apply at (1 such row(s))" in text and "\n" not in text


def test_how_old_the_weights_are_is_said_in_the_notes_and_on_the_predict_side(panel, tmp_path, caplog):
    from forecaster.portfolio.index_weights import STALE_AFTER, next_weights, stale_line, weights_age

    old = benchmark_weights(panel, str(_weights_file(tmp_path / "old.csv", panel, [panel.dates[20]])))
    age = len(panel.dates) - 1 - 20
    assert weights_age(panel, old) == (panel.dates[20], age) and age > STALE_AFTER
    line = (f"the last weights are of {panel.dates[20].date()}, {age} trading days before the data's last "
            f"day {panel.dates[-1].date()}; they are drifted with prices since")
    assert any(line in n for n in old.notes)
    with caplog.at_level("WARNING", logger="forecaster.portfolio.index_weights"):
        w = next_weights(panel, str(tmp_path / "old.csv"))
    assert np.isclose(w.sum(), 1.0)
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(said) == 1 and f"{age} trading days before the signal day {panel.dates[-1].date()}" in said[0]
    assert said[0].startswith(f"--benchmark-weights {tmp_path / 'old.csv'}: the last weights are of")
    # weights within STALE_AFTER trading days: nothing said; equal weights are never old
    new = _weights_file(tmp_path / "new.csv", panel, [panel.dates[-STALE_AFTER - 1]])
    fresh = benchmark_weights(panel, str(new))
    assert weights_age(panel, fresh)[1] == STALE_AFTER and stale_line(panel, fresh) is None
    assert weights_age(panel, benchmark_weights(panel, "equal")) == (None, 0)
    caplog.clear()
    with caplog.at_level("WARNING", logger="forecaster.portfolio.index_weights"):
        next_weights(panel, str(tmp_path / "new.csv"))
    assert not caplog.records


def test_float_market_values_that_ended_long_ago_are_called_old(panel, caplog):
    from forecaster.portfolio.index_weights import next_weights

    cut = Panel.from_frames({c: f.assign(float_mv=f["float_mv"].where(f.index < panel.dates[90]))
                             for c, f in _frames(panel).items()})
    cut.members = panel.members
    with caplog.at_level("WARNING", logger="forecaster.portfolio.index_weights"):
        next_weights(cut, "float_mv")
    assert [r.getMessage() for r in caplog.records] == [
        f"--benchmark-weights float_mv: the last float market values are of {panel.dates[89].date()}, "
        f"{len(panel.dates) - 90} trading days before the signal day {panel.dates[-1].date()}; they are "
        "drifted with prices since (a member that joined since has no weight): give newer ones"]


def test_weights_that_begin_after_the_first_test_day_are_refused(panel, tmp_path):
    from forecaster.portfolio.index_weights import check_covers

    bw = benchmark_weights(panel, str(_weights_file(tmp_path / "w.csv", panel, [panel.dates[50]])))
    assert bw.weights[50].sum() == 0 and np.isclose(bw.weights[51].sum(), 1)  # held from the next day
    with pytest.raises(DataError) as err:
        check_covers(bw, panel, panel.dates[30])
    d = [str(panel.dates[t].date()) for t in (51, 50, 30, 29)]
    assert str(err.value) == (
        f"--benchmark-weights {tmp_path / 'w.csv'}: the first benchmark weights hold from {d[0]} (dated "
        f"{d[1]}), after the run's first test day {d[2]}: the book would have no benchmark until then; give "
        f"weights dated {d[3]} or earlier, or start the test days on {d[0]} or later (--start)")
    check_covers(bw, panel, panel.dates[51])  # covered from its first test day: accepted
    check_covers(benchmark_weights(panel, "float_mv"), panel, panel.dates[0])


def test_the_weighted_members_of_a_file_are_named_by_it(panel, tmp_path):
    from forecaster.portfolio.index_weights import members_equity

    path = _weights_file(tmp_path / "w.csv", panel, [panel.dates[5]])
    eq, name = members_equity(panel, str(path), panel.dates[10:40], 1e6, next_open=False)
    assert name == f"the members at the weights of {path} (no costs)" and len(eq) == 30
    _, equal = members_equity(panel, "equal", panel.dates[10:40], 1e6, False)
    assert equal == "the members at equal weights (no costs)"
