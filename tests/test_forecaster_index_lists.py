"""Universes by name on any data (issue 51): ``csi300``/``csi500`` from the
``index-constitution`` package on a folder of CSVs (``backtest`` and ``predict``), a Qlib folder's
own ``instruments/NAME.txt`` winning, and the checks every membership list goes through (short
days, overlap with an index it cannot share members with, spans that end before the review)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import shared_path

from forecaster.app.cli import main
from forecaster.app.experiment import DataConfig, read_toml
from forecaster.app.pipeline import Loaded, load_universes, prepare
from forecaster.data import DataError, synthetic_panel, write_qlib, write_synthetic_panel
from forecaster.data.market.indices import known_index, review_days
from forecaster.data.market.universe import package_universe, read_universe, resolve_universe
from forecaster.data.qlib.reader import read_qlib

ALWAYS = ["sh.600000", "sh.600016", "sz.000001", "sz.000002"]  # CSI 300 members all of 2018
LEAVING = ["sz.000060", "sz.000540"]  # out from 2018-12-17 (the package's opt-out)
ENTERING = ["sz.000661", "sz.002001"]  # in from 2018-12-17
NEVER = ["sz.000004", "sz.000005", "sz.000007", "sh.600070"]  # in neither CSI 300 nor CSI 500
CODES = ALWAYS + LEAVING + ENTERING + NEVER
QUICK = ["--window", "8", "--d-model", "16", "--heads", "2", "--layers", "1", "--epochs", "1",
         "--n-seeds", "1", "--epoch-stock-days", "2000", "--device", "cpu", "--no-baselines",
         "--train-days", "150", "--retrain-every", "60", "--min-stock-days", "60", "--jobs", "1"]


def _real_codes_folder(folder, n_days: int = 260, seed: int = 1):
    """Synthetic baostock files (2018-01-02 on) under the codes of :data:`CODES`."""
    paths = write_synthetic_panel(folder, n_stocks=len(CODES), n_days=n_days, seed=seed)
    for path, code in zip(sorted(paths), CODES, strict=True):
        (folder / f"{code}.csv").write_text(path.read_text().replace(path.name[:-4], code))
        path.unlink()
    return folder


def test_a_name_on_a_folder_of_csvs_reads_the_packages_point_in_time_members(tmp_path):
    u = resolve_universe("csi300", tmp_path)  # not a Qlib folder: the package
    assert u.kind == "package" and u.name == "csi300" and "index-constitution 1.0.1" in u.source
    assert u.codes[0].startswith(("sh.", "sz.")) and all(c[2] == "." for c in u.codes)
    days = pd.bdate_range("2018-12-10", "2018-12-20")
    mask = u.mask(days, ["sz.000060", "sz.000661", "sh.600000", "sz.000004"])
    first_out = days.get_loc(pd.Timestamp("2018-12-17"))  # opt-out is the first day out
    assert mask[:first_out, 0].all() and not mask[first_out:, 0].any()
    assert not mask[:first_out, 1].any() and mask[first_out:, 1].all()
    assert mask[:, 2].all() and not mask[:, 3].any()
    counts = u.mask(pd.bdate_range("2019-01-02", "2019-12-31"), u.codes).sum(axis=1)
    assert (counts == 300).all()
    assert resolve_universe("CSI500").name == "csi500"  # any case, no data path needed
    assert known_index("csi300_early_spans.txt") == "csi300" and known_index("csi3000") is None


def test_an_unknown_name_lists_the_known_names_and_the_file_forms(tmp_path):
    with pytest.raises(DataError) as err:
        resolve_universe("csi301", tmp_path)
    text = str(err.value)
    assert text.startswith("--universe csi301: no such file") and "csi300, csi500" in text
    assert "Qlib instruments file (CODE<TAB>start<TAB>end)" in text and "code,start,end" in text
    folder = write_qlib(synthetic_panel(n_stocks=3, n_days=30, seed=1), tmp_path / "qlib", market="csi9")
    with pytest.raises(DataError, match=r"no instruments/csi301.txt in the Qlib folder .*it has: csi9.* "
                                        r"expected an index name \(csi300, csi500"):
        resolve_universe("csi301", folder, "--train-universe")


def test_a_qlib_folders_own_file_wins_and_names_the_source(tmp_path):
    codes = ["sh.600000", "sh.600008", "sh.600016", "sh.600021"]  # two CSI 500 members in 2018
    frames = synthetic_panel(n_stocks=4, n_days=40, seed=1)
    frames = {code: f.assign(code=code) for code, f in zip(codes, frames.values(), strict=True)}
    folder = write_qlib(frames, tmp_path / "qlib", market="csi300")
    own = resolve_universe("csi300", folder)
    assert own.kind == "qlib" and own.source == str(folder / "instruments" / "csi300.txt")
    assert own.codes == codes  # the folder's own list, whatever it holds
    other = resolve_universe("csi500", folder)  # the folder lacks it: the package's
    assert other.kind == "package" and "CSI 500" in other.source
    loaded = Loaded(dict(frames), str(folder), "summary")
    load_universes(DataConfig(path=str(folder), universe="csi300", train_universe="csi500"), loaded)
    assert loaded.universe.kind == "qlib" and loaded.train_universe.kind == "package"
    assert f"--universe csi300: members by day from {folder}" in loaded.summary
    assert "--train-universe csi500: members by day from index-constitution 1.0.1, CSI 500 history" \
        in loaded.summary


def test_the_early_spans_file_on_the_qlib_folder_warns_of_short_days_and_early_spans(caplog):
    qlib = shared_path("cn_qlib")
    early = shared_path("universes", "csi300_early_spans.txt")
    frames = read_qlib(qlib, instruments=["SH600000", "SZ000001", "SH600157"]).frames
    loaded = Loaded(frames, str(qlib), "summary")
    with caplog.at_level(logging.WARNING):
        load_universes(DataConfig(path=str(qlib), universe=str(early)), loaded)
    warnings = loaded.universe.warnings
    short = [w for w in warnings if "the list holds fewer members than CSI 300's 300" in w]
    assert len(short) == 1 and "2016-01-04 (275)" in short[0]  # the first short day, its count
    spans = [w for w in warnings if "spans end before the next review" in w]
    assert len(spans) == 1 and "exactly the 30 leaving on 2016-12-12" in spans[0]
    assert all(w in caplog.text for w in warnings)  # logged
    assert "csi300_early_spans.txt" in loaded.summary and "warning(s) on the list" in loaded.summary
    # 2019-03-01: the list lacks exactly the 19 members that leave at the review of 2019-06-17
    u, ref = loaded.universe, package_universe("csi300")
    day, review = [pd.Timestamp("2019-03-01")], pd.Timestamp("2019-06-17")
    assert review in review_days(loaded.panel.dates)
    lacking = set(ref.members_between(day[0], day[0])) - set(u.members_between(day[0], day[0]))
    leaving = set(ref.members_between(day[0], day[0])) - set(ref.members_between(review, review))
    assert len(lacking) == 19 and lacking == leaving
    # the folder's own list (built from the package) has no early spans and is 300 a day
    own = resolve_universe("csi300", qlib)
    lines = own.check(loaded.panel.dates, loaded.panel.codes, qlib)
    assert not any("spans end before" in w for w in lines)
    assert not any("fewer members" in w and "2019" in w for w in lines)


def test_the_packages_csi500_overlaps_its_csi300_and_the_check_says_so():
    csi500, csi300 = package_universe("csi500"), package_universe("csi300")
    days = pd.bdate_range("2016-01-04", "2019-12-31")
    common = sorted(set(csi500.codes) & set(csi300.codes))
    shared = (csi500.mask(days, common) & csi300.mask(days, common)).sum(axis=1)
    by_day = dict(zip(days, shared, strict=True))
    assert by_day[pd.Timestamp("2016-06-01")] == 100 and by_day[pd.Timestamp("2019-03-01")] == 48
    lines = csi500.check(days, ["sh.600000"])
    overlap = [w for w in lines if "shares members with csi300" in w]
    assert len(overlap) == 1 and "2016-01-04 (100)" in overlap[0]
    assert "CSI 500 and CSI 300 are disjoint" in overlap[0]
    assert not any("fewer members" in w for w in lines)  # 500 on every day


def test_overlap_with_a_qlib_folders_own_other_list(tmp_path):
    """Two lists of a Qlib folder that share a stock for some days: one line naming the days
    and the name; a list of an unknown index is checked against its own usual count."""
    frames = synthetic_panel(n_stocks=3, n_days=20, seed=2)
    folder = write_qlib(frames, tmp_path / "qlib", market="all")
    (folder / "instruments" / "csi300.txt").write_text("SH600000\t2020-01-01\t2020-12-31\n")
    (folder / "instruments" / "csi500.txt").write_text(
        "SH600016\t2020-01-01\t2020-12-31\nSH600000\t2020-03-02\t2020-03-06\n")
    days = pd.bdate_range("2020-01-01", "2020-12-31")
    lines = resolve_universe("csi500", folder).check(days, ["sh.600000", "sh.600016"], folder)
    overlap = [w for w in lines if "shares members with csi300" in w]
    assert len(overlap) == 1 and f"({folder / 'instruments' / 'csi300.txt'})" in overlap[0]
    assert "on 5 days, 1 name in all" in overlap[0] and "2020-03-02 (1)" in overlap[0]
    assert "e.g. sh.600000" in overlap[0]
    custom = tmp_path / "mine.txt"
    custom.write_text("SH600000\t2020-01-01\t2020-12-31\nSH600016\t2020-01-01\t2020-06-30\n"
                      "SH600016\t2020-08-03\t2020-12-31\n")
    lines = read_universe(custom).check(days, ["sh.600000"])
    assert len(lines) == 1 and "fewer members than its usual 2" in lines[0] and "2020-07-01 (1)" in lines[0]


def test_backtest_with_a_name_on_a_folder_of_csvs_scores_only_each_days_members(tmp_path, one_thread):
    data = _real_codes_folder(tmp_path / "csv")
    out = tmp_path / "r"
    res = CliRunner().invoke(main, ["backtest", str(data), "--out", str(out), "--universe", "csi300", *QUICK])
    assert res.exit_code == 0, res.output
    assert "--universe csi300: members by day from index-constitution 1.0.1, CSI 300 history" in res.output
    assert "warning: universe csi300 (index-constitution" in res.output  # its overlap with CSI 500, 2018
    pred = pd.read_csv(out / "predictions.csv", parse_dates=["date"])
    u = package_universe("csi300")
    member = np.array([u.mask(pd.DatetimeIndex([d]), [c])[0, 0] for d, c in zip(pred["date"], pred["code"],
                                                                               strict=True)])
    assert len(pred) and member.all()  # only each day's members scored
    assert not set(pred["code"]) & set(NEVER)
    review = pd.Timestamp("2018-12-17")
    assert pred.loc[pred["code"].isin(LEAVING), "date"].max() < review
    assert pred.loc[pred["code"].isin(ENTERING), "date"].min() >= review
    cov = json.loads((out / "metrics.json").read_text())["index_universe"]
    assert cov["kind"] == "package" and cov["source"].startswith("index-constitution 1.0.1")
    assert cov["members_per_day"]["max"] == 6 and cov["warnings"]
    assert "universe csi300 (index-constitution 1.0.1, CSI 300 history): members per day" in res.output


def test_an_experiment_file_names_the_universe(tmp_path):
    _real_codes_folder(tmp_path / "csv", n_days=80)
    path = tmp_path / "experiment.toml"
    path.write_text('[data]\npath = "csv"\nuniverse = "csi300"\ntrain_universe = "csi300"\n')
    exp, loaded = prepare(read_toml(path), str(path))
    assert exp.data.universe == "csi300" and loaded.universe.kind == "package"
    assert loaded.train_universe is loaded.universe  # one list, read and checked once


def test_predict_with_a_name_on_a_folder_of_csvs_lists_only_the_signal_days_members(tmp_path, one_thread):
    data = _real_codes_folder(tmp_path / "csv")
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(data), "--out", str(run), "--epochs", "1", "--n-seeds", "1",
                                    "--window", "8", "--d-model", "16", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "next.csv"
    res = CliRunner().invoke(main, ["predict", str(data), "--run", str(run), "--out", str(out),
                                    "--device", "cpu", "--universe", "csi300", "--stale-after", "500"])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(out)
    signal = pd.read_csv(data / f"{CODES[0]}.csv", parse_dates=["date"])["date"].max()
    assert signal > pd.Timestamp("2018-12-17")  # after the review: the entrants are in, the leavers out
    assert set(table["code"]) == set(ALWAYS + ENTERING)
    assert "members by day from index-constitution 1.0.1, CSI 300 history" in res.output
    assert f"{len(table)} of the 12 stocks" in res.output
    res = CliRunner().invoke(main, ["predict", str(data), "--run", str(run), "--out", str(out),
                                    "--device", "cpu", "--universe", "csi301", "--overwrite"])
    assert res.exit_code != 0 and "csi300, csi500" in res.output and "Traceback" not in res.output
