"""Point-in-time universes (issue 43): the readers, the membership mask, scoring and trading
only the day's members (a holding that leaves is sold, the benchmark is the members' equal
weight), a training universe, ``backtest --universe`` and ``predict --universe`` end to end."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from forecaster.app.cli import main
from forecaster.data import DataError, Panel, synthetic_panel, write_qlib, write_synthetic_panel
from forecaster.data.daily.folders import load_dir
from forecaster.data.market.universe import read_universe, resolve_universe
from forecaster.evaluation.scoring import score_run
from forecaster.evaluation.universe import restrict_to_members
from forecaster.evaluation.walkforward import WalkForwardConfig, WalkForwardResult
from forecaster.features.labels import by_forecast_date, tradeable_label
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.portfolio.strategy import StrategyConfig, target_weights

DAYS = pd.bdate_range("2020-01-01", "2020-01-10")  # Wed 1 .. Fri 10: 8 days


def _write(path, text: str):
    path.write_text(text)
    return path


def test_a_qlib_instruments_file_with_several_spans_per_stock(tmp_path):
    path = _write(tmp_path / "idx.txt", "SH600000\t2020-01-02\t2020-01-06\nSZ000001\t2020-01-03\t2099-12-31\n"
                  "SH600000\t2020-01-09\t2020-01-10\n")
    u = read_universe(path)
    assert u.kind == "qlib" and u.codes == ["sh.600000", "sz.000001"] and len(u.spans["sh.600000"]) == 2
    mask = u.mask(DAYS, ["sh.600000", "sz.000001", "sz.000002"])
    assert mask[:, 0].tolist() == [False, True, True, True, False, False, True, True]
    assert mask[:, 1].tolist() == [False, False, True, True, True, True, True, True]
    assert not mask[:, 2].any()  # not in the file: never a member
    cov = u.coverage(DAYS, ["sh.600000", "sz.000002"])
    assert cov["members_per_day"] == {"min": 0, "median": 1.0, "max": 1}
    assert cov["members_in_period"] == 2 and cov["members_without_data"] == 1  # sz.000001: no data


def test_a_csv_and_a_list_of_codes(tmp_path):
    csv = read_universe(_write(tmp_path / "u.csv", "code,start,end\nsh.600000,2020-01-02,2020-01-03\n"
                                                   "600001.SH,2020-01-06,2020-01-10\n"))
    assert csv.kind == "csv" and csv.codes == ["sh.600000", "sh.600001"]
    assert csv.mask(DAYS, ["sh.600001"])[:, 0].sum() == 5
    listed = read_universe(_write(tmp_path / "codes.txt", "code\nsz.000001\n# a comment\n\nSH600000\n"))
    assert listed.kind == "list" and listed.codes == ["sh.600000", "sz.000001"]
    assert listed.mask(DAYS, listed.codes).all()  # a list: always members


def test_a_market_name_inside_a_qlib_folder(tmp_path):
    frames = synthetic_panel(n_stocks=3, n_days=30, seed=1)
    folder = write_qlib(frames, tmp_path / "qlib", market="csi9")
    u = resolve_universe("csi9", folder)
    assert u.name == "csi9" and u.codes == sorted(frames)
    with pytest.raises(DataError, match=r"no instruments/csi301.txt .*it has: csi9"):
        resolve_universe("csi301", folder)
    assert resolve_universe("csi300", folder).kind == "package"  # not in the folder: index-constitution's
    with pytest.raises(DataError, match="--universe nothing.txt: no such file"):
        resolve_universe("nothing.txt", tmp_path)


@pytest.mark.parametrize("text, match", [
    ("SH600000\t2020-01-02\t2020-01-06\nSH600001\t2020-01-02\n",
     r"line 2: .*expected CODE<TAB>start<TAB>end"),
    ("SH600000\t2020-13-45\t2020-01-06\n", r"line 1: '2020-13-45' is not a date YYYY-MM-DD"),
    ("code,start,end\nsh.600000,2020-01-06,2020-01-02\n", r"line 2: start 2020-01-06 is after end"),
    ("sh.600000,2020-01-02,2020-01-06\nsh.600001,2020-01-02\n", r"line 2: .*expected code,start,end"),
    ("sh.600000\nsh.600001 sh.600002\n", r"line 2: .*expected one code a line"),
    ("# only a comment\n", "empty"),
])
def test_a_bad_universe_file_names_the_line_and_what_was_expected(tmp_path, text, match):
    path = _write(tmp_path / "bad.txt", text)
    with pytest.raises(DataError, match=match) as err:
        read_universe(path)
    assert str(path) in str(err.value)


def test_members_leaving_are_dropped_at_once_and_replaced_at_the_next_rebalance():
    f = pd.DataFrame([[5, 4, 3, 2, 1]] * 3, index=DAYS[:3], columns=list("abcde"), dtype=float)
    members = np.ones(f.shape, dtype=bool)
    members[1:, :2] = False  # a and b leave on row 1: both sold although n_drop is 1
    w = target_weights(f, StrategyConfig(rule="dropout", top_k=2, n_drop=1, rebalance_every=2), members)
    held = [set(f.columns[row > 0]) for row in w.to_numpy()]
    assert held == [{"a", "b"}, set(), {"c", "d"}]


def _simple_panel() -> Panel:
    """Four stocks on eight days, each with its own constant daily return, opens at preclose."""
    growth = {"sh.600000": 0.01, "sh.600001": -0.01, "sh.600002": 0.02, "sh.600003": 0.0}
    frames = {}
    for code, g in growth.items():
        close = 10 * (1 + g) ** np.arange(1, len(DAYS) + 1)
        pre = np.concatenate([[10.0], close[:-1]])
        frames[code] = pd.DataFrame({"code": code, "open": pre, "high": np.maximum(pre, close),
                                     "low": np.minimum(pre, close), "close": close, "preclose": pre,
                                     "volume": 1e6}, index=pd.DatetimeIndex(DAYS, name="date"))
    return Panel.from_frames(frames)


def test_the_benchmark_is_the_equal_weight_of_the_days_members_and_leavers_are_sold():
    panel = _simple_panel()
    members = np.zeros((len(DAYS), 4), dtype=bool)
    members[:4, :2] = True  # the first two stocks on days 0..3, the other two from day 4
    members[4:, 2:] = True
    panel.members = members
    forecast = pd.DataFrame([[4.0, 3.0, 2.0, 1.0]] * 7, index=DAYS[1:], columns=list(panel.codes))
    config = BacktestConfig(strategy=StrategyConfig(rule="dropout", top_k=1, n_drop=1))
    res = run_backtest(panel, forecast, config)
    g = panel["close"][1:] / panel["preclose"][1:]  # days 1..7
    expected = 1e6 * np.prod(g[:4, :2].mean(axis=1)) * np.prod(g[4:, 2:].mean(axis=1))
    assert res.benchmark_equity.iloc[-1] == pytest.approx(expected, rel=1e-9)
    assert "day's members" in res.benchmark
    pos = res.positions
    assert (pos.loc[DAYS[1]:DAYS[3], "sh.600000"] > 0).all() and (pos.loc[DAYS[4]:, "sh.600000"] == 0).all()
    assert (pos.loc[DAYS[4]:, "sh.600002"] > 0).all()  # the best member from day 4, bought that open
    buys = res.trades[res.trades["side"] == "buy"]
    assert set(buys["code"]) == {"sh.600000", "sh.600002"}


def _planted_result(panel: Panel, members: np.ndarray) -> WalkForwardResult:
    """Forecasts of every stock from day 20: the outcome itself for a member, and a score
    above every member's for a non-member (so an unrestricted run would buy only them)."""
    label = by_forecast_date(tradeable_label(panel, 1, "next_open")[0])
    rows = []
    for i in range(20, panel.n_days):
        for j, code in enumerate(panel.codes):
            if np.isfinite(label[i, j]):
                value = label[i, j] if members[i, j] else 100.0 + j
                rows.append((panel.dates[i], code, value, label[i, j]))
    pred = pd.DataFrame(rows, columns=["date", "code", "forecast", "actual"]).set_index("date")
    pred.insert(1, "model", "planted")
    pred.insert(2, "fold", 0)
    folds = pd.DataFrame([{"fold": 0, "train_start": panel.dates[0], "train_end": panel.dates[18],
                           "test_start": panel.dates[20], "test_end": panel.dates[-1],
                           "n_test_days": panel.n_days - 20, "n_stocks": panel.n_stocks}])
    return WalkForwardResult(pred, folds, WalkForwardConfig(train_days=19, min_stock_days=1), {}, {}, {}, {},
                             {0: [str(c) for c in panel.codes]})


