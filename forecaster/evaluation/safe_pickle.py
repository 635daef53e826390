"""Reading a pickle that someone else wrote without running its code.

A pickle names the functions that rebuild its objects, and ``pickle.load`` calls them: a file
can name ``os.system``. :func:`load_pickle` reads with an unpickler that resolves only the
globals pandas, numpy and pyarrow write for a frame or series of numbers, strings, dates and
categories (plus the classes a caller adds), and refuses any other name with
:class:`UnsafePickle` *before* calling anything. pandas' own compatibility renames (pickles of
pandas 1.x) apply first, so Qlib's ``pred.pkl`` files of older versions read as
``pd.read_pickle`` reads them.

A name on the list can still be called with harmful arguments (issue 78), so each call and
each ``BUILD`` (an object's state) is checked before it is made, and refused with
:class:`RefusedPickle` (one line saying why):

- a ``numpy.dtype`` is one of the simple kinds (bool, integers, floats, object, datetime64 and
  timedelta64, unicode and bytes) and its state is the one numpy writes for it: no fields, no
  sub-array, no itemsize of its own (a field laid over raw bytes would be read as pointers);
- every declared size (an array's shape, a range, a slice, a block's placement) is at most
  :func:`element_limit` of the file's size, and an array's bytes are as many as its shape needs,
  before anything is allocated;
- ``bytearray`` takes bytes (never a length), ``_codecs.encode`` only ``latin1`` (protocol 2's
  bytes; other codecs are quadratic), ``copyreg._reconstructor`` only an ``object``-based class;
- no class is built with arguments pickles never give it (``ndarray.__new__(shape)``), no
  ``BUILD`` sets attributes on a class, function or module (monkey-patching pandas);
- marks nest at most :data:`MAX_DEPTH` deep.

This is the reader's first wall; :mod:`.pickle_sandbox` reads a file from elsewhere in a
separate, memory- and CPU-limited process behind it.
"""

from __future__ import annotations

import _compat_pickle
import io
import math
import pickle
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

try:  # pandas' unpickler: renames of classes moved since pandas 1.x, and their old reduce forms
    from pandas.compat.pickle_compat import Unpickler as _Base
    from pandas.compat.pickle_compat import _class_locations_map as _RENAMED
except ImportError:  # pragma: no cover - a pandas without it reads current pickles only
    _Base, _RENAMED = pickle._Unpickler, {}

MAX_DEPTH = 100  # marks open at once (nested tuples, lists, dicts being built)
ELEMENTS_PER_BYTE = 64  # a declared size may be this many elements per byte of the file
MIN_ELEMENTS = 2**20  # ... and at least this many (a small file's RangeIndex)

