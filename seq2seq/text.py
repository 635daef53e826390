"""Reading parallel text: one sentence per line, plain or gzip-compressed, line counts checked.

Also locates the embedded toy German-English corpus shipped in ``data/toy_de_en/``.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path


class DataError(ValueError):
    """Bad input data (missing file, empty file, mismatched line counts)."""


def read_lines(path: str | Path, allow_blank: bool = False) -> list[str]:
    """All lines of a UTF-8 text file (``.gz`` is decompressed), without line endings.

    Lines end at ``\\n`` only (a ``\\r\\n`` ending loses its ``\\r`` too), so lines are counted
    as ``wc -l`` and ``paste`` count them; a stray ``\\r`` inside a line stays in it.

    Args:
        allow_blank: return an empty or all-blank file's lines instead of raising.

    Raises:
        DataError: when the file is missing, not UTF-8, or holds no non-blank line (unless
            ``allow_blank``).
    """
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="\n") as handle:
            lines = [line.rstrip("\r\n") for line in handle]
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc})") from exc
    except (OSError, EOFError) as exc:  # e.g. a truncated or fake .gz
        raise DataError(f"{path}: cannot read ({exc})") from exc
    if not allow_blank and all(not line.strip() for line in lines):
        raise DataError(f"{path}: file is empty; expected one sentence per line")
    return lines


@dataclass
class ParallelText:
    """Aligned source/target sentences (``src[i]`` translates to ``tgt[i]``)."""

    src: list[str]
    tgt: list[str]

    def __len__(self) -> int:
        return len(self.src)


def read_parallel(src_path: str | Path, tgt_path: str | Path, skip_empty: bool = True) -> ParallelText:
    """Read two line-aligned files.

    Args:
        src_path, tgt_path: plain or ``.gz`` files, one sentence per line.
        skip_empty: drop pairs where either side is blank (after checking the counts).

    Raises:
        DataError: naming both files and both line counts when they differ, or an empty file.
    """
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"line counts differ: {src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; "
            "parallel files must have one sentence per line, aligned line by line"
        )
    if skip_empty:
        pairs = [(s, t) for s, t in zip(src, tgt, strict=True) if s.strip() and t.strip()]
        src = [s for s, _ in pairs]
        tgt = [t for _, t in pairs]
    return ParallelText([s.strip() for s in src], [t.strip() for t in tgt])


def data_dir() -> Path:
    """The repository's ``data/`` folder (found relative to this package, so an editable
    install works from anywhere)."""
    return Path(__file__).resolve().parent.parent / "data"


def toy_corpus_paths() -> tuple[Path, Path]:
    """``(train.de, train.en)`` of the embedded toy corpus.

    Raises:
        DataError: when the corpus is not where an editable install of the repository puts it.
    """
    folder = data_dir() / "toy_de_en"
    src, tgt = folder / "train.de", folder / "train.en"
    for path in (src, tgt):
        if not path.is_file():
            raise DataError(
                f"embedded toy corpus not found at {path}; install the repository editable "
                "(pip install -e .) or pass --train-src/--train-tgt"
            )
    return src, tgt