def test_non_members_are_not_scored_and_not_bought_a_signal_planted_in_members_is_recovered():
    panel = Panel.from_frames(synthetic_panel(n_stocks=12, n_days=140, seed=3))
    members = np.zeros((panel.n_days, panel.n_stocks), dtype=bool)
    members[:80, :6] = True
    members[80:, 3:9] = True  # three leave, three enter; the last three are never members
    panel.members = members
    result, n_out = restrict_to_members(_planted_result(panel, members), panel)
    assert n_out > 0 and set(result.outside) == {str(c) for c in panel.codes[9:]}
    pred = result.predictions
    day, col = panel.dates.get_indexer(pred.index), pd.Index(panel.codes).get_indexer(pred["code"])
    assert members[day, col].all()
    report = score_run(result, panel, {"planted": object()}, "planted",
                       BacktestConfig(strategy=StrategyConfig(rule="dropout", top_k=2, n_drop=1)))
    assert report.ic["planted"]["mean_ic"] > 0.95  # the members' outcomes, ranked perfectly
    trades = report.backtests["planted"].trades
    buys = trades[(trades["side"] == "buy") & (trades["status"] != "blocked")]
    assert len(buys)
    d = panel.dates.get_indexer(pd.DatetimeIndex(buys["date"]))
    assert members[d, pd.Index(panel.codes).get_indexer(buys["code"])].all()  # no non-member bought
    used = report.universe.set_index("code")
    assert used.loc[str(panel.codes[10]), "reason"].startswith("not a member of the universe")


