"""What a data path is, decided in one place.

A path is one of

* a **Qlib data folder** (:func:`is_qlib_folder`: ``calendars/day.txt`` and ``features/``),
  read by :mod:`forecaster.data.qlib.reader` into canonical frames;
* a **folder of exported files** (:func:`scan_dir`: which of its entries are data files, and
  which are skipped and why), each file read as below by
  :func:`~forecaster.data.daily.folders.load_dir`;
* an **exported file** (:func:`read_table`: plain or gzip CSV, UTF-8 or GBK, a TDX title line
  and footer set apart): its header and first row pick its layout from :data:`FORMATS`
  (:func:`detect_format`), and the layout says whether it holds daily rows or minute bars and
  how its columns map to the canonical frame, which
  :func:`~forecaster.data.daily.loading.load_csv` builds alike for every layout (a minute
  file's rows then become a bar frame, :mod:`forecaster.data.minute.bars`). Its name says which
  stock it holds (:func:`code_in_name`).

A new layout is one :class:`~forecaster.data.daily.formats.CsvFormat` (daily layouts live in
:mod:`forecaster.data.daily.formats`, minute layouts in :mod:`forecaster.data.minute.formats`)
and one entry in :data:`FORMATS`.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from forecaster.data.daily.formats import (
    AKSHARE,
    BAOSTOCK,
    OHLCV,
    TDX,
    TUSHARE,
    XBX,
    XBX_EN,
    YAHOO,
    CsvFormat,
)
from forecaster.data.market.exchange import canonical_code
from forecaster.data.minute.formats import MINUTE_FORMATS, STAMP_NAMES, TDX_MINUTE, prepare_text

# The registry of layouts, in the order they are tried. Minute formats first: a baostock minute
# export has the daily export's markers too, and a date-time column looks like a date column by
# name. XBX_EN before BAOSTOCK: it is baostock's columns and more.
FORMATS: tuple[CsvFormat, ...] = (*MINUTE_FORMATS, TUSHARE, AKSHARE, XBX, XBX_EN, YAHOO, BAOSTOCK, OHLCV)
# The layouts of a file with a title line above the header: a TDX export (minute bars, else
# daily rows), or the '邢不行' layout (数据由邢不行整理); then any other, as without the title.
TDX_FORMATS = (TDX_MINUTE, TDX, XBX)
TITLED_FORMATS = (*TDX_FORMATS, *(f for f in FORMATS if f not in TDX_FORMATS))

FORMATS_BY_NAME = {f.name: f for f in (*FORMATS, TDX)}

# What load_dir reads by default: plain and gzip-compressed CSVs.
DEFAULT_PATTERN = ("*.csv", "*.csv.gz")
_GZIP_MAGIC = b"\x1f\x8b"
# A CSV's header (or an export's title line) is far shorter than this many bytes.
_FIRST_LINE_MAX = 2048
# One stock's daily file is a few MB at most (30 years of rows, every column a vendor exports);
# a file past this is refused before it is read (a folder skips and counts it): --max-file-mb.
MAX_FILE_MB = 256
MAX_FILE_HINT = "--max-file-mb, [data] max_file_mb"


class DataError(ValueError):
    """Bad input data; the message names the file, line and column."""


def is_qlib_folder(path: str | Path) -> bool:
    """Whether ``path`` looks like a Qlib provider folder (calendars/day.txt and features/)."""
    path = Path(path)
    return (path / "calendars" / "day.txt").is_file() and (path / "features").is_dir()


def detect_format(header: list[str], path: str, first: dict | None = None, tdx: bool = False) -> CsvFormat:
    """Pick the format whose marker columns are all in ``header`` (and whose probe matches the
    ``first`` data row, where given); ``tdx``: the file is a TDX export (title line, footer)."""
    names = set(header)
    for fmt in TITLED_FORMATS if tdx else FORMATS:
        if fmt.matches(names, first):
            return fmt
    daily = "; ".join(f"{f.name}: {', '.join(f.markers)}" for f in FORMATS if not f.intraday)
    shown = [c if len(c) <= 40 else c[:40] + "..." for c in header[:30]]  # a line, not kilobytes
    shown += ["..."] if len(header) > 30 else []
    raise DataError(
        f"{path}: unrecognised header {shown!r}; expected the columns of one of these exports "
        f"(daily: {daily}; minute bars: baostock's date,time,code (time like 20230103103000000), "
        "akshare's 时间, efinance's 股票代码,日期 (a date and time), TDX's 日期,时间 (HHMM), date plus "
        "time (HH:MM[:SS] or HHMM), or one date-time column named "
        f"{'/'.join(STAMP_NAMES)}, each with open,high,low,close)"
    )


@dataclass(frozen=True)
class Table:
    """An exported file read up to its layout.

    Attributes:
        raw: its rows, every cell a string, columns as the file names them (stripped; a
            pandas-written index column left out).
        fmt: its layout (``fmt.intraday``: minute bars).
        encoding: ``"utf-8-sig"`` or ``"gbk"``; compression: ``"gzip"`` or ``""``.
        header_line: the header's line in the file (1-based; 2 under a TDX title line).
        adjustment: what a TDX title says of the prices (``"unadjusted"``...), else ``""``.
    """

    raw: pd.DataFrame
    fmt: CsvFormat
    encoding: str
    compression: str
    header_line: int = 1
    adjustment: str = ""


def read_table(path: Path, max_file_mb: float = MAX_FILE_MB) -> Table:
    """The cells of the file at ``path`` and its layout (:func:`detect_format`).

    Raises:
        FileNotFoundError: no such file.
        DataError: the file is empty, larger than ``max_file_mb`` MB (or decompresses past it),
            damaged gzip data, not UTF-8 or GBK text, not a readable CSV, or in none of the
            layouts of :data:`FORMATS`.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    text, encoding, compression = _read_text(path, max_file_mb)
    if not text.strip():
        raise DataError(f"{path}: the file is empty; expected a header line and daily rows")
    prepared = prepare_text(text)  # a TDX export: its title line and footer set apart
    text = prepared.text
    try:
        raw = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True)
    except pd.errors.ParserError as exc:
        raise DataError(f"{path}: not a readable CSV ({exc})") from exc
    raw.columns = [str(c).strip() for c in raw.columns]
    # A pandas-written index column ("" or "Unnamed: 0") carries no data.
    raw = raw.loc[:, [c for c in raw.columns if c and not c.startswith("Unnamed:")]]
    _refuse_stray_lines(raw, path, prepared.header_line)
    try:
        fmt = detect_format(list(raw.columns), str(path), raw.iloc[0].to_dict() if len(raw) else None,
                            tdx=prepared.tdx)
    except ValueError as exc:
        raise DataError(str(exc)) from None
    return Table(raw, fmt, encoding, compression, prepared.header_line, prepared.adjustment)


