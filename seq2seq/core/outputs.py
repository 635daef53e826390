"""Output folders (a report folder, a run folder, a training run's checkpoints) are never
silently overwritten or mixed: the one rule of both commands, ``forecaster`` and ``seq2seq``.

A folder that already holds files is refused unless the caller resumes the same run or asks
to overwrite it; overwriting removes the earlier run's files first, and only when every file
there is one a run writes (a folder of other files is never emptied). The folder is checked
for being writable before any work starts, so a long training never ends in a write error.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path


class OutputError(ValueError):
    """An output folder that cannot be used: names the folder and what to do."""


# What the toolkit writes into report and run folders, and their temporary files while
# written (``atomic_write``: ``.<name>.<random>.tmp``); anything else in a folder means it is
# not only ours. forecaster: reports (.csv .png .json .html .toml), caches (.parquet), models
# and folds (.pt .pkl, ``folds/``), logs. seq2seq: checkpoints (best.pt, last.pt, epoch<N>.pt,
# averaged.pt, ema<D>.pt; the tokenizers travel inside them), the recipe's logs, scores
# (.json) and checkpoint selection (.txt), attention plots (.png).
_SUFFIXES = {".csv", ".png", ".json", ".html", ".toml", ".parquet", ".pt", ".pkl", ".tmp", ".log", ".txt"}
_FOLDERS = {"folds"}


@dataclass(frozen=True)
class OutputFolder:
    """A checked output folder. :meth:`claim` then makes it ready to write: the earlier
    run's files removed when overwriting."""

    path: Path
    earlier: tuple[Path, ...]
    overwrite: bool

    def claim(self) -> Path:
        """Remove the earlier run's files (only when overwriting) and return the folder."""
        if self.overwrite:
            for entry in self.earlier:
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink(missing_ok=True)
        self.path.mkdir(parents=True, exist_ok=True)
        return self.path


def _ours(entry: Path) -> bool:
    if entry.is_dir():
        return entry.name in _FOLDERS
    return entry.suffix.lower() in _SUFFIXES


def check_output(folder: str | Path, *, overwrite: bool = False, resume: bool = False,
                 option: str = "--out", resume_with: str | None = "--resume") -> OutputFolder:
    """Check ``folder`` before any work starts: creatable, writable, and either empty, resumed
    (``resume``: the same run continues there) or to be overwritten (``overwrite``).

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
    entries = tuple(sorted(path.iterdir())) if path.exists() else ()
    if not entries or resume:
        return OutputFolder(path, (), False)
    names = ", ".join(e.name + ("/" if e.is_dir() else "") for e in entries[:8])
    names += f" and {len(entries) - 8} more" if len(entries) > 8 else ""
    if not overwrite:
        flags = ("--overwrite to remove its files and write a new run there, "
                 + (f"{resume_with} to continue it, or " if resume_with else "or "))
        raise OutputError(f"{option} {path}: already holds an earlier run ({len(entries)} entries: "
                          f"{names}); pass {flags}choose another folder")
    foreign = [e.name for e in entries if not _ours(e)]
    if foreign:
        raise OutputError(f"{option} {path}: holds files a run does not write ({', '.join(foreign[:8])}"
                          f"{' ...' if len(foreign) > 8 else ''}); --overwrite only empties folders of "
                          "earlier runs: move them or choose another folder")
    return OutputFolder(path, entries, True)