def test_a_training_universe_masks_the_labels_models_learn():
    panel = _simple_panel()
    learn = np.ones((len(DAYS), 4), dtype=bool)
    learn[:, 1] = False
    learn[5:, 0] = False
    full, _ = tradeable_label(panel, 1)
    panel.learn = learn
    masked, report = tradeable_label(panel.slice(None, None), 1)
    assert np.isfinite(full[:6, :]).all() and np.isnan(masked[:, 1]).all() and np.isnan(masked[5:, 0]).all()
    np.testing.assert_array_equal(masked[:, 2:], full[:, 2:])
    assert report.masked["not in the training universe"] == 6 + 1


def test_the_masks_travel_to_the_fold_workers(tmp_path):
    panel = _simple_panel()
    panel.learn = np.eye(len(DAYS), 4, dtype=bool)
    opened = panel.to_files(tmp_path).open()  # what a parallel worker maps
    np.testing.assert_array_equal(opened.learn, panel.learn)
    assert opened.members is None and panel.slice(DAYS[2], None).learn.shape == (6, 4)


QUICK = ["--window", "8", "--d-model", "16", "--heads", "2", "--layers", "1", "--epochs", "1",
         "--n-seeds", "1", "--epoch-stock-days", "2000", "--device", "cpu", "--no-baselines",
         "--train-days", "150", "--retrain-every", "60", "--min-stock-days", "60", "--jobs", "1"]


def _universe_file(folder, codes: list[str]):
    """Stocks 0..5 members until 2018-08-31, 3..8 from then (Qlib's format)."""
    lines = [f"{c.upper()}\t2010-01-04\t2018-08-31" for c in codes[:6]]
    lines += [f"{c.upper()}\t2018-09-03\t2099-12-31" for c in codes[3:9]]
    return _write(folder / "idx.txt", "\n".join(lines) + "\n")


