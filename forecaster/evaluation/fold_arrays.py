"""The binary parts of a fold on disk (:mod:`.fold_files` holds the rest): its forecast rows
as Parquet and its warm-start tensors as an npz, each read bounded by the size of its file.

- rows: ``date`` (timestamp[ns], no time zone), ``code`` and ``model`` (strings, dictionary
  encoded), ``fold`` (int32), ``forecast`` (float64), the parts of ``FoldOutput.rows`` one
  after another; uncompressed, with ``date``, ``fold`` and ``forecast`` in plain encoding, so a
  file of ``B`` bytes holds at most ``B / 20`` rows.
- tensors: ``t0.npy, t1.npy, ...`` stored uncompressed (``np.savez``); each member's header is
  checked against the dtype (a closed set, :data:`DTYPES`) and shape its fold's JSON declares
  before a byte of its data is read, and it is read with ``allow_pickle=False``.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

ROW_COLUMNS = ("code", "model", "fold", "forecast")  # besides the date index
MIN_ROW_BYTES = 20  # date 8 + fold 4 + forecast 8, plain and uncompressed
# dtype name -> (torch dtype, the numpy dtype its bytes are stored as); nothing else is read.
DTYPES = {"float32": (torch.float32, "<f4"), "float64": (torch.float64, "<f8"),
          "float16": (torch.float16, "<f2"), "bfloat16": (torch.bfloat16, "<i2"),
          "int64": (torch.int64, "<i8"), "int32": (torch.int32, "<i4"), "int16": (torch.int16, "<i2"),
          "int8": (torch.int8, "|i1"), "uint8": (torch.uint8, "|u1"), "bool": (torch.bool, "|b1")}


class FoldFileError(Exception):
    """A fold file that is not one this version writes: ``"FILE: what is wrong"``, one line."""


def fail(path: Path, what: str):
    """Raise :class:`FoldFileError` ``"FILE: what"``."""
    raise FoldFileError(f"{path.name}: {what}")


def rows_table(rows: list, fold: int) -> tuple[pa.Table, list[dict]]:
    """The parts as one table, and each part's length and date unit."""
    columns = {name: [] for name in ("date", *ROW_COLUMNS)}
    parts = []
    for i, part in enumerate(rows):
        if (not isinstance(part, pd.DataFrame) or tuple(part.columns) != ROW_COLUMNS
                or not isinstance(part.index, pd.DatetimeIndex) or part.index.tz is not None):
            raise TypeError(f"fold {fold} rows[{i}]: not a frame of {', '.join(ROW_COLUMNS)} on dates")
        parts.append({"rows": len(part), "unit": part.index.unit})
        columns["date"].append(pa.array(part.index.as_unit("ns").to_numpy(), pa.timestamp("ns")))
        for name in ("code", "model"):
            col = part[name]
            if isinstance(col.dtype, pd.CategoricalDtype):  # codes and names once, not per row
                array = pa.DictionaryArray.from_arrays(
                    pa.array(col.cat.codes.to_numpy(np.int32)), pa.array(col.cat.categories.astype(str)))
            else:
                array = pa.array(col.astype(str).to_numpy(object), pa.string()).dictionary_encode()
            columns[name].append(array.cast(pa.dictionary(pa.int32(), pa.string())))
        columns["fold"].append(pa.array(part["fold"].to_numpy(np.int32)))
        columns["forecast"].append(pa.array(part["forecast"].to_numpy(np.float64)))
    types = {"date": pa.timestamp("ns"), "code": pa.dictionary(pa.int32(), pa.string()),
             "model": pa.dictionary(pa.int32(), pa.string()), "fold": pa.int32(), "forecast": pa.float64()}
    table = pa.table({k: pa.chunked_array(v, types[k]) for k, v in columns.items()})
    return table, parts


def read_tensors(path: Path, specs: list) -> list[torch.Tensor]:
    """The npz's ``t0 .. t{n-1}``, each member's header checked against its spec first."""
    if not path.is_file():
        fail(path, "is missing (the fold's JSON declares tensors)")
    size, out = path.stat().st_size, []
    declared = sum(math.prod(s["shape"]) * np.dtype(DTYPES[s["dtype"]][1]).itemsize for s in specs)
    if declared > size:
        fail(path, f"holds {size} bytes, fewer than the {declared} its tensors' shapes declare")
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            if [i.filename for i in infos] != [f"t{k}.npy" for k in range(len(specs))]:
                fail(path, f"holds {[i.filename for i in infos][:8]}, not t0.npy .. t{len(specs) - 1}.npy")
            for info, spec in zip(infos, specs, strict=True):
                out.append(_member(path, z, info, spec, size))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        fail(path, f"cannot be read ({(str(exc).splitlines() or [type(exc).__name__])[0]})")
    return out