# (module, name) a frame, series or array of numbers, strings, dates and categories needs.
_ALLOWED = frozenset({
    ("builtins", "bytearray"), ("builtins", "slice"), ("_codecs", "encode"), ("collections", "OrderedDict"),
    ("copyreg", "_reconstructor"), ("builtins", "object"), ("datetime", "datetime"), ("datetime", "date"),
    ("datetime", "time"), ("datetime", "timedelta"), ("datetime", "timezone"), ("zoneinfo", "ZoneInfo"),
    ("numpy", "dtype"), ("numpy", "ndarray"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"), ("numpy", "float64"), ("numpy", "float32"), ("numpy", "int64"),
    ("numpy", "bool_"), ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("pandas", "DataFrame"), ("pandas", "Series"), ("pandas", "Index"), ("pandas", "MultiIndex"),
    ("pandas", "RangeIndex"), ("pandas", "DatetimeIndex"), ("pandas", "CategoricalIndex"),
    ("pandas", "PeriodIndex"), ("pandas", "TimedeltaIndex"), ("pandas", "Categorical"),
    ("pandas", "CategoricalDtype"), ("pandas", "DatetimeTZDtype"), ("pandas", "StringDtype"),
    ("pandas", "PeriodDtype"), ("pandas", "Timestamp"), ("pandas", "Timedelta"), ("pandas", "NA"),
    ("pandas", "NaT"), ("pandas.core.frame", "DataFrame"), ("pandas.core.series", "Series"),
    ("pandas.core.indexes.base", "Index"), ("pandas.core.indexes.base", "_new_Index"),
    ("pandas.core.indexes.multi", "MultiIndex"), ("pandas.core.indexes.range", "RangeIndex"),
    ("pandas.core.indexes.datetimes", "DatetimeIndex"),
    ("pandas.core.indexes.datetimes", "_new_DatetimeIndex"),
    ("pandas.core.indexes.category", "CategoricalIndex"), ("pandas.core.indexes.frozen", "FrozenList"),
    ("pandas.core.indexes.period", "PeriodIndex"), ("pandas.core.indexes.period", "_new_PeriodIndex"),
    ("pandas.core.indexes.timedeltas", "TimedeltaIndex"), ("pandas.core.internals.managers", "BlockManager"),
    ("pandas.core.internals.managers", "SingleBlockManager"), ("pandas._libs.internals", "_unpickle_block"),
    ("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked"), ("pandas.arrays", "DatetimeArray"),
    ("pandas.arrays", "TimedeltaArray"), ("pandas.arrays", "PeriodArray"), ("pandas.arrays", "StringArray"),
    ("pandas.arrays", "ArrowStringArray"), ("pandas.arrays", "IntegerArray"),
    ("pandas.arrays", "FloatingArray"), ("pandas.arrays", "BooleanArray"), ("pandas", "Int64Dtype"),
    ("pandas", "Int32Dtype"), ("pandas", "Float64Dtype"), ("pandas", "Float32Dtype"),
    ("pandas", "BooleanDtype"), ("pandas.core.arrays.integer", "IntegerArray"),
    ("pandas.core.arrays.floating", "FloatingArray"), ("pandas.core.arrays.boolean", "BooleanArray"),
    ("pandas.core.arrays.integer", "Int64Dtype"), ("pandas.core.arrays.floating", "Float64Dtype"),
    ("pandas.core.arrays.boolean", "BooleanDtype"), ("pandas.core.arrays.datetimes", "DatetimeArray"),
    ("pandas.core.arrays.timedeltas", "TimedeltaArray"), ("pandas.core.arrays.categorical", "Categorical"),
    ("pandas.core.arrays.string_", "StringArray"), ("pandas.core.arrays.string_", "StringDtype"),
    ("pandas.core.arrays.string_arrow", "ArrowStringArray"),
    ("pandas.core.dtypes.dtypes", "CategoricalDtype"), ("pandas.core.dtypes.dtypes", "DatetimeTZDtype"),
    ("pandas.core.dtypes.dtypes", "PeriodDtype"), ("pandas._libs.tslibs.timestamps", "_unpickle_timestamp"),
    ("pandas._libs.tslibs.timestamps", "Timestamp"),
    ("pandas._libs.tslibs.timedeltas", "_timedelta_unpickle"),
    ("pandas._libs.tslibs.nattype", "_nat_unpickle"), ("pandas._libs.missing", "NA"),
    ("pyarrow.lib", "_restore_array"), ("pyarrow.lib", "py_buffer"), ("pyarrow.lib", "type_for_alias"),
})
# Frequencies (a DatetimeIndex's ``freq``): the offset classes of this module, by any name.
_OFFSETS = "pandas._libs.tslibs.offsets"
# ``getattr(obj, name)`` a pickle may ask for (a class method that rebuilds an instance).
_ATTRIBUTES = frozenset({("zoneinfo", "ZoneInfo", "_unpickle")})
# The dtypes an array of a frame holds: numpy's names for them as pickled (``dtype('f8', ...)``).
_DTYPE_NAME = re.compile(r"[<>|=]?(b1|[iu][1248]|f[248]|O8?|[Mm]8(\[\w+\])?|U\d{1,6}|S\d{1,6})")
_TIME_UNITS = frozenset({b"Y", b"M", b"W", b"D", b"h", b"m", b"s", b"ms", b"us", b"ns", b"generic"})


class RefusedPickle(pickle.UnpicklingError):
    """A pickle refused for what it declares (one line saying why), before it is built."""


class UnsafePickle(RefusedPickle):
    """A pickle that names a global outside the allow-list (it could run code)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def element_limit(n_bytes: int) -> int:
    """The most elements a declared size may hold in a pickle of ``n_bytes`` bytes."""
    return max(ELEMENTS_PER_BYTE * n_bytes, MIN_ELEMENTS)


def _safe_getattr(obj, name: str):
    """``getattr`` limited to :data:`_ATTRIBUTES` (a pickle may call it with any object)."""
    key = (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None), name)
    if key not in _ATTRIBUTES:
        raise UnsafePickle(f"getattr({getattr(obj, '__qualname__', type(obj).__name__)}, {name!r})")
    return getattr(obj, name)


def _latin1(text, codec="latin1", *rest):
    """``_codecs.encode`` as protocol 2 writes bytes (``encode(str, 'latin1')``), nothing else."""
    if rest or type(text) is not str or codec not in ("latin1", "latin-1"):
        raise RefusedPickle(f"_codecs.encode with codec {codec!r}: only latin1 (protocol 2's bytes) is read")
    return text.encode("latin1")


def _bytearray(data=b""):
    """``bytearray`` of bytes only: ``bytearray(10**10)`` would allocate 10 GB from 48 bytes."""
    if type(data) is not bytes:
        raise RefusedPickle(f"bytearray({type(data).__name__}): only bytes are read (never a length)")
    return bytearray(data)


def _reconstructor(cls, base, state):
    """``copyreg._reconstructor`` of a class on ``object`` (protocols 0 and 1 write no other for
    a frame); a set or other built-in base would be filled from any ``state``
    (``set(range(10**10))``)."""
    if base is not object or state is not None or not isinstance(cls, type):
        raise RefusedPickle(f"copyreg._reconstructor({getattr(cls, '__name__', cls)!s}, "
                            f"{getattr(base, '__name__', base)!s}, ...): only classes on object are read")
    return object.__new__(cls)


class _Reader(_Base):
    """pandas' unpickler with the allow-list, and each call and state checked first."""

    def __init__(self, file, extra: frozenset[tuple[str, str]], n_bytes: int):
        super().__init__(file)
        self._extra = extra
        self._limit = element_limit(n_bytes)
        self._built: set[type] = set()  # classes the file named: the only ones BUILD may fill

    def find_class(self, module: str, name: str):
        if self.proto < 3:  # Python 2's names, as pickle's own fix_imports maps them
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        key = _RENAMED.get((module, name), (module, name))
        if (module, name) == ("builtins", "getattr"):
            return _safe_getattr
        if key in _WRAPPED:
            return _WRAPPED[key]
        if key in _ALLOWED or (module, name) in self._extra:
            found = super().find_class(module, name)
        elif module == _OFFSETS and name[:1].isupper():  # the offset classes (Day, BDay, ...)
            found = super().find_class(module, name)
            if not isinstance(found, type):
                raise UnsafePickle(f"{module}.{name}")
        else:
            raise UnsafePickle(f"{module}.{name}")
        if isinstance(found, type):
            self._built.add(found)
        return found

    def _count(self, n, what: str) -> int:
        if type(n) is not int or n < 0:
            raise RefusedPickle(f"{what} declares {n!r} elements; expected a count")
        if n > self._limit:
            raise RefusedPickle(f"{what} declares {n:,} elements, more than a file of this size can "
                                f"hold ({self._limit:,}); the file is damaged or crafted")
        return n

    def _check_call(self, func, args) -> None:
        if type(args) is not tuple:
            raise RefusedPickle(f"a call with arguments of type {type(args).__name__}")
        try:
            check = _CALLS.get(func)
        except TypeError:  # an unhashable "function": not one pickle calls
            raise RefusedPickle(f"a call of a {type(func).__name__}") from None
        if check is not None:
            check(self, *args)
        elif isinstance(func, type) and issubclass(func, _NO_ARGS) and args:
            raise RefusedPickle(f"{func.__name__}(...) with arguments, which pandas never writes")

    def _top(self, n: int) -> list:
        if len(self.stack) < n:
            raise RefusedPickle("a call with fewer arguments on the stack than it takes; the file is damaged")
        return self.stack[-n:]

    def load_reduce(self):
        self._top(2)
        self._check_call(self.stack[-2], self.stack[-1])
        _Base.dispatch[pickle.REDUCE[0]](self)

    def load_newobj(self):
        cls, args = self._top(2)
        if not isinstance(cls, type) or (args and issubclass(cls, _NO_ARGS)):
            raise RefusedPickle(f"{getattr(cls, '__name__', cls)!s}.__new__ with arguments, which pandas "
                                "never writes")
        _Base.dispatch[pickle.NEWOBJ[0]](self)

    def load_newobj_ex(self):
        self._top(3)
        if self.stack[-1] or self.stack[-2]:
            raise RefusedPickle(f"{getattr(self.stack[-3], '__name__', '?')!s}.__new__ with arguments")
        _Base.dispatch[pickle.NEWOBJ_EX[0]](self)

    def load_obj_or_inst(self):
        raise RefusedPickle("the INST/OBJ opcodes (a class called with any arguments), which pandas "
                            "never writes")

    def load_mark(self):
        if len(self.metastack) >= MAX_DEPTH:
            raise RefusedPickle(f"its objects nest more than {MAX_DEPTH} deep; a table never does")
        _Base.dispatch[pickle.MARK[0]](self)

    def load_build(self):
        inst, state = self._top(2)
        kind = type(inst)
        if kind not in self._built and not isinstance(inst, (np.dtype, np.ndarray)):
            raise RefusedPickle(f"a state set on a {kind.__name__} (only the file's own objects are built)")
        if isinstance(inst, np.dtype):
            _check_dtype_state(inst, state)
        elif kind is np.ndarray:
            self._check_array_state(state)
        _Base.dispatch[pickle.BUILD[0]](self)

    def _check_array_state(self, state) -> None:
        if type(state) is not tuple or len(state) != 5:
            raise RefusedPickle("an array's state is not the (version, shape, dtype, order, data) "
                                "numpy writes")
        _, shape, dtype, _, data = state
        n = self._shape(shape, "an array")
        _check_data(dtype, n, data, "an array")

    def _shape(self, shape, what: str) -> int:
        if type(shape) is not tuple or len(shape) > 2:
            raise RefusedPickle(f"{what} of shape {shape!r}; expected one or two dimensions")
        return self._count(math.prod(self._count(n, what) for n in shape), what)

    dispatch = _Base.dispatch.copy()
    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.INST[0]] = load_obj_or_inst
    dispatch[pickle.OBJ[0]] = load_obj_or_inst
    dispatch[pickle.MARK[0]] = load_mark
    dispatch[pickle.BUILD[0]] = load_build


