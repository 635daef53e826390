"""Read a folder of exported files: which files are data
(:func:`~forecaster.data.sources.scan_dir`, and what is skipped, named), each read by
:func:`~forecaster.data.daily.loading.load_csv` (in parallel processes when the folder holds
many), the columnar cache, and the folder's load summary (:class:`FolderLoad`): rows,
suspensions, dropped rows, stocks lacking columns the others have, implausible rows across
files (:mod:`forecaster.data.daily.quality`; ``strict`` stops at the first).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pandas as pd
from joblib import Parallel, delayed

from forecaster.checks import check_choice
from forecaster.data.daily.calendar import MIN_WITNESSES, lonely_days
from forecaster.data.daily.loading import (
    DROP_HINT,
    MIN_ROWS,
    ON_BAD,
    is_too_new,
    line_of,
    log_report,
    name_code,
    raise_flagged,
    read_one,
)
from forecaster.data.daily.quality import (
    KINDS,
    Flag,
    adjust_mismatches,
    lacking_columns,
    level_breaks,
    quality_clauses,
)
from forecaster.data.daily.report import LoadReport
from forecaster.data.minute.bars import folder_bar_clauses
from forecaster.data.sources import (
    DEFAULT_PATTERN,
    FORMATS_BY_NAME,
    MAX_FILE_MB,
    DataError,
    Skipped,
    patterns_of,
    scan_dir,
)

log = logging.getLogger(__name__)

# Folders with fewer files load in this process (starting workers costs more than it saves).
PARALLEL_MIN_FILES = 64
# The version of the checks of forecaster.data.daily.quality, .calendar (dates) and
# forecaster.data.minute.bars a cache's frames and reports hold (a cache built by older checks is
# rebuilt: 3 added the date checks and the days only one file holds, 4 the float market value
# derived from turnover).
QUALITY_CHECKS = 4


def named_list(items: list[str], limit: int) -> str:
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


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
            (:func:`~forecaster.data.daily.quality.lacking_columns`).
        usual_adjust: the adjustflag most files hold (``""`` without the column);
            adjust: ``{code: Flag}`` of the files holding another
            (:func:`~forecaster.data.daily.quality.adjust_mismatches`).
        too_new: ``{code: LoadReport}`` of the stocks left out for too few usable rows to score
            (fewer than :data:`~forecaster.data.daily.loading.MIN_ROWS`: a listing of yesterday
            is in every whole-market folder), named in the summary; not in ``frames`` or
            ``reports``.
    """

    def __new__(cls, frames: dict, reports: dict, *, folder: str | Path = "",
                skipped: list[Skipped] | tuple[Skipped, ...] = (), from_cache: bool = False,
                workers: int = 1, too_new: dict | None = None):
        self = super().__new__(cls, (frames, reports))
        self.frames, self.reports, self.folder = frames, reports, str(folder)
        self.skipped, self.from_cache, self.workers = list(skipped), from_cache, workers
        self.too_new = dict(too_new or {})
        self.lacking = lacking_columns(frames)
        self.usual_adjust, self.adjust = adjust_mismatches(
            {code: r.adjust_flags for code, r in reports.items()},
            {code: FORMATS_BY_NAME[r.format].source("adjust_flag") for code, r in reports.items()})
        # files without an adjustflag column: told by their price level against their amounts
        untold = {c: f for c, f in frames.items() if c not in self.adjust}
        for code, flag in level_breaks(untold, lambda c, day: line_of(Path(reports[c].path), day)).items():
            self.adjust[code] = flag
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
        (:func:`~forecaster.data.daily.quality.quality_clauses`)."""
        return quality_clauses(self.reports, self.lacking, self.adjust, self.usual_adjust, max_named)

    def __getnewargs_ex__(self):
        return (self.frames, self.reports), {"folder": self.folder, "skipped": self.skipped,
                                             "from_cache": self.from_cache, "workers": self.workers,
                                             "too_new": self.too_new}

    def summary(self, max_named: int = 20) -> str:
        """One line: stocks, rows, suspended days, dropped rows, files whose code column was
        trusted over their name, the entries not read (named, the first ``max_named``), and
        :meth:`quality`'s clauses (columns lacking, implausible rows)."""
        reports = list(self.reports.values())
        dropped = sum(sum(r.dropped.values()) for r in [*reports, *self.too_new.values()])
        text = (f"{self.folder}: {len(self.frames)} stocks, {sum(r.rows_kept for r in reports)} rows, "
                f"{sum(r.suspended_days for r in reports)} suspended days"
                + (f", {dropped} bad rows dropped (on_bad='drop')" if dropped else "")
                + (" (from the cache)" if self.from_cache else ""))
        renamed = [r for r in reports if r.name_code]
        if renamed:
            text += (f"; {len(renamed)} file(s) named for another stock, code column trusted: "
                     + named_list([f"{Path(r.path).name} is {c}" for c, r in self.reports.items()
                               if r.name_code], max_named))
        text += skipped_clause(self.skipped, max_named)
        if self.too_new:
            text += f"; {too_new_clause(self.too_new, max_named)}"
        return "; ".join([text, *folder_bar_clauses(reports, max_named), *self.quality(max_named)])