def test_backtest_with_a_universe_end_to_end(tmp_path, one_thread):
    data = tmp_path / "syn"
    write_synthetic_panel(data, n_stocks=12, n_days=260, seed=1)
    codes = sorted(p.name[:-4] for p in data.glob("*.csv"))
    idx = _universe_file(tmp_path, codes)
    bad = _write(tmp_path / "bad.txt", "SYN.000001\t2018-01-02\n")
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(tmp_path / "no"),
                                    "--universe", str(bad)])
    assert res.exit_code != 0 and "Error:" in res.output and "line 1" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "no").exists()  # nothing written
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(out), "--universe", str(idx),
                                    "--train-universe", str(idx), *QUICK])
    assert res.exit_code == 0, res.output
    u = read_universe(idx)
    pred = pd.read_csv(out / "predictions.csv", parse_dates=["date"])
    assert len(pred) and u.mask(pred["date"], list(codes)).any()
    member = {c: u.mask(pd.DatetimeIndex(pred["date"]), [c])[:, 0] for c in pred["code"].unique()}
    assert all(member[c][i] for i, c in enumerate(pred["code"]))  # only the day's members scored
    metrics = json.loads((out / "metrics.json").read_text())
    cov = metrics["index_universe"]
    assert cov["name"] == "idx.txt" and cov["members_per_day"]["max"] <= 6
    assert cov["forecast_rows_outside"] > 0
    assert "day's members" in json.dumps(metrics)
    html = (out / "report.html").read_text()
    assert "universe idx.txt" in html and "learnt only the labels of the members" in html


def test_predict_lists_and_orders_only_the_members(tmp_path, one_thread):
    data = tmp_path / "syn"
    write_synthetic_panel(data, n_stocks=12, n_days=200, seed=2)
    codes = sorted(p.name[:-4] for p in data.glob("*.csv"))
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(data), "--out", str(run), "--epochs", "1", "--n-seeds", "1",
                                    "--window", "8", "--d-model", "16"])
    assert res.exit_code == 0, res.output
    members = codes[2:8]
    idx = _write(tmp_path / "members.txt", "\n".join(members) + "\n")
    holdings = _write(tmp_path / "h.csv", f"code,shares\n{codes[0]},400\ncash,300000\n")  # a non-member held
    out = tmp_path / "next.csv"
    res = CliRunner().invoke(main, ["predict", str(data), "--run", str(run), "--out", str(out),
                                    "--device", "cpu", "--universe", str(idx), "--holdings", str(holdings),
                                    "--stale-after", "500"])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(out)
    assert set(table["code"]) <= set(members) and len(table) >= 4
    assert sorted(table["rank"].dropna().astype(int)) == list(range(1, int(table["score"].notna().sum()) + 1))
    orders = pd.read_csv(out.with_name("orders.csv"))
    assert set(orders.loc[orders["side"] == "buy", "code"]) <= set(members)
    assert orders.set_index("code").loc[codes[0], "side"] == "sell"  # the non-member held is sold
    assert f"{len(table)} of the 12 stocks" in res.output


def test_train_with_a_training_universe_learns_only_the_members_labels(tmp_path, one_thread):
    """``train --train-universe`` fits exactly what the Python API fits on a panel whose
    ``learn`` mask is the universe's (so non-members' labels are not learnt), says so, and
    records the universe; a bad universe stops before the run folder is made."""
    import dataclasses

    from forecaster.models.panel.model import PanelTransformer

    data = tmp_path / "syn"
    write_synthetic_panel(data, n_stocks=12, n_days=200, seed=2)
    codes = sorted(p.name[:-4] for p in data.glob("*.csv"))
    idx = _universe_file(tmp_path, codes)
    small = ["--epochs", "1", "--n-seeds", "1", "--window", "8", "--d-model", "16", "--device", "cpu"]
    res = CliRunner().invoke(main, ["train", str(data), "--out", str(tmp_path / "bad"),
                                    "--train-universe", str(tmp_path / "none.txt"), *small])
    assert res.exit_code != 0 and "--train-universe" in res.output and not (tmp_path / "bad").exists()
    runs = {}
    for name, extra in (("all", []), ("members", ["--train-universe", str(idx)])):
        res = CliRunner().invoke(main, ["train", str(data), "--out", str(tmp_path / name), *small, *extra])
        assert res.exit_code == 0, res.output
        runs[name] = PanelTransformer.load(tmp_path / name / "model.pt", device="cpu")
    assert "labels learnt only from the members" in res.output
    info = json.loads((tmp_path / "members" / "run.json").read_text())
    assert info["train_universe"] == str(idx)
    panel = Panel.from_frames(load_dir(data)[0])
    learn = read_universe(idx).mask(panel.dates, panel.codes)
    api = PanelTransformer(**runs["members"].get_params()).fit(
        dataclasses.replace(panel, learn=learn, _cache={}))
    for cli_net, api_net in zip(runs["members"].nets_, api.nets_, strict=True):
        for (k, a), b in zip(cli_net.state_dict().items(), api_net.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, msg=k)
    differs = any(not torch.equal(a, b) for a, b in zip(runs["all"].nets_[0].state_dict().values(),
                                                          runs["members"].nets_[0].state_dict().values(),
                                                          strict=True))
    assert differs  # the mask changed what was learnt