def _check_data(dtype, n: int, data, what: str) -> None:
    """``data`` holds exactly the ``n`` items of ``dtype`` (bytes, or a list for objects)."""
    if not isinstance(dtype, np.dtype) or dtype.fields is not None or dtype.subdtype is not None:
        raise RefusedPickle(f"{what} of dtype {dtype!r}; expected a plain dtype (no fields)")
    if dtype.kind == "O":
        ok = type(data) is list and len(data) == n
    else:
        ok = isinstance(data, (bytes, bytearray)) and dtype.itemsize > 0 and len(data) == n * dtype.itemsize
    if not ok:
        size = len(data) if isinstance(data, (bytes, bytearray, list)) else type(data).__name__
        raise RefusedPickle(f"{what} of {n:,} {dtype} items carries {size} bytes/items, not as many "
                            "as it needs")


def _check_dtype_state(dtype: np.dtype, state) -> None:
    """The state numpy writes for a simple ``dtype`` (no fields, sub-array or own itemsize)."""
    fresh = np.dtype(dtype.str) if dtype.kind not in "Mm" else dtype
    want = fresh.__reduce__()[2]
    ok = (type(state) is tuple and len(state) == len(want) and state[0] == want[0]
          and state[1] in ("<", ">", "|", "=")
          and state[2:5] == (None, None, None) and state[5:8] == want[5:8])
    if ok and len(state) == 9:  # datetime64/timedelta64: (metadata, (unit, count, 1, 1))
        meta = state[8]
        ok = (type(meta) is tuple and len(meta) == 2 and meta[0] in (None, {}) and type(meta[1]) is tuple
              and len(meta[1]) == 4 and meta[1][0] in _TIME_UNITS and meta[1][1:] == (1, 1, 1))
    if not ok:
        raise RefusedPickle(f"a numpy dtype {dtype} with the state {str(state)[:120]}, not the one numpy "
                            "writes for it (fields or items laid over raw bytes); the file is crafted")


