"""Output folders (a report folder, a run folder, a training run's checkpoints) are never
silently overwritten or mixed, and no command deletes a file it did not write: the one rule of
both commands, ``forecaster`` and ``seq2seq``.

Every folder a command claims gets a manifest, :data:`MANIFEST`: one line per file written into
it (``sha256<TAB>path``), appended by :func:`seq2seq.core.atomic_write` as each file lands, the
latest line of a path winning. What a run wrote is known from that list, never guessed from a
file's suffix: ``--overwrite`` removes exactly the listed files whose contents are still the
ones written, and refuses a folder holding anything else (a user's CSV, notes, a file changed
since), naming it. A folder that already holds files is refused unless the caller resumes the
same run or asks to overwrite it; the folder is checked for being writable before any work
starts, so a long training never ends in a write error.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

MANIFEST = ".manifest.tsv"
# A run holds an exclusive lock on this file of its folder for its whole life (fcntl.flock: the
# system releases it when the process ends, however it ends), so a second run cannot write into
# the folder, overwrite it or resume it meanwhile. It names who holds it; a holder that ends
# cleanly removes it.
LOCK = ".lock"
# The folders this process holds, resolved path -> open lock file: a command's later check of
# its own folder (or a test's second command in one process) is not refused by its own lock.
_HELD: dict[str, object] = {}
_HEADER = ("# written by forecaster / seq2seq: sha256<TAB>path of each file a run wrote here; "
           "--overwrite removes only these, and only while unchanged\n")
# How far up from a written file its folder's manifest is looked for: a run folder's own files
# and those of its sub-folders (``folds/``).
_LEVELS = 2


class OutputError(ValueError):
    """An output folder or file that cannot be used: names it and what to do."""


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _manifest_of(path: Path) -> Path | None:
    """The manifest of the run folder ``path`` lies in (its folder or the one above), if any."""
    folder = path.absolute().parent
    for _ in range(_LEVELS):
        if (folder / MANIFEST).is_file():
            return folder / MANIFEST
        folder = folder.parent
    return None


def record_written(path: str | Path, digest: str | None = None) -> None:
    """Append ``path`` (just written) to its run folder's manifest, if it lies in one.

    One short line in append mode is a single ``write``: fold workers in parallel processes
    record into the same manifest without a lock."""
    path = Path(path)
    manifest = _manifest_of(path)
    if manifest is None or path.name == MANIFEST:
        return
    rel = path.absolute().relative_to(manifest.parent).as_posix()
    line = f"{digest or file_digest(path)}\t{rel}\n"
    with open(manifest, "a", encoding="utf-8") as f:
        f.write(line)


def read_manifest(folder: str | Path) -> dict[str, str]:
    """``{relative path: digest}`` of the files a run recorded writing into ``folder`` (empty
    when it has no manifest)."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return {}
    listed: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#") and "\t" in line:
            digest, rel = line.split("\t", 1)
            listed[rel] = digest
    return listed


def _lock_key(folder: Path) -> str:
    return str(folder.resolve())


