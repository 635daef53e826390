"""How an experiment file records the files ``[backtest]`` reads (``benchmark_weights``, a
weights file; ``dividend_data``, a dividend export) and ``[strategy]``'s ``industries``: by
their absolute path, each with its
SHA-256 right after it (``benchmark_weights_sha256``, ``dividend_data_sha256``), so that
``forecaster run REPORT/experiment.toml`` reproduces the run from any folder. Reading the file
back, a relative path is read from the experiment file's folder, and a recorded digest that the
file no longer matches is refused in one line (the run would not reproduce: restore the file,
or delete the digest to run with the file as it is now)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from forecaster.app.fields import ConfigError
from forecaster.portfolio.backtest import WEIGHT_SOURCES

RECORDED = ("benchmark_weights", "dividend_data")  # [backtest]'s keys that may name a file
STRATEGY_RECORDED = ("industries",)  # [strategy]'s
DIGESTS = tuple(f"{key}_sha256" for key in (*RECORDED, *STRATEGY_RECORDED))


def file_digest(path: str | Path) -> str:
    """The SHA-256 of the file ``path``, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _is_file(spec) -> bool:
    return isinstance(spec, str) and bool(spec) and spec not in WEIGHT_SOURCES and Path(spec).is_file()


def record_weights(backtest: dict, keys: tuple = RECORDED) -> dict:
    """``[backtest]``'s ``{key: value}`` as recorded: each file of ``keys`` (:data:`RECORDED`;
    ``[strategy]``'s: :data:`STRATEGY_RECORDED`) by its absolute path and its SHA-256 right
    after it (a new dict; anything else as it is)."""
    out = {}
    for key, value in backtest.items():
        if key in keys and _is_file(value):
            out[key] = str(Path(value).resolve())
            out[f"{key}_sha256"] = file_digest(value)
        else:
            out[key] = value
    return out


def read_weights_record(backtest: dict, path: Path, keys: tuple = RECORDED,
                        section: str = "backtest") -> None:
    """``[backtest]`` (or ``section``, its files ``keys``) of the experiment file ``path``, in
    place: a relative file of ``keys`` read from the file's folder; a recorded digest checked
    against the file as it is now (a changed or missing file is refused, :class:`ConfigError`)
    and removed."""
    for key in keys:
        spec = backtest.get(key)
        relative = isinstance(spec, str) and bool(spec) and not Path(spec).is_absolute()
        if relative and spec not in WEIGHT_SOURCES and (path.parent / spec).is_file():  # as [data] universe
            backtest[key] = spec = str((path.parent / spec).resolve())
        name = f"{key}_sha256"
        if name not in backtest:
            continue
        digest = backtest.pop(name)
        at = f"{path}: [{section}] {name}"
        if not (isinstance(digest, str) and len(digest) == 64):
            raise ConfigError(f"{at} = {digest!r}: expected the 64 hex digits of a SHA-256")
        if not _is_file(spec):
            raise ConfigError(f"{at}: the digest of a file, but {key} = {spec!r} is no file (moved or "
                              "deleted?)")
        now = file_digest(spec)
        if now != digest.lower():
            raise ConfigError(f"{path}: [{section}] {key} = {spec!r} has changed since the run (SHA-256 "
                              f"{digest[:12]}... recorded, {now[:12]}... now), so the run would not "
                              f"reproduce; restore the file, or delete {name} to run with it as it is")
