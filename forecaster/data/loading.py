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
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

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
    frame, report = read_one(Path(path), on_bad, code, trust_code_column)
    if report.bar_minutes:  # a daily file of the stock beside it gives the first bars' preclose
        frame = pair_beside(frame, report, Path(path), scan_dir(Path(path).parent)[0],
                            lambda other: read_one(other, "raise", None, trust_code_column),
                            (DataError, OSError))
    column = {report.path: FORMATS_BY_NAME[report.format].source("adjust_flag")}
    report.flags.extend(adjust_mismatches({report.path: report.adjust_flags}, column)[1].values())
    if strict:
        raise_flagged(report.path, report.flags)
    log_report(report)
    return frame, report


def raise_flagged(path: str, flags: list[Flag]) -> None:
    """``strict``: the first flag as a :class:`DataError`."""
    if flags:
        flag = flags[0]
        raise DataError(f"{path}: {flag.describe()} ({flag.rows} such row(s): {KINDS[flag.kind]}; strict "
                        "loading stops here, without strict they are kept and counted in the load summary)")


def log_report(report: LoadReport, flags: bool = True) -> None:
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


def read_one(path: Path, on_bad: str, code: str | None, trust_code_column: bool
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


def named_list(items: list[str], limit: int) -> str:
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def patterns_of(pattern: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
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
    patterns = patterns_of(pattern)
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