def _check_dtype(self, name, align=False, copy=True, *rest) -> None:
    if rest or type(name) is not str or not _DTYPE_NAME.fullmatch(name) or align is not False:
        raise RefusedPickle(f"numpy dtype {name!r}: a table holds numbers, strings and dates only")


def _check_reconstruct(self, cls=None, shape=None, mode=None, *rest) -> None:
    if rest or cls is not np.ndarray or shape != (0,) or mode != b"b":
        raise RefusedPickle("numpy _reconstruct other than (ndarray, (0,), b'b'), which numpy writes")


def _check_frombuffer(self, buf=None, dtype=None, shape=None, order="C", *rest) -> None:
    n = self._shape(shape, "an array")
    if rest or order not in ("C", "F"):
        raise RefusedPickle("numpy _frombuffer with other arguments than numpy writes")
    _check_data(dtype, n, buf, "an array")


def _check_slice(self, *args) -> None:
    if len(args) != 3 or any(a is not None and type(a) is not int for a in args):
        raise RefusedPickle(f"slice{args!r}: expected integer bounds")
    start, stop, step = (a if a is not None else d for a, d in zip(args, (0, 0, 1), strict=True))
    if step:
        self._count(len(range(start, stop, step)), "a slice")


def _check_new_index(self, cls=None, d=None, *rest) -> None:
    import pandas as pd

    if rest or not (isinstance(cls, type) and issubclass(cls, pd.Index)) or type(d) is not dict:
        raise RefusedPickle("pandas _new_Index other than (an Index class, its dict), which pandas writes")
    if d.get("verify_integrity", True) is not True:  # a MultiIndex's codes past its levels: read unchecked
        raise RefusedPickle("an index that asks not to be verified (verify_integrity), which pandas "
                            "never writes")
    if issubclass(cls, pd.RangeIndex):
        bounds = [d.get(k, default) for k, default in (("start", 0), ("stop", 0), ("step", 1))]
        if any(type(b) is not int for b in bounds) or bounds[2] == 0:
            raise RefusedPickle(f"a RangeIndex of {bounds!r}; expected integer start, stop and step")
        self._count(len(range(*bounds)), "a RangeIndex")


