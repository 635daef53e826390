"""How an experiment file records a benchmark weights file (``[backtest] benchmark_weights``):
by its absolute path, with its SHA-256 beside it (``benchmark_weights_sha256``), so that
``forecaster run REPORT/experiment.toml`` reproduces the run from any folder. Reading the file
back, a relative path is read from the experiment file's folder, and a recorded digest that the
file no longer matches is refused in one line (the run would not reproduce: restore the file,
or delete the digest to run with the file as it is now)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from forecaster.app.fields import ConfigError
from forecaster.portfolio.backtest import WEIGHT_SOURCES

WEIGHTS_DIGEST = "benchmark_weights_sha256"  # [backtest]'s record of a weights file, not an option


def file_digest(path: str | Path) -> str:
    """The SHA-256 of the file ``path``, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _is_file(spec) -> bool:
    return isinstance(spec, str) and bool(spec) and spec not in WEIGHT_SOURCES and Path(spec).is_file()


def record_weights(backtest: dict) -> dict:
    """``[backtest]``'s ``{key: value}`` as recorded: a weights file by its absolute path and its
    SHA-256 (a new dict; anything else as it is)."""
    spec = backtest.get("benchmark_weights")
    if not _is_file(spec):
        return backtest
    return {**backtest, "benchmark_weights": str(Path(spec).resolve()), WEIGHTS_DIGEST: file_digest(spec)}


def read_weights_record(backtest: dict, path: Path) -> None:
    """``[backtest]`` of the experiment file ``path``, in place: a relative weights file read
    from the file's folder; a recorded digest checked against the file as it is now (a changed
    or missing file is refused, :class:`ConfigError`) and removed."""
    spec = backtest.get("benchmark_weights")
    relative = isinstance(spec, str) and bool(spec) and not Path(spec).is_absolute()
    if relative and spec not in WEIGHT_SOURCES and (path.parent / spec).is_file():  # as [data] universe
        backtest["benchmark_weights"] = spec = str((path.parent / spec).resolve())
    if WEIGHTS_DIGEST not in backtest:
        return
    digest = backtest.pop(WEIGHTS_DIGEST)
    at = f"{path}: [backtest] {WEIGHTS_DIGEST}"
    if not (isinstance(digest, str) and len(digest) == 64):
        raise ConfigError(f"{at} = {digest!r}: expected the 64 hex digits of a SHA-256")
    if not _is_file(spec):
        raise ConfigError(f"{at}: the digest of a weights file, but benchmark_weights = {spec!r} is no file "
                          "(moved or deleted?)")
    now = file_digest(spec)
    if now != digest.lower():
        raise ConfigError(f"{path}: [backtest] benchmark_weights = {spec!r} has changed since the run "
                          f"(SHA-256 {digest[:12]}... recorded, {now[:12]}... now), so the run would not "
                          f"reproduce; restore the file, or delete {WEIGHTS_DIGEST} to run with it as it is")
