"""The pure parts of scripts/bench_enhanced.py (its contract lines, issue 79 item 7, and its
options) and scripts/qlib_enhanced_worker.py (Qlib's units and the count of each trial's
solves, item 6), without the bench's long run and without Qlib: a stand-in optimiser logs as
Qlib's does."""

from __future__ import annotations

import importlib.util
import logging
import math
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


bench = _load("bench_enhanced")
worker = _load("qlib_enhanced_worker")

ISSUE_LINES = ("benchmark index=sh.000300 weights=fitted proxy_te=0.0150 proxy_corr=0.997 "
               "dividends_ann=0.026 capital=100000000\n" + """\
book name=enhanced against=total_return excess_ann=+0.080 te=0.048 ir=1.67 turnover=12.3 years_positive=8 of 8
book name=enhanced against=price excess_ann=+0.106 te=0.049 ir=2.16 turnover=12.3 years_positive=8 of 8
book name=topk against=total_return excess_ann=+0.130 te=0.115 ir=1.13 turnover=25.0 years_positive=7 of 8
book name=topk against=price excess_ann=+0.156 te=0.116 ir=1.34 turnover=25.0 years_positive=7 of 8
risk bias=0.97""").splitlines()


def _stats(excess, te, ir, negative_years=0):
    years = {2019 + i: (-0.01 if i < negative_years else 0.02) for i in range(8)}
    return {"excess": excess, "te": te, "ir": ir, "years": years}


def _summary(**changes) -> object:
    fields = dict(
        index="sh.000300", weights="fitted", proxy_te=0.01502, proxy_corr=0.99712, dividends_ann=0.0261,
        capital=1e8, risk_bias=0.9711,
        books={"enhanced": {"price": _stats(0.1061, 0.0491, 2.163),
                            "total_return": _stats(0.0801, 0.0484, 1.671)},
               "topk": {"total_return": _stats(0.1304, 0.1151, 1.1349, 1),
                        "price": _stats(0.1556, 0.1158, 1.3449, 1)}},
        turnover={"enhanced": 12.34, "topk": 24.96})
    fields.update(changes)
    return bench.Summary(**fields)


def test_contract_lines_are_the_issues_lines_for_a_hand_made_result():
    assert bench.contract_lines(_summary()) == ISSUE_LINES


def test_years_positive_counts_calendar_years_with_a_positive_excess():
    assert bench.years_positive({2019: 0.01, 2020: -0.02, 2021: 0.0, 2022: 0.3}) == (2, 4)
    assert bench.years_positive({}) == (0, 0)


def test_the_qlib_peers_lines_end_in_each_trials_solves():
    books = dict(_summary().books, qlib_enhanced={"total_return": _stats(-0.12, 0.085, -1.5, 7),
                                                  "price": _stats(-0.1, 0.086, -1.2, 7)})
    words = bench.solves_words({"trial1": 412, "trial2": 1450, "failed": 38}, 1900)
    lines = bench.contract_lines(_summary(books=books, turnover={"enhanced": 12.3, "topk": 25.0,
                                                                 "qlib_enhanced": 121.3},
                                          extra={"qlib_enhanced": words}))
    assert lines[5:7] == [
        "book name=qlib_enhanced against=total_return excess_ann=-0.120 te=0.085 ir=-1.50 turnover=121.3 "
        "years_positive=1 of 8 solved_trial1=412 solved_trial2=1450 unsolved=38 of 1900",
        "book name=qlib_enhanced against=price excess_ann=-0.100 te=0.086 ir=-1.20 turnover=121.3 "
        "years_positive=1 of 8 solved_trial1=412 solved_trial2=1450 unsolved=38 of 1900"]
    assert lines[1] == ISSUE_LINES[1] and lines[-1] == "risk bias=0.97"


