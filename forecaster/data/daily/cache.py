"""A columnar cache of a folder's loaded CSVs, so that a second run starts in seconds.

``load_dir(folder, cache=True)`` keeps ``FOLDER/.forecaster_cache/``: one Parquet file with
every stock's canonical rows (pyarrow) and a manifest of the files it was built from (each
``.csv`` or ``.csv.gz`` file's path in the folder, size and modification time), the loader's
options and each file's :class:`LoadReport`. It is used only when the folder's data files are
exactly those of the manifest; a changed (a compressed file included), added or removed file
rebuilds it. A folder that cannot (or should not: its mode says read-only) be written keeps
its cache under ``~/.cache/forecaster`` instead (:func:`cache_location`). The cache holds
what ``load_csv`` returned, so cached and uncached loads give equal frames (a test checks it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path

import pandas as pd

from seq2seq.core import atomic_write

log = logging.getLogger(__name__)

CACHE_DIR = ".forecaster_cache"
# 2: .csv.gz files, paths relative to the folder, trust_code_column, LoadReport.compression
CACHE_VERSION = 3  # 3: a Qlib folder's float_mv and total_mv


def cache_location(folder: Path) -> Path:
    """Where a data folder's cache lives: ``FOLDER`` itself when it may take one (writable by
    us, and not marked read-only by its mode: a shared data folder, which root could write
    all the same), else ``$XDG_CACHE_HOME/forecaster`` (``~/.cache/forecaster``), one folder
    per data folder (its name and a hash of its path)."""
    folder = Path(folder)
    if os.access(folder, os.W_OK) and folder.stat().st_mode & 0o222:
        return folder
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "forecaster"
    digest = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    return base / f"{folder.resolve().name}-{digest}"


def manifest_of(files: list[Path], options: dict, folder: Path | None = None) -> dict:
    """What a cache is valid for: each data file's path (relative to ``folder``, else its
    name), size and mtime, and the loader options (JSON values: lists, not tuples)."""
    entries = {}
    for f in files:
        stat = f.stat()
        name = f.relative_to(folder).as_posix() if folder is not None else f.name
        entries[name] = [stat.st_size, stat.st_mtime_ns]
    return {"version": CACHE_VERSION, "options": options, "files": entries}


def read_cache(folder: Path, manifest: dict, report_type) -> tuple[dict, dict] | None:
    """``(frames, reports)`` from the cache if it matches ``manifest``, else ``None``."""
    where = folder / CACHE_DIR
    try:
        stored = json.loads((where / "manifest.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if {k: stored.get(k) for k in ("version", "options", "files")} != manifest:
        log.info("%s: cache out of date (files or options changed); rebuilding", folder)
        return None
    try:
        table = pd.read_parquet(where / "panel.parquet")
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable cache (%s); rebuilding", folder, exc)
        return None
    frames = {}
    for code, frame in table.groupby("__key__", sort=True):
        key = "time" if "time" in frame.columns else "date"  # minute bars are keyed by time
        frame = frame.drop(columns="__key__").set_index(key)
        frame = frame[stored["columns"][code]]  # each stock's own columns, in its order
        frames[code] = frame
    reports = {code: report_type(**r) for code, r in stored["reports"].items()}
    return dict(sorted(frames.items())), dict(sorted(reports.items()))


def write_cache(folder: Path, manifest: dict, frames: dict, reports: dict) -> None:
    """Store ``frames`` and ``reports`` under ``folder/.forecaster_cache`` (atomically)."""
    where = folder / CACHE_DIR
    try:
        where.mkdir(parents=True, exist_ok=True)
        long = pd.concat([f.reset_index().assign(__key__=code) for code, f in frames.items()],
                         ignore_index=True)
        with atomic_write(where / "panel.parquet") as fh:
            long.to_parquet(fh, index=False)
        body = {**manifest, "columns": {c: list(f.columns) for c, f in frames.items()},
                "reports": {c: dataclasses.asdict(r) for c, r in reports.items()}}
        with atomic_write(where / "manifest.json", "w") as fh:
            json.dump(body, fh)
    except OSError as exc:
        log.warning("%s: cannot write the cache (%s); loading without it", folder, exc)
