"""One float32 store of a run's raw features, computed once and read by every fold.

Each fold used to compute the features of its own slice (the same rows again at every refit)
and hold them, processed, in memory: at 5,400 stocks x 3,900 days that is 2 GB per fold
worker, plus the temporaries of processing it. The walk-forward now computes the whole
panel's features once (:meth:`FeatureStore.build`) into one array laid out stock-major,
``[N, D, F]`` float32, in memory or in a file; a fold's :class:`~forecaster.data.panel.Panel`
slice carries a :class:`FeatureView` of it (its rows and stocks), and the models read what
they need when they need it: a training step reads its stocks' windows (a few KB each), a
pass over the days reads stocks in chunks. A file store is read with plain file reads, never
mapped, so the pages sit once in the operating system's cache, shared by every worker, and
in no worker's resident memory.

No leakage: every feature of day ``t`` uses bars up to ``t`` only (:mod:`.factors`), and a
fold's view ends at its own last row. A feature that reads the day's cross-section
(idiosyncratic volatility's equal-weight market) reads every stock of the run's panel that
day, not only the fold's members.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

ITEM = np.dtype(np.float32).itemsize


@dataclass
class FeatureStore:
    """Raw features ``[N, D, F]`` float32 of a panel (stock-major: one stock's days are
    contiguous, so a window of a few stocks is a few short reads).

    Attributes:
        names: the ``F`` feature names, in order.
        n_stocks, n_days: the panel's shape.
        path: the file holding the array (:meth:`build` with ``path``), or ``None``.
        values: the array in memory, or ``None`` for a file store.
    """

    names: tuple[str, ...]
    n_stocks: int
    n_days: int
    path: Path | None = None
    values: np.ndarray | None = None
    _file: object = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, panel, names, path: str | Path | None = None) -> FeatureStore:
        """The features ``names`` (already expanded, each computable) of every stock and day
        of ``panel``, one feature at a time; in memory (the peak: the store plus one float64
        feature), or streamed to ``path`` (the peak: one feature and one chunk of stocks,
        whatever the store's size; the file system holds twice the store for a moment)."""
        from forecaster.features.factors import feature  # factors imports this module

        names = tuple(names)
        store = cls(names, panel.n_stocks, panel.n_days)
        columns = (feature(panel, name, cache=False) for name in names)  # each [D, N]
        if path is None:
            store.values = np.empty((panel.n_stocks, panel.n_days, len(names)), np.float32)
            for i, values in enumerate(columns):
                store.values[:, :, i] = values.T
        else:
            store.path = Path(path)
            write_stock_major(store.path, columns, store.n_stocks, store.n_days, len(names))
        return store

    def __getstate__(self):  # a file store pickles as its path: workers open their own handle
        return {**self.__dict__, "_file": None}

    @property
    def n_features(self) -> int:
        return len(self.names)

    def read(self, stocks: np.ndarray, lo: int, hi: int, columns: np.ndarray | None = None) -> np.ndarray:
        """Rows ``lo..hi-1`` of ``stocks`` (store indices): ``[len(stocks), hi - lo, F]``
        float32, a copy (features ``columns`` only when given, read a stock at a time so that
        the other features of a wide store are never held at once)."""
        stocks = np.asarray(stocks, dtype=np.intp)
        width = self.n_features if columns is None else len(columns)
        if self.values is not None:
            if columns is None:
                return self.values[stocks, lo:hi]
            return self.values[np.ix_(stocks, np.arange(lo, max(lo, hi)), np.asarray(columns, np.intp))]
        out = np.empty((len(stocks), max(0, hi - lo), width), np.float32)
        if hi <= lo:
            return out
        if self._file is None:
            self._file = open(self.path, "rb", buffering=0)  # noqa: SIM115 (kept per process)
        row, f = self.n_days * self.n_features * ITEM, self._file
        whole = None if columns is None else np.empty((hi - lo, self.n_features), np.float32)
        for k, s in enumerate(stocks):
            f.seek(int(s) * row + lo * self.n_features * ITEM)
            target = out[k] if whole is None else whole
            view = memoryview(target).cast("B")
            got = f.readinto(view)
            if got != view.nbytes:
                raise OSError(f"{self.path}: short read ({got} of {view.nbytes} bytes); "
                              "the feature store was changed during the run")
            if whole is not None:
                np.take(whole, columns, axis=1, out=out[k])
        return out

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass(frozen=True)
class FeatureView:
    """The part of a :class:`FeatureStore` that one panel (a slice of the store's) covers:
    its rows ``lo..lo + n_days - 1``, its stocks ``stocks`` (store indices, in the panel's
    order) and the features ``columns`` (store indices; ``None``: all, in the store's order).
    Read as a ``[D, N, F]`` array would be (:attr:`shape`)."""

    store: FeatureStore
    lo: int
    n_days: int
    stocks: np.ndarray
    columns: np.ndarray | None = None

    @classmethod
    def whole(cls, store: FeatureStore) -> FeatureView:
        return cls(store, 0, store.n_days, np.arange(store.n_stocks))

    @property
    def names(self) -> tuple[str, ...]:
        names = self.store.names
        return names if self.columns is None else tuple(names[i] for i in self.columns)

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.n_days, len(self.stocks), len(self.names)

    def covers(self, names) -> bool:
        return set(names) <= set(self.store.names)

    def select(self, names) -> FeatureView:
        """The same rows and stocks, features ``names`` (each in the store) in that order."""
        names = tuple(names)
        if names == self.store.names:
            return replace(self, columns=None)
        where = {n: i for i, n in enumerate(self.store.names)}
        return replace(self, columns=np.array([where[n] for n in names], dtype=np.intp))

    def sliced(self, rows: slice, cols) -> FeatureView:
        """The view of the panel ``panel._sliced(rows, cols)`` returns (rows a step-1 slice)."""
        lo, hi, _ = rows.indices(self.n_days)
        return replace(self, lo=self.lo + lo, n_days=max(0, hi - lo), stocks=self.stocks[cols])

    def read(self, lo: int, hi: int, stocks: np.ndarray | None = None) -> np.ndarray:
        """The view's rows ``lo..hi-1`` (clipped to the view) of its stocks ``stocks`` (view
        indices; all when None): ``[stocks, rows, F]`` float32."""
        lo, hi = max(0, lo), min(self.n_days, hi)
        picked = self.stocks if stocks is None else self.stocks[np.asarray(stocks, dtype=np.intp)]
        return self.store.read(picked, self.lo + lo, self.lo + max(lo, hi), self.columns)

    def stock_chunks(self, budget_bytes: int = 64 * 2**20) -> list[tuple[int, int]]:
        """``(first, end)`` view stock indices of chunks whose every day fits ``budget_bytes``."""
        n, size = len(self.stocks), chunk_stocks(self.n_days, len(self.names), budget_bytes)
        return [(a, min(n, a + size)) for a in range(0, n, size)]

    def days(self, out: np.ndarray | None = None) -> np.ndarray:
        """The whole view as ``[D, N, F]`` (into ``out`` when given), read a chunk of stocks
        at a time."""
        out = np.empty(self.shape, np.float32) if out is None else out
        for a, b in self.stock_chunks():
            out[:, a:b] = self.read(0, self.n_days, np.arange(a, b)).transpose(1, 0, 2)
        return out

    def flat_rows(self, rows: int, pick: np.ndarray | None) -> np.ndarray:
        """``X[:rows].reshape(-1, F)[pick]`` of the ``[D, N, F]`` array this view reads as
        (every row when ``pick`` is None), in one pass over the stocks."""
        n = len(self.stocks)
        if pick is None:
            pick = np.arange(rows * n)
        day, stock = np.divmod(np.asarray(pick), n)
        out = np.empty((len(day), len(self.names)), np.float32)
        for a, b in self.stock_chunks():
            sel = (stock >= a) & (stock < b)
            if sel.any():
                out[sel] = self.read(0, rows, np.arange(a, b))[stock[sel] - a, day[sel]]
        return out


def chunk_stocks(n_days: int, n_features: int, budget_bytes: int = 64 * 2**20) -> int:
    """Stocks a chunk of a pass over all days holds within ``budget_bytes`` (at least 1)."""
    return max(1, budget_bytes // max(1, n_days * n_features * ITEM))


def write_stock_major(path: Path, columns, n_stocks: int, n_days: int, n_features: int,
                      budget_bytes: int = 256 * 2**20) -> None:
    """Write features given one at a time (``columns``: ``n_features`` arrays ``[D, N]``) as
    one ``[N, D, F]`` float32 file at ``path``, never holding more than one feature and one
    chunk of stocks: each feature goes to a scratch file as it comes (feature-major, where
    it is contiguous), then chunks of stocks are gathered from it into the stock-major file."""
    scratch = path.with_name(path.name + ".by-feature")
    block = n_stocks * n_days * ITEM  # one feature, [N, D]
    try:
        with open(scratch, "wb") as f:
            written = 0
            for values in columns:
                np.ascontiguousarray(values.T, dtype=np.float32).tofile(f)
                written += 1
        if written != n_features:
            raise ValueError(f"{written} features given, {n_features} expected")
        size = max(1, min(n_stocks, chunk_stocks(n_days, n_features, budget_bytes)))
        with open(scratch, "rb", buffering=0) as src, open(path, "wb") as out:
            piece = np.empty((size, n_days), np.float32)
            whole = np.empty((size, n_days, n_features), np.float32)
            for a in range(0, n_stocks, size):
                b = min(n_stocks, a + size)
                chunk = whole[: b - a]
                for i in range(n_features):
                    src.seek(i * block + a * n_days * ITEM)
                    view = memoryview(piece[: b - a]).cast("B")
                    if src.readinto(view) != view.nbytes:
                        raise OSError(f"{scratch}: short read while writing the feature store")
                    chunk[:, :, i] = piece[: b - a]
                chunk.tofile(out)
    finally:
        scratch.unlink(missing_ok=True)