def lock_holder(folder: str | Path) -> str | None:
    """Who holds ``folder``'s lock, if another process does (``"pid 123, started ..., running
    forecaster backtest ..."``), else ``None``. Only probes: takes nothing, writes nothing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: folders are not locked
        return None
    path = Path(folder) / LOCK
    if not path.is_file() or _lock_key(Path(folder)) in _HELD:
        return None
    try:
        with open(path, "rb") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return f.read(1000).decode("utf-8", "replace").strip() or "a process of this tool"
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    except OSError:
        return None
    return None


def _live_run(folder: Path, holder: str, option: str) -> OutputError:
    return OutputError(f"{option} {folder}: a live run is writing there ({holder}); --overwrite and "
                       f"--resume never apply to a folder a live run holds: wait for it to end, stop "
                       f"it, or choose another {option}")


def acquire_lock(folder: str | Path, option: str = "--out") -> str | None:
    """Hold ``folder``'s lock from now until :func:`release_lock` or the process's end. Returns
    a note when it takes over the lock of a run that ended without releasing it (killed, a
    crash: its lock file is still there, naming it); raises :class:`OutputError` naming the live
    run that holds it."""
    import sys
    import time

    try:
        import fcntl
    except ImportError:  # pragma: no cover
        return None
    folder = Path(folder)
    key = _lock_key(folder)
    if key in _HELD:
        return None
    while True:
        f = open(folder / LOCK, "a+b")
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            holder = f.read(1000).decode("utf-8", "replace").strip() or "a process of this tool"
            f.close()
            raise _live_run(folder, holder, option) from None
        try:  # the file locked must still be the folder's (a holder ending removes its file)
            same = os.stat(folder / LOCK).st_ino == os.fstat(f.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        f.close()
    f.seek(0)
    earlier = f.read(1000).decode("utf-8", "replace").strip()
    f.seek(0)
    f.truncate()
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    f.write(f"pid {os.getpid()}, started {started}, running {shlex.join(sys.argv)[:300]}\n".encode())
    f.flush()
    _HELD[key] = (f, folder / LOCK)
    return (f"took over the lock of an earlier run that ended without releasing it ({earlier})"
            if earlier else None)


def release_lock(folder: str | Path) -> None:
    """Let go of ``folder``'s lock, if this process holds it: its file removed (a clean end:
    a lock file found later names a run that died holding it), then the lock released."""
    held = _HELD.pop(_lock_key(Path(folder)), None)
    if held is None:
        return
    f, path = held
    try:
        path.unlink(missing_ok=True)
        f.close()  # closing the last descriptor releases the flock
    except OSError:  # pragma: no cover
        pass


def release_locks() -> None:
    """Let go of every folder this process holds (a command's end)."""
    for key in list(_HELD):
        release_lock(key)


def _start_manifest(folder: Path) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f"{MANIFEST}.", suffix=".tmp", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(_HEADER)
    os.chmod(tmp, 0o644)
    os.replace(tmp, folder / MANIFEST)


@dataclass(frozen=True)
class Ownership:
    """The files under a folder, by whether a run of this toolkit wrote them there."""

    ours: tuple[Path, ...]  # listed in the manifest, contents unchanged
    changed: tuple[str, ...]  # listed, but changed since they were written
    foreign: tuple[str, ...]  # never listed: a user's files


def ownership(folder: str | Path) -> Ownership:
    """Which files under ``folder`` (sub-folders included) this toolkit wrote, by its manifest."""
    folder = Path(folder)
    listed = read_manifest(folder)
    ours, changed, foreign = [], [], []
    for path in sorted(p for p in folder.rglob("*") if not p.is_dir()):
        rel = path.relative_to(folder).as_posix()
        if rel in (MANIFEST, LOCK):
            continue
        if rel not in listed or path.is_symlink():
            foreign.append(rel)
        elif file_digest(path) != listed[rel]:
            changed.append(rel)
        else:
            ours.append(path)
    return Ownership(tuple(ours), tuple(changed), tuple(foreign))


def in_claimed_folder(path: str | Path) -> bool:
    """Whether ``path`` lies in a folder a run claimed (one with a manifest, at most one level
    up), so that what was written there is known by digest."""
    return _manifest_of(Path(path)) is not None


def is_own_file(path: str | Path) -> bool:
    """Whether ``path`` is a file a run wrote into a folder with a manifest, unchanged since."""
    path = Path(path)
    manifest = _manifest_of(path)
    if manifest is None or not path.is_file() or path.is_symlink():
        return False
    rel = path.absolute().relative_to(manifest.parent).as_posix()
    digest = read_manifest(manifest.parent).get(rel)
    return digest is not None and digest == file_digest(path)


def remove_own_file(path: str | Path) -> bool:
    """Delete ``path`` if a run wrote it and it is unchanged (a stale output); ``True`` if it
    was removed. A user's file, or one changed since, is never touched."""
    if is_own_file(path):
        Path(path).unlink()
        return True
    return False


def _names(items, n: int = 8) -> str:
    items = list(items)
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


@dataclass(frozen=True)
class OutputFolder:
    """A checked output folder. ``claim()`` then makes it ready to write: the earlier run's
    files removed when overwriting, and its manifest started."""

    path: Path
    earlier: tuple[Path, ...]
    overwrite: bool

    def claim(self) -> Path:
        """Take the folder's lock (:func:`acquire_lock`: held until the command ends, or the
        process), remove the earlier run's files (only when overwriting, and only those still
        as the run wrote them), start the manifest and return the folder."""
        import logging

        self.path.mkdir(parents=True, exist_ok=True)
        note = acquire_lock(self.path)
        if note:
            logging.getLogger(__name__).warning("%s: %s", self.path, note)
        folders = set()
        if self.overwrite:
            listed = read_manifest(self.path)
            for entry in self.earlier:
                rel = entry.relative_to(self.path).as_posix()
                # checked again: a file changed since the check is left where it is
                if entry.is_file() and listed.get(rel) == file_digest(entry):
                    entry.unlink()
                    folders.update(p for p in entry.parents if self.path in p.parents)
        for sub in sorted(folders, key=lambda p: -len(p.parts)):  # emptied sub-folders, deepest first
            if sub.is_dir() and not any(sub.iterdir()):
                sub.rmdir()
        if self.overwrite or not (self.path / MANIFEST).is_file():
            _start_manifest(self.path)
        return self.path


def _check_writable(path: Path, option: str) -> None:
    # Writable where it is or would be created, probed without creating it: a refused command
    # leaves no empty folder behind (claim() creates it).
    probe = path.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise OutputError(f"{option} {path}: cannot write there ({probe} is not a folder); choose a "
                          "writable folder")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise OutputError(f"{option} {path}: cannot write there ({exc.strerror or exc}); choose a "
                          "writable folder") from exc


def check_output(folder: str | Path, *, overwrite: bool = False, resume: bool = False,
                 option: str = "--out", resume_with: str | None = "--resume") -> OutputFolder:
    """Check ``folder`` before any work starts: creatable, writable, and either empty, resumed
    (``resume``: the same run continues there) or to be overwritten (``overwrite``: only when
    every file there is one its manifest lists, unchanged). A folder of files without a
    manifest (written before this toolkit kept one) is refused with or without ``overwrite``:
    the message names its files and how to move them away.

    Args:
        option: the option that named the folder, for the messages.
        resume_with: how to continue the earlier run there, for the message that refuses the
            folder (``None``: it cannot be continued, and the message offers no resuming).

    Raises :class:`OutputError` naming the folder, the files found and the flags that would
    allow it. Nothing is removed here: :meth:`OutputFolder.claim` does that when writing starts.
    """
    path = Path(folder)
    if overwrite and resume:
        raise OutputError("--overwrite and --resume contradict each other: resume continues the "
                          "earlier run, overwrite removes it")
    if path.exists() and not path.is_dir():
        raise OutputError(f"{option} {path}: exists and is not a folder")
    _check_writable(path, option)
    holder = lock_holder(path) if path.is_dir() else None
    if holder:
        raise _live_run(path, holder, option)
    entries = (tuple(sorted(e for e in path.iterdir() if e.name not in (MANIFEST, LOCK)))
               if path.exists() else ())
    if resume and entries and not (path / MANIFEST).is_file():
        # A run's folder copied without its dot-files (cp -r REP/* NEW): what was written there
        # cannot be checked, and resuming would start a manifest that disowns every earlier file.
        here = shlex.quote(str(path))
        raise OutputError(f"{option} {path}: cannot resume: it holds {len(entries)} entries but no "
                          f"{MANIFEST}, the list of what the run wrote there (a copy made without dot-files, "
                          f"such as cp -r REPORT/* {here}, leaves it behind); copy the whole folder with "
                          f"cp -a REPORT {here} (or cp -r REPORT/. {here}) and resume again")
    if not entries or resume:
        return OutputFolder(path, (), False)
    names = _names(e.name + ("/" if e.is_dir() else "") for e in entries)
    files = sorted(p.relative_to(path).as_posix() for p in path.rglob("*")
                   if not p.is_dir() and p.relative_to(path).as_posix() != LOCK)
    if files and not (path / MANIFEST).is_file():
        # Nothing lists what a run wrote here (a folder of a version before the manifest, or of
        # another program): no file can be told a run's from the user's, so none is removed.
        raise OutputError(f"{option} {path}: already holds files but no {MANIFEST} (written before this "
                          f"tool kept one, or not by this tool), so its {len(files)} file(s) cannot be "
                          f"told from yours: {_names(files)}. --overwrite removes only the files a "
                          f"{MANIFEST} lists: move them away (e.g. mv {shlex.quote(str(path))} "
                          f"{shlex.quote(str(path) + '.old')}) or choose another {option}")
    if not overwrite:
        flags = ("--overwrite to remove its files and write a new run there, "
                 + (f"{resume_with} to continue it, or " if resume_with else "or "))
        what = "an earlier run" if (path / MANIFEST).is_file() else "files"
        raise OutputError(f"{option} {path}: already holds {what} ({len(entries)} entries: "
                          f"{names}); pass {flags}choose another folder")
    owned = ownership(path)
    if owned.foreign or owned.changed:
        parts = []
        if owned.foreign:
            parts.append(f"{len(owned.foreign)} file(s) no run of this tool wrote: {_names(owned.foreign)}")
        if owned.changed:
            parts.append(f"{len(owned.changed)} changed since a run wrote them: {_names(owned.changed)}")
        raise OutputError(f"{option} {path}: holds {'; '.join(parts)}. --overwrite removes only the "
                          f"files a run lists in its {MANIFEST}, as written: move the others or choose "
                          "another folder")
    return OutputFolder(path, owned.ours, True)


def check_output_file(path: str | Path, *, overwrite: bool = False, option: str = "--out") -> Path:
    """Check a single output file before any work starts: writable, and new, a file a run wrote
    (its folder's manifest lists it, unchanged: the command's own earlier output), or replaced
    on purpose (``overwrite``)."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{option} {path}: is a folder; name a file")
    _check_writable(path.parent, option)
    if path.exists() and not overwrite and not is_own_file(path):
        raise OutputError(f"{option} {path}: already exists; pass --overwrite to replace it, or "
                          "choose another file")
    return path
