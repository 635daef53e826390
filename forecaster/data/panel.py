"""The panel: many stocks' daily bars on one calendar, every field a ``[days, stocks]`` array.

Built once from canonical frames (:func:`forecaster.data.load_dir`); features, labels,
walk-forward slices and backtests read it. A single stock is a panel of one. Where a stock
has no bar on a calendar day (not yet listed, delisted, missing row) every field is NaN and
``listed`` is False.

Prices are unadjusted as exported; :meth:`Panel.log_adjusted` chains ``close / preclose`` so
that ex-rights days do not show false jumps.
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.market.delisting import QUIET_DAYS, Delistings, decide
from forecaster.data.market.exchange import limit_matrix
from forecaster.data.minute.features import INTRADAY_FEATURES
from forecaster.data.minute.session import is_bar_frame

# Canonical columns carried into the panel when a frame has them.
FIELDS = ("open", "high", "low", "close", "preclose", "volume", "amount", "turnover",
          "pe_ttm", "pb_mrq", "ps_ttm", "float_mv", "total_mv", "delisting", *INTRADAY_FEATURES,
          "gap_excluded")


def _union_calendar(indexes: list[pd.DatetimeIndex]) -> pd.DatetimeIndex:
    """The sorted union of the stocks' dates: one concatenation and a sort, not a set of every
    stock-day's Timestamp (21 M Python objects at whole-market size)."""
    first = indexes[0]
    if all(index.dtype == first.dtype for index in indexes):
        return pd.DatetimeIndex(first.append(indexes[1:]).unique().sort_values(), name="date")
    return pd.DatetimeIndex(sorted(set().union(*indexes)), name="date")  # mixed units or zones


