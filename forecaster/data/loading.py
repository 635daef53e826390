"""Read exported daily-bar CSVs into the canonical frame, counting everything it changes.

Nothing is dropped or filled silently: problems raise :class:`DataError` naming the file, the
line (1-based, the header is line 1) and the column, or with ``on_bad="drop"`` the offending
rows are dropped and counted in the :class:`LoadReport`. Files may be gzip-compressed
(``.csv.gz``, as exporters ship them). A file named for a stock (``sz.300001.csv``) must hold
that stock's rows: a code column that says otherwise is an error unless the caller trusts the
column (``trust_code_column``). :func:`load_dir` reads a folder, in parallel processes when it
holds many files, and names what in the folder it did not read (:attr:`FolderLoad.skipped`).
Rows that parse but cannot be (impossible bars, jumps beyond the daily limit, an adjustflag
unlike the other files') are kept and counted, and stocks whose files lack columns the others
have are named (:mod:`forecaster.data.quality`); with ``strict`` the first implausible row is
an error.
"""

from __future__ import annotations

import gzip
import io
import logging
import os
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from joblib import Parallel, delayed

from forecaster.checks import check_choice
from forecaster.data.formats import (
    FORMATS_BY_NAME,
    PRICE_COLUMNS,
    REQUIRED,
    CsvFormat,
    canonical_code,
    code_in_name,
    data_stem,
    detect_format,
)
from forecaster.data.intraday import session_minutes
from forecaster.data.minute_bars import (
    BarError,
    auction_stamps,
    bar_clauses,
    bar_frame,
    folder_bar_clauses,
    pair_beside,
)
from forecaster.data.minute_formats import prepare_text
from forecaster.data.quality import (
    KINDS,
    Flag,
    adjust_counts,
    adjust_mismatches,
    as_flags,
    bar_flags,
    lacking_columns,
    quality_clauses,
)

log = logging.getLogger(__name__)

ON_BAD = ("raise", "drop")
# What load_dir reads by default: plain and gzip-compressed CSVs.
DEFAULT_PATTERN = ("*.csv", "*.csv.gz")
# Folders with fewer files load in this process (starting workers costs more than it saves).
PARALLEL_MIN_FILES = 64
# The version of the checks of forecaster.data.quality (and of forecaster.data.minute_bars) a
# cache's reports hold (a cache built by older checks is rebuilt).
QUALITY_CHECKS = 2
# How a command-line user and an experiment file say on_bad="drop".
DROP_HINT = "pass on_bad='drop' (--on-bad drop; [data] on_bad = \"drop\")"
_GZIP_MAGIC = b"\x1f\x8b"


class DataError(ValueError):
    """Bad input data; the message names the file, line and column."""


