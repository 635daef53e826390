"""Finished folds of a walk-forward run, kept on disk so an interrupted run can resume.

Each fold's output (its forecast rows, the models it skipped and the models that failed) is
written atomically to ``FOLDER/fold_NNNN.pkl`` the moment the fold finishes, so a crash,
SIGKILL or Ctrl-C loses only the folds still running. ``FOLDER/run.json`` holds a fingerprint
of the data, of the configuration (fold layout, labels, every model's class and parameters)
and of the code (the package's version and a digest of its source); a resume with other data,
another configuration or another version is refused, since mixing folds of two runs would
give a report that belongs to neither.

A fold file is data, never code: in a report folder a resume reads only files whose SHA-256 is
the one the run recorded in the folder's manifest (a swapped file is refused, named; a store
outside any claimed folder, given to the API, has no manifest), and reads them with the
restricted unpickler of :mod:`.safe_pickle` (frames, arrays, this module's ``FoldOutput`` and
the network configuration; tensors are stored as numpy arrays), so even a file whose digest
was forged alongside cannot run code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

import forecaster
from forecaster.data.panel import Panel
from forecaster.evaluation.safe_pickle import UnsafePickle, load_pickle
from forecaster.models.panel.network import PanelNetConfig
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
    digest of its source files (any change of the code may change the forecasts)."""
    root = Path(forecaster.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return {"version": forecaster.__version__, "source": h.hexdigest()[:16]}


_TENSOR = "__tensor__"


def _plain(value):
    """``value`` with every torch tensor as ``{_TENSOR: ndarray, "dtype": name}`` (a fold file
    holds numpy arrays, which the restricted unpickler rebuilds; tensors it does not)."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu()
        return {_TENSOR: (t.float() if t.dtype == torch.bfloat16 else t).numpy(), "dtype": str(t.dtype)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _tensors(value):
    """The inverse of :func:`_plain`."""
    if isinstance(value, dict):
        if _TENSOR in value:
            dtype = getattr(torch, value["dtype"].removeprefix("torch."))
            return torch.from_numpy(np.array(value[_TENSOR])).to(dtype)
        return {k: _tensors(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_tensors(v) for v in value)
    return value


class FoldStore:
    """The fold files of one run in ``folder``.

    Args:
        folder: where fold files live (created on first write).
        fingerprint: ``{"data": hash, "run": run_description(...)}`` of this run.
    """

    RUN_FILE = "run.json"

    def __init__(self, folder: str | Path, fingerprint: dict):
        self.folder = Path(folder)
        fingerprint = {**fingerprint, "code": fingerprint.get("code", code_fingerprint())}
        self.fingerprint = json.loads(json.dumps(fingerprint))  # as it reads back from disk

    def _fold_path(self, fold: int) -> Path:
        return self.folder / f"fold_{fold:04d}.pkl"

    def finished(self) -> list[Path]:
        return sorted(self.folder.glob("fold_*.pkl"))

    def check(self, resume: bool) -> None:
        """Raise :class:`ResumeError` if ``start(resume)`` would refuse; reads, never writes
        (a run validates this before it touches its folder)."""
        if not resume:
            return
        stored = self.folder / self.RUN_FILE
        if not stored.is_file():
            if self.finished():
                raise ResumeError(f"{self.folder}: fold files without {self.RUN_FILE}; cannot tell which "
                                  "run they belong to (remove them or run without resume)")
            return
        old = json.loads(stored.read_text())
        problems = []
        if old.get("data") != self.fingerprint["data"]:
            problems.append("the data differ (a file was changed, added or removed)")
        if old.get("code") != self.fingerprint["code"]:
            was = old.get("code") or {"version": "an earlier one", "source": "not recorded"}
            problems.append(f"the folds were computed by another version of forecaster ({was['version']}, "
                            f"source {was['source']} then; {self.fingerprint['code']['version']}, source "
                            f"{self.fingerprint['code']['source']} now)")
        diff = _differences(old.get("run", {}), self.fingerprint["run"])
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
        self.check(resume)
        files = self.finished()
        if not resume or not (self.folder / self.RUN_FILE).is_file():
            if resume:
                log.warning("%s: nothing to resume, starting from the first fold", self.folder)
            elif files:
                log.warning("%s: %d fold file(s) of an earlier run replaced (resume would have "
                            "continued it)", self.folder, len(files))
            for f in files:
                f.unlink()
            self._write_fingerprint()
            return {}
        done = {}
        for f in files:
            out = self._read(f)
            done[out.fold] = out
        log.info("%s: resuming with %d finished fold(s)", self.folder, len(done))
        return done

    def _read(self, path: Path) -> FoldOutput:
        """One fold file, after checking it is the one this run wrote (its digest in the
        folder's manifest) and with the restricted unpickler."""
        if in_claimed_folder(path) and not is_own_file(path):
            raise ResumeError(f"cannot resume the run in {self.folder}: {path.name} is not the file the run "
                              "wrote (its SHA-256 is not the one recorded in the folder's manifest); a fold "
                              "file is only read as written. Run without --resume to start afresh")
        try:
            out = load_pickle(path, extra=(FoldOutput, PanelNetConfig))
        except UnsafePickle as exc:
            raise ResumeError(f"cannot resume the run in {self.folder}: {path.name} asks for {exc.name}, "
                              "which a fold never holds (a pickle can run code: refused unread)") from None
        except Exception as exc:  # noqa: BLE001 - a damaged file, said in one line
            raise ResumeError(f"cannot resume the run in {self.folder}: {path.name} cannot be read "
                              f"({(str(exc).splitlines() or [type(exc).__name__])[0]})") from None
        if not isinstance(out, FoldOutput):
            raise ResumeError(f"cannot resume the run in {self.folder}: {path.name} holds a "
                              f"{type(out).__name__}, not a fold")
        out.states = _tensors(out.states)
        return out

    def _write_fingerprint(self) -> None:
        with atomic_write(self.folder / self.RUN_FILE, "w") as f:
            json.dump(self.fingerprint, f, indent=1)

    def save(self, output: FoldOutput) -> Path:
        """Write one finished fold (atomically: a kill mid-write leaves no partial file)."""
        path = self._fold_path(output.fold)
        plain = FoldOutput(**{**output.__dict__, "states": _plain(output.states)})
        with atomic_write(path) as f:
            pickle.dump(plain, f, protocol=pickle.HIGHEST_PROTOCOL)
        return path
