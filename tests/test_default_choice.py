"""The protocol that chooses a default of the book (issue 88,
forecaster/evaluation/default_choice.py): cells cut from one run, the verdict's two conditions
each made to fail, a planted edge found, a null edge not."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from forecaster.evaluation.default_choice import (
    MAX_P,
    PERIODS,
    cell_figures,
    cell_line,
    choose,
    one_sided_turnover,
    pooled_difference,
    verdict,
)

DAYS = pd.bdate_range("2019-01-01", "2026-12-31")
INDICES = ("csi300", "csi500")


def _book(rng, edge_by_period=(0.0, 0.0), noise=0.003):
    """``[date]`` daily returns: the benchmark's plus noise plus a per-period mean edge."""
    r = rng.normal(0.0, noise, len(DAYS))
    r[DAYS >= "2023-01-01"] += edge_by_period[1]
    r[DAYS < "2023-01-01"] += edge_by_period[0]
    return pd.Series(r, index=DAYS)


def _cells(returns: dict, bench: pd.Series) -> dict:
    eq = pd.Series(1e8, index=DAYS)
    traded = pd.Series(0.0, index=DAYS)
    out = {}
    for index, r in returns.items():
        for period, figs in cell_figures(r + bench, bench, traded, eq).items():
            out[index, period] = figs
    return out


def test_cell_figures_cut_one_run_into_its_periods():
    bench = pd.Series(0.0004, index=DAYS)
    r = pd.Series(0.0004, index=DAYS) + np.where(DAYS < "2023-01-01", 0.0002, -0.0001) \
        + np.tile([0.001, -0.001], len(DAYS) // 2 + 1)[:len(DAYS)]
    eq = pd.Series(2e8, index=DAYS)
    traded = pd.Series(4e7, index=DAYS)  # 0.2 of the book a day both sides: 0.1 one-sided
    figs = cell_figures(r, bench, traded, eq)
    assert list(figs) == [p[0] for p in PERIODS]
    assert figs["2019-2022"]["ir"] > 0 > figs["2023-2026"]["ir"]
    assert figs["2019-2022"]["n_days"] == int((DAYS < "2023-01-01").sum())
    assert figs["2019-2022"]["turnover"] == pytest.approx(0.1 * 252)
    assert figs["2019-2022"]["te"] == pytest.approx(0.001 * math.sqrt(252), rel=1e-3)
    line = cell_line("csi300", "2019-2022", "zscore_a1_d1_c0.1", figs["2019-2022"])
    assert line.startswith("cell index=csi300 period=2019-2022 name=zscore_a1_d1_c0.1 excess_ann=+")
    assert " te=0.0159 ir=" in line and line.endswith(" turnover=25.2")


def test_turnover_counts_only_its_days_and_is_nan_when_too_short():
    eq = pd.Series(1e8, index=DAYS[:30])
    traded = pd.Series(1e6, index=DAYS)  # days outside the equity's are not counted
    assert one_sided_turnover(traded, eq) == pytest.approx(30 * 1e6 / 2 / 1e8 / (30 / 252))
    assert math.isnan(one_sided_turnover(traded, eq.iloc[:5]))


def test_a_planted_edge_in_every_cell_replaces_the_incumbent():
    rng = np.random.default_rng(0)
    bench = pd.Series(rng.normal(0, 0.01, len(DAYS)), index=DAYS)
    inc = {i: _book(rng) for i in INDICES}
    cand = {i: inc[i] + _book(rng, (0.0003, 0.0003), noise=0.001) for i in INDICES}
    v = verdict(_cells(cand, bench), _cells(inc, bench), {i: cand[i] + bench for i in INDICES},
                {i: inc[i] + bench for i in INDICES})
    assert v["leads"] == 4 and v["cells"] == 4
    assert v["p"] < 1e-3 and v["replaces"]


def test_an_edge_in_two_cells_only_does_not_replace_however_significant():
    rng = np.random.default_rng(1)
    bench = pd.Series(rng.normal(0, 0.01, len(DAYS)), index=DAYS)
    inc = {i: _book(rng) for i in INDICES}
    # a large edge on CSI 300 alone: the pooled test is significant, the cells are 2 of 4
    cand = {"csi300": inc["csi300"] + _book(rng, (0.002, 0.002), noise=0.0005),
            "csi500": inc["csi500"] - 0.0001}
    v = verdict(_cells(cand, bench), _cells(inc, bench), cand, inc)
    assert v["leads"] == 2 and v["p"] < MAX_P
    assert not v["replaces"]


def test_leading_in_every_cell_while_earning_less_does_not_replace():
    # half the incumbent's bets plus a hair: a higher IR in every cell, a lower excess
    rng = np.random.default_rng(2)
    bench = pd.Series(rng.normal(0, 0.01, len(DAYS)), index=DAYS)
    inc = {i: _book(rng, (0.0004, 0.0004)) for i in INDICES}
    cand = {i: 0.5 * inc[i] + 0.00005 for i in INDICES}
    v = verdict(_cells(cand, bench), _cells(inc, bench), cand, inc)
    assert v["leads"] == 4 and v["mean_diff"] < 0
    assert v["p"] > 0.5 and not v["replaces"]


def test_null_candidates_replace_at_about_the_tests_size():
    """A metric is a model: candidates with no edge at all replace the incumbent about as often
    as the one-sided test's size (10 %; leading in 3 of 4 cells mostly goes with it)."""
    rng = np.random.default_rng(3)
    bench = pd.Series(rng.normal(0, 0.01, len(DAYS)), index=DAYS)
    inc = {i: _book(rng) for i in INDICES}
    inc_cells = _cells(inc, bench)
    replaced = 0
    for _ in range(120):
        cand = {i: inc[i] + pd.Series(rng.normal(0, 0.002, len(DAYS)), index=DAYS) for i in INDICES}
        replaced += verdict(_cells(cand, bench), inc_cells, cand, inc)["replaces"]
    assert 0.02 < replaced / 120 < 0.19


def test_choose_keeps_the_incumbent_unless_replaced_and_takes_the_strongest():
    rng = np.random.default_rng(4)
    bench = pd.Series(rng.normal(0, 0.01, len(DAYS)), index=DAYS)
    inc = {i: _book(rng) for i in INDICES}
    books = {"inc": inc,
             "weak": {i: inc[i] + _book(rng, (0.0002, 0.0002), noise=0.001) for i in INDICES},
             "strong": {i: inc[i] + _book(rng, (0.0006, 0.0006), noise=0.001) for i in INDICES},
             "null": {i: inc[i] + _book(rng, noise=0.001) - 0.0001 for i in INDICES}}
    cells = {n: _cells(b, bench) for n, b in books.items()}
    kept, verdicts = choose("inc", ["weak", "strong", "null"], cells, books)
    assert kept == "strong" and verdicts["weak"]["replaces"] and not verdicts["null"]["replaces"]
    kept, _ = choose("inc", ["null"], cells, books)
    assert kept == "inc"


def test_pooled_difference_averages_the_indices_each_day():
    a = pd.Series([0.01, 0.02, 0.03], index=DAYS[:3])
    b = pd.Series([0.00, 0.00, 0.00], index=DAYS[:3])
    d = pooled_difference({"x": a, "y": a * 3}, {"x": b, "y": b})
    assert d.tolist() == pytest.approx([0.02, 0.04, 0.06])
    with pytest.raises(ValueError, match="run on"):
        pooled_difference({"x": a}, {"y": b})
