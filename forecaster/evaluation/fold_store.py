"""Finished folds of a walk-forward run, kept on disk so an interrupted run can resume.

Each fold's output (its forecast rows, the models it skipped and the models that failed, the
warm-start states) is written to ``FOLDER/fold_NNNN.json`` with ``fold_NNNN.parquet`` (its
rows) and, with warm-start states, ``fold_NNNN.npz`` (their tensors), each atomically and the
JSON last, the moment the fold finishes, so a crash, SIGKILL or Ctrl-C loses only the folds
still running. ``FOLDER/run.json`` holds a fingerprint of the data, of the configuration (fold
layout, labels, every model's class and parameters) and of the code (the package's version and
a digest of its source and of ``seq2seq.core``'s); a resume with other data, another
configuration or another version is refused, since mixing folds of two runs would give a report
that belongs to neither.

What a resume guarantees of a fold file: it is read as data, never run. The formats hold data
only (JSON, Parquet, ``.npy`` members read with ``allow_pickle=False``; no pickle anywhere on
the resume path, :mod:`.fold_files`), every field is checked against what this version writes
and every size against the file that holds it, so a forged file gives one ``ResumeError``
line, never code run, a crash or a memory bomb. In a report folder a resume also reads only
files whose SHA-256 is the one the run recorded in the folder's manifest (a swapped file is
refused, named); a store outside any claimed folder (given to the API) has no manifest, and
there the JSON's own record of its companions' SHA-256 catches a mismatched pair. Fold files
of versions that pickled them (``fold_NNNN.pkl``) are refused on resume, not read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import forecaster
import seq2seq.core
from forecaster.data.panel import Panel
from forecaster.evaluation.fold_arrays import FoldFileError
from forecaster.evaluation.fold_files import fold_paths, read_fold, write_fold
from seq2seq.core import atomic_write
from seq2seq.core.outputs import in_claimed_folder, is_own_file

log = logging.getLogger(__name__)

# Options that change how a run executes but not its numbers.
_EXECUTION_ONLY = ("n_jobs", "progress", "resume", "backend", "address")


@dataclass
class FoldOutput:
    """What one fold produced: forecast rows (``date`` index; ``code, model, fold,
    forecast``), ``{(fold, name): reason}`` of models skipped (too little data) and of models
    that failed (exception summary), ``{(fold, name): [codes]}`` of stocks a model left
    out, ``{(fold, name): seconds}`` each model took to fit and forecast, and, in a run that
    warm-starts, ``{name: state}`` each warm-startable model ended the fold with (what a later
    fold starts from; kept on disk so a resumed run continues the chain), and the peak resident
    memory of the worker that ran it."""

    fold: int
    rows: list[pd.DataFrame]
    skipped: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    excluded: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    states: dict = field(default_factory=dict)
    peak_gb: float | None = None  # the worker's peak resident memory over the fold (Linux)


def data_fingerprint(frames: Mapping[str, pd.DataFrame] | Panel) -> str:
    """A hash of every stock's rows, columns and values (order of stocks irrelevant); of a
    :class:`~forecaster.data.panel.Panel`'s calendar, codes and arrays."""
    h = hashlib.sha256()
    if isinstance(frames, Panel):
        h.update(b"panel")
        h.update(frames.dates.asi8.tobytes())
        h.update(",".join(map(str, frames.codes)).encode())
        for name in sorted(frames.fields):
            h.update(name.encode())
            h.update(np.ascontiguousarray(frames.fields[name]).tobytes())
        for mask in (frames.listed, frames.suspended, frames.st):
            h.update(np.ascontiguousarray(mask).tobytes())
        return h.hexdigest()
    for code in sorted(frames):
        frame = frames[code]
        h.update(code.encode())
        h.update(",".join(map(str, frame.columns)).encode())
        h.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    return h.hexdigest()


def _describe(value):
    """A JSON-able, address-free description of a parameter value (estimators by their
    class and parameters)."""
    if hasattr(value, "get_params"):
        return {"class": f"{type(value).__module__}.{type(value).__qualname__}",
                "params": {k: _describe(v) for k, v in sorted(value.get_params(deep=False).items())}}
    if isinstance(value, (list, tuple)):
        return [_describe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _describe(v) for k, v in sorted(value.items())}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, pd.Timestamp):  # [walk_forward] start/end: a date, as the TOML file writes it
        return value.isoformat()
    return repr(value)


def run_description(config, models: Mapping) -> dict:
    """What makes a run's numbers: the walk-forward configuration (without execution-only
    options such as ``n_jobs``) and each model's class and parameters."""
    conf = {k: _describe(v) for k, v in asdict(config).items() if k not in _EXECUTION_ONLY}
    return {"walk_forward": conf, "models": {name: _describe(m) for name, m in models.items()}}


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    keys = sorted(set(old) | set(new))
    out = []
    for k in keys:
        a, b = old.get(k, "<absent>"), new.get(k, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} then, {b!r} now")
    return out


class ResumeError(ValueError):
    """The stored folds belong to a run with other data, another configuration or another
    version of the code, or a fold file is not the one the run wrote."""


