"""Reading a pickle that someone else wrote without running its code.

A pickle names the functions that rebuild its objects, and ``pickle.load`` calls them: a file
can name ``os.system``. :func:`load_pickle` reads with an unpickler that resolves only the
globals pandas, numpy and pyarrow need to rebuild frames, series, indexes and arrays (plus the
classes a caller adds), and refuses any other name with :class:`UnsafePickle` *before* calling
anything. pandas' own compatibility renames (pickles of pandas 1.x) apply first, so Qlib's
``pred.pkl`` files of older versions read as ``pd.read_pickle`` reads them.
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
from collections.abc import Iterable
from pathlib import Path

try:  # pandas' unpickler: renames of classes moved since pandas 1.x, and their old reduce forms
    from pandas.compat.pickle_compat import Unpickler as _Base
    from pandas.compat.pickle_compat import _class_locations_map as _RENAMED
except ImportError:  # pragma: no cover - a pandas without it reads current pickles only
    _Base, _RENAMED = pickle._Unpickler, {}

# (module, name) a frame, series or array of numbers, strings, dates and categories needs.
_ALLOWED = frozenset({
    ("builtins", "bytearray"), ("builtins", "slice"), ("builtins", "complex"), ("builtins", "set"),
    ("builtins", "frozenset"), ("builtins", "range"), ("_codecs", "encode"),
    ("collections", "OrderedDict"),
    ("copyreg", "_reconstructor"), ("builtins", "object"),
    ("datetime", "datetime"), ("datetime", "date"), ("datetime", "time"), ("datetime", "timedelta"),
    ("datetime", "timezone"), ("zoneinfo", "ZoneInfo"),
    ("numpy", "dtype"), ("numpy", "ndarray"), ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"), ("numpy", "float64"), ("numpy", "float32"), ("numpy", "int64"),
    ("numpy", "bool_"), ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("pandas", "DataFrame"), ("pandas", "Series"), ("pandas", "Index"), ("pandas", "MultiIndex"),
    ("pandas", "RangeIndex"), ("pandas", "DatetimeIndex"), ("pandas", "CategoricalIndex"),
    ("pandas", "PeriodIndex"), ("pandas", "TimedeltaIndex"), ("pandas", "Categorical"),
    ("pandas", "CategoricalDtype"), ("pandas", "DatetimeTZDtype"), ("pandas", "StringDtype"),
    ("pandas", "PeriodDtype"), ("pandas", "Timestamp"), ("pandas", "Timedelta"), ("pandas", "NA"),
    ("pandas", "NaT"),
    ("pandas.core.frame", "DataFrame"), ("pandas.core.series", "Series"),
    ("pandas.core.indexes.base", "Index"), ("pandas.core.indexes.base", "_new_Index"),
    ("pandas.core.indexes.multi", "MultiIndex"), ("pandas.core.indexes.range", "RangeIndex"),
    ("pandas.core.indexes.datetimes", "DatetimeIndex"),
    ("pandas.core.indexes.datetimes", "_new_DatetimeIndex"),
    ("pandas.core.indexes.category", "CategoricalIndex"), ("pandas.core.indexes.frozen", "FrozenList"),
    ("pandas.core.indexes.period", "PeriodIndex"), ("pandas.core.indexes.period", "_new_PeriodIndex"),
    ("pandas.core.indexes.timedeltas", "TimedeltaIndex"),
    ("pandas.core.internals.managers", "BlockManager"),
    ("pandas.core.internals.managers", "SingleBlockManager"),
    ("pandas._libs.internals", "_unpickle_block"), ("pandas._libs.arrays", "__pyx_unpickle_NDArrayBacked"),
    ("pandas.arrays", "DatetimeArray"), ("pandas.arrays", "TimedeltaArray"), ("pandas.arrays", "PeriodArray"),
    ("pandas.arrays", "StringArray"), ("pandas.arrays", "ArrowStringArray"),
    ("pandas.arrays", "IntegerArray"), ("pandas.arrays", "FloatingArray"), ("pandas.arrays", "BooleanArray"),
    ("pandas", "Int64Dtype"), ("pandas", "Int32Dtype"), ("pandas", "Float64Dtype"),
    ("pandas", "Float32Dtype"), ("pandas", "BooleanDtype"),
    ("pandas.core.arrays.integer", "IntegerArray"), ("pandas.core.arrays.floating", "FloatingArray"),
    ("pandas.core.arrays.boolean", "BooleanArray"), ("pandas.core.arrays.integer", "Int64Dtype"),
    ("pandas.core.arrays.floating", "Float64Dtype"), ("pandas.core.arrays.boolean", "BooleanDtype"),
    ("pandas.core.arrays.datetimes", "DatetimeArray"), ("pandas.core.arrays.timedeltas", "TimedeltaArray"),
    ("pandas.core.arrays.categorical", "Categorical"), ("pandas.core.arrays.string_", "StringArray"),
    ("pandas.core.arrays.string_", "StringDtype"), ("pandas.core.arrays.string_arrow", "ArrowStringArray"),
    ("pandas.core.dtypes.dtypes", "CategoricalDtype"), ("pandas.core.dtypes.dtypes", "DatetimeTZDtype"),
    ("pandas.core.dtypes.dtypes", "PeriodDtype"),
    ("pandas._libs.tslibs.timestamps", "_unpickle_timestamp"),
    ("pandas._libs.tslibs.timestamps", "Timestamp"),
    ("pandas._libs.tslibs.timedeltas", "_timedelta_unpickle"),
    ("pandas._libs.tslibs.nattype", "_nat_unpickle"), ("pandas._libs.missing", "NA"),
    ("pyarrow.lib", "_restore_array"), ("pyarrow.lib", "py_buffer"), ("pyarrow.lib", "type_for_alias"),
})
# Frequencies (a DatetimeIndex's ``freq``): the offset classes of this module, by any name.
_OFFSETS = "pandas._libs.tslibs.offsets"
# ``getattr(obj, name)`` a pickle may ask for (a class method that rebuilds an instance).
_ATTRIBUTES = frozenset({("zoneinfo", "ZoneInfo", "_unpickle")})


class UnsafePickle(pickle.UnpicklingError):
    """A pickle that names a global outside the allow-list (it could run code)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def _safe_getattr(obj, name: str):
    """``getattr`` limited to :data:`_ATTRIBUTES` (a pickle may call it with any object)."""
    key = (getattr(obj, "__module__", None), getattr(obj, "__qualname__", None), name)
    if key not in _ATTRIBUTES:
        raise UnsafePickle(f"getattr({getattr(obj, '__qualname__', type(obj).__name__)}, {name!r})")
    return getattr(obj, name)