def test_dividends_ann_is_what_the_total_return_index_adds_a_year(monkeypatch):
    days = pd.bdate_range("2024-01-02", periods=300)
    price = pd.Series(np.random.default_rng(0).normal(0, 0.01, 300), index=days)
    calls = []

    def total_return_index(index_returns, panel, weights):
        calls.append((panel, weights))
        return index_returns + 1e-4, ["dividends on 12 ex-date(s)"]

    monkeypatch.setattr(bench, "TOTAL_RETURN", types.SimpleNamespace(total_return_index=total_return_index))
    tr, dividends, note = bench.total_return("PANEL", price, "WEIGHTS")
    assert calls == [("PANEL", "WEIGHTS")]
    np.testing.assert_allclose(tr.to_numpy(), price.to_numpy() + 1e-4)
    assert dividends == pytest.approx(0.0252)
    assert "dividends on 12 ex-date(s)" in note
    monkeypatch.setattr(bench, "TOTAL_RETURN", types.SimpleNamespace(
        total_return_index=lambda index_returns, panel, weights: (None, ["the data carry no preclose"])))
    tr, dividends, note = bench.total_return("PANEL", price, "WEIGHTS")
    assert tr is None and math.isnan(dividends) and "the data carry no preclose" in note


def test_without_a_total_return_estimate_its_lines_say_nan(monkeypatch):
    monkeypatch.setattr(bench, "TOTAL_RETURN", None)
    tr, dividends, note = bench.total_return(None, None, None)
    assert tr is None and math.isnan(dividends) and "no total-return estimator" in note
    nan = {"excess": math.nan, "te": math.nan, "ir": math.nan, "years": {}}
    books = {"enhanced": {"price": _stats(0.1, 0.05, 2.0), "total_return": nan}}
    lines = bench.contract_lines(_summary(books=books, dividends_ann=dividends, turnover={"enhanced": 12.0}))
    assert lines[0].endswith("dividends_ann=nan capital=100000000")
    assert lines[1] == ("book name=enhanced against=total_return excess_ann=+nan te=nan ir=nan turnover=12.0 "
                        "years_positive=0 of 0")


