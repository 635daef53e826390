"""Benchmark weights fitted to the index's own series, and the estimated total-return index
(issue 79, items 1 and 2): point in time, planted weights recovered, the simplex, drift with
prices between refits, shrinkage toward the prior, dividends from the data's adjustment."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecaster.data.panel import Panel
from forecaster.data.sources import DataError
from forecaster.portfolio.backtest import BacktestConfig
from forecaster.portfolio.fitted_weights import (
    attach_index_series,
    fit_weights,
    index_series_of,
    refit_days,
    stock_returns,
)
from forecaster.portfolio.index_weights import (
    benchmark_weights,
    default_source,
    growth,
    next_weights,
    weighted_returns,
)
from forecaster.portfolio.total_return import dividend_returns, total_return_index


def _panel(returns: np.ndarray, float_mv: np.ndarray | None = None, members=None, listed=None,
           dividends: np.ndarray | None = None) -> Panel:
    """A panel whose ``close / preclose - 1`` are ``returns`` (``[days, stocks]``), the
    preclose ``dividends`` (fractions of the previous close) below the previous close."""
    D, N = returns.shape
    listed = np.ones((D, N), dtype=bool) if listed is None else listed
    cut = 1.0 - (np.zeros((D, N)) if dividends is None else dividends)
    close = 10.0 * np.cumprod(cut * (1 + returns), axis=0)
    pre = np.vstack([10.0 * np.ones((1, N)), close[:-1]]) * cut
    fields = {"open": close.copy(), "close": np.where(listed, close, np.nan),
              "preclose": np.where(listed, pre, np.nan)}
    if float_mv is not None:
        fields["float_mv"] = float_mv
    codes = np.array([f"sh.60{j:04d}" for j in range(N)])
    return Panel(dates=pd.bdate_range("2020-01-01", periods=D), codes=codes, fields=fields, listed=listed,
                 suspended=np.zeros((D, N), dtype=bool),
                 st=np.zeros((D, N), dtype=bool), limit_up=np.full((D, N), np.inf),
                 limit_down=np.zeros((D, N)), members=members)


def _index_frame(panel: Panel, index_returns: np.ndarray) -> pd.DataFrame:
    r = np.nan_to_num(index_returns)
    return pd.DataFrame({"close": 1000.0 * np.cumprod(1 + r)}, index=panel.dates)


def _market(D=260, N=20, seed=0):
    rng = np.random.default_rng(seed)
    market = rng.normal(0, 0.012, (D, 1))
    return market + rng.normal(0, 0.015, (D, N)), rng


def _planted(D=260, N=20, seed=0):
    """A cap-weighted index of known shares (held: its weights drift with prices): ``(returns,
    weights [days, stocks] held over each day, index returns)``."""
    returns, rng = _market(D, N, seed)
    shares = rng.dirichlet(np.ones(N))
    value = shares * np.cumprod(1 + returns, axis=0)  # at each close
    held = np.vstack([shares, value[:-1]])
    held /= held.sum(axis=1, keepdims=True)
    index_returns = (held * returns).sum(axis=1)
    index_returns[0] = np.nan
    return returns, held, index_returns


def test_a_planted_index_is_recovered():
    returns, w, index_returns = _planted()
    D, N = returns.shape
    ones = np.ones((D, N), dtype=bool)
    refit = refit_days(pd.bdate_range("2020-01-01", periods=D), ones)
    fitted, counts = fit_weights(returns, index_returns, ones, ones, np.full((D, N), 1.0 / N), 1 + returns,
                                 refit, window=120, shrink=0.0)
    days = np.flatnonzero(refit & (np.arange(D) > 125))
    assert len(days) >= 4 and counts.refits == refit.sum()
    for t in days:
        assert np.abs(fitted[t] - w[t]).max() < 1e-3
    # holding the weights fixed over the window (regressing returns) cannot recover them as well
    fixed, _ = fit_weights(returns, index_returns, ones, ones, np.full((D, N), 1.0 / N), 1 + returns,
                           refit, window=120, shrink=0.0, levels=False)
    assert max(np.abs(fixed[t] - w[t]).max() for t in days) > 3 * max(np.abs(fitted[t] - w[t]).max()
                                                                      for t in days)


def test_end_to_end_fitted_weights_track_their_index_and_are_the_default():
    returns, w, index_returns = _planted(seed=1)
    D, N = returns.shape
    members = np.ones((D, N), dtype=bool)
    members[:100, -1] = False  # joins on day 100: a refit that day
    panel = _panel(returns, members=members)
    with pytest.raises(DataError, match="fitted: the data hold no series"):
        benchmark_weights(panel, "fitted")
    assert default_source(panel) == "equal"
    attach_index_series(panel, "sh.000300", _index_frame(panel, index_returns))
    assert index_series_of(panel).code == "sh.000300"
    assert default_source(panel) == "fitted"
    bw = benchmark_weights(panel)
    assert bw.source == "fitted" and "fitted to sh.000300's own series" in bw.notes[0]
    weights = bw.weights
    assert (weights >= 0).all()
    assert np.allclose(weights.sum(axis=1), 1.0)
    assert (weights[:100, -1] == 0).all()  # not a member
    late = np.arange(D) >= 140
    fitted_r = weighted_returns(panel, weights)[late]
    equal_r = weighted_returns(panel, benchmark_weights(panel, "equal").weights)[late]
    te_fit = np.std(fitted_r - index_returns[late]) * np.sqrt(252)
    te_equal = np.std(equal_r - index_returns[late]) * np.sqrt(252)
    assert te_fit < 0.3 * te_equal  # the fit follows its index far closer than equal weights
    assert BacktestConfig(benchmark_weights="fitted").benchmark_weights == "fitted"


def test_perturbing_the_future_leaves_every_earlier_weight_bitwise_equal():
    returns, _, index_returns = _planted(seed=2)
    D, N = returns.shape
    mv = 1e9 * np.cumprod(1 + returns, axis=0) * np.arange(1, N + 1)

    def weights(r, ir, m):
        panel = _panel(r, float_mv=m)
        attach_index_series(panel, "sh.000300", _index_frame(panel, ir))
        return benchmark_weights(panel, "fitted").weights

    before = weights(returns, index_returns, mv)
    refit = refit_days(pd.bdate_range("2020-01-01", periods=D), np.ones((D, N), dtype=bool))
    first = int(np.flatnonzero(refit & (np.arange(D) > 150))[0])
    rng = np.random.default_rng(9)
    for k in (first, first + 3):  # from a refit day, and between refits
        r2, ir2, mv2 = returns.copy(), index_returns.copy(), mv.copy()
        r2[k:] += rng.normal(0, 0.05, r2[k:].shape)
        ir2[k:] += 0.03
        mv2[k:] *= 3.0
        after = weights(r2, ir2, mv2)
        assert np.array_equal(before[: k + 1], after[: k + 1])  # row k: decided at k-1's close
        assert not np.array_equal(before[k + 1:], after[k + 1:])


def test_between_refits_the_weights_drift_with_prices():
    returns, _, index_returns = _planted(seed=3)
    panel = _panel(returns)
    attach_index_series(panel, "sh.000300", _index_frame(panel, index_returns))
    w = benchmark_weights(panel, "fitted").weights
    refit = refit_days(panel.dates, panel.listed)
    g = growth(panel)
    drift_days = np.flatnonzero(~refit)[5:40]
    for t in drift_days:
        expect = w[t - 1] * g[t - 1]
        assert np.allclose(w[t], expect / expect.sum(), atol=1e-13)
    t = int(np.flatnonzero(refit)[5])
    expect = w[t - 1] * g[t - 1]
    assert not np.allclose(w[t], expect / expect.sum())  # a refit day is fitted anew
    tomorrow = next_weights(panel, "fitted")  # the predict side: the last day's, drifted by its prices
    expect = w[-1] * g[-1]
    assert np.allclose(tomorrow, expect / expect.sum(), atol=1e-13)


def test_shrinkage_pulls_toward_float_mv_or_equal_weights():
    returns, w, index_returns = _planted(seed=4)
    D, N = returns.shape
    ones = np.ones((D, N), dtype=bool)
    refit = refit_days(pd.bdate_range("2020-01-01", periods=D), ones)
    prior = np.tile(np.arange(1, N + 1) / np.arange(1, N + 1).sum(), (D, 1))
    t = int(np.flatnonzero(refit & (np.arange(D) > 125))[0])
    errors = []
    for shrink in (0.0, 0.3, 1e6):
        fitted, _ = fit_weights(returns, index_returns, ones, ones, prior, 1 + returns, refit, 120, shrink)
        errors.append((np.abs(fitted[t] - w[t]).max(), np.abs(fitted[t] - prior[t]).max()))
    assert errors[0][0] < 1e-3 < errors[1][0]  # away from the truth ...
    assert errors[0][1] > errors[1][1] > errors[2][1]  # ... toward the prior
    assert errors[2][1] < 1e-4
    # the panel's prior: float_mv where it has one, else equal
    mv = np.tile(np.arange(1, N + 1) * 1e9, (D, 1))
    for float_mv, target in ((mv, prior[0]), (None, np.full(N, 1.0 / N))):
        panel = _panel(returns, float_mv=float_mv)
        attach_index_series(panel, "sh.000300", _index_frame(panel, index_returns))
        from forecaster.portfolio.fitted_weights import fit_to_index

        prior_bw = benchmark_weights(panel, "float_mv" if float_mv is not None else "equal")
        heavy, *_ = fit_to_index(panel, prior_bw.weights, prior_bw.source, growth(panel), 120, 1e6)
        assert np.abs(heavy[t] - target).max() < 1e-4


def test_a_member_without_returns_in_the_window_is_counted_and_keeps_its_prior():
    returns, _, index_returns = _planted(seed=5)
    D, N = returns.shape
    listed = np.ones((D, N), dtype=bool)
    listed[:200, 0] = False  # lists on day 200, a member throughout
    listed[150:160, 1] = False  # ten days without a bar
    panel = _panel(returns, members=np.ones((D, N), dtype=bool), listed=listed)
    attach_index_series(panel, "sh.000300", _index_frame(panel, index_returns))
    bw = benchmark_weights(panel, "fitted")
    text = " ".join(bw.notes)
    assert "held at their equal weight" in text
    assert "member-day(s) of the windows without a bar taken as a 0 return" in text
    t = int(np.flatnonzero(refit_days(panel.dates, panel.members) & (np.arange(D) > 200))[0])
    # on the first refit after it lists, with fewer than half the window's returns: its prior weight
    assert bw.weights[t, 0] == pytest.approx(1.0 / N, abs=1e-12)
    assert np.isnan(stock_returns(panel)[150, 1])


def test_total_return_is_the_price_index_plus_the_weighted_dividends():
    dates = pd.bdate_range("2021-06-01", periods=3)
    # A: a 2 % cash dividend on day 2 (previous close 10, ex-rights preclose 9.8, close 9.9)
    # B: ten bonus shares for ten on day 2 (previous close 20, preclose 10, close 10.5): no dividend
    close = np.array([[10.0, 20.0], [10.0, 20.0], [9.9, 10.5]])
    pre = np.array([[10.0, 20.0], [10.0, 20.0], [9.8, 10.0]])
    D, N = close.shape
    panel = Panel(dates=dates, codes=np.array(["sh.600000", "sh.600001"]),
                  fields={"open": close, "close": close, "preclose": pre}, listed=np.ones((D, N), dtype=bool),
                  suspended=np.zeros((D, N), dtype=bool), st=np.zeros((D, N), dtype=bool),
                  limit_up=np.full((D, N), np.inf), limit_down=np.zeros((D, N)))
    div = dividend_returns(panel).returns
    assert div[2, 0] == pytest.approx(9.9 / 9.8 - 9.9 / 10.0)
    assert div[2, 1] == pytest.approx(0.0, abs=1e-12)
    assert (div[:2] == 0).all()
    weights = np.array([[0.6, 0.4]] * 3)
    index = pd.Series([0.0, 0.01, -0.02], index=dates)
    tr, notes = total_return_index(index, panel, weights)
    assert np.allclose(tr.to_numpy(), [0.0, 0.01, -0.02 + 0.6 * (9.9 / 9.8 - 0.99)])
    assert "1 with a share issue undone first" in notes[0]
    # without a preclose, or with prices adjusted already, no estimate (never 0)
    for fields in ({"open": close, "close": close},
                   {"open": close, "close": close, "preclose": np.vstack([close[:1], close[:-1]])}):
        flat = Panel(dates=dates, codes=panel.codes, fields=fields, listed=panel.listed,
                     suspended=panel.suspended, st=panel.st, limit_up=panel.limit_up,
                     limit_down=panel.limit_down)
        tr, notes = total_return_index(index, flat, weights)
        assert tr is None and "no total-return estimate" in notes[0]


def test_the_index_book_leads_with_the_total_return_estimate_and_each_sources_tracking():
    from forecaster.evaluation.index_book import against_index, total_return_figures

    returns, _, index_returns = _planted(seed=6)
    D, N = returns.shape
    dividends = np.zeros((D, N))
    dividends[150::40, :] = 0.02  # every stock 2 % of its price on a few days
    panel = _panel(returns, dividends=dividends)
    days = panel.dates[130:]
    index = pd.Series(index_returns, index=panel.dates)[days]
    book = index + 0.001
    attach_index_series(panel, "sh.000300", _index_frame(panel, index_returns))
    lines, facts = total_return_figures("m's book", book, index, panel, None, "sh.000300")
    weights = benchmark_weights(panel).weights
    added = pd.Series((weights * dividend_returns(panel).returns).sum(axis=1), index=panel.dates)[days]
    expect = against_index(book, index + added)
    got = facts["against_total_return"]
    assert got["excess"] == pytest.approx(expect["excess"]) and got["te"] == pytest.approx(expect["te"])
    assert got["dividends_ann"] == pytest.approx(added.mean() * 252) and got["dividends_ann"] > 0.01
    assert got["excess"] < against_index(book, index)["excess"] - 0.01  # dividends are not alpha
    assert lines[0].startswith("m's book after costs against sh.000300 with its members' dividends (an "
                               "estimated total-return index)")
    assert facts["weights_used"] == "fitted" and set(facts["weights_sources"]) == {"fitted", "equal"}
    assert facts["weights_sources"]["fitted"]["te"] < facts["weights_sources"]["equal"]["te"]
    assert lines[1].startswith("benchmark weights fitted (used); the members at each source of weights "
                               "follow sh.000300 at a tracking error of fitted ")
    # data without ex-dates: the estimate is unavailable, said, never 0
    flat = _panel(returns)
    attach_index_series(flat, "sh.000300", _index_frame(flat, index_returns))
    lines, facts = total_return_figures("m's book", book, index, flat, None, "sh.000300")
    assert facts["against_total_return"] is None and "prices look adjusted" in facts["total_return_note"]
    assert lines[0].startswith("no estimated total-return index of sh.000300")


def _index_folder(tmp_path):
    """A folder of 8 synthetic stocks and the index series ``sh.000300`` (a ninth series renamed),
    and a ``csi300.txt`` membership list of the first 7 stocks: ``(folder, list)``."""
    from forecaster.data import write_synthetic_panel

    data = tmp_path / "syn"
    paths = write_synthetic_panel(data, n_stocks=9, n_days=80, seed=2)
    codes = sorted(p.name[:-4] for p in paths)
    (data / "sh.000300.csv").write_text(paths[-1].read_text().replace(codes[-1], "sh.000300"))
    paths[-1].unlink()
    universe = tmp_path / "csi300.txt"
    universe.write_text("".join(f"{c.upper()}\t2010-01-04\t2099-12-31\n" for c in codes[:-2]))
    return data, universe


def test_a_run_on_an_index_universe_whose_series_the_folder_holds_defaults_to_fitted(tmp_path):
    from forecaster.app.pipeline import prepare

    data, universe = _index_folder(tmp_path)
    _, loaded = prepare({"data": {"path": str(data), "universe": str(universe)}})
    series = index_series_of(loaded.panel)
    assert series.code == "sh.000300" and default_source(loaded.panel) == "fitted"
    assert series.members.sum(axis=0).tolist() == [80] * 7 + [0]  # the universe's members, not every stock
    weights = benchmark_weights(loaded.panel).weights  # before the run sets panel.members
    assert (weights[:, -1] == 0).all() and np.allclose(weights.sum(axis=1), 1.0)
    other = tmp_path / "other.txt"  # a universe that is no index the folder holds: float_mv as before
    other.write_text(universe.read_text())
    _, loaded = prepare({"data": {"path": str(data), "universe": str(other)}})
    assert index_series_of(loaded.panel) is None and default_source(loaded.panel) == "float_mv"


def test_predict_reads_the_universes_index_series_as_the_backtest_does(tmp_path):
    """predict's panel (``load_panel`` then ``members_only``) carries the universe's index
    series, so its benchmark weights default to ``fitted`` as the backtest's do."""
    from forecaster.app.daily import load_panel
    from forecaster.app.signal_day import members_only

    data, universe = _index_folder(tmp_path)
    _, grid, indices = load_panel(str(data))
    assert "sh.000300" in indices and "sh.000300" not in grid.codes
    grid, upcoming = members_only(grid, str(universe), str(data), indices)
    assert upcoming is None  # no trade day asked for: no next members
    assert index_series_of(grid).code == "sh.000300" and default_source(grid) == "fitted"
    _, grid, indices = load_panel(str(data))
    assert default_source(members_only(grid, str(universe), str(data))[0]) == "float_mv"  # no series handed