def too_new_clause(too_new: dict, max_named: int = 20) -> str:
    """The summary's clause on the stocks left out with fewer than two usable rows
    (``{code: LoadReport}``): a file of a header and no row is named as that, not as a new
    listing."""
    empty = [f"{Path(r.path).name}" for r in too_new.values() if r.rows_read == 0]
    short = {c: r for c, r in too_new.items() if r.rows_read > 0}
    named = [f"{c} ({r.rows_kept} usable row{'' if r.rows_kept == 1 else 's'})" for c, r in short.items()]
    parts = []
    if short:
        parts.append(f"{len(short)} stock(s) too new to score (fewer than {MIN_ROWS} usable rows), left out: "
                     + named_list(named, max_named))
    if empty:
        parts.append(f"{len(empty)} file(s) with a header and no data rows, left out: "
                     + named_list(empty, max_named))
    return "; ".join(parts)


def skipped_clause(skipped: list[Skipped], max_named: int = 20) -> str:
    """The summary's clauses on the entries not read: data files over the size limit (counted
    and named with their size), then the entries that are not data files."""
    large = [s for s in skipped if s.large]
    other = [s for s in skipped if not s.large]
    text = ""
    if large:
        text += (f"; skipped {len(large)} data file(s) over the size limit, not read "
                 f"({large[0].reason.split('(')[-1].rstrip(')')}): "
                 f"{named_list([str(s) for s in large], max_named)}")
    if other:
        text += (f"; skipped {len(other)} entr{'y' if len(other) == 1 else 'ies'} "
                 f"that are not data files: {named_list([str(s) for s in other], max_named)}")
    return text


def load_dir(path: str | Path, pattern: str | tuple[str, ...] = DEFAULT_PATTERN, on_bad: str = "raise",
             cache: bool = False, trust_code_column: bool = False, workers: int | None = None,
             progress: bool | None = None, parallel_min_files: int = PARALLEL_MIN_FILES,
             strict: bool = False, max_file_mb: float = MAX_FILE_MB) -> FolderLoad:
    """Load every CSV (plain or ``.csv.gz``) in a folder as a panel.

    Args:
        path: the folder.
        pattern: a glob pattern or several (default ``("*.csv", "*.csv.gz")``); the folder's
            other entries are not read but counted and named (:attr:`FolderLoad.skipped`, the
            summary and the log).
        on_bad: as for :func:`load_csv`.
        cache: keep a columnar copy in ``FOLDER/.forecaster_cache`` and use it while the
            folder's files are unchanged (:mod:`forecaster.data.daily.cache`).
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
        max_file_mb: a file larger than this many MB is not read: skipped, counted and named
            in the summary (a gzip file that decompresses past it is an error naming it).

    A file of fewer than 2 usable rows (a listing of yesterday; none at all included) is no
    error: its stock is left out, counted and named (:attr:`FolderLoad.too_new`).

    Returns:
        a :class:`FolderLoad`: ``(frames, reports)``, both keyed by stock code (e.g.
        ``"sh.600000"``) in sorted order, with ``.skipped``, ``.summary()`` and how it was
        read. Parallel and serial loads give equal frames and reports, and an error in any
        file is the same :class:`DataError` naming it.
    """
    from forecaster.data.daily.cache import cache_location, manifest_of, read_cache, write_cache

    check_choice("on_bad", on_bad, ON_BAD)
    folder = Path(path)
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.is_file() else "no such folder"
        raise FileNotFoundError(f"{folder}: {what}")
    patterns = patterns_of(pattern)
    if not max_file_mb > 0:
        raise ValueError(f"max_file_mb must be > 0, got {max_file_mb!r}")
    files, skipped = scan_dir(folder, patterns, max_file_mb)
    if skipped:
        log.warning("%s: %s", folder, skipped_clause(skipped).lstrip("; "))
    if not files:
        raise DataError(f"{folder}: no files match {', '.join(repr(p) for p in patterns)}"
                        + (f" (it holds {named_list([str(s) for s in skipped], 20)})" if skipped else ""))
    options = {"pattern": list(patterns), "on_bad": on_bad, "trust_code_column": trust_code_column,
               "checks": QUALITY_CHECKS, "max_file_mb": max_file_mb}
    manifest = manifest_of(files, options, folder) if cache else None
    if cache:
        hit = read_cache(cache_location(folder), manifest, LoadReport)
        if hit is not None:
            for report in hit[1].values():
                log_report(report, flags=not strict)
            # the cache keeps a too-new stock's report without a frame
            frames, reports = hit
            too_new = {c: r for c, r in reports.items() if c not in frames}
            reports = {c: r for c, r in reports.items() if c in frames}
            return _checked(FolderLoad(frames, reports, folder=path, skipped=skipped, from_cache=True,
                                       workers=0, too_new=too_new), strict)
    results, used = _load_files(folder, files, on_bad, trust_code_column, workers, progress,
                                parallel_min_files, max_file_mb)
    frames, reports, too_new = {}, {}, {}
    for file, (frame, report) in zip(files, results, strict=True):
        log_report(report, flags=not strict)
        key = str(frame["code"].iloc[0]) if len(frame) else name_code(file)  # no rows: its name
        if key in reports or key in too_new:
            other = (reports.get(key) or too_new[key]).path
            raise DataError(f"{file}: stock {key} also appears in {other}; expected one file per stock")
        if is_too_new(report):
            too_new[key] = report
        else:
            frames[key], reports[key] = frame, report
    if not frames:
        raise DataError(f"{folder}: no file has {MIN_ROWS} or more usable rows; "
                        f"{too_new_clause(dict(sorted(too_new.items())))}")
    frames, reports = dict(sorted(frames.items())), dict(sorted(reports.items()))
    too_new = dict(sorted(too_new.items()))
    _drop_lonely_days(frames, reports, on_bad)
    if cache:
        write_cache(cache_location(folder), manifest, frames, {**reports, **too_new})
    return _checked(FolderLoad(frames, reports, folder=path, skipped=skipped, workers=used, too_new=too_new),
                    strict)