class _RestrictedUnpickler(_Base):
    def __init__(self, file, extra: frozenset[tuple[str, str]]):
        super().__init__(file)
        self._extra = extra

    def find_class(self, module: str, name: str):
        if self.proto < 3:  # Python 2's names, as pickle's own fix_imports maps them
            module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
            module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if (module, name) == ("builtins", "getattr"):
            return _safe_getattr
        if _RENAMED.get((module, name), (module, name)) in _ALLOWED or (module, name) in self._extra:
            return super().find_class(module, name)
        if module == _OFFSETS and name[:1].isupper():  # the offset classes (Day, BDay, ...), no functions
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise UnsafePickle(f"{module}.{name}")


def loads_restricted(data: bytes, extra: Iterable[type] = ()):
    """The object pickled in ``data``, rebuilt from the allowed globals only (and ``extra``
    classes); raises :class:`UnsafePickle` naming the first global outside them, before any
    of the pickle's calls to it."""
    allowed = frozenset((cls.__module__, cls.__qualname__) for cls in extra)
    return _RestrictedUnpickler(io.BytesIO(data), allowed).load()


def load_pickle(path: str | Path, extra: Iterable[type] = ()):
    """:func:`loads_restricted` of a file's bytes."""
    return loads_restricted(Path(path).read_bytes(), extra)
