"""Qlib's binary data folders, read into canonical frames.

A Qlib provider folder (the format of Qlib 0.9's ``scripts/dump_bin.py``, which ``qlib.init
(provider_uri=...)`` reads) holds

* ``calendars/day.txt``: the trading days, one ``YYYY-MM-DD`` a line;
* ``instruments/<market>.txt``: ``CODE<TAB>first day<TAB>last day`` a line (``SH600000``);
* ``features/<code>/<field>.day.bin``: little-endian float32, the first value the calendar
  index of the stock's first day, then one value per calendar day from there (NaN where the
  stock has no bar: Qlib's suspended or unlisted days).

Prices there are adjusted (``$close`` = close x ``$factor``) and volume is divided by the
factor. :func:`qlib_frames` turns them back into this package's canonical frames: unadjusted
prices ``$price / $factor``, ``preclose`` = the previous adjusted close / today's factor (so
``close / preclose`` is the adjusted return across ex-dates), volume ``$volume x $factor``, and
a day with NaN prices is no bar. :func:`~forecaster.data.qlib.writer.write_qlib` writes frames
in the same format (factor accumulated from ``preclose``), so a panel can go to Qlib and back.
Whether a path is such a folder is decided by :func:`forecaster.data.sources.is_qlib_folder`.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.daily.cache import CACHE_DIR, cache_location, manifest_of, read_cache, write_cache
from forecaster.data.qlib.conventions import (
    FIELDS,
    PRICE_FIELDS,
    VALUE_FIELDS,
    change_scale,
    convention_notes,
    from_qlib_code,
    qlib_code,
    volume_divided,
    volume_steps,
)
from forecaster.data.sources import DataError, is_qlib_folder

log = logging.getLogger(__name__)


def _read_calendar(path: Path) -> pd.DatetimeIndex:
    """``calendars/day.txt``: one ``YYYY-MM-DD`` a line, rising; a bad line is named."""
    if not path.is_file():
        raise DataError(f"{path}: missing (a Qlib folder needs calendars/day.txt)")
    days = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        text = line.strip()
        if not text:
            continue
        try:
            day = pd.Timestamp(datetime.datetime.strptime(text[:10], "%Y-%m-%d"))
            if text[10:].strip(" 0:"):  # a time other than midnight: not a daily calendar
                raise ValueError
        except ValueError:
            raise DataError(f"{path}: line {line_no}: {text[:40]!r} is not a date (expected "
                            "YYYY-MM-DD)") from None
        if days and day <= days[-1]:
            raise DataError(f"{path}: line {line_no}: {day.date()} does not come after {days[-1].date()} "
                            "(a calendar rises day by day)")
        days.append(day)
    return pd.DatetimeIndex(days)


def _read_bin(path: Path, n_calendar: int) -> tuple[int, np.ndarray]:
    size = path.stat().st_size
    if size % 4:  # float32 values: a size that is not a multiple of 4 was cut mid-value
        raise DataError(f"{path}: damaged Qlib feature file ({size} bytes, not a whole number of float32 "
                        "values: cut short?)")
    if size // 4 - 1 > n_calendar:  # told by its size, before it is read: a day a value at most
        raise DataError(f"{path}: {size:,} bytes hold {size // 4 - 1:,} values, more than the calendar's "
                        f"{n_calendar} days (expected a start index and at most one value a day)")
    raw = np.fromfile(path, dtype="<f4")
    if raw.size == 0:
        raise DataError(f"{path}: empty Qlib feature file (expected a start index and values)")
    start = int(raw[0])
    if start < 0 or start + raw.size - 1 > n_calendar or raw[0] != start:
        raise DataError(f"{path}: start index {raw[0]} and {raw.size - 1} values do not fit the "
                        f"calendar of {n_calendar} days")
    return start, raw[1:].astype(float)


def _instruments(folder: Path, instruments: str | list[str]) -> list[str]:
    if not isinstance(instruments, str):
        return [qlib_code(c) for c in instruments]
    path = folder / "instruments" / f"{instruments}.txt"
    if not path.is_file():
        raise DataError(f"{path}: no such instruments file (Qlib's instruments/<market>.txt)")
    codes = []
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parts = line.strip().split("\t")
        if not parts[0]:
            continue
        if len(parts) != 3:
            raise DataError(f"{path}: line {line_no}: expected CODE<TAB>start<TAB>end, got {line!r}")
        codes.append(parts[0].upper())
    return codes


def qlib_frames(provider_dir: str | Path, instruments: str | list[str] = "all", start=None, end=None,
                cache: bool = False) -> dict[str, pd.DataFrame]:
    """``{code: frame}`` (canonical frames, as :func:`forecaster.data.load_csv` returns) of the
    ``instruments`` (a market file's name, or a list of codes) of a Qlib folder, days
    ``start..end``. Stocks without a close file are an error naming the file. See
    :func:`read_qlib` (the conventions detected, the cache)."""
    return read_qlib(provider_dir, instruments, start, end, cache).frames


@dataclass
class QlibLoad:
    """What :func:`read_qlib` read: ``frames``, the ``notes`` on the folder's conventions
    (:mod:`forecaster.data.qlib.conventions`) and whether it came from the cache."""

    frames: dict[str, pd.DataFrame]
    notes: list[str] = dataclass_field(default_factory=list)
    cached: bool = False


@dataclass
class _Notes:  # the cache's per-"file" report: the load's notes
    lines: list


def read_qlib(provider_dir: str | Path, instruments: str | list[str] = "all", start=None, end=None,
              cache: bool = False) -> QlibLoad:
    """:func:`qlib_frames` with the notes on the folder's conventions. ``$change`` in percent
    and ``$volume`` not divided by ``$factor`` are detected from the data and converted (or
    stop with an error naming the field); upper-case feature folders are read as they are.
    With ``cache``, a columnar copy is kept (:mod:`forecaster.data.daily.cache`: rebuilt when a file
    changes) in ``FOLDER/.forecaster_cache``, or, for a folder that cannot be written, in
    :func:`~forecaster.data.daily.cache.cache_location`."""
    folder = Path(provider_dir)
    if not is_qlib_folder(folder):
        raise DataError(f"{folder}: not a Qlib data folder (expected calendars/day.txt and features/)")
    manifest = where = None
    if cache:
        files = [folder / "calendars" / "day.txt", *sorted((folder / "instruments").glob("*.txt")),
                 *sorted((folder / "features").glob("*/*.bin"))]
        market = instruments if isinstance(instruments, str) else list(instruments)
        options = {"qlib": 1, "instruments": market,
                   "start": None if start is None else str(pd.Timestamp(start).date()),
                   "end": None if end is None else str(pd.Timestamp(end).date())}
        manifest = manifest_of(files, options, folder)
        where = cache_location(folder)
        hit = read_cache(where, manifest, _Notes)
        if hit is not None:
            frames, reports = hit
            notes = reports.pop(_NOTES, _Notes([])).lines
            return QlibLoad(frames, [*notes, f"read from the cache in {where / CACHE_DIR}"], True)
    loaded = _read_qlib(folder, instruments, start, end)
    if cache:
        write_cache(where, manifest, loaded.frames, {_NOTES: _Notes(loaded.notes)})
    return loaded


_NOTES = "__qlib_notes__"


def _read_qlib(folder: Path, instruments, start, end) -> QlibLoad:
    calendar = _read_calendar(folder / "calendars" / "day.txt")
    names = {p.name.lower(): p.name for p in (folder / "features").iterdir()}
    frames, outside, scales, steps, deferred, upper = {}, [], {}, [], [], 0
    for code in _instruments(folder, instruments):
        name = names.get(code.lower(), code.lower())
        upper += name != code.lower()
        fdir = folder / "features" / name
        columns, spans = {}, []
        for fname in FIELDS:
            path = fdir / f"{fname}.day.bin"
            if not path.is_file():
                if fname in ("open", "close", "factor"):
                    raise DataError(f"{path}: missing (a stock needs $open, $close and $factor)")
                continue
            first, values = _read_bin(path, len(calendar))
            span = (first, len(values))
            if columns and span != spans[0][1]:  # one stock's fields are dumped over one span
                raise DataError(f"{path}: damaged Qlib feature file: {len(values)} values from calendar day "
                                f"{first}, while {spans[0][0]}.day.bin holds {spans[0][1][1]} from day "
                                f"{spans[0][1][0]} (a stock's fields cover the same days: cut short?)")
            spans.append((fname, span))
            columns[fname] = pd.Series(values, index=calendar[first:first + len(values)])
        table = pd.DataFrame(columns)
        for fname in VALUE_FIELDS:  # over their own span, laid on the prices' days
            path = fdir / f"{fname}.day.bin"
            if path.is_file():
                first, values = _read_bin(path, len(calendar))
                own = pd.Series(values, index=calendar[first:first + len(values)])
                table[fname] = own.reindex(table.index)
        if "change" in table:
            scales[code] = change_scale(table["close"], table["change"], str(fdir / "change.day.bin"))
        if "volume" in table:
            steps += volume_steps(table["volume"], table["factor"])
        if scales.get(code, 1.0) is None:
            deferred.append((code, fdir, table))  # read with the folder's majority, below
            continue
        if not _add_frame(frames, code, fdir, table, scales.get(code, 1.0), start, end):
            outside.append(code)
    known = [s for s in scales.values() if s is not None]
    majority = 0.01 if known and sum(s == 0.01 for s in known) > len(known) / 2 else 1.0
    for code, fdir, table in deferred:
        if not _add_frame(frames, code, fdir, table, majority, start, end):
            outside.append(code)
    volume = volume_divided(steps)
    for frame in frames.values():
        factor = frame.pop("_factor")
        if volume.divided is False and "volume" in frame:  # share volume already: undo the factor
            frame["volume"] = (frame["volume"] / factor).round(0)
    if not frames:
        raise DataError(f"{folder}: no stock of {instruments!r} has a bar in {start}..{end}")
    if outside:
        log.warning("%s: %d instrument(s) without a bar in %s..%s left out: %s%s", folder, len(outside),
                    start, end, ", ".join(outside[:10]), " ..." if len(outside) > 10 else "")
    notes = convention_notes(scales, volume, upper)
    for note in notes:
        log.info("%s: %s", folder, note)
    return QlibLoad(dict(sorted(frames.items())), notes)


def _add_frame(frames: dict, code: str, fdir: Path, table: pd.DataFrame, scale: float, start, end) -> bool:
    """The canonical frame of one stock's ``table`` of Qlib fields into ``frames`` (with a
    ``_factor`` column the caller removes); False when it has no bar in ``start..end``."""
    factor = table["factor"]
    out = pd.DataFrame(index=table.index)
    for fname in PRICE_FIELDS:
        if fname in table:
            out[fname] = (table[fname] / factor).round(4)
    # $change (close / previous close - 1) gives the first day's preclose too
    previous = (table["close"] / (1 + table["change"] * scale) if "change" in table
                else table["close"].shift(1))
    out["preclose"] = (previous / factor).round(4)
    if "volume" in table:
        out["volume"] = (table["volume"] * factor).round(0)
    if "amount" in table:
        out["amount"] = table["amount"]
    for fname in VALUE_FIELDS:
        if fname in table:
            out[fname] = table[fname]
    out["_factor"] = factor
    bar = table["close"].notna() & table["open"].notna()  # NaN prices: Qlib's no-bar days
    partial = int((table["close"].notna() != table["open"].notna()).sum())
    if partial:
        log.warning("%s: %d day(s) with only one of $open and $close left out as days without a bar",
                    fdir, partial)
    out = out[bar]
    out["preclose"] = out["preclose"].fillna(out["close"])  # a first day without $change
    if start is not None:
        out = out.loc[pd.Timestamp(start):]
    if end is not None:
        out = out.loc[:pd.Timestamp(end)]
    if out.empty:
        return False
    canon = from_qlib_code(code)
    out.insert(0, "code", canon)
    out.index.name = "date"
    out["suspended"] = (out["volume"] == 0).to_numpy() if "volume" in out else False
    frames[canon] = out
    return True


def load_qlib(provider_dir: str | Path, instruments: str | list[str] = "all", start=None, end=None):
    """A Qlib folder as a :class:`~forecaster.data.panel.Panel` (see :func:`qlib_frames`)."""
    from forecaster.data.panel import Panel

    return Panel.from_frames(qlib_frames(provider_dir, instruments, start, end))