@dataclass
class LoadReport:
    """What :func:`load_csv` read, dropped and flagged.

    Attributes:
        compression: ``"gzip"`` for a compressed file, else ``""``.
        name_code: where the file's name says another stock than its code column and the
            column was trusted (``trust_code_column``): the code the name says; else ``""``.
        bar_minutes, trading_days: minute bars (0 for daily files): the bars' length and the
            days they cover.
        flags: implausible rows, kept as they are (:class:`~forecaster.data.quality.Flag`: the
            first of each kind and how many): impossible bars, jumps beyond the daily limit, and
            (for :func:`load_csv`) rows whose adjustflag differs from the file's others.
        adjust_flags: ``{adjustflag: [rows, line, date]}`` of the file's ``adjustflag`` column
            (the first row of each value), compared across a folder by :func:`load_dir`.
        adjustment: what a TDX title says of the prices (``"unadjusted"``...), else ``""``.

    Minute files (:mod:`forecaster.data.minute_bars`, :mod:`forecaster.data.minute_returns`):
    ``stamped`` (``"close"``, or ``"start"``: re-stamped), ``auction_bars`` merged,
    ``missing_bars`` on ``short_days``, ``zero_price_bars`` and ``suspended_bars``,
    ``volume_unit`` and ``volume_ratio`` (``amount / (volume x close)``), ``gaps`` (days of the
    overnight gaps flagged as likely corporate actions) or ``gap_check`` (why not checked), and
    the daily file whose ``preclose`` the first bars return from (``daily_file``,
    ``preclose_days``, ``exrights_days``; ``daily_note``: why one beside the file was not used).
    """

    path: str
    format: str
    encoding: str
    rows_read: int = 0
    rows_kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    reordered_rows: int = 0
    suspended_days: int = 0
    st_days: int = 0
    missing_values: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    compression: str = ""
    name_code: str = ""
    bar_minutes: int = 0
    trading_days: int = 0
    flags: list[Flag] = field(default_factory=list)
    adjust_flags: dict[str, list] = field(default_factory=dict)
    adjustment: str = ""
    stamped: str = ""
    auction_bars: int = 0
    missing_bars: int = 0
    short_days: int = 0
    zero_price_bars: int = 0
    suspended_bars: int = 0
    volume_unit: str = ""
    volume_ratio: float = 0.0
    gaps: list[str] = field(default_factory=list)
    gap_check: str = ""
    daily_file: str = ""
    preclose_days: int = 0
    exrights_days: int = 0
    daily_note: str = ""

    def __post_init__(self):
        self.flags = as_flags(self.flags)  # a cache stores them as dicts

    def summary(self) -> str:
        how = f"{self.encoding}, {self.compression}" if self.compression else self.encoding
        parts = [f"{self.path}: {self.format} ({how}{', ' + self.adjustment if self.adjustment else ''}), "
                 f"{self.rows_kept}/{self.rows_read} rows kept"]
        if self.bar_minutes:
            parts.extend(bar_clauses(self))
        if self.dropped:
            parts.append("dropped " + ", ".join(f"{n} {why}" for why, n in self.dropped.items()))
        if self.reordered_rows:
            parts.append(f"{self.reordered_rows} rows out of date order were sorted")
        if not self.bar_minutes:
            parts.append(f"{self.suspended_days} suspended days, {self.st_days} ST days")
        if self.missing_values:
            parts.append("empty cells " + ", ".join(f"{c}={n}" for c, n in self.missing_values.items()))
        parts.extend(f"{f.rows} row(s) with {KINDS[f.kind]}, kept: first {f.describe()}" for f in self.flags)
        parts.extend(self.warnings)
        return "; ".join(parts)


def _read_text(path: Path) -> tuple[str, str, str]:
    """``(text, encoding, compression)``: gzip data (told by its magic bytes) is decompressed."""
    raw = path.read_bytes()
    compression = ""
    if raw[:2] == _GZIP_MAGIC:
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{path}: damaged or truncated gzip data ({exc}); expected a complete "
                            "gzip-compressed CSV") from None
        compression = "gzip"
    elif raw and path.name.lower().endswith(".gz"):
        raise DataError(f"{path}: named .gz but not gzip data (it starts with {raw[:12]!r}); expected "
                        "a gzip-compressed CSV")
    for encoding in ("utf-8-sig", "gbk"):
        try:
            return raw.decode(encoding), encoding, compression
        except UnicodeDecodeError:
            continue
    raise DataError(f"{path}: cannot decode as UTF-8 (with or without BOM) or GBK")


class _Cleaner:
    """Applies the ``on_bad`` policy: raise at the first problem, or drop and count."""

    def __init__(self, path: Path, on_bad: str, report: LoadReport):
        self.path, self.on_bad, self.report = path, on_bad, report

    def bad_rows(self, frame: pd.DataFrame, bad: pd.Series, reason: str, column: str, expected: str,
                 raw: pd.Series | None = None, name: str = "") -> pd.DataFrame:
        """``name``: the column(s) as the file names them, where not ``repr(column)``."""
        if not bad.any():
            return frame
        if self.on_bad == "raise":
            first = bad.idxmax()
            value = (raw if raw is not None else frame[column]).loc[first]
            shown = repr(value) if isinstance(value, str) else f"{float(value):g}"
            raise DataError(
                f"{self.path}: line {frame.loc[first, '_line']}, column {name or repr(column)}: expected "
                f"{expected}, got {shown} ({int(bad.sum())} such rows; {DROP_HINT} "
                "to drop and count them)"
            )
        self.report.dropped[reason] = self.report.dropped.get(reason, 0) + int(bad.sum())
        return frame.loc[~bad]


