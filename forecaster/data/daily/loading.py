"""Read one exported file (daily rows or minute bars) into the canonical frame, counting
everything it changes.

Nothing is dropped or filled silently: problems raise :class:`DataError` naming the file, the
line (1-based, the header is line 1) and the column, or with ``on_bad="drop"`` the offending
rows are dropped and counted in the :class:`LoadReport`. Files may be gzip-compressed
(``.csv.gz``, as exporters ship them). What a file is (its layout, daily or minute) is decided
by :func:`forecaster.data.sources.read_table`; every layout's rows become the same canonical
frame here, and a minute file's then a bar frame (:mod:`forecaster.data.minute.bars`). A file
named for a stock (``sz.300001.csv``) must hold that stock's rows: a code column that says
otherwise is an error unless the caller trusts the column (``trust_code_column``). Rows that
parse but cannot be (impossible bars, jumps beyond the daily limit, an adjustflag unlike the
other files') are kept and counted (:mod:`forecaster.data.daily.quality`); with ``strict`` the
first implausible row is an error. :func:`~forecaster.data.daily.folders.load_dir` reads a
folder.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.checks import check_choice
from forecaster.data.daily.calendar import impossible_days
from forecaster.data.daily.formats import PRICE_COLUMNS, REQUIRED, CsvFormat
from forecaster.data.daily.quality import KINDS, Flag, adjust_counts, adjust_mismatches, bar_flags
from forecaster.data.daily.report import LoadReport
from forecaster.data.market.delisting import name_status
from forecaster.data.market.exchange import canonical_code, float_market_value
from forecaster.data.minute.bars import BarError, auction_stamps, bar_frame, pair_beside
from forecaster.data.minute.session import session_minutes
from forecaster.data.sources import (
    FORMATS_BY_NAME,
    MAX_FILE_MB,
    DataError,
    code_in_name,
    data_stem,
    read_table,
    scan_dir,
)

log = logging.getLogger(__name__)

ON_BAD = ("raise", "drop")
# Usable rows a stock needs: a return needs two days.
MIN_ROWS = 2
# How a command-line user and an experiment file say on_bad="drop".
DROP_HINT = "pass on_bad='drop' (--on-bad drop; [data] on_bad = \"drop\")"


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
            text = str(value)[:40] + ("..." if len(str(value)) > 40 else "")  # a line, not kilobytes
            shown = repr(text) if isinstance(value, str) else f"{float(value):g}"
            raise DataError(
                f"{self.path}: line {frame.loc[first, '_line']}, column {name or repr(column)}: expected "
                f"{expected}, got {shown} ({int(bad.sum())} such rows; {DROP_HINT} "
                "to drop and count them)"
            )
        self.report.dropped[reason] = self.report.dropped.get(reason, 0) + int(bad.sum())
        return frame.loc[~bad]


def load_csv(path: str | Path, on_bad: str = "raise", code: str | None = None,
             trust_code_column: bool = False, strict: bool = False,
             max_file_mb: float = MAX_FILE_MB) -> tuple[pd.DataFrame, LoadReport]:
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
        strict: implausible rows (:mod:`forecaster.data.daily.quality`: impossible bars, prices
            beyond the daily limit that no preclose explains, rows whose adjustflag differs
            from the file's others) raise :class:`DataError` naming the first; by default they
            are kept and counted (:attr:`LoadReport.flags`, the summary and the log).
        max_file_mb: a file larger than this many MB (or whose gzip data decompress past it)
            is refused before it is read whole.

    Returns:
        ``(frame, report)``: the canonical frame (``DatetimeIndex`` named ``date``, sorted,
        lower snake-case columns, a boolean ``suspended`` column) and a :class:`LoadReport`.
    """
    check_choice("on_bad", on_bad, ON_BAD)
    frame, report = read_one(Path(path), on_bad, code, trust_code_column, max_file_mb=max_file_mb)
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


def read_one(path: Path, on_bad: str, code: str | None, trust_code_column: bool, short_ok: bool = False,
             max_file_mb: float = MAX_FILE_MB) -> tuple[pd.DataFrame, LoadReport]:
    """:func:`load_csv` without logging (it runs in worker processes too); ``short_ok``: a file
    of fewer than :data:`MIN_ROWS` usable rows (none at all included) is returned as it is, its
    rows unchecked, instead of an error (a folder's new listing: :func:`is_too_new`)."""
    table = read_table(path, max_file_mb)  # what the file is: its cells and layout
    raw, fmt = table.raw, table.fmt
    report = LoadReport(path=str(path), format=fmt.name, encoding=table.encoding, rows_read=len(raw),
                        compression=table.compression, adjustment=table.adjustment)
    missing = [src for src, dst in fmt.columns.items() if dst in REQUIRED and src not in raw.columns]
    if missing:
        raise DataError(
            f"{path}: {fmt.name} export without the required column(s) {missing}; "
            f"expected {[s for s, d in fmt.columns.items() if d in REQUIRED]}"
        )
    if raw.empty and not short_ok:
        raise DataError(f"{path}: has a header but no data rows")
    file_code = _file_code(raw, fmt, path, trust_code_column, report, table.header_line) if len(raw) else None
    if file_code is None:
        file_code = code or name_code(path)
    frame, lines = _canonicalise(raw, fmt, path, on_bad, report, table.header_line, file_code)
    frame["code"] = file_code
    report.rows_kept = len(frame)
    if is_too_new(report):
        if not short_ok:
            raise DataError(f"{path}: {len(frame)} usable row(s); at least {MIN_ROWS} trading days are "
                            "needed")
        return frame, report
    # Implausible rows are kept as they are and counted (strict loads raise on them).
    report.flags = bar_flags(frame, lines, str(frame["code"].iloc[0]), fmt.source, daily=not fmt.intraday)
    report.adjust_flags = adjust_counts(frame, lines)
    return frame, report


