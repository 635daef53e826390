"""One finished fold on disk, in formats that hold data and cannot run code (no pickle).

For fold ``k`` the store's folder holds, all written with :func:`seq2seq.core.atomic_write`
(so a claimed folder's manifest lists each with its SHA-256):

- ``fold_NNNN.parquet``: the forecast rows, and ``fold_NNNN.npz`` (only with warm-start
  states): the states' tensors, both laid out and read as :mod:`.fold_arrays` says;
- ``fold_NNNN.json``, written last (a fold is finished once it exists): the fold's number,
  its skipped, failed, excluded and seconds as ``[fold, name, value]`` triples, the worker's
  peak memory, the rows' part lengths, the tensors' dtypes and shapes, the SHA-256 of the two
  files above, and the states in a typed encoding: ``{"tuple": [...]}``, ``{"list": [...]}``,
  ``{"dict": [[key, value], ...]}``, ``{"tensor": i}`` (the npz's ``t{i}``) and
  ``{"PanelNetConfig": {field: value}}`` (the one class a state may hold); numbers, strings,
  booleans and null as themselves.

Reading checks every field's type, every dtype against a closed set, every size against the
file that holds it, and raises :class:`FoldFileError` with one line naming the file and what
is wrong (:class:`~forecaster.evaluation.fold_store.FoldStore` turns it into a ``ResumeError``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch

from forecaster.evaluation.fold_arrays import DTYPES, fail, read_rows, read_tensors, rows_table
from forecaster.models.panel.network import PanelNetConfig
from seq2seq.core import atomic_write
from seq2seq.core.outputs import file_digest

FORMAT, VERSION = "forecaster fold", 1
MAX_JSON_BYTES = 64 << 20  # a fold's metadata is kilobytes; its rows and tensors live apart
MAX_DEPTH = 32  # a warm state nests four levels
CLASSES = {"PanelNetConfig": PanelNetConfig}  # the dataclasses a state may hold, by name
_FIELD_TYPES = {"int": (int,), "float": (int, float), "bool": (bool,), "str": (str,)}
_KEYED = {"skipped": str, "failed": str, "excluded": list, "seconds": float}


def fold_paths(folder: Path, fold: int) -> dict[str, Path]:
    """``{"json", "parquet", "npz"}`` paths of fold ``fold`` in ``folder``."""
    return {ext: folder / f"fold_{fold:04d}.{ext}" for ext in ("json", "parquet", "npz")}


# --- writing -------------------------------------------------------------------------------

def _encode(value, tensors: list, where: str):
    """``value`` in the typed JSON encoding; its tensors appended to ``tensors`` as
    ``(dtype name, numpy array of their bytes)``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        name = str(t.dtype).removeprefix("torch.")
        if name not in DTYPES:
            raise TypeError(f"warm state {where}: a {t.dtype} tensor, which a fold file does not hold")
        tensors.append((name, (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()))
        return {"tensor": len(tensors) - 1}
    if isinstance(value, (tuple, list)):
        return {type(value).__name__: [_encode(v, tensors, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, dict):
        return {"dict": [[_encode(k, tensors, where), _encode(v, tensors, f"{where}.{k}")]
                         for k, v in value.items()]}
    if type(value) in CLASSES.values():
        return {type(value).__name__: {f.name: _encode(getattr(value, f.name), tensors, f"{where}.{f.name}")
                                       for f in dataclasses.fields(value)}}
    raise TypeError(f"warm state {where}: a {type(value).__name__}, which a fold file does not hold")


def _keyed(mapping: dict, kind: str, fold: int) -> list:
    out = []
    for key, value in mapping.items():
        ok = isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str)
        if kind == "excluded":
            ok = ok and isinstance(value, list) and all(isinstance(c, str) for c in value)
        elif kind == "seconds":
            ok = ok and isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        else:
            ok = ok and isinstance(value, str)
        if not ok:
            raise TypeError(f"fold {fold} {kind}: {key!r}: {type(value).__name__}, not a fold file's entry")
        out.append([int(key[0]), key[1], value])
    return out


def write_fold(folder: Path, output) -> Path:
    """Write ``output`` (a :class:`~forecaster.evaluation.fold_store.FoldOutput`) as its
    parquet, npz (when it has tensors) and, last, JSON file; returns the JSON's path.
    Raises TypeError for a value no fold file holds (a bug of the code that made it)."""
    paths = fold_paths(folder, output.fold)
    tensors: list[tuple[str, np.ndarray]] = []
    states = _encode(output.states, tensors, "states")
    table, parts = rows_table(output.rows, output.fold)
    meta = {"format": FORMAT, "version": VERSION, "fold": int(output.fold),
            "peak_gb": None if output.peak_gb is None else float(output.peak_gb),
            **{kind: _keyed(getattr(output, kind), kind, output.fold) for kind in _KEYED},
            "parts": parts, "tensors": [{"dtype": name, "shape": list(a.shape)} for name, a in tensors],
            "states": states}
    with atomic_write(paths["parquet"]) as f:
        pq.write_table(table, f, compression="none", use_dictionary=["code", "model"])
    meta["sha256"] = {"parquet": file_digest(paths["parquet"])}
    if tensors:
        with atomic_write(paths["npz"]) as f:
            np.savez(f, **{f"t{i}": a for i, (_, a) in enumerate(tensors)})
        meta["sha256"]["npz"] = file_digest(paths["npz"])
    with atomic_write(paths["json"], "w") as f:
        json.dump(meta, f, separators=(",", ":"))
    return paths["json"]


# --- reading -------------------------------------------------------------------------------

def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_meta(path: Path, meta, fold: int) -> None:
    """Every field of a fold's JSON has the type this version writes."""
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        fail(path, "is not a fold file (no \"format\": \"forecaster fold\")")
    if meta.get("version") != VERSION:
        fail(path, f"is a fold file of format version {meta.get('version')!r}; this version reads {VERSION}")
    expected = {"format", "version", "fold", "peak_gb", *_KEYED, "parts", "tensors", "states", "sha256"}
    if set(meta) != expected:
        fail(path, f"has fields {sorted(meta)}, expected {sorted(expected)}")
    if meta["fold"] != fold or not _is_int(meta["fold"]):
        fail(path, f"holds fold {meta['fold']!r}, not fold {fold}")
    if meta["peak_gb"] is not None and not _is_number(meta["peak_gb"]):
        fail(path, f"peak_gb is {meta['peak_gb']!r}, not a number or null")
    for kind, kind_type in _KEYED.items():
        entries = meta[kind]
        if not isinstance(entries, list):
            fail(path, f"{kind} is a {type(entries).__name__}, not a list of [fold, name, value]")
        seen = set()
        for entry in entries:
            ok = isinstance(entry, list) and len(entry) == 3 and entry[0] == fold and _is_int(entry[0])
            ok = ok and isinstance(entry[1], str) and entry[1] not in seen
            value = entry[2] if ok else None
            if kind_type is list:
                ok = ok and isinstance(value, list) and all(isinstance(c, str) for c in value)
            else:
                ok = ok and (_is_number(value) if kind_type is float else isinstance(value, str))
            if not ok:
                fail(path, f"{kind} entry {str(entry)[:80]} is not [{fold}, name, {kind_type.__name__}] "
                      "(a name once)")
            seen.add(entry[1])
    parts = meta["parts"]
    if not isinstance(parts, list) or not all(
            isinstance(p, dict) and set(p) == {"rows", "unit"} and _is_int(p["rows"]) and p["rows"] >= 0
            and p["unit"] in ("s", "ms", "us", "ns") for p in parts):
        fail(path, "parts is not a list of {\"rows\": count, \"unit\": s, ms, us or ns}")
    tensors = meta["tensors"]
    if not isinstance(tensors, list):
        fail(path, "tensors is not a list")
    for i, spec in enumerate(tensors):
        if not isinstance(spec, dict) or set(spec) != {"dtype", "shape"}:
            fail(path, f"tensors[{i}] is not {{\"dtype\", \"shape\"}}")
        if not isinstance(spec["dtype"], str) or spec["dtype"] not in DTYPES:
            fail(path, f"tensors[{i}] has dtype {str(spec['dtype'])[:40]!r}, not one of {', '.join(DTYPES)}")
        shape = spec["shape"]
        if not isinstance(shape, list) or len(shape) > 8 or not all(_is_int(n) and n >= 0 for n in shape):
            fail(path, f"tensors[{i}] has shape {str(shape)[:80]}, not a list of at most 8 sizes")
    digests = meta["sha256"]
    if not isinstance(digests, dict) or set(digests) != ({"parquet", "npz"} if tensors else {"parquet"}) \
            or not all(isinstance(d, str) for d in digests.values()):
        fail(path, "sha256 does not name the fold's parquet (and, with tensors, npz) file")


def _decode(path: Path, value, tensors: list, used: set, depth: int = 0):
    """The inverse of :func:`_encode`, every tag and field checked."""
    if depth > MAX_DEPTH:
        fail(path, f"states nest deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if not isinstance(value, dict) or len(value) != 1:
        fail(path, f"states hold {str(value)[:60]}, not a tagged value (a list, tuple, dict, tensor or "
             "PanelNetConfig)")
    ((tag, body),) = value.items()
    if tag in ("list", "tuple") and isinstance(body, list):
        items = [_decode(path, v, tensors, used, depth + 1) for v in body]
        return items if tag == "list" else tuple(items)
    if tag == "dict" and isinstance(body, list):
        out = {}
        for pair in body:
            if not isinstance(pair, list) or len(pair) != 2:
                fail(path, f"states hold a dict entry {str(pair)[:60]}, not [key, value]")
            key = _decode(path, pair[0], tensors, used, depth + 1)
            if not _hashable(key) or key in out:
                fail(path, f"states hold a dict key {str(key)[:60]} that is not a new number, string or "
                     "tuple")
            out[key] = _decode(path, pair[1], tensors, used, depth + 1)
        return out
    if tag == "tensor":
        if not _is_int(body) or not 0 <= body < len(tensors) or body in used:
            fail(path, f"states name tensor {str(body)[:20]}: not one of the {len(tensors)} it declares, "
                 "once")
        used.add(body)
        return tensors[body]
    if tag in CLASSES and isinstance(body, dict):
        return _dataclass(path, CLASSES[tag], body)
    fail(path, f"states hold a {str(tag)[:40]!r} value, which a fold file never holds")


def _hashable(key) -> bool:
    if isinstance(key, tuple):
        return all(_hashable(k) for k in key)
    return key is None or isinstance(key, (bool, int, float, str))


def _dataclass(path: Path, cls, body: dict):
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    if set(body) - set(fields):
        fail(path, f"states hold a {cls.__name__} with unknown fields {sorted(body)[:8]}")
    for name, value in body.items():
        kind = fields[name].type if isinstance(fields[name].type, str) else fields[name].type.__name__
        allowed = _FIELD_TYPES.get(kind, ())
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            fail(path, f"states hold a {cls.__name__} whose {name} is {str(value)[:40]!r}, not {kind}")
    try:
        return cls(**body)
    except (TypeError, ValueError) as exc:
        fail(path, f"states hold an invalid {cls.__name__} ({(str(exc).splitlines() or ['?'])[0]})")


def read_fold(path: Path, fold: int, verify) -> dict:
    """Fold ``fold``'s files, its JSON at ``path``: the keyword arguments of its
    ``FoldOutput``. ``verify(file)`` is called on each file before it is read (the store's
    manifest check). Raises :class:`FoldFileError`, one line, for anything it does not write."""
    verify(path)
    size = path.stat().st_size
    if size > MAX_JSON_BYTES:
        fail(path, f"is {size} bytes, more than a fold's metadata ever holds ({MAX_JSON_BYTES})")
    try:
        meta = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as exc:
        fail(path, f"is not JSON ({(str(exc).splitlines() or [type(exc).__name__])[0]})")
    _check_meta(path, meta, fold)
    paths = fold_paths(path.parent, fold)
    for ext, digest in meta["sha256"].items():
        verify(paths[ext])
        if paths[ext].is_file() and file_digest(paths[ext]) != digest:
            fail(paths[ext], f"is not the file {path.name} was written with (its SHA-256 differs)")
    tensors = read_tensors(paths["npz"], meta["tensors"]) if meta["tensors"] else []
    used: set = set()
    states = _decode(path, meta["states"], tensors, used)
    if len(used) != len(tensors) or not isinstance(states, dict):
        fail(path, "states are not a dict that uses each of its tensors once")
    keyed = {kind: {(f, name): value for f, name, value in meta[kind]} for kind in _KEYED}
    return {"fold": fold, "rows": read_rows(paths["parquet"], meta["parts"], fold), **keyed,
            "states": states, "peak_gb": meta["peak_gb"]}