def load_csv(path: str | Path, on_bad: str = "raise", code: str | None = None,
             trust_code_column: bool = False, strict: bool = False) -> tuple[pd.DataFrame, LoadReport]:
    """Load one stock's daily bars from a baostock, tushare, akshare or Yahoo-style CSV.

    Args:
        path: the CSV file (UTF-8 with or without BOM, or GBK), plain or gzip-compressed
            (``.csv.gz``).
        on_bad: ``"raise"`` (default): unparseable rows, missing or non-positive prices and
            duplicate dates raise :class:`DataError`; ``"drop"``: such rows are dropped and
            counted in the report.
        code: stock code to record when the file has no code column (default: the code the
            file's name says, e.g. ``sz.300001`` for ``sz300001.csv``, else its name without
            ``.csv`` / ``.csv.gz``).
        trust_code_column: a file named for one stock (``sz.300001.csv``, ``sz300001.csv``,
            ``300001.SZ.csv``, ``300001.csv``) whose code column says another is an error
            naming both codes (default); with ``True`` the column's code is used and a warning
            names both. Rows with different codes are an error either way.
        strict: implausible rows (:mod:`forecaster.data.quality`: impossible bars, prices
            beyond the daily limit that no preclose explains, rows whose adjustflag differs
            from the file's others) raise :class:`DataError` naming the first; by default they
            are kept and counted (:attr:`LoadReport.flags`, the summary and the log).

    Returns:
        ``(frame, report)``: the canonical frame (``DatetimeIndex`` named ``date``, sorted,
        lower snake-case columns, a boolean ``suspended`` column) and a :class:`LoadReport`.
    """
    check_choice("on_bad", on_bad, ON_BAD)
    frame, report = _load(Path(path), on_bad, code, trust_code_column)
    if report.bar_minutes:  # a daily file of the stock beside it gives the first bars' preclose
        frame = pair_beside(frame, report, Path(path), scan_dir(Path(path).parent)[0],
                            lambda other: _load(other, "raise", None, trust_code_column),
                            (DataError, OSError))
    column = {report.path: FORMATS_BY_NAME[report.format].source("adjust_flag")}
    report.flags.extend(adjust_mismatches({report.path: report.adjust_flags}, column)[1].values())
    if strict:
        _raise_flagged(report.path, report.flags)
    _log_report(report)
    return frame, report


def _raise_flagged(path: str, flags: list[Flag]) -> None:
    """``strict``: the first flag as a :class:`DataError`."""
    if flags:
        flag = flags[0]
        raise DataError(f"{path}: {flag.describe()} ({flag.rows} such row(s): {KINDS[flag.kind]}; strict "
                        "loading stops here, without strict they are kept and counted in the load summary)")


def _log_report(report: LoadReport, flags: bool = True) -> None:
    """Say what a load dropped or was warned about (the loaders' one place that logs it);
    ``flags``: its implausible rows too (a strict load raises on them instead)."""
    if report.dropped:
        log.warning("%s", report.summary())
    else:
        for warning in report.warnings:
            log.warning("%s", warning)
        for flag in report.flags if flags else ():
            log.warning("%s: %d row(s) with %s, kept: first %s", report.path, flag.rows, KINDS[flag.kind],
                        flag.describe())


