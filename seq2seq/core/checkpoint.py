"""Checkpoint files shared by both packages: a dict of tensors and plain values, tagged with a
kind and a format version, written atomically and read with ``weights_only=True``.

Each file also holds a SHA-256 digest of its contents (every tensor's dtype, shape and bytes,
every plain value), written at save time and checked at load: a file changed after it was
written (a flipped byte, a bad copy) stops with an error instead of loading wrong weights.
The file stays an ordinary ``torch.save`` file that ``torch.load`` reads."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import torch

from .outputs import file_digest, record_written

log = logging.getLogger(__name__)

DIGEST_KEY = "sha256"


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, of another kind or of an unknown version."""


def _file_mode() -> int:
    """The mode an ordinary ``open(path, "w")`` would give a new file (``0o666`` less the
    process's umask, 0644 under the common 022): ``mkstemp`` makes its files 0600, which a
    colleague or a web server could not read."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:  # Linux: read without changing it
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing (``mode`` ``"wb"`` or ``"w"``; text is
    UTF-8 with ``newline=""``, as the csv module and pandas want). When the block ends it is
    flushed, synced, given the usual file mode and renamed over ``path``; on any error it is
    removed and ``path`` is left as it was, so a crash never leaves a half-written file. A file
    written into a claimed output folder is recorded in its manifest
    (:func:`seq2seq.core.outputs.record_written`): what a run wrote is known, never guessed."""
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
        os.chmod(tmp, _file_mode())
        digest = file_digest(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    record_written(path, digest)


def _feed(h, value) -> None:
    """Add ``value`` to the hash ``h`` in a canonical form (dict keys sorted, each value's type
    tagged), so equal contents give equal digests however the file was laid out."""
    if isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        h.update(f"D{len(value)}".encode())
        for key in sorted(value, key=repr):
            h.update(repr(key).encode())
            _feed(h, value[key])
    elif isinstance(value, (list, tuple)):
        h.update(f"{'L' if isinstance(value, list) else 'U'}{len(value)}".encode())
        for item in value:
            _feed(h, item)
    else:
        h.update(f"V{type(value).__name__}:{value!r}".encode())


def content_digest(data: dict[str, Any]) -> str:
    """SHA-256 (hex) of a checkpoint's contents, the digest entry itself left out."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in data.items() if k != DIGEST_KEY})
    return h.hexdigest()


def save_checkpoint(payload: dict[str, Any], path: str | Path, kind: str, version: int) -> Path:
    """Write ``payload`` plus ``{"kind", "version", "sha256"}`` (the digest of the contents) to
    ``path`` atomically (:func:`atomic_write`): an existing file is only ever replaced by a
    whole one."""
    data = {"kind": kind, "version": version, **payload}
    data[DIGEST_KEY] = content_digest(data)
    with atomic_write(path) as f:
        torch.save(data, f)
    return Path(path)


# What a checkpoint this toolkit wrote holds: a tree of dicts and lists a few levels deep.
_MAX_DEPTH = 64


def _pickle_bytes(path: Path) -> int:
    """The length of the file's pickle stream (``data.pkl`` inside torch's zip format), else
    the file's size: every object the stream builds costs at least one of its bytes."""
    try:
        with zipfile.ZipFile(path) as z:
            return sum(i.file_size for i in z.infolist() if i.filename.endswith("data.pkl"))
    except (zipfile.BadZipFile, OSError):
        return path.stat().st_size


def check_structure(data: Any, path: Path) -> None:
    """Refuse, before anything walks it whole, a payload that a file of this size cannot hold as
    a tree: one reached more often than its pickle has bytes (lists holding the same list twice,
    level after level: a digest over them would never end), nested past ``_MAX_DEPTH``, or whose
    tensors and strings add up to far more bytes than the file holds (one tensor listed a million
    times). Iterative, so deep nesting cannot exhaust the stack."""
    size = path.stat().st_size
    max_nodes = _pickle_bytes(path) + 1024
    max_bytes = 4 * size + (1 << 20)
    nodes = payload = 0
    stack = [(data, 0)]
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if depth > _MAX_DEPTH:
            raise CheckpointError(f"{path}: refused: its contents nest deeper than {_MAX_DEPTH} levels; "
                                  "a checkpoint holds a shallow tree of tensors and plain values")
        if isinstance(value, torch.Tensor):
            payload += value.numel() * value.element_size()
        elif isinstance(value, (str, bytes)):
            payload += len(value)
        elif isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
            stack.extend((k, depth + 1) for k in value if not isinstance(k, (str, int)))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)
        if nodes > max_nodes or payload > max_bytes:
            what = (f"more than {max_nodes:,} entries" if nodes > max_nodes
                    else f"more than {max_bytes:,} bytes of tensors and text")
            raise CheckpointError(
                f"{path}: refused: its {size:,} bytes unfold into {what} (the same objects referred "
                "to over and over); a checkpoint holds each tensor and value once")


def _read_error(path: Path, exc: Exception) -> CheckpointError:
    """One line for a file torch cannot read with ``weights_only=True``. A pickle that asks for
    a function or class is refused as what it is; torch's advice to retry with
    ``weights_only=False`` (which would run it) is never relayed."""
    text = str(exc)
    asked = re.search(r"GLOBAL ([\w.]+)", text)
    if asked:
        return CheckpointError(f"{path}: refused: the file asks to run code ({asked.group(1)}) when it "
                               "is read; a checkpoint holds only tensors and plain values. Do not open "
                               "it with another tool: use a checkpoint this toolkit wrote")
    # torch's own paragraphs of advice (weights_only=False, the docs) are left out
    reasons = [p.strip() for p in text.split("\n\n") if p.strip() and "weights_only" not in p
               and "Weights only load failed" not in p and "documentation" not in p]
    first = reasons[0].splitlines()[0][:300] if reasons else ""
    return CheckpointError(f"{path}: cannot read checkpoint (corrupt, truncated or not a torch "
                           f"file): {type(exc).__name__}: {first}")


def load_checkpoint(path: str | Path, kind: str, versions: tuple[int, ...]) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``: no pickled
    code runs), check its structure (:func:`check_structure`) and then its digest, kind and
    version, with a clear error otherwise. The returned dict has no digest entry."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or foreign files
        raise _read_error(path, exc) from None
    if not isinstance(data, dict) or "kind" not in data:
        raise CheckpointError(f"{path}: not a {kind} checkpoint (no 'kind' entry)")
    check_structure(data, path)
    if data["kind"] != kind:
        raise CheckpointError(f"{path}: a {str(data['kind'])[:80]!r} checkpoint, expected {kind!r}")
    stored = data.pop(DIGEST_KEY, None)
    if stored is None:
        log.warning("%s: written before checkpoints carried a digest; its contents cannot be "
                    "checked (save it again to add one)", path)
    elif stored != content_digest(data):
        raise CheckpointError(f"{path}: checkpoint is corrupt: its contents do not match the digest "
                              "written when it was saved (the file changed after it was written; "
                              "use another copy or retrain)")
    if data.get("version") not in versions:
        raise CheckpointError(
            f"{path}: checkpoint format version {data.get('version')!r} is not supported "
            f"(this version reads {list(versions)})"
        )
    return data