def test_the_universes_own_index_series_is_kept_out_of_the_stocks_and_is_a_second_benchmark(tmp_path,
                                                                                             one_thread):
    """A folder holding ``sh.000300.csv`` beside its stocks: the index is never trained on,
    scored or traded, and a run on the universe ``csi300`` reports the index's own growth over
    the strategy's days (checked by hand from its file) beside the members' equal weight."""
    data = tmp_path / "syn"
    paths = write_synthetic_panel(data, n_stocks=12, n_days=260, seed=1)
    codes = sorted(p.name[:-4] for p in paths)
    index_text = paths[-1].read_text().replace(codes[-1], "sh.000300")
    (data / "sh.000300.csv").write_text(index_text)
    paths[-1].unlink()  # the index is a copy of the last stock's prices, under its own code
    idx = _universe_file(tmp_path, codes)
    universe = idx.rename(tmp_path / "csi300.txt")
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(out), "--universe", str(universe),
                                    *QUICK])
    assert res.exit_code == 0, res.output
    assert "1 index series kept out of the stocks" in res.output and "sh.000300" in res.output
    pred = pd.read_csv(out / "predictions.csv")
    assert "sh.000300" not in set(pred["code"])
    metrics = json.loads((out / "metrics.json").read_text())
    entry = metrics["backtest"]["transformer"]
    assert entry["index_name"].startswith("index sh.000300")
    equity = pd.read_csv(out / "equity.csv", parse_dates=["date"]).set_index("date")
    prices = pd.read_csv(data / "sh.000300.csv", parse_dates=["date"]).set_index("date")
    days = equity.index
    by_hand = 1_000_000 * prices["close"].reindex(days) / prices["open"].loc[days[0]]
    np.testing.assert_allclose(equity["index"], by_hand, rtol=1e-9)
    growth = by_hand.iloc[-1] / 1_000_000
    assert entry["index"]["total_return"] == pytest.approx(growth - 1, rel=1e-6)
    assert any("against index sh.000300" in line for line in metrics["verdict"])


def test_a_universe_with_no_stock_of_the_data_stops_backtest_and_train_alike(tmp_path):
    """One check for both commands: a universe of another market names the option, its codes
    and the data's, and nothing is written."""
    data = tmp_path / "syn"
    write_synthetic_panel(data, n_stocks=4, n_days=150, seed=3)
    spans = "\t2010-01-04\t2099-12-31\n"
    other = _write(tmp_path / "other.txt", f"SH600000{spans}SZ000001{spans}")
    for command, option, out in (("backtest", "--universe", "b"), ("backtest", "--train-universe", "c"),
                                 ("train", "--train-universe", "t")):
        res = CliRunner().invoke(main, [command, str(data), "--out", str(tmp_path / out), option, str(other),
                                        "--device", "cpu"])
        assert res.exit_code != 0 and "Traceback" not in res.output, res.output
        assert f"{option} {other}: none of its 2 codes (e.g. sh.600000, sz.000001)" in res.output
        assert "is a stock of the data (e.g. syn." in res.output
        assert not (tmp_path / out).exists()