def _load(path: Path, on_bad: str, code: str | None, trust_code_column: bool
          ) -> tuple[pd.DataFrame, LoadReport]:
    """:func:`load_csv` without logging (it runs in worker processes too)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    text, encoding, compression = _read_text(path)
    if not text.strip():
        raise DataError(f"{path}: the file is empty; expected a header line and daily rows")
    prepared = prepare_text(text)  # a TDX export: its title line and footer set apart
    text = prepared.text
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.ParserError as exc:
        raise DataError(f"{path}: not a readable CSV ({exc})") from exc
    raw.columns = [str(c).strip() for c in raw.columns]
    # A pandas-written index column ("" or "Unnamed: 0") carries no data.
    raw = raw.loc[:, [c for c in raw.columns if c and not c.startswith("Unnamed:")]]
    try:
        fmt = detect_format(list(raw.columns), str(path), raw.iloc[0].to_dict() if len(raw) else None,
                            tdx=prepared.tdx)
    except ValueError as exc:
        raise DataError(str(exc)) from None
    report = LoadReport(path=str(path), format=fmt.name, encoding=encoding, rows_read=len(raw),
                        compression=compression, adjustment=prepared.adjustment)
    missing = [src for src, dst in fmt.columns.items() if dst in REQUIRED and src not in raw.columns]
    if missing:
        raise DataError(
            f"{path}: {fmt.name} export without the required column(s) {missing}; "
            f"expected {[s for s, d in fmt.columns.items() if d in REQUIRED]}"
        )
    if raw.empty:
        raise DataError(f"{path}: has a header but no data rows")
    file_code = _file_code(raw, fmt, path, trust_code_column, report, prepared.header_line)
    if file_code is None:
        named = code_in_name(path.name)
        file_code = code or (canonical_code(named) if named else data_stem(path.name))
    frame, lines = _canonicalise(raw, fmt, path, on_bad, report, prepared.header_line, file_code)
    if len(frame) < 2:
        raise DataError(f"{path}: {len(frame)} usable row(s); at least 2 trading days are needed")
    frame["code"] = file_code
    report.rows_kept = len(frame)
    # Implausible rows are kept as they are and counted (strict loads raise on them).
    report.flags = bar_flags(frame, lines, str(frame["code"].iloc[0]), fmt.source, daily=not fmt.intraday)
    report.adjust_flags = adjust_counts(frame, lines)
    return frame, report


def _codes_agree(named: str, column: str) -> bool:
    """Whether a file name's code and a code column's (both canonical) are one stock; a bare
    number in the name (no exchange) agrees with the column's code of that number."""
    return named == column or (named.isdigit() and column.rpartition(".")[2] == named)


def _file_code(raw: pd.DataFrame, fmt: CsvFormat, path: Path, trust: bool, report: LoadReport,
               header_line: int = 1) -> str | None:
    """The one stock code of the file's code column (canonical), checked against the other
    rows and against the file's name; ``None`` when the file has no code column."""
    column = next((s for s, d in fmt.columns.items() if d == "code" and s in raw.columns), None)
    if column is None:
        return None
    text = raw[column].str.strip()
    codes = text.map({t: canonical_code(t) for t in text.unique()})
    first = codes.iloc[0]
    other = (codes != first).to_numpy()
    if other.any():
        i = int(other.argmax())
        found = sorted(set(codes))
        listed = ", ".join(c or "(empty)" for c in found[:10]) + (", ..." if len(found) > 10 else "")
        raise DataError(
            f"{path}: line {i + header_line + 1}, column {column!r}: code {codes.iloc[i] or '(empty)'} "
            f"but line {header_line + 1} says {first or '(empty)'}; expected one stock per file "
            f"({int(other.sum())} of {len(codes)} rows differ from line {header_line + 1}; {len(found)} "
            f"codes in the file: {listed})"
        )
    named = code_in_name(path.name)
    if named is not None and not _codes_agree(named, first):
        if not trust:
            raise DataError(
                f"{path}: line 2, column {column!r}: the rows say {first or '(empty)'} (all "
                f"{len(codes)} rows) but the file name says {named}; expected the stock the file "
                "is named for (rename the file if the column is right, or pass "
                "trust_code_column=True / --trust-code-column / [data] trust_code_column = true "
                "to use the column)"
            )
        report.name_code = named
        report.warnings.append(
            f"{path}: the file name says {named} but column {column!r} says {first} (line 2 "
            f"on, all {len(codes)} rows); loaded as {first} (trust_code_column)"
        )
    return first


