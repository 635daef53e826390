"""Qlib's binary data folders, read and written.

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
a day with NaN prices is no bar. :func:`write_qlib` writes frames in the same format (factor
accumulated from ``preclose``), so a panel can go to Qlib and back.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.cache import CACHE_DIR, cache_location, manifest_of, read_cache, write_cache
from forecaster.data.formats import canonical_code
from forecaster.data.loading import DataError
from forecaster.data.qlib_conventions import change_scale, convention_notes, volume_divided, volume_steps

log = logging.getLogger(__name__)

PRICE_FIELDS = ("open", "high", "low", "close")
FIELDS = (*PRICE_FIELDS, "volume", "amount", "factor", "change")


def is_qlib_folder(path: str | Path) -> bool:
    """Whether ``path`` looks like a Qlib provider folder (calendars/day.txt and features/)."""
    path = Path(path)
    return (path / "calendars" / "day.txt").is_file() and (path / "features").is_dir()


def qlib_code(code: str) -> str:
    """``sh.600000`` -> ``SH600000`` (Qlib's instrument name); other codes (``syn.000001``)
    upper-cased as they are."""
    canon = canonical_code(code)
    return canon.replace(".", "").upper() if canon[:3] in _EXCHANGES else canon.upper()


def from_qlib_code(name: str) -> str:
    """``SH600000`` -> ``sh.600000``; other names lower-cased (``SYN.000001`` -> ``syn.000001``)."""
    canon = canonical_code(name)
    return canon if canon[:3] in _EXCHANGES else name.strip().lower()


_EXCHANGES = ("sh.", "sz.", "bj.")


def _read_bin(path: Path, n_calendar: int) -> tuple[int, np.ndarray]:
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
    (:mod:`forecaster.data.qlib_conventions`) and whether it came from the cache."""

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
    With ``cache``, a columnar copy is kept (:mod:`forecaster.data.cache`: rebuilt when a file
    changes) in ``FOLDER/.forecaster_cache``, or, for a folder that cannot be written, in
    :func:`~forecaster.data.cache.cache_location`."""
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
    calendar = pd.DatetimeIndex(pd.to_datetime(
        (folder / "calendars" / "day.txt").read_text(encoding="utf-8").split(), format="%Y-%m-%d"))
    names = {p.name.lower(): p.name for p in (folder / "features").iterdir()}
    frames, outside, scales, steps, deferred, upper = {}, [], {}, [], [], 0
    for code in _instruments(folder, instruments):
        name = names.get(code.lower(), code.lower())
        upper += name != code.lower()
        fdir = folder / "features" / name
        columns = {}
        for fname in FIELDS:
            path = fdir / f"{fname}.day.bin"
            if not path.is_file():
                if fname in ("open", "close", "factor"):
                    raise DataError(f"{path}: missing (a stock needs $open, $close and $factor)")
                continue
            first, values = _read_bin(path, len(calendar))
            columns[fname] = pd.Series(values, index=calendar[first:first + len(values)])
        table = pd.DataFrame(columns)
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
    divided = volume_divided(steps, f"{folder}: $volume")
    for frame in frames.values():
        factor = frame.pop("_factor")
        if divided is False and "volume" in frame:  # share volume already: undo the factor
            frame["volume"] = (frame["volume"] / factor).round(0)
    if not frames:
        raise DataError(f"{folder}: no stock of {instruments!r} has a bar in {start}..{end}")
    if outside:
        log.warning("%s: %d instrument(s) without a bar in %s..%s left out: %s%s", folder, len(outside),
                    start, end, ", ".join(outside[:10]), " ..." if len(outside) > 10 else "")
    notes = convention_notes(scales, divided, len(steps), upper)
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


def write_qlib(frames: Mapping[str, pd.DataFrame], provider_dir: str | Path, market: str = "all") -> Path:
    """Write canonical frames as a Qlib folder (calendar: the union of their days). The factor
    is accumulated from ``preclose`` (``close_{t-1} / preclose_t`` on each ex-date, 1 at the first
    day), prices are written adjusted and volume divided by the factor, as Qlib holds them;
    ``$change`` is ``close / preclose - 1``."""
    folder = Path(provider_dir)
    calendar = pd.DatetimeIndex(sorted(set().union(*(f.index for f in frames.values()))))
    (folder / "calendars").mkdir(parents=True, exist_ok=True)
    (folder / "instruments").mkdir(parents=True, exist_ok=True)
    (folder / "calendars" / "day.txt").write_text("\n".join(d.strftime("%Y-%m-%d") for d in calendar) + "\n")
    lines = []
    for code, frame in sorted(frames.items()):
        name = qlib_code(code)
        close = frame["close"].astype(float)
        pre = frame["preclose"].astype(float) if "preclose" in frame else close.shift(1)
        step = (close.shift(1) / pre).where(lambda r: np.isfinite(r) & (r > 0), 1.0)
        factor = step.cumprod()
        span = calendar[calendar.get_loc(frame.index[0]):calendar.get_loc(frame.index[-1]) + 1]
        table = {f: frame[f].astype(float) * factor for f in PRICE_FIELDS if f in frame}
        if "volume" in frame:
            table["volume"] = frame["volume"].astype(float) / factor
        if "amount" in frame:
            table["amount"] = frame["amount"].astype(float)
        table["factor"] = factor
        table["change"] = close / pre - 1
        fdir = folder / "features" / name.lower()
        fdir.mkdir(parents=True, exist_ok=True)
        first = float(calendar.get_loc(frame.index[0]))
        for field, values in table.items():
            aligned = values.reindex(span).to_numpy(dtype=float)
            np.hstack([[first], aligned]).astype("<f4").tofile(fdir / f"{field}.day.bin")
        lines.append(f"{name}\t{frame.index[0].date()}\t{frame.index[-1].date()}")
    (folder / "instruments" / f"{market}.txt").write_text("\n".join(lines) + "\n")
    return folder


def qlib_predictions(predictions: pd.DataFrame, model: str = "transformer") -> pd.DataFrame:
    """A report's predictions (``date``, ``code``, ``model``, ``forecast``) as the frame Qlib's
    ``SignalRecord`` / ``PortAnaRecord`` read: index ``(datetime, instrument)`` (Qlib names such
    as ``SH600000``), one column ``score``, sorted."""
    pred = predictions.reset_index() if "date" not in predictions.columns else predictions
    chosen = pred[pred["model"] == model]
    if chosen.empty:
        raise ValueError(f"no predictions of model {model!r}; models: {sorted(pred['model'].unique())}")
    index = pd.MultiIndex.from_arrays([pd.DatetimeIndex(chosen["date"]),
                                       [qlib_code(c) for c in chosen["code"]]],
                                      names=["datetime", "instrument"])
    return pd.DataFrame({"score": chosen["forecast"].to_numpy(dtype=float)}, index=index).sort_index()