@dataclass
class Panel:
    """Daily bars of ``N`` stocks on a calendar of ``D`` trading days.

    Attributes:
        dates: ``[D]`` sorted trading days (the union of the stocks' days).
        codes: ``[N]`` stock codes, sorted.
        fields: name -> ``[D, N]`` float64 (NaN where there is no bar or no value).
        listed: ``[D, N]`` the stock has a bar that day.
        suspended: ``[D, N]`` a bar without trading (``trade_status`` 0 or zero volume).
        st: ``[D, N]`` under special treatment.
        limit_up, limit_down: ``[D, N]`` limit prices (inf / 0 on days without a limit,
            such as a new listing's first days; NaN without a bar).
        members: ``[D, N]`` the stock belongs to the run's universe that day (an index's
            point-in-time members, :mod:`forecaster.data.market.universe`); ``None``: every stock.
            Backtests trade and benchmark only members; a non-member held is sold.
        learn: ``[D, N]`` the stock-days whose labels a model may learn from: bool (a
            training universe: :func:`forecaster.features.labels.tradeable_label` masks the
            others), or float weights in ``[0, 1]`` (the models weight each stock-day's label by
            it; 0 masks it, as False does; :meth:`learn_weights`); ``None``: all, alike.
        ends: ``{code: last day}`` an instruments file gives (a Qlib folder's
            ``instruments/all.txt``, :func:`~forecaster.data.market.delisting.instrument_ends`):
            a stock whose membership of the market ends before the data's last day is delisted
            there (:meth:`delistings`); ``None``: no such file.
        features: this panel's part of the run's feature store
            (:class:`~forecaster.features.store.FeatureView`): features are read from it
            rather than computed again; ``None``: computed from the fields when needed.
        seen: the fields a lean copy (:meth:`lean`) left out: ``{name: [2, N] bool}``, per
            stock whether it had any value, and any on a day it traded (what :meth:`has` and
            :meth:`stocks_with` answer for them).
    """

    dates: pd.DatetimeIndex
    codes: np.ndarray
    fields: dict[str, np.ndarray]
    listed: np.ndarray
    suspended: np.ndarray
    st: np.ndarray
    limit_up: np.ndarray
    limit_down: np.ndarray
    members: np.ndarray | None = None
    learn: np.ndarray | None = None
    ends: dict | None = None
    features: object | None = field(default=None, repr=False, compare=False)  # a FeatureView
    seen: dict[str, np.ndarray] | None = field(default=None, repr=False, compare=False)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_frames(cls, frames: Mapping[str, pd.DataFrame] | pd.DataFrame) -> Panel:
        """Align canonical frames ``{code: frame}`` (or one frame) on the union calendar."""
        if isinstance(frames, pd.DataFrame):
            frames = {str(frames["code"].iloc[0]) if "code" in frames else "series": frames}
        if not frames:
            raise ValueError("a panel needs at least one stock")
        codes = sorted(frames)
        for code in codes:
            index = frames[code].index
            if not isinstance(index, pd.DatetimeIndex):
                raise ValueError(f"frames[{code!r}] needs a DatetimeIndex (use forecaster.data.load_csv)")
            if is_bar_frame(frames[code]) and len(codes) > 1:  # one stock's bars: a bar-level walk
                raise ValueError(f"{code}: minute bars, but a panel is daily: give a folder of minute "
                                 "bars as --intraday DIR ([data] intraday) beside the daily files, or "
                                 "run one stock's bars alone (forecaster backtest FILE)")
            if not (index.is_monotonic_increasing and index.is_unique):
                raise ValueError(f"frames[{code!r}]: dates must be sorted and unique")
            missing = [c for c in ("open", "close") if c not in frames[code].columns]
            if missing:
                raise ValueError(f"frames[{code!r}] lacks column(s) {missing}")
        dates = _union_calendar([frames[c].index for c in codes])
        # Each field filled stock by stock into its [D, N] array: no long frame of every
        # stock-day (at whole-market size a concat and an unstack per field cost gigabytes).
        rows = [dates.get_indexer(frames[c].index) for c in codes]
        present = set().union(*(frames[c].columns for c in codes))

        def wide(column: str) -> np.ndarray | None:
            if column not in present:
                return None
            table = np.full((len(dates), len(codes)), np.nan)
            for j, code in enumerate(codes):
                if column in frames[code].columns:
                    table[rows[j], j] = frames[code][column].astype(float).to_numpy()
            return table

        fields = {name: wide(name) for name in FIELDS}
        fields = {name: values for name, values in fields.items() if values is not None}
        listed = np.isfinite(fields["open"]) & np.isfinite(fields["close"])
        if "preclose" not in fields or np.isnan(fields["preclose"][listed]).any():
            # Formats without preclose: the previous close (the open on a first bar).
            prev = pd.DataFrame(fields["close"]).ffill().shift(1).to_numpy()
            own = fields.get("preclose", np.full_like(prev, np.nan))
            fields["preclose"] = np.where(np.isfinite(own), own, np.where(np.isfinite(prev), prev,
                                                                           fields["open"]))
            fields["preclose"][~listed] = np.nan
        suspended = np.zeros_like(listed)
        for column, value in (("suspended", None), ("trade_status", 0.0), ("volume", 0.0)):
            table = fields[column] if column in fields else wide(column)
            if table is not None:
                suspended |= (np.nan_to_num(table) > 0) if value is None else (table == value)
        suspended &= listed
        st_table = wide("is_st")
        st = (np.nan_to_num(st_table) == 1) if st_table is not None else np.zeros_like(listed)
        # A day outside its band (a new listing's first days) has no limit; that needs the
        # high and low of every stock.
        ranges = all(c in frames[code].columns for code in codes for c in ("high", "low"))
        up, down = limit_matrix(codes, dates, fields["preclose"], st.astype(float),
                                fields.get("high") if ranges else None, fields.get("low") if ranges else None)
        return cls(dates=dates, codes=np.asarray(codes, dtype=object), fields=fields,
                   listed=listed, suspended=suspended, st=st, limit_up=up, limit_down=down)

    # ------------------------------------------------------------------ shape and access
    @property
    def n_days(self) -> int:
        return len(self.dates)

    @property
    def n_stocks(self) -> int:
        return len(self.codes)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.fields[name]

    def has(self, name: str) -> bool:
        if name not in self.fields and self.seen is not None and name in self.seen:
            return bool(self.seen[name][0].any())
        return name in self.fields and bool(np.isfinite(self.fields[name]).any())

    def stocks_with(self, name: str) -> np.ndarray | None:
        """``[N]`` bool: the stocks with a value of field ``name`` on a day they trade
        (``None``: no such field)."""
        if name not in self.fields:
            return self.seen[name][1] if self.seen is not None and name in self.seen else None
        with np.errstate(invalid="ignore"):
            return (np.isfinite(self.fields[name]) & self.tradeable()).any(axis=0)

    def lean(self, keep) -> Panel:
        """This panel with only the fields ``keep`` (those it has): the others, whose
        features a feature store holds, are remembered by :attr:`seen` only."""
        trades = self.tradeable()
        seen = dict(self.seen or {})
        for name, values in self.fields.items():
            if name not in keep:
                finite = np.isfinite(values)
                seen[name] = np.vstack([finite.any(axis=0), (finite & trades).any(axis=0)])
                release_pages(values)  # a mapped field read once: its pages stay in the page cache only
        return replace(self, fields={k: v for k, v in self.fields.items() if k in keep}, seen=seen,
                       _cache={})

    def _sliced(self, rows, cols) -> Panel:
        def cut(a):
            return a[rows][:, cols]

        return Panel(dates=self.dates[rows], codes=self.codes[cols],
                     fields={k: cut(v) for k, v in self.fields.items()}, listed=cut(self.listed),
                     suspended=cut(self.suspended), st=cut(self.st), limit_up=cut(self.limit_up),
                     limit_down=cut(self.limit_down),
                     members=None if self.members is None else cut(self.members),
                     learn=None if self.learn is None else cut(self.learn), ends=self.ends,
                     seen=None if self.seen is None else {k: v[:, cols] for k, v in self.seen.items()},
                     features=(self.features.sliced(rows, cols)
                               if self.features is not None and isinstance(rows, slice) else None))

    def slice(self, start=None, end=None) -> Panel:
        """Days ``start..end`` (dates, both inclusive, either may be None) of every stock."""
        lo = 0 if start is None else int(self.dates.searchsorted(pd.Timestamp(start)))
        hi = self.n_days if end is None else int(self.dates.searchsorted(pd.Timestamp(end), side="right"))
        return self._sliced(slice(lo, hi), slice(None))

    def rows(self, keep: np.ndarray) -> Panel:
        """The days where the boolean ``keep [D]`` is true, every stock."""
        return self._sliced(np.asarray(keep, dtype=bool), slice(None))

    def take(self, codes) -> Panel:
        """The given stocks (in the given order)."""
        where = {c: i for i, c in enumerate(self.codes)}
        unknown = [c for c in codes if c not in where]
        if unknown:
            raise KeyError(f"stocks not in the panel: {unknown[:5]}")
        return self._sliced(slice(None), np.array([where[c] for c in codes], dtype=int))

    def to_files(self, folder: str | Path) -> PanelFiles:
        """Save every array under ``folder``; returns the small handle that
        :meth:`PanelFiles.open` maps back (what parallel workers receive instead of arrays)."""
        folder = Path(folder)
        arrays = {f"field_{k}": v for k, v in self.fields.items()}
        arrays.update(listed=self.listed, suspended=self.suspended, st=self.st,
                      limit_up=self.limit_up, limit_down=self.limit_down)
        masks = tuple(name for name in ("members", "learn") if getattr(self, name) is not None)
        arrays.update({name: getattr(self, name) for name in masks})
        for name, values in arrays.items():
            np.save(folder / f"{name}.npy", values)
        if self.features is not None and self.features.store.path is None:
            raise ValueError("a panel with an in-memory feature store cannot go to files: "
                             "build the store with a path")
        return PanelFiles(folder, self.dates, self.codes, tuple(self.fields), masks, self.ends, self.features)

    ARRAYS = ("listed", "suspended", "st", "limit_up", "limit_down")

    def spill(self, files: PanelFiles) -> None:
        """Swap this panel's arrays for read-only maps of ``files`` (this panel's own
        :meth:`to_files`): while fold workers read the files, this process holds the panel
        only in the operating system's page cache (clean pages of a file on disk, shared with
        the workers and dropped under memory pressure), not in its own memory.
        :meth:`unspill` reads them back before the files go."""
        opened = files.open()
        for name in self.fields:
            self.fields[name] = opened.fields[name]
        for name in self.ARRAYS:
            setattr(self, name, getattr(opened, name))

    def unspill(self, like: Panel | None = None) -> None:
        """Read the arrays :meth:`spill` mapped back into memory (a no-op otherwise); with
        ``like``, a panel of the same data read back already, take its arrays instead of a
        second copy."""
        if like is not None:
            like.unspill()
        for name, values in self.fields.items():
            if isinstance(values, np.memmap):
                self.fields[name] = like.fields[name] if like is not None else np.array(values)
        for name in self.ARRAYS:
            values = getattr(self, name)
            if isinstance(values, np.memmap):
                setattr(self, name, getattr(like, name) if like is not None else np.array(values))

    def delistings(self, quiet_days: int = QUIET_DAYS) -> Delistings:
        """Which stocks are delisted and from when the delisting is known
        (:func:`forecaster.data.market.delisting.decide`: a ``退`` name in the ``delisting``
        field, an instruments end before the data's last day (:attr:`ends`), or bars that stop
        for good more than ``quiet_days`` trading days before the data end), computed once per
        panel. A slice decides on its own days: a stock that stops near its end, with no end
        date before it, is not yet known to be delisted there."""
        return self.derived(("delistings", int(quiet_days)), lambda: decide(
            self.dates, self.codes, self.listed, self.fields.get("delisting"), ends=self.ends,
            quiet_days=quiet_days))

    def learn_weights(self) -> np.ndarray | None:
        """``[D, N]`` float32 weight of each stock-day's label in training (:attr:`learn` as
        1 / 0 when it is bool), or ``None`` when every label counts alike."""
        if self.learn is None:
            return None
        return self.derived(("learn_weights",), lambda: np.asarray(self.learn, dtype=np.float32))

    def listed_days(self) -> np.ndarray:
        """``[N]`` number of days each stock has a bar."""
        return self.listed.sum(axis=0)

    # ------------------------------------------------------------------ derived arrays
    def derived(self, key: tuple, compute):
        """``compute()`` once per panel, kept under ``key``: arrays derived from the prices
        (adjusted log prices, labels) are built once and read by every part of a run."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def log_adjusted(self, name: str = "close") -> np.ndarray:
        """``[D, N]`` log prices adjusted for corporate actions (NaN without a bar).

        ``log close`` is the running sum of ``log(close / preclose)``; the open, high and low
        of a day are measured against that day's preclose. Only differences along time are
        meaningful (each stock starts at an arbitrary level).
        """
        key = ("log_adjusted", name)
        if key not in self._cache:
            with np.errstate(invalid="ignore", divide="ignore"):
                step = np.where(self.listed, np.log(self["close"] / self["preclose"]), 0.0)
            level = np.cumsum(np.nan_to_num(step), axis=0)  # log adjusted close
            if name == "close":
                out = level
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    out = level - step + np.log(self[name] / self["preclose"])
            self._cache[key] = np.where(self.listed, out, np.nan)
        return self._cache[key]

    def returns(self) -> np.ndarray:
        """``[D, N]`` daily log returns ``log(close / preclose)``; NaN without a bar or on a
        suspended day (no trade, no outcome)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.log(self["close"] / self["preclose"])
        return np.where(self.listed & ~self.suspended, r, np.nan)

    def tradeable(self) -> np.ndarray:
        """``[D, N]`` the stock trades that day (has a bar and is not suspended)."""
        return self.listed & ~self.suspended

    def at_limit_up(self, price: str = "open") -> np.ndarray:
        """``[D, N]`` the ``price`` (open or close) sits at limit-up: no buy fills there."""
        with np.errstate(invalid="ignore"):
            return self.listed & (self[price] >= self.limit_up - 1e-6)

    def at_limit_down(self, price: str = "open") -> np.ndarray:
        """``[D, N]`` the ``price`` sits at limit-down: no sell fills there."""
        with np.errstate(invalid="ignore"):
            return self.listed & (self[price] <= self.limit_down + 1e-6)