def _canonicalise(raw: pd.DataFrame, fmt: CsvFormat, path: Path, on_bad: str, report: LoadReport,
                  header_line: int = 1, code: str = "") -> tuple[pd.DataFrame, np.ndarray]:
    """``(frame, lines)``: the canonical frame, sorted, and each of its rows' line in the file
    (``header_line``: the header's; ``code``: the stock's, for the minute files' gap check)."""
    clean = _Cleaner(path, on_bad, report)
    src = raw.rename(columns=fmt.columns)
    keep = [c for c in dict.fromkeys(fmt.columns.values()) if c in src.columns]
    frame = src[keep].copy()
    frame["_line"] = np.arange(len(frame)) + header_line + 1

    key = fmt.key  # "date", or "time" for minute bars
    text_dates = frame[key].str.strip()
    if fmt.time_column:  # a date column and a time-of-day column (TDX's 0935: HHMM)
        clock = frame.pop("_clock").str.strip()
        clock = clock.where(~clock.str.fullmatch(r"\d{3}"), clock.str.zfill(4))
        text_dates = text_dates + " " + clock
    sample = text_dates.iloc[0] if len(text_dates) else ""
    parsed = next((f for f in fmt.formats if not pd.isna(pd.to_datetime(sample, format=f, errors="coerce"))),
                  None)  # the first row decides among the format's alternatives
    pattern = parsed or fmt.formats[0]
    dates = pd.to_datetime(text_dates, format=pattern, errors="coerce")
    column = (f"{fmt.date_column!r} and {fmt.time_column!r}" if fmt.time_column
              else repr(fmt.date_column) if fmt.intraday else "")
    frame = clean.bad_rows(frame, dates.isna(), "unparseable dates", key,
                           f"a {'timestamp' if fmt.intraday else 'date'} like "
                           f"{pattern if parsed else ' or '.join(fmt.formats)}",
                           raw=text_dates, name=column)
    frame[key] = dates.loc[frame.index]
    if fmt.intraday:
        stamps = pd.DatetimeIndex(frame[key])
        outside = (session_minutes(stamps) < 0) & ~auction_stamps(stamps)
        frame = clean.bad_rows(frame, pd.Series(outside, index=frame.index), "bars outside the session",
                               key, "a bar closing within 09:30-11:30 or 13:00-15:00 (or an opening-auction "
                               "bar from 09:15)", raw=text_dates, name=column)

    numeric = [c for c in frame.columns if c not in (key, "code", "_line")]
    for col in numeric:
        text = frame[col].str.strip()
        empty = text.isin(["", "nan", "NaN", "None", "null", "--"])
        values = pd.to_numeric(text.where(~empty), errors="coerce")
        unparseable = values.isna() & ~empty
        frame = clean.bad_rows(frame, unparseable, "unparseable numbers", col, "a number", raw=text)
        values, empty = values.loc[frame.index], empty.loc[frame.index]
        # a minute file's volume unit is checked against its amount (minute_bars)
        scale = 1.0 if fmt.intraday and col == "volume" else fmt.scale.get(col, 1.0)
        frame[col] = values.astype(float) * scale
        if col in REQUIRED:
            frame = clean.bad_rows(frame, empty, "missing prices", col, "a price", raw=text)
        elif empty.any():
            report.missing_values[col] = int(empty.sum())
    for col in PRICE_COLUMNS:
        if col in frame.columns:
            bad = frame[col] <= 0 if col in REQUIRED else (frame[col] <= 0) & frame[col].notna()
            # a minute bar of all-zero prices is how baostock writes a suspended stock's bars (minute_bars)
            zero_bar = (frame[list(REQUIRED)] == 0).all(axis=1) if fmt.intraday else False
            frame = clean.bad_rows(frame, bad & ~zero_bar, "non-positive prices", col, "a positive price"
                                   + (" (or all-zero prices: a suspended bar)" if fmt.intraday else ""))

    dup = frame[key].duplicated(keep="first")
    if dup.any() and on_bad == "raise":
        first = dup.idxmax()
        day = frame.loc[first, key]
        lines = frame.loc[frame[key] == day, "_line"].tolist()
        what = f"time {day}" if fmt.intraday else f"date {day.date()}"
        raise DataError(
            f"{path}: duplicate {what} on lines {lines}; expected one row per "
            f"{'bar' if fmt.intraday else 'trading day'} ({int(dup.sum())} duplicated rows; {DROP_HINT} "
            "to keep the first of each)"
        )
    frame = clean.bad_rows(frame, dup, f"duplicate {key}s", key, f"a unique {key}")

    order = np.argsort(frame[key].to_numpy(), kind="stable")
    report.reordered_rows = int((order != np.arange(len(order))).sum())
    frame = frame.iloc[order].set_index(key)
    lines = frame.pop("_line").to_numpy()
    # (the code column is set to the file's one checked code by _load)
    if fmt.intraday:
        if len(frame):
            frame, lines = _bars(frame, lines, fmt, path, report, code)
        return frame, lines

    suspended = np.zeros(len(frame), dtype=bool)
    if "trade_status" in frame.columns:
        suspended |= (frame["trade_status"] == 0).to_numpy()
    if "volume" in frame.columns:
        suspended |= (frame["volume"] == 0).to_numpy()
    frame["suspended"] = suspended
    report.suspended_days = int(suspended.sum())
    if "is_st" in frame.columns:
        report.st_days = int((frame["is_st"] == 1).sum())
    return frame, lines