def _member(path: Path, z: zipfile.ZipFile, info: zipfile.ZipInfo, spec: dict, size: int) -> torch.Tensor:
    torch_dtype, stored = DTYPES[spec["dtype"]]
    shape, dtype = tuple(spec["shape"]), np.dtype(stored)
    stored_plain = info.compress_type == zipfile.ZIP_STORED and info.file_size == info.compress_size
    if not stored_plain or info.file_size > size:
        fail(path, f"{info.filename} is compressed or larger than the file (np.savez stores, uncompressed)")
    with z.open(info) as f:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            fail(path, f"{info.filename} is .npy format {version}, not 1.0 or 2.0")
        header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                  else np.lib.format.read_array_header_2_0)(f)
        if header != (shape, False, dtype):
            fail(path, f"{info.filename} holds {header[2]} {list(header[0])}, not the {spec['dtype']} "
                  f"{list(shape)} the JSON declares")
        if info.file_size != f.tell() + math.prod(shape) * dtype.itemsize:
            fail(path, f"{info.filename} is {info.file_size} bytes, not its header's and data's")
    with z.open(info) as f:
        array = np.lib.format.read_array(f, allow_pickle=False)
        f.read(1)  # to the end: zipfile checks the CRC there
    tensor = torch.from_numpy(array)
    return tensor.view(torch_dtype) if torch_dtype == torch.bfloat16 else tensor


def read_rows(path: Path, parts: list, fold: int) -> list[pd.DataFrame]:
    """The rows file of fold ``fold`` as the frames ``parts`` (``[{"rows", "unit"}]``, from its
    JSON) declare: ``code`` and ``model`` categorical, ``fold`` int32, ``forecast`` float64 on
    the dates (in each part's unit). The footer is checked (rows, columns, types, no
    compression, dates and numbers plain) before any data is read."""
    if not path.is_file():
        fail(path, "is missing (every fold file has its rows)")
    size, n = path.stat().st_size, sum(p["rows"] for p in parts)
    if n * MIN_ROW_BYTES > size:
        fail(path, f"holds {size} bytes, too few for the {n} rows its JSON declares")
    names = ["date", *ROW_COLUMNS]
    try:
        pf = pq.ParquetFile(path)
        md, schema = pf.metadata, pf.schema_arrow
        if md.num_rows != n:
            fail(path, f"holds {md.num_rows} rows, not the {n} its JSON declares")
        if schema.names != names:
            fail(path, f"has columns {schema.names[:8]}, not {', '.join(names)}")
        types = [schema.field(k).type for k in names]
        strings = all(t == pa.string() or (pa.types.is_dictionary(t) and t.value_type == pa.string())
                      for t in types[1:3])
        if types[0] != pa.timestamp("ns") or not strings or types[3:] != [pa.int32(), pa.float64()]:
            fail(path, f"has column types {', '.join(map(str, types))}, not timestamp[ns], string, string, "
                  "int32, double")
        for g in range(md.num_row_groups):
            for c in range(md.num_columns):
                column = md.row_group(g).column(c)
                if column.compression != "UNCOMPRESSED" or (
                        c in (0, 3, 4) and any("DICTIONARY" in e for e in column.encodings)):
                    fail(path, f"column {names[c]} is {column.compression} {column.encodings}; a fold's rows "
                          "are written uncompressed, dates and numbers plain")
        table = pf.read()
    except (pa.ArrowException, OSError, ValueError) as exc:
        fail(path, f"cannot be read ({(str(exc).splitlines() or [type(exc).__name__])[0]})")
    if table.num_rows != n or any(table.column(k).null_count for k in names):
        fail(path, "has missing values or another number of rows than its metadata")
    date = table.column("date").to_numpy()
    folds = table.column("fold").to_numpy()
    if (folds != fold).any():
        fail(path, f"holds rows of fold {int(folds[folds != fold][0])} in fold {fold}'s file")
    forecast = table.column("forecast").to_numpy()
    table = table.unify_dictionaries()
    code, model = (_indices(path, table.column(k)) for k in ("code", "model"))
    out, start = [], 0
    for p in parts:
        s = slice(start, start + p["rows"])
        try:
            index = pd.DatetimeIndex(date[s]).as_unit(p["unit"])
        except ValueError:
            fail(path, f"holds dates finer than the unit {p['unit']!r} its JSON declares")
        out.append(pd.DataFrame({"code": _categorical(*code, s), "model": _categorical(*model, s),
                                 "fold": folds[s], "forecast": forecast[s]}, index=index))
        start = s.stop
    return out


def _indices(path: Path, column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """A string column as ``(positions, distinct strings)``: its dictionary as written (the
    table's dictionaries unified), or one built for a plain string column."""
    array = column.combine_chunks()
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    names = array.dictionary
    positions = array.indices.to_numpy(zero_copy_only=False)
    if names.null_count or len(pc.unique(names)) != len(names) or (
            len(positions) and not 0 <= positions.min() <= positions.max() < len(names)):
        fail(path, "has a code or model dictionary with missing or repeated strings, or rows outside it")
    return positions, np.array(names.to_pylist(), dtype=object)


def _categorical(positions: np.ndarray, names: np.ndarray, rows: slice) -> pd.Categorical:
    """The part's ``rows`` as a categorical of the strings they use, sorted (as
    ``pd.Categorical`` of the strings orders them)."""
    positions = positions[rows]
    used = np.flatnonzero(np.bincount(positions, minlength=len(names)))
    order = np.argsort(names[used], kind="stable")
    remap = np.zeros(len(names), np.int32)
    remap[used[order]] = np.arange(len(used), dtype=np.int32)
    return pd.Categorical.from_codes(remap[positions], categories=pd.Index(list(names[used[order]])))
