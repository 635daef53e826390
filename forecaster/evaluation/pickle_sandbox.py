"""A pickle from elsewhere (``forecaster score pred.pkl``) read apart, so that it cannot harm
the tool (issue 78).

:func:`load_plain_pickle` runs ``python -m forecaster.evaluation.pickle_sandbox FILE OUT`` in a
child process limited to :func:`memory_limit` bytes of address space beyond its start
(``RLIMIT_AS``) and :data:`CPU_SECONDS` of CPU (``RLIMIT_CPU``), and kills it after
:data:`WALL_SECONDS`. The child reads the file with the checked unpickler of
:mod:`.safe_pickle`, checks that it holds a DataFrame or Series of plain columns (numbers,
bools, strings, datetimes, timedeltas, categoricals of those; an index of such levels), each
cell of an object column a string (never ``astype(str)`` of an arbitrary object), and writes
the columns back as an Arrow IPC file; the parent reads only that file, checked again, and a
one-line JSON status. A child that crashes (a signal), runs out of memory or time, becomes one
line (:class:`~.safe_pickle.RefusedPickle`): the test process never sees the pickle's objects.

Where ``resource`` does not exist (Windows), the file is read in this process, with the same
checks but without the limits.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.evaluation.safe_pickle import RefusedPickle, UnsafePickle, element_limit, loads_restricted

try:
    import resource
except ImportError:  # pragma: no cover - Windows: read in-process, without limits
    resource = None

log = logging.getLogger(__name__)

MEMORY_BYTES = 2**30  # the child's address space beyond its start: at least this ...
MEMORY_PER_BYTE = 20  # ... and this many bytes per byte of the file
CPU_SECONDS = 30
WALL_SECONDS = 60  # a child waiting on nothing (not CPU) is killed after this
_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds the package, for the child
_NAME_TYPES = (str, int, float, bool, type(None), np.integer, np.floating)


def memory_limit(n_bytes: int) -> int:
    """The address space the child may take beyond its start to read a file of ``n_bytes``."""
    return max(MEMORY_BYTES, MEMORY_PER_BYTE * n_bytes)


def load_plain_pickle(path: str | Path) -> pd.DataFrame | pd.Series:
    """The DataFrame or Series pickled in ``path``, of plain columns only, read in a limited
    child process: index levels (a MultiIndex, or a named index; an unnamed one is not handed
    back, a RangeIndex stands for it), columns and a Series' name as the file has them.

    Raises:
        UnsafePickle: it names a global outside the allow-list.
        RefusedPickle: anything else it declares or holds that a table of numbers, strings and
            dates never does, or the reader crashed, ran out of memory or time (one line).
        pickle.UnpicklingError, ValueError, ...: it is no pickle (the reader's first line).
    """
    path = Path(path)
    if resource is None:  # pragma: no cover - no limits to set
        data = path.read_bytes()
        columns, meta = _plain(loads_restricted(data), len(data))
        return _rebuild(pd.DataFrame({i: a.to_pandas() for i, a in enumerate(columns)}), meta)
    import pyarrow as pa
    import pyarrow.ipc

    with tempfile.TemporaryDirectory(prefix="forecaster-pickle-") as tmp:
        out = Path(tmp) / "table.arrow"
        # one thread, the system allocator: no address space reserved ahead of the limit
        env = {**os.environ, "ARROW_DEFAULT_MEMORY_POOL": "system", "OMP_NUM_THREADS": "1",
               "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join([str(_ROOT), os.environ.get("PYTHONPATH", "")])}
        n_bytes = path.stat().st_size
        cmd = [sys.executable, "-m", __name__, str(path.resolve()), str(out), str(memory_limit(n_bytes)),
               str(CPU_SECONDS)]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=WALL_SECONDS, env=env, cwd=tmp,
                                  stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise RefusedPickle(f"reading it took longer than {WALL_SECONDS} s (a table of predictions "
                                "reads in seconds); the file is damaged or crafted") from None
        meta = _status(proc, n_bytes)
        table = pa.ipc.open_file(pa.BufferReader(out.read_bytes())).read_all()  # held, not mapped
        table.validate(full=True)
        for f in table.schema:
            if not _plain_type(f.type):
                raise RefusedPickle(f"the reader handed back a column of type {f.type}")
        columns = [table.column(i).to_pandas() for i in range(table.num_columns)]
    for note in meta["notes"]:
        log.warning("%s: %s", path, note)
    return _rebuild(pd.DataFrame(dict(enumerate(columns))), meta)


def _plain_type(t) -> bool:
    import pyarrow as pa

    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_timestamp(t)
            or pa.types.is_duration(t) or pa.types.is_null(t))


def _status(proc: subprocess.CompletedProcess, n_bytes: int) -> dict:
    """The child's JSON status, or the line its end says (a signal, a limit)."""
    lines = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        status = json.loads(lines[-1]) if proc.returncode == 0 and lines else {}
    except ValueError:  # not the status line the child writes
        status = {}
    limit = memory_limit(n_bytes)
    size = f"{limit / 2**30:.1f} GB" if limit >= 2**30 else f"{limit / 2**20:.0f} MB"
    if status.get("status") == "ok":
        return status
    if status.get("status") == "unsafe":
        raise UnsafePickle(status["name"])
    if status.get("status") == "refused":
        raise RefusedPickle(status["reason"])
    if status.get("status") == "memory":
        raise RefusedPickle(f"reading it needed more than {size} of memory (a table of predictions "
                            "of this size needs far less)")
    if status.get("status") == "error":
        raise pickle.UnpicklingError(status["message"])  # no pickle, a truncated file: its first line
    if proc.returncode == -signal.SIGXCPU:
        raise RefusedPickle(f"reading it took more than {CPU_SECONDS} s of CPU (a table of predictions "
                            "reads in seconds); the file is damaged or crafted")
    if proc.returncode == -signal.SIGKILL:
        raise RefusedPickle(f"the reader was killed (signal 9: more than {CPU_SECONDS} s of CPU, or the "
                            "machine's memory ran out); the file is damaged or crafted")
    if proc.returncode < 0:
        raise RefusedPickle(f"it crashed the reader (signal {-proc.returncode}): the file is damaged or "
                            "crafted")
    err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
    if any("MemoryError" in line or "bad_alloc" in line for line in err[-5:]):
        raise RefusedPickle(f"reading it needed more than {size} of memory (a table of predictions "
                            "of this size needs far less)")
    last = (err or ["no message"])[-1][:200]
    raise RefusedPickle(f"the reader failed (exit status {proc.returncode}: {last})")


def _rebuild(frame: pd.DataFrame, meta: dict) -> pd.DataFrame | pd.Series:
    """The object of the file again from its plain columns and the names in ``meta``."""
    n_index = len(meta["index"])
    if n_index:
        index = pd.MultiIndex.from_arrays([frame[i] for i in range(n_index)], names=meta["index"])
        if n_index == 1:
            index = index.get_level_values(0)
    else:
        index = pd.RangeIndex(meta["rows"])
    data = frame.iloc[:, n_index:].set_axis(index, axis=0)
    data.columns = meta["columns"]
    if meta["kind"] == "Series":
        return data.iloc[:, 0].rename(meta["columns"][0])
    return data


def _name(value, what: str):
    if not isinstance(value, _NAME_TYPES) or (isinstance(value, str) and len(value) > 1000):
        raise RefusedPickle(f"{what} is a {type(value).__name__}; expected a string or number")
    return value.item() if isinstance(value, np.generic) else value


def _plain(obj, n_bytes: int) -> tuple[list, dict]:
    """``obj``'s index levels and columns as plain Arrow arrays, and their names: refused unless
    it is a DataFrame or Series of plain columns. Nothing of ``obj`` is walked recursively."""
    if type(obj) not in (pd.DataFrame, pd.Series):
        raise RefusedPickle(f"it holds a {type(obj).__name__}; expected a DataFrame or Series "
                            "indexed by (datetime, instrument) (Qlib's pred.pkl)")
    notes = []
    attrs = obj.__dict__.get("_attrs")
    if attrs:  # pandas deep-copies attrs on most operations: never touched, only counted
        notes.append(f"its attrs ({type(attrs).__name__} of {len(attrs) if isinstance(attrs, dict) else '?'} "
                     "entries) are not read")
    obj.__dict__["_attrs"] = {}
    if len(obj) > element_limit(n_bytes):
        raise RefusedPickle(f"it declares {len(obj):,} rows, more than a file of this size holds")
    index = obj.index
    levels = []
    if isinstance(index, pd.MultiIndex) or index.name is not None:
        for i in range(index.nlevels):
            name = _name(index.names[i], f"index level {i}'s name")
            levels.append((name, _arrow(index.get_level_values(i)._values, f"index level {name!r}")))
    if type(obj) is pd.Series:
        names = [_name(obj.name, "the series' name")]
        columns = [_arrow(obj._values, f"the series {names[0]!r}")]
    else:
        if isinstance(obj.columns, pd.MultiIndex):
            raise RefusedPickle("its columns are a MultiIndex; expected one row of column names")
        names = [_name(c, f"column {j + 1}'s name") for j, c in enumerate(obj.columns._values)]
        columns = [_arrow(obj._ixs(j, axis=1)._values, f"column {names[j]!r}") for j in range(len(names))]
    meta = {"status": "ok", "kind": type(obj).__name__, "index": [n for n, _ in levels], "columns": names,
            "rows": len(obj), "notes": notes}
    return [a for _, a in levels] + columns, meta


def _arrow(values, where: str):
    """One column's values (an ndarray or a pandas array of plain values) as a pyarrow Array."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = getattr(getattr(values, "dtype", None), "kind", None)
    if isinstance(values, np.ndarray):
        if kind in "biufMm" and values.ndim == 1:
            return pa.array(values)
        if kind == "O" and values.ndim == 1:
            return _objects(values, where)
    elif isinstance(values, pd.Categorical):
        codes, cats = values._ndarray, values.categories
        inside = not len(codes) or -1 <= codes.min() <= codes.max() < len(cats)
        if codes.ndim != 1 or codes.dtype.kind != "i" or not inside:  # take() reads unchecked
            raise RefusedPickle(f"{where}: categorical codes outside its {len(cats)} categories; "
                                "the file is crafted")
        table = _arrow(cats._values, where)
        return pc.take(table, pa.array(codes.astype(np.int64), mask=codes < 0))
    elif isinstance(values, pd.arrays.DatetimeArray | pd.arrays.TimedeltaArray):
        raw = values._ndarray
        if raw.ndim != 1 or raw.dtype.kind not in "Mm":
            raise RefusedPickle(f"{where}: dates stored as {raw.dtype}; the file is crafted")
        out = pa.array(raw)
        tz = getattr(values, "tz", None)
        return out.cast(pa.timestamp(out.type.unit, tz=str(tz))) if tz is not None else out
    elif isinstance(values, pd.arrays.IntegerArray | pd.arrays.FloatingArray | pd.arrays.BooleanArray):
        data, mask = values._data, values._mask
        if not (data.ndim == mask.ndim == 1 and len(data) == len(mask) and mask.dtype == bool
                and data.dtype.kind in "biuf"):
            raise RefusedPickle(f"{where}: a masked array whose mask does not fit its values; "
                                "the file is crafted")
        return pa.array(data, mask=mask)
    elif isinstance(values, pd.arrays.ArrowStringArray):
        chunked = values._pa_array
        if not isinstance(chunked, pa.ChunkedArray):
            raise RefusedPickle(f"{where}: strings stored as a {type(chunked).__name__}; the file is crafted")
        chunked.validate(full=True)
        if pa.types.is_string(chunked.type) or pa.types.is_large_string(chunked.type):
            return chunked.combine_chunks().cast(pa.string())
    elif isinstance(values, pd.arrays.StringArray):
        return _objects(values._ndarray, where)
    raise RefusedPickle(f"{where} is of dtype {getattr(values, 'dtype', type(values).__name__)}; "
                        "expected numbers, strings or dates")


def _objects(values: np.ndarray, where: str):
    """An object array as strings (each cell a str, or missing) or as floats (each a number);
    each cell is looked at by its type only, never converted or walked."""
    import pyarrow as pa

    missing = [v is None or v is pd.NA or (type(v) is float and v != v) for v in values]
    kinds = {type(v) for v, gone in zip(values, missing, strict=True) if not gone}
    if kinds <= {str}:
        return pa.array([None if gone else v for v, gone in zip(values, missing, strict=True)],
                        type=pa.string())
    if kinds <= {int, float, np.float64, np.float32, np.int64}:
        return pa.array([None if gone else float(v) for v, gone in zip(values, missing, strict=True)],
                        type=pa.float64())
    bad = next(i for i, v in enumerate(values) if not missing[i] and type(v) not in (str,))
    raise RefusedPickle(f"{where}, row {bad + 1}: a {type(values[bad]).__name__}, not a number, string or "
                        "date "
                        f"({len(kinds)} kind(s) of cell: {', '.join(sorted(k.__name__ for k in kinds))})")


def _limit_self(memory: int, cpu: int) -> None:
    """This process's address space (``memory`` bytes beyond what it holds now) and CPU time."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())  # mimalloc/jemalloc reserve address space at once
    status = Path("/proc/self/status")  # Linux: the address space the imports took
    held = next((int(line.split()[1]) * 1024 for line in status.read_text().splitlines()
                 if line.startswith("VmSize:")), None) if status.exists() else None
    if held is not None:  # elsewhere (macOS) RLIMIT_AS is not kept: the CPU limit only
        resource.setrlimit(resource.RLIMIT_AS, (held + memory, held + memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))


def _child(src: str, dst: str, memory: str, cpu: str) -> dict:
    """Read ``src``, write its plain columns to ``dst`` (Arrow IPC) within ``memory`` bytes and
    ``cpu`` seconds; the status to hand back."""
    import pyarrow as pa
    import pyarrow.ipc

    n_bytes = os.stat(src).st_size
    _limit_self(int(memory), int(cpu))
    try:
        data = Path(src).read_bytes()
        columns, meta = _plain(loads_restricted(data), n_bytes)
        table = pa.table({str(i): c for i, c in enumerate(columns)})
        with pa.OSFile(dst, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        return meta
    except UnsafePickle as exc:
        return {"status": "unsafe", "name": exc.name}
    except RefusedPickle as exc:
        return {"status": "refused", "reason": str(exc)}
    except MemoryError:
        return {"status": "memory"}
    except RecursionError:
        return {"status": "refused", "reason": "its objects nest too deep for a table"}
    except Exception as exc:  # noqa: BLE001 - a damaged file: its reader's first line
        return {"status": "error", "message": (str(exc).splitlines() or [type(exc).__name__])[0][:300]}


if __name__ == "__main__":
    _status_line = json.dumps(_child(*sys.argv[1:5]))
    sys.stdout.write(_status_line + "\n")
    sys.stdout.flush()
    os._exit(0)  # nothing of the pickle's objects is torn down (a crafted one could crash then)
