"""Read exported daily-bar CSVs into the canonical frame, counting everything it changes.

Nothing is dropped or filled silently: problems raise :class:`DataError` naming the file, the
line (1-based, the header is line 1) and the column, or with ``on_bad="drop"`` the offending
rows are dropped and counted in the :class:`LoadReport`.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.formats import PRICE_COLUMNS, REQUIRED, CsvFormat, canonical_code, detect_format

log = logging.getLogger(__name__)

ON_BAD = ("raise", "drop")


class DataError(ValueError):
    """Bad input data; the message names the file, line and column."""


@dataclass
class LoadReport:
    """What :func:`load_csv` read, dropped and flagged."""

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

    def summary(self) -> str:
        parts = [f"{self.path}: {self.format} ({self.encoding}), {self.rows_kept}/{self.rows_read} rows kept"]
        if self.dropped:
            parts.append("dropped " + ", ".join(f"{n} {why}" for why, n in self.dropped.items()))
        if self.reordered_rows:
            parts.append(f"{self.reordered_rows} rows out of date order were sorted")
        parts.append(f"{self.suspended_days} suspended days, {self.st_days} ST days")
        if self.missing_values:
            parts.append("empty cells " + ", ".join(f"{c}={n}" for c, n in self.missing_values.items()))
        return "; ".join(parts)


def _read_text(path: Path) -> tuple[str, str]:
    raw = path.read_bytes()
    for encoding in ("utf-8-sig", "gbk"):
        try:
            return raw.decode(encoding), encoding
        except UnicodeDecodeError:
            continue
    raise DataError(f"{path}: cannot decode as UTF-8 (with or without BOM) or GBK")


class _Cleaner:
    """Applies the ``on_bad`` policy: raise at the first problem, or drop and count."""

    def __init__(self, path: Path, on_bad: str, report: LoadReport):
        self.path, self.on_bad, self.report = path, on_bad, report

    def bad_rows(self, frame: pd.DataFrame, bad: pd.Series, reason: str, column: str, expected: str,
                 raw: pd.Series | None = None) -> pd.DataFrame:
        if not bad.any():
            return frame
        if self.on_bad == "raise":
            first = bad.idxmax()
            value = (raw if raw is not None else frame[column]).loc[first]
            shown = repr(value) if isinstance(value, str) else f"{float(value):g}"
            raise DataError(
                f"{self.path}: line {frame.loc[first, '_line']}, column {column!r}: expected "
                f"{expected}, got {shown} ({int(bad.sum())} such rows; pass on_bad='drop' "
                "to drop and count them)"
            )
        self.report.dropped[reason] = self.report.dropped.get(reason, 0) + int(bad.sum())
        return frame.loc[~bad]


def load_csv(path: str | Path, on_bad: str = "raise", code: str | None = None
             ) -> tuple[pd.DataFrame, LoadReport]:
    """Load one stock's daily bars from a baostock, tushare, akshare or Yahoo-style CSV.

    Args:
        path: the CSV file (UTF-8 with or without BOM, or GBK).
        on_bad: ``"raise"`` (default): unparseable rows, missing or non-positive prices and
            duplicate dates raise :class:`DataError`; ``"drop"``: such rows are dropped and
            counted in the report.
        code: stock code to record when the file has none (default: the file's stem).

    Returns:
        ``(frame, report)``: the canonical frame (``DatetimeIndex`` named ``date``, sorted,
        lower snake-case columns, a boolean ``suspended`` column) and a :class:`LoadReport`.
    """
    if on_bad not in ON_BAD:
        raise ValueError(f"on_bad must be one of {ON_BAD}, got {on_bad!r}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    text, encoding = _read_text(path)
    if not text.strip():
        raise DataError(f"{path}: the file is empty; expected a header line and daily rows")
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.ParserError as exc:
        raise DataError(f"{path}: not a readable CSV ({exc})") from exc
    raw.columns = [str(c).strip() for c in raw.columns]
    # A pandas-written index column ("" or "Unnamed: 0") carries no data.
    raw = raw.loc[:, [c for c in raw.columns if c and not c.startswith("Unnamed:")]]
    try:
        fmt = detect_format(list(raw.columns), str(path))
    except ValueError as exc:
        raise DataError(str(exc)) from None
    report = LoadReport(path=str(path), format=fmt.name, encoding=encoding, rows_read=len(raw))
    missing = [src for src, dst in fmt.columns.items() if dst in REQUIRED and src not in raw.columns]
    if missing:
        raise DataError(
            f"{path}: {fmt.name} export without the required column(s) {missing}; "
            f"expected {[s for s, d in fmt.columns.items() if d in REQUIRED]}"
        )
    if raw.empty:
        raise DataError(f"{path}: has a header but no data rows")
    frame = _canonicalise(raw, fmt, path, on_bad, report)
    if len(frame) < 2:
        raise DataError(f"{path}: {len(frame)} usable row(s); at least 2 trading days are needed")
    if "code" not in frame.columns:
        frame["code"] = code or path.stem
    report.rows_kept = len(frame)
    if report.dropped:
        log.warning("%s", report.summary())
    return frame, report


def _canonicalise(raw: pd.DataFrame, fmt: CsvFormat, path: Path, on_bad: str,
                  report: LoadReport) -> pd.DataFrame:
    clean = _Cleaner(path, on_bad, report)
    src = raw.rename(columns=fmt.columns)
    keep = [c for c in dict.fromkeys(fmt.columns.values()) if c in src.columns]
    frame = src[keep].copy()
    frame["_line"] = np.arange(len(frame)) + 2  # header is line 1

    text_dates = frame["date"].str.strip()
    dates = pd.to_datetime(text_dates, format=fmt.date_format, errors="coerce")
    frame = clean.bad_rows(frame, dates.isna(), "unparseable dates", "date",
                           f"a date like {fmt.date_format}", raw=text_dates)
    frame["date"] = dates.loc[frame.index]

    numeric = [c for c in frame.columns if c not in ("date", "code", "_line")]
    for col in numeric:
        text = frame[col].str.strip()
        empty = text.isin(["", "nan", "NaN", "None", "null", "--"])
        values = pd.to_numeric(text.where(~empty), errors="coerce")
        unparseable = values.isna() & ~empty
        frame = clean.bad_rows(frame, unparseable, "unparseable numbers", col, "a number", raw=text)
        values, empty = values.loc[frame.index], empty.loc[frame.index]
        frame[col] = values.astype(float) * fmt.scale.get(col, 1.0)
        if col in REQUIRED:
            frame = clean.bad_rows(frame, empty, "missing prices", col, "a price", raw=text)
        elif empty.any():
            report.missing_values[col] = int(empty.sum())
    for col in PRICE_COLUMNS:
        if col in frame.columns:
            bad = frame[col] <= 0 if col in REQUIRED else (frame[col] <= 0) & frame[col].notna()
            frame = clean.bad_rows(frame, bad, "non-positive prices", col, "a positive price")

    dup = frame["date"].duplicated(keep="first")
    if dup.any() and on_bad == "raise":
        first = dup.idxmax()
        day = frame.loc[first, "date"]
        lines = frame.loc[frame["date"] == day, "_line"].tolist()
        raise DataError(
            f"{path}: duplicate date {day.date()} on lines {lines}; expected one row per trading "
            f"day ({int(dup.sum())} duplicated rows; pass on_bad='drop' to keep the first of each)"
        )
    frame = clean.bad_rows(frame, dup, "duplicate dates", "date", "a unique date")

    order = np.argsort(frame["date"].to_numpy(), kind="stable")
    report.reordered_rows = int((order != np.arange(len(order))).sum())
    frame = frame.iloc[order].set_index("date").drop(columns="_line")
    if "code" in frame.columns:
        frame["code"] = frame["code"].map(canonical_code)

    suspended = np.zeros(len(frame), dtype=bool)
    if "trade_status" in frame.columns:
        suspended |= (frame["trade_status"] == 0).to_numpy()
    if "volume" in frame.columns:
        suspended |= (frame["volume"] == 0).to_numpy()
    frame["suspended"] = suspended
    report.suspended_days = int(suspended.sum())
    if "is_st" in frame.columns:
        report.st_days = int((frame["is_st"] == 1).sum())
    return frame


def load_dir(path: str | Path, pattern: str = "*.csv", on_bad: str = "raise", cache: bool = False
             ) -> tuple[dict[str, pd.DataFrame], dict[str, LoadReport]]:
    """Load every CSV in a folder as a panel.

    Args:
        cache: keep a columnar copy in ``FOLDER/.forecaster_cache`` and use it while the
            folder's files are unchanged (:mod:`forecaster.data.cache`).

    Returns:
        ``(frames, reports)``, both keyed by stock code (e.g. ``"sh.600000"``) in sorted order.
    """
    from forecaster.data.cache import manifest_of, read_cache, write_cache

    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    files = sorted(folder.glob(pattern))
    if not files:
        raise DataError(f"{folder}: no files match {pattern!r}")
    manifest = manifest_of(files, {"pattern": pattern, "on_bad": on_bad}) if cache else None
    if cache:
        hit = read_cache(folder, manifest, LoadReport)
        if hit is not None:
            return hit
    frames, reports = {}, {}
    for file in files:
        frame, report = load_csv(file, on_bad=on_bad)
        key = str(frame["code"].iloc[0])
        if key in frames:
            raise DataError(f"{file}: stock {key} also appears in {reports[key].path}")
        frames[key], reports[key] = frame, report
    frames, reports = dict(sorted(frames.items())), dict(sorted(reports.items()))
    if cache:
        write_cache(folder, manifest, frames, reports)
    return frames, reports