def name_code(path: Path) -> str:
    """The code a file's name says (canonical), else its name without ``.csv`` / ``.csv.gz``:
    the stock of a file without a code column."""
    named = code_in_name(path.name)
    return canonical_code(named) if named else data_stem(path.name)


def is_too_new(report: LoadReport) -> bool:
    """Whether a loaded file has too few usable rows to score its stock (a listing of
    yesterday): :func:`load_csv` refuses such a file, a folder's load leaves it out, counted
    and named (:attr:`~forecaster.data.daily.folders.FolderLoad.too_new`)."""
    return report.rows_kept < MIN_ROWS


def line_of(path: Path, day: pd.Timestamp) -> int | str:
    """The line of ``path`` holding the row of ``day`` (its first bar, for minute files), read
    again: for errors found after the file was loaded."""
    table = read_table(path)
    report = LoadReport(path=str(path), format=table.fmt.name, encoding=table.encoding)
    frame, lines = _canonicalise(table.raw, table.fmt, path, "drop", report, table.header_line)
    hit = np.flatnonzero(frame.index.normalize() == pd.Timestamp(day).normalize())
    return int(lines[hit[0]]) if len(hit) else "?"


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
    # no day that cannot exist (forecaster.data.daily.calendar): after today, or a weekend
    after_today, _ = impossible_days(pd.DatetimeIndex(frame[key]))
    shown = column or repr(fmt.date_column)
    frame = clean.bad_rows(frame, pd.Series(after_today, index=frame.index), "dates after today", key,
                           f"a date up to today ({pd.Timestamp.today().date()})", raw=text_dates, name=shown)
    _, weekend = impossible_days(pd.DatetimeIndex(frame[key]))
    frame = clean.bad_rows(frame, pd.Series(weekend, index=frame.index), "weekend dates", key,
                           "a trading day (Monday to Friday; the exchanges have not traded on weekends since "
                           "1995-05-01)",
                           raw=text_dates, name=shown)
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
        # a minute file's volume unit is checked against its amount (minute.bars)
        scale = 1.0 if fmt.intraday and col == "volume" else fmt.scale.get(col, 1.0)
        frame[col] = values.astype(float) * scale
        if col in REQUIRED:
            frame = clean.bad_rows(frame, empty, "missing prices", col, "a price", raw=text)
        elif empty.any():
            report.missing_values[col] = int(empty.sum())
    for col in PRICE_COLUMNS:
        if col in frame.columns:
            bad = frame[col] <= 0 if col in REQUIRED else (frame[col] <= 0) & frame[col].notna()
            # a minute bar of all-zero prices is how baostock writes a suspended stock's bars (minute.bars)
            zero_bar = (frame[list(REQUIRED)] == 0).all(axis=1) if fmt.intraday else False
            frame = clean.bad_rows(frame, bad & ~zero_bar, "non-positive prices", col, "a positive price"
                                   + (" (or all-zero prices: a suspended bar)" if fmt.intraday else ""))

    if not fmt.intraday:
        frame = _derived_columns(frame, raw, fmt)

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
    if "delisting" in frame.columns:
        report.delisting_days = int((frame["delisting"] == 1).sum())
    return frame, lines


def _derived_columns(frame: pd.DataFrame, raw: pd.DataFrame, fmt: CsvFormat) -> pd.DataFrame:
    """Columns a layout gives by other means: the status its names carry (``is_st``,
    ``delisting``: :func:`~forecaster.data.market.delisting.name_status`), and, where it has the
    float market value but no turnover (xbx), turnover in percent = 100 x volume x close / float
    market value (as baostock's ``turn``); where it has turnover but no float market value
    (baostock), the float market value at the close = close x float shares = close x volume x
    100 / turnover (days with no turnover: none), so size is a feature on both layouts."""
    if fmt.name_column and fmt.name_column in raw.columns:
        status = name_status(raw[fmt.name_column].loc[frame.index])
        frame["is_st"] = status["is_st"]
        frame["delisting"] = status["delisting"]
    if "turnover" not in frame.columns and {"float_mv", "volume", "close"} <= set(frame.columns):
        with np.errstate(invalid="ignore", divide="ignore"):
            float_mv = frame["float_mv"].where(frame["float_mv"] > 0)
            frame["turnover"] = 100.0 * frame["volume"] * frame["close"] / float_mv
    elif "float_mv" not in frame.columns and {"turnover", "volume", "close"} <= set(frame.columns):
        frame["float_mv"] = float_market_value(frame["volume"], frame["close"], frame["turnover"])
    return frame


def _bars(frame: pd.DataFrame, lines: np.ndarray, fmt: CsvFormat, path: Path, report: LoadReport,
          code: str) -> tuple[pd.DataFrame, np.ndarray]:
    """A minute file's parsed rows as a bar frame, its facts in the report
    (:func:`forecaster.data.minute.bars.bar_frame`)."""
    try:
        return bar_frame(frame, lines, fmt, report, code)
    except BarError as exc:
        raise DataError(f"{path}: {exc}") from None
