"""Checkpoint files shared by both packages: a dict of tensors and plain values, tagged with a
kind and a format version, written atomically and read with ``weights_only=True``."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import torch


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, of another kind or of an unknown version."""


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"wb"`` or ``"w"``; text is
    UTF-8 with ``newline=""``, as the csv module and pandas want). When the block ends it is
    flushed, synced and renamed over ``path``; on any error it is removed and ``path`` is left
    as it was, so a crash never leaves a half-written file."""
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_write mode must be 'wb' or 'w', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        text = {} if mode == "wb" else {"encoding": "utf-8", "newline": ""}
        with os.fdopen(fd, mode, **text) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(payload: dict[str, Any], path: str | Path, kind: str, version: int) -> Path:
    """Write ``payload`` plus ``{"kind", "version"}`` to ``path`` atomically
    (:func:`atomic_write`): an existing file is only ever replaced by a whole one."""
    with atomic_write(path) as f:
        torch.save({"kind": kind, "version": version, **payload}, f)
    return Path(path)


def load_checkpoint(path: str | Path, kind: str, versions: tuple[int, ...]) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``: no pickled
    code runs) and check its kind and version, with a clear error otherwise."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or foreign files
        raise CheckpointError(f"{path}: cannot read checkpoint (corrupt, truncated or not a torch "
                              f"file): {type(exc).__name__}: {exc}") from exc
    if not isinstance(data, dict) or "kind" not in data:
        raise CheckpointError(f"{path}: not a {kind} checkpoint (no 'kind' entry)")
    if data["kind"] != kind:
        raise CheckpointError(f"{path}: a {data['kind']!r} checkpoint, expected {kind!r}")
    if data.get("version") not in versions:
        raise CheckpointError(
            f"{path}: checkpoint format version {data.get('version')!r} is not supported "
            f"(this version reads {list(versions)})"
        )
    return data