def _drop_lonely_days(frames: dict, reports: dict, on_bad: str) -> None:
    """A day only one file holds while others trade around it (:func:`~forecaster.data.daily.calendar.
    lonely_days`) would add a trading day to every stock: an error naming the file, line and
    day, or with ``on_bad="drop"`` its rows dropped and counted in that file's report."""
    lonely = lonely_days(frames)
    if not lonely:
        return
    if on_bad == "raise":
        code, days = next(iter(lonely.items()))
        path = Path(reports[code].path)
        others = sum(len(d) for d in lonely.values()) - 1
        more = f"; {others} more such row(s) in the folder" if others else ""
        raise DataError(f"{path}: line {line_of(path, days[0])}: {days[0].date()} is a day no other file of "
                        f"the folder has, although {MIN_WITNESSES} or more of them trade around it (a day "
                        f"the market did not trade?){more}; {DROP_HINT} to drop and count them")
    for code, days in lonely.items():
        keep = ~frames[code].index.normalize().isin(days)
        frames[code] = frames[code].loc[keep]
        report = reports[code]
        report.dropped["days no other file has"] = int((~keep).sum())
        report.rows_kept = len(frames[code])
        log.warning("%s: dropped %d row(s) on days no other file has: %s", report.path, int((~keep).sum()),
                    ", ".join(str(d.date()) for d in days[:5]))


def _checked(loaded: FolderLoad, strict: bool) -> FolderLoad:
    """``strict``: the first implausible row of the folder as a :class:`DataError`; else the
    folder-wide findings (columns lacking, adjustflags unlike the others') in the log (each
    file's own flags were logged with its report)."""
    if strict:
        for path, flag in loaded.flagged():
            raise_flagged(path, [flag])
    for code, columns in loaded.lacking.items():
        source = FORMATS_BY_NAME[loaded.reports[code].format].source
        log.warning("%s: lacks column(s) %s that other files have; features that need them are missing "
                    "for %s", loaded.reports[code].path, ", ".join(sorted(map(source, columns))), code)
    for code, flag in loaded.adjust.items():
        log.warning("%s: %d row(s) with %s, kept: first %s", loaded.reports[code].path, flag.rows,
                    KINDS[flag.kind], flag.describe())
    if loaded.too_new:
        log.warning("%s: %s", loaded.folder, too_new_clause(loaded.too_new))
    return loaded


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _load_task(args: tuple[str, str, bool, float]) -> tuple[pd.DataFrame, LoadReport]:
    path, on_bad, trust, max_file_mb = args
    return read_one(Path(path), on_bad, None, trust, short_ok=True, max_file_mb=max_file_mb)


def _load_files(folder: Path, files: list[Path], on_bad: str, trust: bool, workers: int | None,
                progress: bool | None, min_files: int, max_file_mb: float = MAX_FILE_MB) -> tuple[list, int]:
    """``([(frame, report)] in the order of files, processes used)``."""
    from tqdm import tqdm

    n = len(files)
    workers = available_cores() if workers is None else int(workers)
    if workers < 1:
        raise ValueError(f"workers must be >= 1 or None, got {workers}")
    workers = min(workers, n)
    parallel = workers > 1 and n >= min_files
    show = sys.stderr.isatty() if progress is None else bool(progress)
    tasks = [(str(f), on_bad, trust, max_file_mb) for f in files]
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