def _restored_array(data):
    """pyarrow's ``_restore_array``, fully validated at once: its buffers are the file's bytes,
    and an array whose length or offsets run past them would be read out of bounds."""
    from pyarrow.lib import ArrowException, _restore_array

    try:
        out = _restore_array(data)
        out.validate(full=True)
    except (ArrowException, TypeError, ValueError, IndexError) as exc:
        raise RefusedPickle(f"an Arrow array that does not fit its buffers ({str(exc)[:120]})") from None
    return out


def _check_block(self, values=None, placement=None, ndim=2, *rest) -> None:
    if rest or ndim not in (1, 2):
        raise RefusedPickle(f"a pandas block of {ndim!r} dimensions")


_NO_ARGS: tuple[type, ...] = (np.ndarray,)  # filled with pandas' containers on first use
_CALLS: dict[Callable, Callable] = {}
_WRAPPED: dict[tuple[str, str], Callable] = {
    ("_codecs", "encode"): _latin1, ("builtins", "bytearray"): _bytearray,
    ("copyreg", "_reconstructor"): _reconstructor, ("pyarrow.lib", "_restore_array"): _restored_array,
}


def _policies() -> None:
    """The checks of each call, keyed by the function (filled once, when a pickle is first read)."""
    global _NO_ARGS
    if _CALLS:
        return
    import pandas as pd
    from pandas._libs.internals import _unpickle_block
    from pandas.core.indexes.base import _new_Index

    try:
        from numpy._core.multiarray import _reconstruct
        from numpy._core.numeric import _frombuffer
    except ImportError:  # pragma: no cover - numpy 1.x
        from numpy.core.multiarray import _reconstruct
        from numpy.core.numeric import _frombuffer
    _CALLS.update({np.dtype: _check_dtype, _reconstruct: _check_reconstruct, _frombuffer: _check_frombuffer,
                   slice: _check_slice, _new_Index: _check_new_index, _unpickle_block: _check_block})
    _NO_ARGS = (np.ndarray, pd.DataFrame, pd.Series, pd.Index, pd.Categorical,
                pd.api.extensions.ExtensionArray)


def loads_restricted(data: bytes, extra: Iterable[type] = ()):
    """The object pickled in ``data``, rebuilt from the allowed globals only (and ``extra``
    classes) with every call checked; raises :class:`UnsafePickle` naming the first global
    outside them, or :class:`RefusedPickle` saying what else it declares that a table never
    does, before any of the pickle's calls to it."""
    _policies()
    allowed = frozenset((cls.__module__, cls.__qualname__) for cls in extra)
    return _Reader(io.BytesIO(data), allowed, len(data)).load()


def load_pickle(path: str | Path, extra: Iterable[type] = ()):
    """:func:`loads_restricted` of a file's bytes (in this process: for a file from elsewhere,
    :func:`forecaster.evaluation.pickle_sandbox.load_plain_pickle` reads it apart)."""
    return loads_restricted(Path(path).read_bytes(), extra)
