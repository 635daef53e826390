"""Loading folders: gzip files, parallel reads equal serial ones, a file's code checked
against its name, entries that are not data named, the cache keyed on .gz files too."""

from __future__ import annotations

import gzip
import logging
import os
import pickle
from pathlib import Path

import pandas as pd
import pytest

from forecaster.data import DataError, FolderLoad, SyntheticConfig, load_csv, load_dir, synthetic_prices
from forecaster.data.sources import code_in_name, data_stem

N = 30


def bars_text(code: str, seed: int = 0, n_days: int = N) -> str:
    """A baostock export of ``n_days`` synthetic bars whose rows say ``code``."""
    bars = synthetic_prices(SyntheticConfig(n_days=n_days, seed=seed))
    return bars.assign(code=code).to_csv(index=False)


def write(folder: Path, name: str, text: str, gz: bool | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if gz if gz is not None else name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def read(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode() if path.name.endswith(".gz") else path.read_text()


def market(folder: Path, n: int = 6, gz_every: int = 2) -> list[str]:
    """``n`` stocks, every ``gz_every``-th one gzip-compressed; their codes."""
    codes = [f"sz.{300001 + i}" for i in range(n)]
    for i, code in enumerate(codes):
        write(folder, f"{code}.csv" + (".gz" if i % gz_every == 0 else ""), bars_text(code, seed=i))
    return codes


def assert_loads_equal(a: FolderLoad, b: FolderLoad, same_paths: bool = True) -> None:
    assert list(a.frames) == list(b.frames)
    for code in a.frames:
        pd.testing.assert_frame_equal(a.frames[code], b.frames[code])
    if same_paths:
        assert a.reports == b.reports


# ----------------------------------------------------------------------------------- gzip


def test_gzip_file_loads_like_the_plain_csv(tmp_path):
    text = bars_text("sz.000001", seed=4)
    plain, plain_report = load_csv(write(tmp_path / "plain", "sz.000001.csv", text))
    packed, packed_report = load_csv(write(tmp_path / "packed", "sz.000001.csv.gz", text))
    pd.testing.assert_frame_equal(packed, plain)
    assert (plain_report.compression, packed_report.compression) == ("", "gzip")
    assert "gzip" in packed_report.summary()
    assert packed_report.rows_kept == plain_report.rows_kept == N
    # A folder mixing both loads them all by default, and as the plain files would.
    market(tmp_path / "mixed")
    mixed = load_dir(tmp_path / "mixed")
    for file in (tmp_path / "mixed").iterdir():
        write(tmp_path / "unpacked", data_stem(file.name) + ".csv", read(file))
    assert_loads_equal(mixed, load_dir(tmp_path / "unpacked"), same_paths=False)
    assert sum(r.compression == "gzip" for r in mixed.reports.values()) == 3


def test_pattern_still_selects_files_and_names_the_rest(tmp_path):
    codes = market(tmp_path)
    only_plain = load_dir(tmp_path, pattern="*.csv")
    assert list(only_plain.frames) == codes[1::2]
    assert [s.name for s in only_plain.skipped] == [f"{c}.csv.gz" for c in codes[::2]]
    assert "matches none of '*.csv'" in only_plain.skipped[0].reason


def test_damaged_gzip_is_an_error_naming_the_file(tmp_path):
    good = gzip.compress(bars_text("sz.000001").encode())
    (tmp_path / "sz.000001.csv.gz").write_bytes(good[: len(good) // 2])
    with pytest.raises(DataError, match=r"sz\.000001\.csv\.gz: damaged or truncated gzip data"):
        load_csv(tmp_path / "sz.000001.csv.gz")
    write(tmp_path, "sz.000002.csv.gz", bars_text("sz.000002"), gz=False)
    with pytest.raises(DataError, match=r"sz\.000002\.csv\.gz: named \.gz but not gzip data"):
        load_csv(tmp_path / "sz.000002.csv.gz")


# ----------------------------------------------------------------------------------- parallel


def test_parallel_load_equals_serial_and_reports_errors_the_same_way(tmp_path):
    codes = market(tmp_path / "ok", n=8)
    serial = load_dir(tmp_path / "ok", workers=1)
    parallel = load_dir(tmp_path / "ok", workers=2, parallel_min_files=2, progress=False)
    assert (serial.workers, parallel.workers) == (1, 2)
    assert list(parallel.frames) == codes  # sorted by code
    assert_loads_equal(parallel, serial)
    # Below the threshold the folder is read in this process.
    assert load_dir(tmp_path / "ok", workers=2, parallel_min_files=100).workers == 1
    # A bad file in a worker: the same DataError, naming the file, line and column.
    bad = tmp_path / "ok" / f"{codes[5]}.csv"
    if not bad.exists():
        bad = bad.with_name(bad.name + ".gz")
    lines = read(bad).splitlines()
    cells = lines[4].split(",")
    cells[lines[0].split(",").index("close")] = "abc"
    lines[4] = ",".join(cells)  # line 5 of the file
    write(bad.parent, bad.name, "\n".join(lines) + "\n")
    with pytest.raises(DataError) as in_process:
        load_dir(tmp_path / "ok", workers=1)
    with pytest.raises(DataError) as in_worker:
        load_dir(tmp_path / "ok", workers=2, parallel_min_files=2, progress=False)
    assert str(in_worker.value) == str(in_process.value)
    assert f"{bad}: line 5, column 'close': expected a number, got 'abc'" in str(in_worker.value)


def test_folder_load_unpacks_as_the_pair_and_pickles(tmp_path):
    market(tmp_path, n=3)
    loaded = load_dir(tmp_path)
    frames, reports = loaded
    assert frames is loaded.frames and reports is loaded.reports and len(loaded) == 2
    again = pickle.loads(pickle.dumps(loaded))
    assert isinstance(again, FolderLoad) and again.summary() == loaded.summary()


# ----------------------------------------------------------------------------------- codes


@pytest.mark.parametrize("name", ["sz.300001.csv", "sz.300001.csv.gz", "sz300001.csv", "300001.SZ.csv"])
def test_a_file_whose_rows_name_another_stock_is_an_error(tmp_path, name):
    path = write(tmp_path, name, bars_text("sh.600016"))
    message = (rf"{name}: line 2, column 'code': the rows say sh\.600016 \(all {N} rows\) but the "
               r"file name says sz\.300001; .*trust_code_column")
    with pytest.raises(DataError, match=message):
        load_csv(path)
    with pytest.raises(DataError, match=message):
        load_dir(tmp_path)


def test_names_that_are_not_codes_or_agree_pass(tmp_path):
    assert code_in_name("syn.000001.csv") is None and code_in_name("yahoo.csv.gz") is None
    assert code_in_name("300001.csv") == "300001"  # no exchange in the name
    assert load_csv(write(tmp_path, "prices.csv", bars_text("sh.600016")))[0]["code"].iloc[0] == "sh.600016"
    assert load_csv(write(tmp_path, "600016.csv", bars_text("sh.600016")))[0]["code"].iloc[0] == "sh.600016"
    assert load_csv(write(tmp_path, "SH600016.csv", bars_text("600016.SH")))[0]["code"].iloc[0] == "sh.600016"
    # Without a code column the name's code is recorded (canonical), else the name.
    yahoo = synthetic_prices(SyntheticConfig(n_days=N)).rename(columns=str.title)[
        ["Date", "Open", "High", "Low", "Close", "Volume"]].to_csv(index=False)
    assert load_csv(write(tmp_path, "600016.SH.csv.gz", yahoo))[0]["code"].iloc[0] == "sh.600016"
    assert load_csv(write(tmp_path, "index.csv.gz", yahoo))[0]["code"].iloc[0] == "index"


def test_trusting_the_code_column_warns_and_uses_it(tmp_path, caplog):
    from forecaster.app.experiment import DataConfig
    from forecaster.app.pipeline import load_data

    write(tmp_path, "sz.300001.csv", bars_text("sh.600016"))
    write(tmp_path, "sz.300002.csv.gz", bars_text("sz.300002", seed=1))
    with caplog.at_level(logging.WARNING, logger="forecaster.data.daily.loading"):
        frame, report = load_csv(tmp_path / "sz.300001.csv", trust_code_column=True)
    assert frame["code"].iloc[0] == "sh.600016" and report.name_code == "sz.300001"
    assert "sz.300001.csv: the file name says sz.300001 but column 'code' says sh.600016" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="forecaster.data.daily.loading"):
        loaded = load_data(DataConfig(path=str(tmp_path), trust_code_column=True))
    assert list(loaded.frames) == ["sh.600016", "sz.300002"]
    assert "the file name says sz.300001 but column 'code' says sh.600016" in caplog.text
    trusted = "1 file(s) named for another stock, code column trusted: sz.300001.csv is sh.600016"
    assert trusted in loaded.summary
    with pytest.raises(DataError, match="the file name says sz.300001"):
        load_data(DataConfig(path=str(tmp_path)))


def test_trust_code_column_is_a_config_field_and_a_cli_option():
    import click

    from forecaster.app.experiment import build_section, option_fields
    from forecaster.app.options import experiment_options

    helps = {name: text for name, _, _, text in option_fields("data")}
    assert "code column" in helps["trust_code_column"]
    assert build_section("data", {"trust_code_column": True}).trust_code_column is True
    command = experiment_options(sections=("data",))(click.command()(lambda **kw: None))
    assert any("--trust-code-column" in p.opts for p in command.params)


def test_a_file_with_several_codes_is_an_error_even_when_trusted(tmp_path):
    lines = bars_text("sz.300001").splitlines()
    lines[7] = lines[7].replace("sz.300001", "sz.300002")
    path = write(tmp_path, "prices.csv", "\n".join(lines) + "\n")
    message = (r"prices\.csv: line 8, column 'code': code sz\.300002 but line 2 says sz\.300001; "
               r"expected one stock per file \(1 of 30 rows")
    for trust in (False, True):
        with pytest.raises(DataError, match=message):
            load_csv(path, trust_code_column=trust)


# ----------------------------------------------------------------------------------- skipped entries


def test_entries_that_are_not_data_are_counted_and_named(tmp_path, caplog):
    from forecaster.app.experiment import DataConfig
    from forecaster.app.pipeline import load_data

    market(tmp_path, n=3)
    for name in ("README.md", "notes.txt", "book.xlsx"):
        (tmp_path / name).write_text("not prices")
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "sz.300009.csv").write_text(bars_text("sz.300009"))
    (tmp_path / ".hidden").write_text("x")
    load_dir(tmp_path, cache=True)  # makes .forecaster_cache
    with caplog.at_level(logging.WARNING, logger="forecaster.data.daily.loading"):
        loaded = load_dir(tmp_path, cache=True)
    assert loaded.from_cache and len(loaded.frames) == 3
    assert [(s.name, s.reason) for s in loaded.skipped] == [
        ("README.md", "not a data file (matches none of '*.csv', '*.csv.gz')"),
        ("book.xlsx", "not a data file (matches none of '*.csv', '*.csv.gz')"),
        ("notes.txt", "not a data file (matches none of '*.csv', '*.csv.gz')"),
        ("raw", "sub-folder")]
    named = "skipped 4 entries that are not data files: README.md, book.xlsx, notes.txt, raw/"
    assert named in caplog.text
    summary = load_data(DataConfig(path=str(tmp_path))).summary
    assert summary.startswith(f"{tmp_path}: 3 stocks, {3 * N} rows") and summary.endswith(named)
    assert ".forecaster_cache" not in summary and ".hidden" not in summary
    # A folder with no data files names what it holds instead.
    (tmp_path / "empty_market" / "raw").mkdir(parents=True)
    with pytest.raises(DataError, match=r"no files match '\*\.csv', '\*\.csv\.gz' \(it holds raw/\)"):
        load_dir(tmp_path / "empty_market")


# ----------------------------------------------------------------------------------- cache


def test_cache_keys_on_gzip_files_and_notices_a_change(tmp_path, caplog):
    codes = market(tmp_path, n=4, gz_every=1)  # all .csv.gz
    built = load_dir(tmp_path, cache=True)
    cached = load_dir(tmp_path, cache=True)
    assert not built.from_cache and cached.from_cache
    assert_loads_equal(cached, built)
    # One compressed file rewritten with a day fewer: the cache is rebuilt from it.
    gz = tmp_path / f"{codes[1]}.csv.gz"
    text = read(gz).splitlines(keepends=True)
    gz.write_bytes(gzip.compress("".join(text[:-1]).encode()))
    os.utime(gz, ns=(gz.stat().st_atime_ns, gz.stat().st_mtime_ns + 10**9))
    with caplog.at_level(logging.INFO, logger="forecaster.data.daily.cache"):
        again = load_dir(tmp_path, cache=True)
    assert "out of date" in caplog.text and not again.from_cache
    assert len(again.frames[codes[1]]) == N - 1
    assert load_dir(tmp_path, cache=True).from_cache
    # An added .gz file too; the option trust_code_column is part of the key.
    write(tmp_path, "sz.300099.csv.gz", bars_text("sz.300099"))
    assert "sz.300099" in load_dir(tmp_path, cache=True).frames
    assert not load_dir(tmp_path, cache=True, trust_code_column=True).from_cache


def test_a_read_only_folder_keeps_its_cache_elsewhere(tmp_path, monkeypatch):
    from forecaster.data import write_synthetic_panel

    folder = tmp_path / "data"
    write_synthetic_panel(folder, n_stocks=3, n_days=60, seed=1)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    folder.chmod(0o555)  # a shared data folder: read-only by its mode (root could write it)
    try:
        first, again = load_dir(folder, cache=True), load_dir(folder, cache=True)
    finally:
        folder.chmod(0o755)
    assert not first.from_cache and again.from_cache
    assert not (folder / ".forecaster_cache").exists()
    assert list((tmp_path / "home" / "forecaster").glob("data-*/.forecaster_cache/panel.parquet"))