def too_large(path: Path, max_file_mb: float) -> str | None:
    """Why ``path`` is too large to read as one stock's file (its size against the limit), or
    ``None``: told by ``stat``, before a byte is read."""
    size = path.stat().st_size
    if size <= max_file_mb * (1 << 20):
        return None
    return (f"{size / (1 << 20):,.0f} MB, over the limit of {max_file_mb:g} MB for one stock's file "
            f"({MAX_FILE_HINT} raises it)")


def _refuse_stray_lines(raw: pd.DataFrame, path: Path, header_line: int) -> None:
    """A line that is no row, named as what it is: the header again (two exports joined into
    one file) or a footer (one cell of text after the rows, as ``数据来源:通达信``), rather than
    read as a row of another stock."""
    if not len(raw) or raw.shape[1] < 2:
        return
    # the header again: rows whose cells are the column names (looked at where the first one is)
    names = pd.Series(list(raw.columns), index=raw.columns)
    maybe = (raw.iloc[:, 0].str.strip() == raw.columns[0]).to_numpy().nonzero()[0]
    again = [i for i in maybe if (raw.iloc[i].str.strip() == names).mean() >= 0.5]
    if again:
        i = int(again[0])
        raise DataError(f"{path}: line {i + header_line + 1} repeats the header line ({len(again)} such "
                        f"line(s)): two exports joined into one file? Expected one header line: keep one "
                        "export, or remove the repeated header (and any rows it repeats)")
    last = [str(c).strip() for c in raw.iloc[-1]]
    if sum(bool(c) for c in last) == 1 and last[0] and not last[0][:1].isdigit():
        raise DataError(f"{path}: line {len(raw) + header_line}: {last[0][:60]!r} is a footer line "
                        "(one cell of text after the rows), not a row; expected only rows after the header: "
                        "remove it")