def release_pages(values: np.ndarray) -> None:
    """Drop a memory-mapped array's pages from this process's resident memory (they stay in
    the operating system's page cache, and a later read maps them again); a no-op for an
    array in memory or where ``madvise`` is not available."""
    mapped = getattr(values, "_mmap", None)
    if mapped is not None and hasattr(mmap, "MADV_DONTNEED"):
        try:
            mapped.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):
            pass


@dataclass
class PanelFiles:
    """A panel saved by :meth:`Panel.to_files`: the folder, calendar and codes only, so it
    pickles in microseconds. A worker :meth:`open` s it per task, slices what the task needs
    (in-memory copies) and drops the maps: processes share one copy of the arrays through the
    page cache, and no worker keeps the mapped pages in its resident memory beyond the
    slicing (they would count once per worker in a resident-memory sum)."""

    folder: Path
    dates: pd.DatetimeIndex
    codes: np.ndarray
    field_names: tuple[str, ...]
    masks: tuple[str, ...] = ()  # of "members", "learn": those the panel had
    ends: dict | None = None  # the panel's instruments end dates
    features: object | None = None  # the panel's FeatureView of a file store (it pickles as its path)

    def open(self) -> Panel:
        """The panel with every array a read-only memory map of its file."""
        def load(name: str) -> np.ndarray:
            return np.load(self.folder / f"{name}.npy", mmap_mode="r")

        return Panel(dates=self.dates, codes=self.codes,
                     fields={k: load(f"field_{k}") for k in self.field_names},
                     listed=load("listed"), suspended=load("suspended"), st=load("st"),
                     limit_up=load("limit_up"), limit_down=load("limit_down"),
                     ends=self.ends, features=self.features, **{name: load(name) for name in self.masks})