def test_capital_defaults_to_1e8_and_bad_options_are_one_line(capsys, tmp_path):
    assert bench._args([]).capital == 1e8
    assert bench._args(["--capital", "5e6"]).capital == 5e6
    for argv, said in ((["--capital", "0"], "--capital 0.0: expected a positive amount of CNY"),
                       (["--report", str(tmp_path / "none")], "no such folder"),
                       (["--qlib-python", str(tmp_path / "py")], "no such file")):
        with pytest.raises(SystemExit) as e:
            bench._args(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err


def test_the_worker_hands_qlib_percent_as_its_risk_models_make_them():
    """Qlib's RiskModel.predict multiplies returns by 100 before estimating: a covariance in
    percent squared. The worker's conversion of a decimal covariance gives that covariance."""
    rng = np.random.default_rng(0)
    returns = rng.normal(0.0, 0.02, size=(250, 3))  # daily decimal returns
    cov_decimal = np.cov(returns, rowvar=False)
    r, cov, var = worker.to_percent(np.array([0.001, -0.002, 0.0]), cov_decimal, np.diag(cov_decimal))
    np.testing.assert_allclose(cov, np.cov(returns * 100, rowvar=False))
    np.testing.assert_allclose(var, np.diag(np.cov(returns * 100, rowvar=False)))
    np.testing.assert_allclose(r, [0.1, -0.2, 0.0])


class _FakeOptimizer:
    """Qlib's EnhancedIndexingOptimizer's trials and log messages, on a script of outcomes:
    ``1`` solves with every limit, ``2`` only without the turnover limit, ``0`` fails both."""

    script: list[int] = []
    seen: list[tuple] = []
    limits: list = []

    def __init__(self, lamb, delta, b_dev, f_dev):
        type(self).limits.append(f_dev)
        self.logger = logging.getLogger("qlib.EnhancedIndexingOptimizer")
        self.logger.setLevel(logging.INFO)  # as Qlib's QlibLogger sets it on each use

    def __call__(self, r, F, cov_b, var_u, w0, wb):
        type(self).seen.append((r, cov_b, var_u))
        outcome = type(self).script.pop(0)
        if outcome == 1:
            return wb.copy()
        self.logger.warning("trial 1 failed  (status: infeasible)")
        self.logger.info("try removing turnover constraint as the last optimization failed")
        if outcome == 2:
            return wb.copy()
        self.logger.warning("trial 2 failed  (status: infeasible)")
        self.logger.warning("optimization failed, will return current holding weight")
        return w0


def _inputs(folder: Path, n: int) -> dict:
    rng = np.random.default_rng(1)
    arrays = {}
    for k in range(n):
        wb = rng.uniform(0.5, 1.5, 4)
        arrays.update({f"codes_{k}": np.array(["a", "b", "c", "d"]), f"growth_{k}": np.ones(4),
                       f"r_{k}": rng.normal(0, 1e-3, 4), f"F_{k}": rng.normal(size=(4, 2)),
                       f"cov_{k}": np.eye(2) * 1e-4, f"var_{k}": np.full(4, 4e-4), f"wb_{k}": wb / wb.sum()})
    np.savez(folder / "inputs.npz", n=n, **arrays)
    return arrays


def test_the_worker_counts_the_solves_of_each_trial(tmp_path, monkeypatch, capfd):
    arrays = _inputs(tmp_path, 5)
    _FakeOptimizer.script, _FakeOptimizer.seen, _FakeOptimizer.limits = [1, 2, 2, 0, 1], [], []
    fake = types.ModuleType("qlib.contrib.strategy.optimizer")
    fake.EnhancedIndexingOptimizer = _FakeOptimizer
    for name in ("qlib", "qlib.contrib", "qlib.contrib.strategy"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "qlib.contrib.strategy.optimizer", fake)
    monkeypatch.setattr(sys, "argv", ["worker", str(tmp_path), "--delta", "0.2", "--f-dev", "0.5",
                                      "--n-style", "1"])
    logger = logging.getLogger(worker.LOGGER)
    monkeypatch.setattr(logger, "handlers", [])
    monkeypatch.setattr(logger, "propagate", True)
    worker.main()
    got = np.load(tmp_path / "qlib_weights.npz")
    assert got["trial"].tolist() == [1, 2, 2, 0, 1]
    assert (int(got["trial1"]), int(got["trial2"]), int(got["failed"])) == (2, 2, 1)
    err = capfd.readouterr().err
    assert ("5 rebalances, 2 solved by trial 1 (all limits), 2 by trial 2 (no turnover limit), "
            "1 returned the holdings unchanged") in err
    assert "trial 1 failed with the solver's status infeasible 3" in err
    assert "(status: infeasible)" not in err  # Qlib's per-rebalance warnings are counted, not printed
    # the optimiser was handed percent: returns x 100, variances x 10,000
    r, cov, var = _FakeOptimizer.seen[0]
    np.testing.assert_allclose(r, arrays["r_0"] * 100)
    np.testing.assert_allclose(cov, np.eye(2))
    np.testing.assert_allclose(var, np.full(4, 4.0))
    # the style column bounded as asked, the statistical one at a bound on its own scale
    reach = 2.02 * np.abs(arrays["F_0"][:, 1]).max() + 1e-6
    np.testing.assert_allclose(_FakeOptimizer.limits[0], [0.5, reach])


def test_factor_limits_bound_the_styles_and_never_bind_the_others():
    rng = np.random.default_rng(2)
    F = rng.normal(size=(300, 6)) * np.array([1, 1, 1, 0.05, 0.05, 0.05])  # 3 styles, 3 statistical
    limits = worker.factor_limits(F, 3, 0.5)
    np.testing.assert_allclose(limits[:3], 0.5)
    assert np.all(limits[3:] < 1.0)  # on the loadings' scale, not 1e6 (ECOS: optimal_inaccurate)
    for _ in range(200):  # no long-only fully invested book against a benchmark reaches them
        w, wb = rng.dirichlet(np.full(300, 0.05)), rng.dirichlet(np.ones(300))
        assert np.all(np.abs((w - wb) @ F)[3:] < limits[3:])
    assert worker.factor_limits(F, 3, None) is None


def test_the_cash_and_timing_lines_are_issue_86s():
    lines = bench.contract_lines(_summary(
        cash={"enhanced": {"max": 0.0041, "mean": 0.0012, "review_days_max": 0.0038}},
        timing={"enhanced": {"solve_s": 61.24, "compile_s": 40.01, "backtest_s": 150.26}}))
    assert lines[len(ISSUE_LINES):] == [
        "cash name=enhanced max=0.0041 mean=0.0012 review_days_max=0.0038",
        "timing name=enhanced solve_s=61.2 compile_s=40.0 backtest_s=150.3"]
    lines = bench.contract_lines(_summary(timing={"enhanced": {
        "solve_s": 61.24, "compile_s": 40.01, "backtest_s": 150.26, "baseline_s": 280.0}}))
    assert lines[-1] == ("timing name=enhanced solve_s=61.2 compile_s=40.0 backtest_s=150.3 "
                         "baseline_s=280.0 ratio=0.54")
    with pytest.raises(SystemExit):
        bench._args(["--baseline-wall", "0"])


def test_cash_stats_read_the_books_cash_and_its_review_days():
    import numpy as np
    import pandas as pd

    class Result:
        held = pd.DataFrame({"a": [0.99, 0.95, 0.999, 0.98], "CASH": [0.01, 0.05, 0.001, 0.02]},
                            index=pd.bdate_range("2024-01-01", periods=4))

    members = np.array([[1, 1], [1, 0], [1, 0], [1, 1]], bool)  # reviews on days 1 and 3
    got = bench.cash_stats(Result(), members, Result.held.index)
    assert got == {"max": 0.05, "mean": pytest.approx(0.02025), "review_days_max": 0.05}


def test_cells_options_are_checked_before_anything_runs(tmp_path):
    cells = _load("enhanced_cells")
    for index in ("csi300", "csi500"):
        (tmp_path / index).mkdir()
    with pytest.raises(SystemExit):
        bench._args(["--cells", "--cell-report", f"csi800={tmp_path}"])  # no such index
    with pytest.raises(SystemExit):  # a report without forecasts
        bench._args(["--cells", "--cell-report", f"csi300={tmp_path / 'csi300'}",
                     "--cell-report", f"csi500={tmp_path / 'csi500'}"])
    for index in ("csi300", "csi500"):
        (tmp_path / index / "predictions.csv").write_text("date,code,model,forecast\n")
    args = bench._args(["--cells", "--cell-report", f"csi300={tmp_path / 'csi300'}",
                        "--cell-report", f"csi500={tmp_path / 'csi500'}"])
    assert args.cell_reports == {"csi300": str(tmp_path / "csi300"), "csi500": str(tmp_path / "csi500")}
    assert cells.name_of(cells.INCUMBENT) == "zscore_a1_d1_c0.1"
    # each dimension's candidates differ from the incumbent in that one setting
    for key, values in cells.DIMENSIONS:
        assert key in cells.INCUMBENT and cells.INCUMBENT[key] not in values


def test_the_industries_lines_are_issue_87s():
    lines = bench.contract_lines(_summary(
        risk_named={"enhanced_industries": 1.013},
        industries={"source": "ind.csv", "groups": 19, "unclassified": 1200, "level": 1, "bound": 0.05,
                    "max_active": 0.05123}))
    assert lines[len(ISSUE_LINES):] == [
        "risk name=enhanced_industries bias=1.01",
        "industries source=ind.csv groups=19 unclassified=1200 level=1 bound=0.05 max_active=0.0512"]
    with pytest.raises(SystemExit):
        bench._args(["--industries", "/no/such/file.csv"])


def _books_daily(folder: Path, book: np.ndarray, index: np.ndarray, days: pd.DatetimeIndex) -> str:
    folder.mkdir()
    pd.DataFrame({"enhanced_industries": book, "total_return": index},
                 index=pd.Index(days, name="date")).to_csv(folder / "books_daily.csv")
    return str(folder)


@pytest.mark.parametrize("edge, replaces", [(4e-4, "yes"), (0.0, "no")])
def test_the_industry_levels_cells_replace_only_a_planted_edge(tmp_path, capsys, edge, replaces):
    """``industry_level_cells.py``: four cells (two indices, two periods) a level; a level that
    earns 4 bp a day more replaces the incumbent; one that differs by noise alone does not."""
    cells = _load("industry_level_cells")
    days = pd.bdate_range("2019-01-01", "2026-05-29")
    rng = np.random.default_rng(0)
    runs = []
    for index in ("csi300", "csi500"):
        market = rng.normal(0, 0.01, len(days))
        one = market + rng.normal(2e-4, 0.003, len(days))
        two = one + edge + rng.normal(0, 0.002, len(days))
        for level, book in ((1, one), (2, two)):
            folder = _books_daily(tmp_path / f"{index}_{level}", book, market, days)
            runs += ["--run", f"{index}:{level}={folder}"]
    cells.main(runs)
    out = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("cell index=") for line in out) == 8
    assert out[-1].startswith("verdict name=level_2 against=level_1 leads=")
    assert out[-1].endswith(f"replaces={replaces}")
    with pytest.raises(SystemExit):
        cells.main(["--run", "csi300:x=" + str(tmp_path)])
