"""Issue 85 (trust VII): no file, folder or state a user meets can stall the tool, lose a report
or mislead. Each case is planted, and each refusal is one line naming the file and the cause."""

from __future__ import annotations

import time

import pandas as pd
import pytest
import torch
from click.testing import CliRunner
from test_forecaster_trust import QUICK, _digests, _invoke

from forecaster.data import write_synthetic_panel
from seq2seq.cli import main as seq2seq_main
from seq2seq.core.checkpoint import CheckpointError, load_checkpoint

PANEL_KIND = "forecaster.PanelTransformer"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A data folder of 6 stocks, a report of it and a trained panel run."""
    root = tmp_path_factory.mktemp("trust7")
    write_synthetic_panel(root / "data", n_stocks=6, n_days=260, seed=4)
    res = _invoke("backtest", root / "data", "--out", root / "rep", *QUICK)
    assert res.exit_code == 0, res.output
    res = _invoke("train", root / "data", "--out", root / "run", *QUICK[:8])
    assert res.exit_code == 0, res.output
    return root


def _save(obj, path):
    """torch.save, with the stack a deeply nested payload needs to be written at all."""
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        torch.save(obj, path)
    finally:
        sys.setrecursionlimit(limit)


def _one_line(res):
    assert res.exit_code != 0, res.output
    assert "Traceback" not in res.output and res.output.count("Error") == 1, res.output
    return res.output


# ------------------------------------------------------------------ 1, 3: checkpoints


def _doubling(levels):
    x = [1]
    for _ in range(levels):
        x = [x, x]  # each level refers to the one below twice: 2**levels visits, a few bytes
    return x


def _nested(levels):
    x = []
    for _ in range(levels):
        x = [x]
    return x


class _RunsCode:
    def __reduce__(self):
        import os

        return (os.system, ("true",))


@pytest.mark.parametrize("payload, message", [
    (_doubling(40), "unfold into more than"),
    (_doubling(64), "nest deeper than 64 levels"),
    (_nested(20_000), "nest deeper than 64 levels"),
    ([torch.zeros(100_000)] * 10_000, "bytes of tensors and text"),
])
@pytest.mark.parametrize("kind", ["seq2seq translation", PANEL_KIND])
def test_a_checkpoint_that_unfolds_without_end_is_refused_within_a_second(tmp_path, payload, message, kind):
    path = tmp_path / "m.pt"
    _save({"kind": kind, "version": 1, "sha256": "0" * 64, "meta": payload}, path)
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path, kind, (1,))
    assert time.perf_counter() - start < 1.0


def test_a_checkpoint_that_asks_to_run_code_is_called_so_and_never_advised_open(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"kind": "seq2seq translation", "version": 1, "x": _RunsCode()}, path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, "seq2seq translation", (1,))
    text = str(err.value)
    assert "asks to run code (posix.system)" in text or "asks to run code (nt.system)" in text
    assert "weights_only" not in text and "corrupt" not in text


def test_the_commands_refuse_a_bomb_in_one_line(root, tmp_path):
    import shutil

    from forecaster.app.cli import main as forecaster_main

    bomb = tmp_path / "bomb.pt"
    _save({"kind": "seq2seq translation", "version": 1, "sha256": "0", "m": _doubling(40)}, bomb)
    res = CliRunner().invoke(seq2seq_main, ["translate", "-c", str(bomb), "Hallo"])
    assert res.exit_code != 0 and "unfold into more than" in res.output and "Traceback" not in res.output
    run = tmp_path / "run"
    shutil.copytree(root / "run", run)
    _save({"kind": PANEL_KIND, "version": 1, "sha256": "0", "m": _nested(20_000)}, run / "model.pt")
    res = CliRunner().invoke(forecaster_main, ["predict", "--run", str(run), str(root / "data")])
    assert "nest deeper than 64 levels" in _one_line(res)


# ------------------------------------------------------------------ 2: a big file is not read whole


def _sparse(path, size):
    with open(path, "wb") as f:  # a sparse file: its size on paper, no disk spent
        f.truncate(size)


def test_a_huge_file_named_like_a_stock_is_refused_by_its_size_before_it_is_read(tmp_path):
    import tracemalloc

    from forecaster.data import DataError, load_csv

    big = tmp_path / "sh.600000.csv"
    _sparse(big, 2 << 30)
    tracemalloc.start()
    with pytest.raises(DataError, match=r"600000\.csv: 2,048 MB, over the limit of 256 MB .*--max-file-mb"):
        load_csv(big)
    assert tracemalloc.get_traced_memory()[1] < 50 << 20
    tracemalloc.stop()


def test_a_gzip_file_that_decompresses_past_the_limit_is_refused(tmp_path):
    import gzip

    from forecaster.data import DataError, load_csv

    path = tmp_path / "sh.600000.csv.gz"
    with gzip.open(path, "wb") as f:
        for _ in range(3):
            f.write(b"date,open,high,low,close,volume\n" + b"0" * (1 << 20))
    with pytest.raises(DataError, match="decompresses to more than 2 MB"):
        load_csv(path, max_file_mb=2)


def test_a_folder_skips_counts_and_names_a_file_over_the_limit(root, tmp_path):
    import shutil

    from forecaster.data import load_dir

    data = tmp_path / "data"
    shutil.copytree(root / "data", data)
    _sparse(data / "sh.688999.csv", 300 << 20)
    loaded = load_dir(data, workers=1)
    assert "sh.688999" not in loaded.frames and len(loaded.frames) == 6
    text = loaded.summary()
    assert "skipped 1 data file(s) over the size limit, not read" in text
    assert "sh.688999.csv (300 MB" in text and "--max-file-mb" in text
    # the option raises the limit, and the CLI takes it; a limit of 0 is refused in one line
    res = _invoke("backtest", data, "--out", tmp_path / "rep", "--max-file-mb", "0", *QUICK)
    assert "--max-file-mb must be > 0" in _one_line(res)
    assert not (tmp_path / "rep").exists()
    res = _invoke("backtest", data, "--out", tmp_path / "rep", "--max-file-mb", "1", *QUICK)
    assert res.exit_code == 0, res.output
    assert "sh.688999.csv (300 MB" in (tmp_path / "rep" / "report.html").read_text() or \
        "sh.688999.csv (300 MB" in res.output


def test_a_qlib_feature_file_larger_than_its_calendar_is_refused_before_it_is_read(tmp_path):
    from forecaster.data import DataError
    from forecaster.data.qlib.reader import _read_bin

    path = tmp_path / "close.day.bin"
    _sparse(path, 1 << 30)
    with pytest.raises(DataError, match="more than the calendar's 100 days"):
        _read_bin(path, 100)


# ------------------------------------------------------------------ 4: two runs, one folder


def _hold_in_child(folder, ready, release):
    from seq2seq.core.outputs import check_output

    check_output(folder).claim()
    ready.set()
    release.wait(60)


def test_a_folder_a_live_run_holds_is_refused_even_with_overwrite_and_taken_over_once_it_died(root, tmp_path,
                                                                                            caplog):
    import multiprocessing as mp

    from seq2seq.core.outputs import LOCK

    out = tmp_path / "rep"
    ctx = mp.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    child = ctx.Process(target=_hold_in_child, args=(out, ready, release))
    child.start()
    try:
        assert ready.wait(60)
        for flag in ("--overwrite", "--resume", None):
            before = _digests(out)
            res = _invoke("backtest", root / "data", "--out", out, *QUICK, *([flag] if flag else []))
            text = _one_line(res)
            assert f"a live run is writing there (pid {child.pid}, started " in text, text
            assert "never apply to a folder a live run holds" in text
            assert _digests(out) == before
    finally:
        release.set()
        child.join(60)
    # the holder ended without releasing (its lock file still names it): taken over, with a note
    (out / LOCK).write_text(f"pid {child.pid}, started 2026-01-01 00:00:00, running forecaster backtest\n")
    res = _invoke("backtest", root / "data", "--out", out, "--overwrite", *QUICK)
    assert res.exit_code == 0, res.output
    taken = f"took over the lock of an earlier run that ended without releasing it (pid {child.pid}"
    assert taken in caplog.text
    assert not (out / LOCK).exists()  # released cleanly at the command's end


# ------------------------------------------------------------------ 5: fold files' contents


def _forge_rows(report, edit):
    """Rewrite fold 0's rows as a forger would: through the manifest and with the fold JSON's
    SHA-256 of them updated, so that only their contents can tell."""
    import hashlib
    import io
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from seq2seq.core import atomic_write

    folds = report / "folds"
    table = pq.read_table(folds / "fold_0000.parquet").to_pandas()
    table = edit(table.astype({"code": str, "model": str}))
    sink = io.BytesIO()
    schema = pa.schema([("date", pa.timestamp("ns")), ("code", pa.string()), ("model", pa.string()),
                        ("fold", pa.int32()), ("forecast", pa.float64())])
    pq.write_table(pa.Table.from_pandas(table, schema=schema, preserve_index=False), sink, compression="NONE",
                   use_dictionary=["code", "model"])
    data = sink.getvalue()
    with atomic_write(folds / "fold_0000.parquet") as f:
        f.write(data)
    meta = json.loads((folds / "fold_0000.json").read_text())
    meta["sha256"]["parquet"] = hashlib.sha256(data).hexdigest()
    meta["parts"] = [{**meta["parts"][0], "rows": len(table)}] + [
        {**p, "rows": 0} for p in meta["parts"][1:]] if len(meta["parts"]) == 1 else meta["parts"]
    with atomic_write(folds / "fold_0000.json", "w") as f:
        json.dump(meta, f)


def _shift(table, i, **values):
    table = table.copy()
    for key, value in values.items():
        table.loc[i, key] = value
    return table


@pytest.mark.parametrize("edit, message", [
    (lambda t: _shift(t, 3, date=pd.Timestamp("2031-01-06")), "row 4 (2031-01-06"),
    (lambda t: _shift(t, 0, date=pd.Timestamp("2010-01-09")), "row 1 (2010-01-09"),
    (lambda t: _shift(t, 2, code="sh.688999"), "its code is not a stock of the data"),
    (lambda t: pd.concat([t, t.iloc[[5]]], ignore_index=True), "repeats an earlier row's date, code"),
])
def test_a_fold_file_whose_rows_are_not_the_runs_is_refused_before_anything_is_written(root, tmp_path, edit,
                                                                                        message):
    import shutil

    report = tmp_path / "rep"
    shutil.copytree(root / "rep", report)
    _forge_rows(report, edit)
    before = _digests(report)
    res = _invoke("backtest", root / "data", "--out", report, "--resume", *QUICK)
    text = _one_line(res)
    assert "fold_0000.parquet: row" in text and message in text, text
    if message.startswith("row"):
        assert "is not a test day of fold 0" in text
    assert _digests(report) == before


# ------------------------------------------------------------------ 6: a book that cannot buy


def test_a_capital_below_one_lot_of_the_cheapest_stock_is_refused_before_any_work(root, tmp_path):
    from forecaster.data import load_dir
    from forecaster.data.panel import Panel

    panel = Panel.from_frames(load_dir(root / "data", workers=1).frames)
    close = panel.fields["close"]
    res = _invoke("backtest", root / "data", "--out", tmp_path / "rep", "--capital", "10", *QUICK)
    text = _one_line(res)
    assert "--capital 10 buys not one lot of any stock: the cheapest on" in text
    assert "for its smallest buy (100 shares at" in text and "give --capital" in text
    assert not (tmp_path / "rep").exists()
    # the figure named is the cheapest lot of that day
    day = pd.Timestamp(text.split("the cheapest on ")[1][:10])
    at = panel.dates.get_loc(day)
    cheapest = float(pd.Series(close[at]).min() * 100)
    assert f"costs {cheapest:,.0f} CNY" in text
    # predict with a cash book alike; with one lot's worth it runs
    res = _invoke("predict", "--run", root / "run", root / "data", "--capital", "10",
                  "--out", tmp_path / "next.csv")
    assert "buys not one lot of any stock" in _one_line(res)
    assert not (tmp_path / "next.csv").exists()
    res = _invoke("predict", "--run", root / "run", root / "data", "--capital", str(int(cheapest * 3)),
                  "--out", tmp_path / "next.csv")
    assert res.exit_code == 0, res.output


# ------------------------------------------------------------------ 7: a universe of one stock


def test_a_one_stock_universe_says_why_no_book_was_backtested(root, tmp_path):
    members = tmp_path / "one.txt"
    codes = sorted(p.name[:-4] for p in (root / "data").glob("*.csv"))
    members.write_text(codes[0] + "\n")
    res = _invoke("backtest", root / "data", "--out", tmp_path / "rep", "--universe", members,
                  "--strategy", "enhanced", *QUICK)
    assert res.exit_code in (0, 1), res.output
    assert "no backtest of transformer: its forecasts cover one stock a day" in res.output
    notes = (tmp_path / "rep" / "report.html").read_text()
    assert "no backtest of transformer" in notes and "a universe of one member" in notes


# ------------------------------------------------------------------ 8: one date is no year


def test_a_prediction_file_of_one_date_shows_no_annualised_figure(root, tmp_path):
    import json

    pred = pd.read_csv(root / "rep" / "predictions.csv", parse_dates=["date"])
    day = pred["date"].unique()[10]
    one = pred[(pred["date"] == day) & (pred["model"] == "transformer")]
    one[["date", "code", "forecast"]].rename(columns={"forecast": "score"}).to_csv(tmp_path / "single.csv",
                                                                                   index=False)
    res = _invoke("score", tmp_path / "single.csv", "--report", root / "rep", "--out", tmp_path / "sc")
    assert res.exit_code in (0, 1), res.output
    out = res.output
    assert "single ann_return, excess_vs_bench, sharpe (fewer than 20 days: not annualised (1 day(s)))" in out
    assert not any("single" in line and "%/yr" in line for line in out.splitlines()), out
    metrics = json.loads((tmp_path / "sc" / "metrics.json").read_text())
    text = json.dumps(metrics)
    assert "fewer than 20 days: not annualised" in text


def test_the_annual_figures_need_twenty_days():
    import math

    import numpy as np

    from forecaster.metrics.returns import active_stats, annual_return
    from forecaster.portfolio.broker import performance_metrics

    r = pd.Series(np.full(19, 0.01), index=pd.bdate_range("2024-01-01", periods=19))
    assert math.isnan(annual_return(r)) and not math.isnan(annual_return(pd.concat([r, r])))
    assert math.isnan(active_stats(r, r * 0.5)["information_ratio"])
    m = performance_metrics((1 + r).cumprod() * 100, capital=100)
    annual = ("annual_return", "annual_volatility", "sharpe", "sortino", "calmar")
    assert all(math.isnan(m[k]) for k in annual)
    assert m["total_return"] == pytest.approx(1.01 ** 19 - 1)


# ------------------------------------------------------------------ 9, 10: one date format a file


def _scores(root, n_days=30):
    pred = pd.read_csv(root / "rep" / "predictions.csv", parse_dates=["date"])
    pred = pred[pred["model"] == "transformer"]
    days = sorted(pred["date"].unique())[:n_days]
    return pred[pred["date"].isin(days)][["date", "code", "forecast"]].rename(columns={"forecast": "score"})


def test_day_first_dates_are_read_in_one_format_and_ambiguous_ones_refused(root, tmp_path):
    from forecaster.evaluation.external import read_external

    scores = _scores(root)
    iso = read_external(_write(scores, tmp_path / "iso.csv"))
    # day-first: some days > 12 tell the format; every date must come back as the ISO file's
    day_first = scores.assign(date=scores["date"].dt.strftime("%d/%m/%Y"))
    read = read_external(_write(day_first, tmp_path / "dmy.csv"))
    assert (read["date"].to_numpy() == iso["date"].to_numpy()).all()
    month_first = scores.assign(date=scores["date"].dt.strftime("%m/%d/%Y"))
    assert (read_external(_write(month_first, tmp_path / "mdy.csv"))["date"].to_numpy()
            == iso["date"].to_numpy()).all()
    # only days <= 12: both readings fit every row and differ, refused in one line naming both
    early = scores[scores["date"].dt.day <= 12]
    ambiguous = early.assign(date=early["date"].dt.strftime("%d/%m/%Y"))
    path = _write(ambiguous, tmp_path / "amb.csv")
    res = _invoke("score", path, "--report", root / "rep", "--out", tmp_path / "sc")
    text = _one_line(res)
    assert "line 2, column date:" in text and "%d/%m/%Y" in text and "%m/%d/%Y" in text
    assert "pass --date-format" in text and not (tmp_path / "sc").exists()
    res = _invoke("score", path, "--report", root / "rep", "--out", tmp_path / "sc",
                  "--date-format", "%d/%m/%Y")
    assert res.exit_code in (0, 1) and "Traceback" not in res.output, res.output
    assert (tmp_path / "sc" / "report.html").exists()
    # a value in another format than the column's is named by its line
    mixed = day_first.copy()
    mixed.iloc[4, 0] = "2018-08-07"
    with pytest.raises(Exception, match="line 6, column date"):
        read_external(_write(mixed, tmp_path / "mixed.csv"))


def _write(frame, path):
    frame.to_csv(path, index=False)
    return path


def test_zone_aware_dates_are_converted_to_shanghai_with_a_note(root, tmp_path):
    from forecaster.evaluation.external import read_external

    scores = _scores(root)
    iso = read_external(_write(scores, tmp_path / "iso.csv"))
    aware = scores.assign(date=scores["date"].dt.tz_localize("Asia/Shanghai"))
    aware.to_parquet(tmp_path / "aware.parquet")
    read = read_external(tmp_path / "aware.parquet")
    assert (read["date"].to_numpy() == iso["date"].to_numpy()).all()
    assert "converted to Asia/Shanghai" in read.attrs["notes"][0]
    text = scores.assign(date=scores["date"].dt.strftime("%Y-%m-%d 00:00+08:00"))
    read = read_external(_write(text, tmp_path / "aware.csv"))
    assert (read["date"].to_numpy() == iso["date"].to_numpy()).all()
    res = _invoke("score", tmp_path / "aware.parquet", "--report", root / "rep", "--out", tmp_path / "sc")
    assert res.exit_code in (0, 1) and "no trading day" not in res.output, res.output
    assert "converted to Asia/Shanghai" in res.output


# ------------------------------------------------------------------ 11: the reason that decided


def test_a_left_out_stock_names_the_count_that_decided_and_the_option(root, tmp_path):
    import re
    import shutil

    data = tmp_path / "data"
    shutil.copytree(root / "data", data)
    victim = sorted(data.glob("*.csv"))[0]
    frame = pd.read_csv(victim)
    pd.concat([frame.iloc[:100], frame.iloc[150:]]).to_csv(victim, index=False)  # a long gap without rows
    res = _invoke("backtest", data, "--out", tmp_path / "rep", *QUICK, "--scheme", "rolling",
                  "--min-stock-days", "125")
    assert res.exit_code in (0, 1), res.output
    table = pd.read_csv(tmp_path / "rep" / "universe.csv")
    row = table[table["code"] == victim.name[:-4]].iloc[0]
    assert row["status"] == "left out", row
    reason = row["reason"]
    assert "in any fold's training window (--scheme rolling)" in reason and "--min-stock-days 125" in reason
    counted = int(re.search(r"at most (\d+) day", reason).group(1))
    assert counted < 125 < int(row["days"])  # what decided, not all its history
    assert "min_stock_days" not in reason


def test_a_stock_the_prediction_file_lacks_has_no_score_in_the_file(root, tmp_path):
    scores = _scores(root, n_days=60)
    lacking = sorted(scores["code"].unique())[2]
    _write(scores[scores["code"] != lacking], tmp_path / "lack.csv")
    res = _invoke("score", tmp_path / "lack.csv", root / "data", "--out", tmp_path / "sc")
    assert f"{lacking} (no score in the file)" in res.output, res.output
    assert "too few days" not in res.output


# ------------------------------------------------------------------ 12, 13: the real cause, named


def test_a_report_copied_without_its_dot_files_names_the_manifest_and_cp_a(root, tmp_path):
    import shutil

    new = tmp_path / "new"
    new.mkdir()
    for entry in (root / "rep").iterdir():  # cp -r REP/* NEW: the shell's * leaves dot-files out
        if not entry.name.startswith("."):
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, new / entry.name)
    before = _digests(new)
    res = _invoke("backtest", root / "data", "--out", new, "--resume", *QUICK)
    text = _one_line(res)
    assert "no .manifest.tsv" in text and "cp -a" in text and "is not the file the run wrote" not in text
    assert _digests(new) == before and not (new / ".manifest.tsv").exists()


@pytest.mark.parametrize("make, message", [
    (lambda text: text + text, "line 262 repeats the header line"),
    (lambda text: text + "数据来源:通达信\n", "'数据来源:通达信' is a footer line"),
])
def test_a_repeated_header_or_a_footer_is_named_as_such_not_as_another_stock(root, tmp_path, make, message):
    from forecaster.data import DataError, load_csv

    source = sorted((root / "data").glob("*.csv"))[0]
    path = tmp_path / source.name
    path.write_text(make(source.read_text()))
    with pytest.raises(DataError, match=message) as err:
        load_csv(path)
    assert "expected one stock per file" not in str(err.value)


def test_a_folds_entry_that_is_a_file_and_a_weights_file_listing_the_index_get_the_real_cause(root, tmp_path):
    import shutil

    from forecaster.data.panel import Panel
    from forecaster.portfolio.index_weights import file_weights

    report = tmp_path / "rep"
    shutil.copytree(root / "rep", report)
    shutil.rmtree(report / "folds")
    (report / "folds").write_text("not a folder\n")
    res = _invoke("backtest", root / "data", "--out", report, "--resume", *QUICK)
    assert "folds: is a file, not the folder of fold files" in _one_line(res)
    # the index itself in a vendor's weights export, at weight 0: left out with a note
    from forecaster.data import load_dir

    panel = Panel.from_frames(load_dir(root / "data", workers=1).frames)
    day = panel.dates[5].strftime("%Y-%m-%d")
    codes = [str(c) for c in panel.codes]
    rows = [f"{day},{c},{1 / len(codes)}" for c in codes] + [f"{day},sh.000300,0"]
    path = tmp_path / "w.csv"
    path.write_text("date,code,weight\n" + "\n".join(rows) + "\n")
    weights = file_weights(panel, path)
    assert any("of the index itself (sh.000300) at weight 0" in n for n in weights.notes)
    path.write_text("date,code,weight\n" + "\n".join(rows[:-1] + [f"{day},sh.000300,0.5"]) + "\n")
    with pytest.raises(Exception, match="sh.000300 is an index, not a member"):
        file_weights(panel, path)


# ------------------------------------------------------------------ 14: a long command a person can read


def test_backtest_help_shows_its_options_in_sections_with_every_name_kept():
    import re

    from forecaster.app.cli import backtest, main

    res = CliRunner().invoke(main, ["backtest", "--help"])
    assert res.exit_code == 0
    text = res.output
    heads = ["Options:", "Data:", "Universe:", "Model:", "Walk-forward:", "Book:", "Enhanced index:",
             "Costs:", "Run:"]
    at = [text.index("\n" + h + "\n") for h in heads]
    assert at == sorted(at)  # in this order
    section = {h: text[a:b] for h, a, b in zip(heads, at, [*at[1:], len(text)], strict=True)}
    enhanced = section["Enhanced index:"]
    assert "--tracking-error" in enhanced and "--benchmark-weights" in enhanced
    assert "--universe" in section["Universe:"] and "--top-k" in section["Book:"]
    assert "--epochs" in section["Model:"] and "--jobs" in section["Run:"]
    for param in backtest.params:  # every option name kept, each listed once
        for opt in param.opts:
            if opt.startswith("--"):
                assert re.search(re.escape(opt) + r"[ ,/\n]", text), opt
    assert "\n  [DATA]" not in text
    assert "[strategy: " in text and "\n  --top-k" in text
    # each command's first lines: what it does and its most used options
    for command in ("backtest", "run", "train", "predict", "plot", "score", "fetch", "compare",
                    "export-qlib"):
        head = CliRunner().invoke(main, [command, "--help"]).output.split("Options:")[0]
        assert "Most used:" in " ".join(head.split()[:80]), command