def _read_text(path: Path, max_file_mb: float = MAX_FILE_MB) -> tuple[str, str, str]:
    """``(text, encoding, compression)``: gzip data (told by its magic bytes) is decompressed.
    Neither the file nor its decompressed text is read past ``max_file_mb`` MB."""
    limit = int(max_file_mb * (1 << 20))
    reason = too_large(path, max_file_mb)
    if reason:
        raise DataError(f"{path}: {reason}; expected one stock's daily rows")
    with open(path, "rb") as f:
        raw = f.read(limit + 1)  # the file may have grown since stat
    if len(raw) > limit:
        raise DataError(f"{path}: over the limit of {max_file_mb:g} MB for one stock's file "
                        f"({MAX_FILE_HINT} raises it); expected one stock's daily rows")
    compression = ""
    if raw[:2] == _GZIP_MAGIC:
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as z:
                raw = z.read(limit + 1)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataError(f"{path}: damaged or truncated gzip data ({exc}); expected a complete "
                            "gzip-compressed CSV") from None
        if len(raw) > limit:
            raise DataError(f"{path}: decompresses to more than {max_file_mb:g} MB, the limit for one "
                            f"stock's file ({MAX_FILE_HINT} raises it); expected one stock's daily rows")
        compression = "gzip"
    elif raw and path.name.lower().endswith(".gz"):
        raise DataError(f"{path}: named .gz but not gzip data (it starts with {raw[:12]!r}); expected "
                        "a gzip-compressed CSV")
    head = raw[:8192]
    control = sum(b < 32 and b not in (9, 10, 13) for b in head)
    nul = raw.find(b"\x00")
    # Text files hold no NUL and few control bytes, and a CSV's first line (its header, or an
    # export's title) is short: bytes that decode as GBK all the same (0xC5C5 is 排) are no CSV.
    unbroken = len(raw) > _FIRST_LINE_MAX and not re.search(rb"[\r\n]", raw[:_FIRST_LINE_MAX])
    if nul >= 0 or control > len(head) // 100 or unbroken:
        kind = {b"PK": "a zip archive (an .xlsx workbook?)", b"\xd0\xcf": "an old Office file (.xls?)",
                b"PA": "a Parquet file"}.get(raw[:2], "binary data")
        detail = (f"{control} control bytes in its first {len(head)}" if control > len(head) // 100
                  else f"a NUL byte at byte {nul}" if nul >= 0
                  else f"no line break in its first {_FIRST_LINE_MAX} bytes")
        raise DataError(f"{path}: not a text file ({kind}: {detail}); expected a CSV (export a workbook "
                        "as CSV first)")
    for encoding in ("utf-8-sig", "gbk"):
        try:
            return raw.decode(encoding), encoding, compression
        except UnicodeDecodeError:
            continue
    raise DataError(f"{path}: cannot decode as UTF-8 (with or without BOM) or GBK")