def code_fingerprint() -> dict:
    """The version of the code that computes a run's folds: the package's version and a
    digest of its source files and of ``seq2seq.core``'s, which it imports (any change of
    either may change the forecasts)."""
    roots = tuple(str(Path(package.__file__).parent) for package in (forecaster, seq2seq.core))
    return {"version": forecaster.__version__, "source": _source_digest(roots)}


@functools.cache
def _source_digest(roots: tuple[str, str]) -> str:
    """The digest of ``forecaster/`` and ``seq2seq/core/`` at ``roots``, once a process (the
    code it runs, not files edited on disk since). Each file is hashed with its path under its
    package's name and its length, so no two trees give the same bytes to hash."""
    h = hashlib.sha256()
    for prefix, root in zip(("forecaster", "seq2seq/core"), map(Path, roots), strict=True):
        for path in sorted(root.rglob("*.py")):
            data = path.read_bytes()
            h.update(f"{prefix}/{path.relative_to(root).as_posix()}\0{len(data)}\0".encode())
            h.update(data)
    return h.hexdigest()[:16]


_FOLD = re.compile(r"fold_(\d{4,})\.json")
# Every file a fold store writes, and the pickles of versions before the fold files of issue 78.
_FOLD_FILES = ("fold_*.json", "fold_*.parquet", "fold_*.npz", "fold_*.pkl")