def _bars(frame: pd.DataFrame, lines: np.ndarray, fmt: CsvFormat, path: Path, report: LoadReport,
          code: str) -> tuple[pd.DataFrame, np.ndarray]:
    """A minute file's parsed rows as a bar frame, its facts in the report
    (:func:`forecaster.data.minute_bars.bar_frame`)."""
    try:
        return bar_frame(frame, lines, fmt, report, code)
    except BarError as exc:
        raise DataError(f"{path}: {exc}") from None


# ------------------------------------------------------------------ folders


@dataclass(frozen=True)
class Skipped:
    """An entry of a data folder that :func:`load_dir` did not read.

    Attributes:
        name: its name in the folder (``README.md``, ``raw``).
        reason: why: ``"sub-folder"`` or ``"not a data file (matches none of ...)"``.
    """

    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name}/" if self.reason == "sub-folder" else self.name


class FolderLoad(tuple):
    """What :func:`load_dir` returns: the pair ``(frames, reports)`` (so ``frames, reports =
    load_dir(...)`` works), with what else the load found as attributes.

    Attributes:
        frames: ``{code: canonical frame}`` sorted by code.
        reports: ``{code: LoadReport}`` sorted by code.
        folder: the folder, as given.
        skipped: the folder's entries that were not read (sub-folders, files matching none of
            the patterns), sorted by name; hidden entries (``.forecaster_cache``) are left out.
        from_cache: the frames came from ``FOLDER/.forecaster_cache``.
        workers: processes that read the files (1: this process; 0: read from the cache).
        lacking: ``{code: canonical columns}`` of the columns features need that other files
            have and the stock's file lacks
            (:func:`~forecaster.data.quality.lacking_columns`).
        usual_adjust: the adjustflag most files hold (``""`` without the column);
            adjust: ``{code: Flag}`` of the files holding another
            (:func:`~forecaster.data.quality.adjust_mismatches`).
    """

    def __new__(cls, frames: dict, reports: dict, *, folder: str | Path = "",
                skipped: list[Skipped] | tuple[Skipped, ...] = (), from_cache: bool = False,
                workers: int = 1):
        self = super().__new__(cls, (frames, reports))
        self.frames, self.reports, self.folder = frames, reports, str(folder)
        self.skipped, self.from_cache, self.workers = list(skipped), from_cache, workers
        self.lacking = lacking_columns(frames)
        self.usual_adjust, self.adjust = adjust_mismatches(
            {code: r.adjust_flags for code, r in reports.items()},
            {code: FORMATS_BY_NAME[r.format].source("adjust_flag") for code, r in reports.items()})
        return self

    def flagged(self) -> list[tuple[str, Flag]]:
        """``[(path, flag)]``: every file's implausible rows (:attr:`LoadReport.flags`) and
        the adjustflags unlike the folder's, by file."""
        out = []
        for code, report in self.reports.items():
            out.extend((report.path, f) for f in report.flags)
            if code in self.adjust:
                out.append((report.path, self.adjust[code]))
        return out

    def quality(self, max_named: int = 20) -> list[str]:
        """The load summary's clauses on what the files lack or hold that cannot be
        (:func:`~forecaster.data.quality.quality_clauses`)."""
        return quality_clauses(self.reports, self.lacking, self.adjust, self.usual_adjust, max_named)

    def __getnewargs_ex__(self):
        return (self.frames, self.reports), {"folder": self.folder, "skipped": self.skipped,
                                             "from_cache": self.from_cache, "workers": self.workers}

    def summary(self, max_named: int = 20) -> str:
        """One line: stocks, rows, suspended days, dropped rows, files whose code column was
        trusted over their name, the entries not read (named, the first ``max_named``), and
        :meth:`quality`'s clauses (columns lacking, implausible rows)."""
        reports = list(self.reports.values())
        dropped = sum(sum(r.dropped.values()) for r in reports)
        text = (f"{self.folder}: {len(self.frames)} stocks, {sum(r.rows_kept for r in reports)} rows, "
                f"{sum(r.suspended_days for r in reports)} suspended days"
                + (f", {dropped} bad rows dropped (on_bad='drop')" if dropped else "")
                + (" (from the cache)" if self.from_cache else ""))
        renamed = [r for r in reports if r.name_code]
        if renamed:
            text += (f"; {len(renamed)} file(s) named for another stock, code column trusted: "
                     + _named([f"{Path(r.path).name} is {c}" for c, r in self.reports.items()
                               if r.name_code], max_named))
        if self.skipped:
            text += (f"; skipped {len(self.skipped)} entr{'y' if len(self.skipped) == 1 else 'ies'} "
                     f"that are not data files: {_named([str(s) for s in self.skipped], max_named)}")
        return "; ".join([text, *folder_bar_clauses(reports, max_named), *self.quality(max_named)])