def decode_text(raw: bytes, at: str) -> str:
    """``raw`` as UTF-8 (with or without a BOM) or else GBK text, the two encodings users'
    exports come in; neither: a :class:`DataError` ``at`` (``"OPTION FILE"``) naming the line and
    the byte offset of the first byte GBK cannot read."""
    bad = 0
    for encoding in ("utf-8-sig", "gbk"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError as exc:
            bad = exc.start
    line = raw[:bad].count(b"\n") + 1
    raise DataError(f"{at}: line {line}: byte {raw[bad:bad + 1]!r} at offset {bad} is neither UTF-8 nor "
                    "GBK text")


# Suffixes of data files, longest first: ``sz.000001.csv.gz`` is the stock ``sz.000001``.
DATA_SUFFIXES = (".csv.gz", ".csv")
# File names that are a stock code: sz.300001, sz300001, 300001.SZ or a bare 300001.
_CODE_NAME = re.compile(r"(?:(?:sh|sz|bj)\.?\d{6}|\d{6}\.(?:sh|sz|bj)|\d{6})", re.IGNORECASE)
# ... or a code and what the file holds: TDX's SZ#000665#5min, 300708_5min, sh600000-1min.
_TDX_NAME = re.compile(r"(sh|sz|bj)#(\d{6})#.*", re.IGNORECASE)
_CODE_AND_MORE = re.compile(r"((?:sh|sz|bj)\.?\d{6}|\d{6}\.(?:sh|sz|bj)|\d{6})[_#-].*", re.IGNORECASE)
# ... or an exchange's MIC and the code anywhere after or before it: XSHG_5min_600977,
# 600977.XSHG (JoinQuant), XSHE-000001-1min.
_MIC = {"xshg": "sh", "xshe": "sz", "bjse": "bj"}
_MIC_NAME = re.compile(r"(?:(xshg|xshe|bjse)[_#.-](?:.*[_#.-])?(\d{6})(?:[_#.-].*)?"
                       r"|(?:.*[_#.-])?(\d{6})[_#.-](?:.*[_#.-])?(xshg|xshe|bjse)(?:[_#.-].*)?)",
                       re.IGNORECASE)


def data_stem(name: str) -> str:
    """A data file's name without ``.csv`` / ``.csv.gz`` (any other name unchanged but for
    ``Path.stem``'s last suffix): ``sz.000001.csv.gz`` -> ``sz.000001``."""
    lower = name.lower()
    for suffix in DATA_SUFFIXES:
        if lower.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name.rsplit(".", 1)[0] if "." in name else name


def code_in_name(name: str) -> str | None:
    """The stock code a data file's name says, or ``None`` when the name is not a code.

    ``sz.300001.csv(.gz)``, ``sz300001.csv`` and ``300001.SZ.csv`` give ``sz.300001``
    (:func:`~forecaster.data.market.exchange.canonical_code`); a bare ``300001.csv`` gives
    ``300001`` (no exchange: the name does not say which); ``yahoo.csv`` or ``syn.000001.csv``
    give ``None``. A code followed by what the file holds names that code too: TDX's
    ``SZ#000665#5min.csv`` gives ``sz.000665``, ``300708_5min.csv`` gives ``300708``; an
    exchange's MIC beside the code (``XSHG_5min_600977.csv``, ``600977.XSHG.csv``) gives
    ``sh.600977``.
    """
    stem = data_stem(name)
    tdx = _TDX_NAME.fullmatch(stem)
    if tdx:
        return f"{tdx.group(1).lower()}.{tdx.group(2)}"
    mic = _MIC_NAME.fullmatch(stem)
    if mic:
        exchange, number = (mic.group(1), mic.group(2)) if mic.group(1) else (mic.group(4), mic.group(3))
        return f"{_MIC[exchange.lower()]}.{number}"
    if not _CODE_NAME.fullmatch(stem):
        more = _CODE_AND_MORE.fullmatch(stem)
        if not more:
            return None
        stem = more.group(1)
    return stem if stem.isdigit() else canonical_code(stem)


@dataclass(frozen=True)
class Skipped:
    """An entry of a data folder that :func:`~forecaster.data.daily.folders.load_dir` did not read.

    Attributes:
        name: its name in the folder (``README.md``, ``raw``).
        reason: why: ``"sub-folder"``, ``"not a data file (matches none of ...)"`` or its size
            over the limit (``large``).
    """

    name: str
    reason: str
    large: bool = False  # a data file over the size limit, not read (the reason says so)

    def __str__(self) -> str:
        if self.large:
            return f"{self.name} ({self.reason.split(',')[0]})"
        return f"{self.name}/" if self.reason == "sub-folder" else self.name


def patterns_of(pattern: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    patterns = (pattern,) if isinstance(pattern, str) else tuple(pattern)
    if not patterns or not all(isinstance(p, str) and p for p in patterns):
        raise ValueError(f"pattern must be a glob pattern or a sequence of them, got {pattern!r}")
    return patterns


def scan_dir(folder: str | Path, pattern: str | tuple[str, ...] = DEFAULT_PATTERN,
             max_file_mb: float | None = None) -> tuple[list[Path], list[Skipped]]:
    """``(files, skipped)``: the files of ``folder`` that match any of the glob ``pattern``\\ s
    (sorted), and its other entries (sub-folders, other files; hidden ones left out), which
    :func:`~forecaster.data.daily.folders.load_dir` names in its summary. With ``max_file_mb``,
    a matching file larger than that is skipped too (:func:`too_large`), never read."""
    folder = Path(folder)
    patterns = patterns_of(pattern)
    matched = {p for pat in patterns for p in folder.glob(pat)}
    files = sorted(p for p in matched if p.is_file())
    skipped = []
    if max_file_mb is not None:
        large = {p: too_large(p, max_file_mb) for p in files}
        skipped = [Skipped(p.name, why, large=True) for p, why in large.items() if why]
        files = [p for p in files if not large[p]]
    used = {p.relative_to(folder).parts[0] for p in files} | {s.name for s in skipped}
    expected = ", ".join(repr(p) for p in patterns)
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name in used or entry.name.startswith("."):
            continue
        reason = "sub-folder" if entry.is_dir() else f"not a data file (matches none of {expected})"
        skipped.append(Skipped(entry.name, reason))
    return files, skipped