class FoldStore:
    """The fold files of one run in ``folder`` (:mod:`.fold_files`: a fold's JSON, its rows'
    Parquet file and its tensors' npz).

    Args:
        folder: where fold files live (created on first write).
        fingerprint: ``{"data": hash, "run": run_description(...)}`` of this run.
    """

    RUN_FILE = "run.json"

    def __init__(self, folder: str | Path, fingerprint: dict):
        self.folder = Path(folder)
        self._checked: dict[int, FoldOutput] | None = None  # finished folds read by check()
        fingerprint = {**fingerprint, "code": fingerprint.get("code", code_fingerprint())}
        self.fingerprint = json.loads(json.dumps(fingerprint))  # as it reads back from disk

    def finished(self) -> list[Path]:
        """The JSON files of the finished folds (a fold's JSON is written last), by number."""
        return sorted(p for p in self.folder.glob("fold_*.json") if _FOLD.fullmatch(p.name))

    def _all_files(self) -> list[Path]:
        return sorted({p for pattern in _FOLD_FILES for p in self.folder.glob(pattern)})

    def _refuse(self, why: str) -> ResumeError:
        return ResumeError(f"cannot resume the run in {self.folder}: {why}; run without --resume to start "
                           "afresh")

    def check(self, resume: bool, folds=None, codes=None) -> None:
        """Raise :class:`ResumeError` if ``start(resume)`` would refuse; reads, never writes
        (a run validates this before it touches its folder). Given the run's ``folds`` and the
        data's ``codes``, the finished folds are read and their rows checked too
        (:meth:`check_contents`), and kept for :meth:`start`."""
        self._checked = None
        if self.folder.exists() and not self.folder.is_dir():
            raise ResumeError(f"{self.folder}: is a file, not the folder of fold files a run keeps there; "
                              "move it away (or choose another --out)")
        if not resume:
            return
        self._check_run()
        if folds is not None and (self.folder / self.RUN_FILE).is_file():
            done = self._finished_folds()
            self.check_contents(done, folds, codes)
            self._checked = done

    def _check_run(self) -> None:
        old_files = sorted(self.folder.glob("fold_*.pkl"))
        if old_files:
            raise self._refuse(f"{len(old_files)} fold file(s) ({old_files[0].name}, ...) were written by an "
                               "earlier version of forecaster, in a format no longer read (a pickle)")
        stored = self.folder / self.RUN_FILE
        if not stored.is_file():
            if self.finished():
                raise ResumeError(f"{self.folder}: fold files without {self.RUN_FILE}; cannot tell which "
                                  "run they belong to (remove them or run without resume)")
            return
        try:
            old = json.loads(stored.read_text())
        except (ValueError, OSError) as exc:
            why = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise self._refuse(f"{self.RUN_FILE} cannot be read ({why})") from None
        if not isinstance(old, dict):
            raise self._refuse(f"{self.RUN_FILE} holds a {type(old).__name__}, not a run's fingerprint")
        problems = []
        if old.get("data") != self.fingerprint["data"]:
            problems.append("the data differ (a file was changed, added or removed)")
        if old.get("code") != self.fingerprint["code"]:
            was = old.get("code")
            if not (isinstance(was, dict) and {"version", "source"} <= set(was)):
                was = {"version": "an earlier one", "source": "not recorded"}
            problems.append(f"the folds were computed by another version of forecaster ({was['version']}, "
                            f"source {was['source']} then; {self.fingerprint['code']['version']}, source "
                            f"{self.fingerprint['code']['source']} now)")
        run = old.get("run") if isinstance(old.get("run"), dict) else {}
        diff = _differences(run, self.fingerprint["run"])
        if diff:
            problems.append("the configuration differs: " + "; ".join(diff[:8])
                            + (f" (and {len(diff) - 8} more)" if len(diff) > 8 else ""))
        if problems:
            raise ResumeError(f"cannot resume the run in {self.folder}: " + " and ".join(problems)
                              + "; run without --resume to start afresh, or restore the data and "
                              "options of the interrupted run")

    def start(self, resume: bool) -> dict[int, FoldOutput]:
        """Begin a run: with ``resume``, the finished folds of the stored run (after checking
        it is this run, :meth:`check`); without, clear any fold files of an earlier run.
        Returns the folds already done, by number."""
        if resume:
            self._check_run()
        if not resume or not (self.folder / self.RUN_FILE).is_file():
            files = self._all_files()
            if resume:
                log.warning("%s: nothing to resume, starting from the first fold", self.folder)
            elif files:
                log.warning("%s: %d fold file(s) of an earlier run replaced (resume would have "
                            "continued it)", self.folder, len(files))
            for f in files:
                f.unlink()
            self._write_fingerprint()
            return {}
        done = self._checked if self._checked is not None else self._finished_folds()
        self._checked = None
        numbers = {f"fold_{k:04d}" for k in done}
        unfinished = [p for p in self._all_files() if p.stem not in numbers]
        if unfinished:
            log.warning("%s: %d file(s) of folds that did not finish (no fold_NNNN.json), such as %s, "
                        "are left unread: those folds run again", self.folder, len(unfinished),
                        unfinished[0].name)
        log.info("%s: resuming with %d finished fold(s)", self.folder, len(done))
        return done

    def _finished_folds(self) -> dict[int, FoldOutput]:
        done = {}
        for f in self.finished():
            out = self._read(f)
            done[out.fold] = out
        return done

    def check_contents(self, done: Mapping[int, FoldOutput], folds, codes) -> None:
        """Refuse, in one line naming the file and its first bad row, a finished fold whose rows
        are not this run's: a fold number the run does not cut, a date outside the fold's test
        days (the future, the past, a Saturday), a code the data lack, or a (date, code, model)
        held twice (which would count twice in every statistic). ``folds``: the run's
        :class:`~forecaster.evaluation.folds.Fold` list; ``codes``: the data's stocks."""
        spans = {f.fold: f for f in folds}
        known = pd.Index(list(map(str, codes)))
        for k, output in sorted(done.items()):
            name = fold_paths(self.folder, k)["parquet"].name
            fold = spans.get(k)
            if fold is None:
                raise self._refuse(f"{name}: fold {k} is not one of this run's {len(folds)} folds")
            if not output.rows:
                continue
            rows = pd.concat(output.rows)
            days = pd.DatetimeIndex(fold.test_days)
            dates = pd.DatetimeIndex(rows.index)
            where = {
                "date": ~dates.normalize().isin(days),
                "code": ~rows["code"].astype(str).isin(known).to_numpy(),
                "repeat": pd.DataFrame({"d": dates, "c": rows["code"].astype(str).to_numpy(),
                                        "m": rows["model"].astype(str).to_numpy()}).duplicated().to_numpy(),
            }
            for what, bad in where.items():
                if not bad.any():
                    continue
                i = int(np.argmax(bad))
                row = (f"row {i + 1} ({dates[i].date()}, {rows['code'].iloc[i]}, model "
                       f"{rows['model'].iloc[i]})")
                span = f"{days[0].date()}..{days[-1].date()}"
                why = {"date": f"its date is not a test day of fold {k} ({span})",
                       "code": "its code is not a stock of the data",
                       "repeat": "it repeats an earlier row's date, code and model"}[what]
                raise self._refuse(f"{name}: {row}: {why} ({int(bad.sum())} such row(s)); a fold file "
                                   "holds one forecast per test day, stock and model of its fold")

    def _verify(self, path: Path) -> None:
        """Refuse a file of a claimed folder whose digest is not the one its manifest records."""
        if in_claimed_folder(path) and not is_own_file(path):
            raise self._refuse(f"{path.name} is not the file the run wrote (its SHA-256 is not the one "
                               "recorded in the folder's manifest); a fold file is only read as written")

    def _read(self, path: Path) -> FoldOutput:
        """One finished fold, every file checked against the manifest and read by
        :func:`.fold_files.read_fold` (JSON, Parquet, npz: no pickle)."""
        try:
            return FoldOutput(**read_fold(path, int(_FOLD.fullmatch(path.name).group(1)), self._verify))
        except FoldFileError as exc:
            raise self._refuse(str(exc)) from None

    def _write_fingerprint(self) -> None:
        with atomic_write(self.folder / self.RUN_FILE, "w") as f:
            json.dump(self.fingerprint, f, indent=1)

    def save(self, output: FoldOutput) -> Path:
        """Write one finished fold: its files atomically, its JSON last, so a kill mid-write
        leaves the fold unfinished, never half-read. Returns the JSON's path."""
        return write_fold(self.folder, output)