def _named(items: list[str], limit: int) -> str:
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def _patterns(pattern: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    patterns = (pattern,) if isinstance(pattern, str) else tuple(pattern)
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise ValueError(f"pattern must be a glob pattern or a sequence of them, got {pattern!r}")
    return patterns


def scan_dir(folder: str | Path, pattern: str | tuple[str, ...] = DEFAULT_PATTERN
             ) -> tuple[list[Path], list[Skipped]]:
    """``(files, skipped)``: the files of ``folder`` that match any of the glob ``pattern``\\ s
    (sorted), and its other entries (sub-folders, other files; hidden ones left out), which
    :func:`load_dir` names in its summary."""
    folder = Path(folder)
    patterns = _patterns(pattern)
    matched = {p for pat in patterns for p in folder.glob(pat)}
    files = sorted(p for p in matched if p.is_file())
    used = {p.relative_to(folder).parts[0] for p in files}
    expected = ", ".join(repr(p) for p in patterns)
    skipped = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name in used or entry.name.startswith("."):
            continue
        reason = "sub-folder" if entry.is_dir() else f"not a data file (matches none of {expected})"
        skipped.append(Skipped(entry.name, reason))
    return files, skipped


def load_dir(path: str | Path, pattern: str | tuple[str, ...] = DEFAULT_PATTERN, on_bad: str = "raise",
             cache: bool = False, trust_code_column: bool = False, workers: int | None = None,
             progress: bool | None = None, parallel_min_files: int = PARALLEL_MIN_FILES,
             strict: bool = False) -> FolderLoad:
    """Load every CSV (plain or ``.csv.gz``) in a folder as a panel.

    Args:
        path: the folder.
        pattern: a glob pattern or several (default ``("*.csv", "*.csv.gz")``); the folder's
            other entries are not read but counted and named (:attr:`FolderLoad.skipped`, the
            summary and the log).
        on_bad: as for :func:`load_csv`.
        cache: keep a columnar copy in ``FOLDER/.forecaster_cache`` and use it while the
            folder's files are unchanged (:mod:`forecaster.data.cache`).
        trust_code_column: as for :func:`load_csv`: use the code column of a file whose name
            says another stock (with a warning) instead of stopping with an error.
        workers: processes reading the files; ``None``: one per available core; 1: this
            process only.
        progress: a progress bar on stderr; ``None``: when stderr is a terminal.
        parallel_min_files: folders with fewer files are read in this process.
        strict: implausible rows (impossible bars, prices beyond the daily limit that no
            preclose explains, a file whose adjustflag differs from the other files') raise
            :class:`DataError` naming the first file, line, date and what was expected; by
            default they are kept, counted and named in the summary (:meth:`FolderLoad.quality`).
            Stocks whose files lack columns the others have are named either way.

    Returns:
        a :class:`FolderLoad`: ``(frames, reports)``, both keyed by stock code (e.g.
        ``"sh.600000"``) in sorted order, with ``.skipped``, ``.summary()`` and how it was
        read. Parallel and serial loads give equal frames and reports, and an error in any
        file is the same :class:`DataError` naming it.
    """
    from forecaster.data.cache import cache_location, manifest_of, read_cache, write_cache

    check_choice("on_bad", on_bad, ON_BAD)
    folder = Path(path)
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.is_file() else "no such folder"
        raise FileNotFoundError(f"{folder}: {what}")
    patterns = _patterns(pattern)
    files, skipped = scan_dir(folder, patterns)
    if skipped:
        log.warning("%s: skipped %d entr%s that are not data files: %s", folder, len(skipped),
                    "y" if len(skipped) == 1 else "ies", _named([str(s) for s in skipped], 20))
    if not files:
        raise DataError(f"{folder}: no files match {', '.join(repr(p) for p in patterns)}"
                        + (f" (it holds {_named([str(s) for s in skipped], 20)})" if skipped else ""))
    options = {"pattern": list(patterns), "on_bad": on_bad, "trust_code_column": trust_code_column,
               "checks": QUALITY_CHECKS}
    manifest = manifest_of(files, options, folder) if cache else None
    if cache:
        hit = read_cache(cache_location(folder), manifest, LoadReport)
        if hit is not None:
            for report in hit[1].values():
                _log_report(report, flags=not strict)
            return _checked(FolderLoad(*hit, folder=path, skipped=skipped, from_cache=True, workers=0),
                            strict)
    results, used = _load_files(folder, files, on_bad, trust_code_column, workers, progress,
                                parallel_min_files)
    frames, reports = {}, {}
    for file, (frame, report) in zip(files, results, strict=True):
        _log_report(report, flags=not strict)
        key = str(frame["code"].iloc[0])
        if key in frames:
            raise DataError(f"{file}: stock {key} also appears in {reports[key].path}; expected one "
                            "file per stock")
        frames[key], reports[key] = frame, report
    frames, reports = dict(sorted(frames.items())), dict(sorted(reports.items()))
    if cache:
        write_cache(cache_location(folder), manifest, frames, reports)
    return _checked(FolderLoad(frames, reports, folder=path, skipped=skipped, workers=used), strict)


def _checked(loaded: FolderLoad, strict: bool) -> FolderLoad:
    """``strict``: the first implausible row of the folder as a :class:`DataError`; else the
    folder-wide findings (columns lacking, adjustflags unlike the others') in the log (each
    file's own flags were logged with its report)."""
    if strict:
        for path, flag in loaded.flagged():
            _raise_flagged(path, [flag])
    for code, columns in loaded.lacking.items():
        source = FORMATS_BY_NAME[loaded.reports[code].format].source
        log.warning("%s: lacks column(s) %s that other files have; features that need them are missing "
                    "for %s", loaded.reports[code].path, ", ".join(sorted(map(source, columns))), code)
    for code, flag in loaded.adjust.items():
        log.warning("%s: %d row(s) with %s, kept: first %s", loaded.reports[code].path, flag.rows,
                    KINDS[flag.kind], flag.describe())
    return loaded


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _load_task(args: tuple[str, str, bool]) -> tuple[pd.DataFrame, LoadReport]:
    path, on_bad, trust = args
    return _load(Path(path), on_bad, None, trust)


def _load_files(folder: Path, files: list[Path], on_bad: str, trust: bool, workers: int | None,
                progress: bool | None, min_files: int) -> tuple[list, int]:
    """``([(frame, report)] in the order of files, processes used)``."""
    from tqdm import tqdm

    n = len(files)
    workers = available_cores() if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be >= 1 or None, got {workers}")
    workers = min(workers, n)
    parallel = workers > 1 and n >= min_files
    show = sys.stderr.isatty() if progress is None else bool(progress)
    tasks = [(str(f), on_bad, trust) for f in files]
    out = []
    with tqdm(total=n, desc=f"loading {folder.name or folder}", unit="file", file=sys.stderr,
              disable=not show, dynamic_ncols=True, leave=False) as bar:
        if not parallel:
            for task in tasks:
                out.append(_load_task(task))
                bar.update()
            return out, 1
        # Batches of files per task: few round trips, small enough to balance the load. joblib's
        # loky processes start clean (no fork of this process's threads) and, unlike
        # multiprocessing's spawn, need no ``if __name__ == "__main__"`` guard in the caller.
        batch = max(1, min(32, n // (workers * 4)))
        log.info("%s: reading %d files in %d processes", folder, n, workers)
        jobs = (delayed(_load_task)(task) for task in tasks)
        for result in Parallel(n_jobs=workers, batch_size=batch, return_as="generator")(jobs):
            out.append(result)  # in file order; the first error stops the rest, as serially
            bar.update()
    return out, workers
