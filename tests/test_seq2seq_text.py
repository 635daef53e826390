"""Reading parallel text files: plain and gzip, clear errors for bad input."""

import gzip
import os
from pathlib import Path

import pytest

from seq2seq.text import DataError, read_lines, read_parallel, toy_corpus_paths

MULTI30K = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "multi30k"


def _write(path: Path, lines: list[str]) -> Path:
    text = "".join(line + "\n" for line in lines)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_reads_plain_and_gzip_alike(tmp_path):
    src = _write(tmp_path / "a.de.gz", ["Hallo Welt.", "Guten Tag."])
    tgt = _write(tmp_path / "a.en", ["Hello world.", "Good day."])
    pairs = read_parallel(src, tgt)
    assert pairs.src == ["Hallo Welt.", "Guten Tag."]
    assert pairs.tgt == ["Hello world.", "Good day."]
    assert len(pairs) == 2


def test_blank_pairs_are_skipped_after_the_count_check(tmp_path):
    src = _write(tmp_path / "s", ["eins", "", "drei"])
    tgt = _write(tmp_path / "t", ["one", "two", "three"])
    assert read_parallel(src, tgt).tgt == ["one", "three"]
    assert read_parallel(src, tgt, skip_empty=False).src == ["eins", "", "drei"]


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    src = _write(tmp_path / "train.de", ["a", "b", "c"])
    tgt = _write(tmp_path / "train.en", ["a", "b"])
    with pytest.raises(DataError) as err:
        read_parallel(src, tgt)
    msg = str(err.value)
    assert "train.de" in msg and "train.en" in msg
    assert "3 lines" in msg and "has 2" in msg


def test_empty_and_missing_files_are_clear_errors(tmp_path):
    empty = tmp_path / "empty.en"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.en: file is empty"):
        read_lines(empty)
    with pytest.raises(DataError, match="no such file"):
        read_lines(tmp_path / "nope.de")
    bad_gz = tmp_path / "bad.de.gz"
    bad_gz.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match="bad.de.gz: cannot read"):
        read_lines(bad_gz)


def test_embedded_toy_corpus_is_aligned():
    src, tgt = toy_corpus_paths()
    pairs = read_parallel(src, tgt)
    assert 50 <= len(pairs) <= 200
    assert "Ich möchte ein Bier." in pairs.src
    assert pairs.tgt[pairs.src.index("Ich möchte ein Bier.")] == "I want a beer."


def test_multi30k_files_are_aligned():
    if not MULTI30K.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but Multi30k is missing at {MULTI30K}")
        pytest.skip(f"Multi30k not found at {MULTI30K}")
    for split, n in (("train", 29000), ("val", 1014), ("test_2016_flickr", 1000)):
        pairs = read_parallel(MULTI30K / f"{split}.de.gz", MULTI30K / f"{split}.en.gz", skip_empty=False)
        assert len(pairs) == n
