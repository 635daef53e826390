"""Checkpoint files shared by both packages: a dict of tensors and plain values, tagged with a
kind and a format version, written atomically and read with ``weights_only=True``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, of another kind or of an unknown version."""


def save_checkpoint(payload: dict[str, Any], path: str | Path, kind: str, version: int) -> Path:
    """Write ``payload`` plus ``{"kind", "version"}`` to ``path`` atomically: a temporary file
    in the same folder is written, flushed and renamed over the target, so a crash never
    leaves a half-written checkpoint and an existing file is only replaced by a whole one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"kind": kind, "version": version, **payload}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
