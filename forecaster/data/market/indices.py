"""Indices by name, and the checks every membership list goes through.

Known indices (:data:`INDICES`): ``csi300`` (CSI 300, 300 members) and ``csi500`` (CSI 500, 500
members). Their point-in-time membership comes from the ``index-constitution`` package (MIT, pure
data), whose history holds a row per span: ``symbol`` (``SH600000``), ``opt-in`` (the first member
day) and ``opt-out`` (the first day *out*, empty while still a member). A span is kept as
``(opt-in, opt-out - 1 day)``: on any calendar it ends on the last trading day before ``opt-out``.

A membership list is checked, not trusted (:func:`list_warnings`), whichever its source (a file,
a Qlib folder's ``instruments/NAME.txt`` or the package), over the data's calendar; each kind of
finding is one warning line naming the first few days:

* **short days**: the list holds fewer members than the index's size (known by name, else the
  list's own usual count): a shortfall of the list itself, which no stock the data lack explains;
* **overlap**: members shared with an index the list cannot share (CSI 300 and CSI 500 are
  disjoint), when both lists are at hand;
* **early spans**: spans that end before the next review (CSI's reviews take effect on the
  trading day after the second Friday of June and December): on a short day of the ~3 months
  before a review, the members missing (against the package's list) are exactly ones that
  leave at that review.
"""

from __future__ import annotations

from functools import cache
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.market.exchange import canonical_code
from forecaster.data.sources import DataError

PACKAGE = "index-constitution"
INDICES = {"csi300": ("CSI 300", 300), "csi500": ("CSI 500", 500)}  # name: (title, members)
DISJOINT = {"csi300": ("csi500",), "csi500": ("csi300",)}  # lists that cannot share a member
STILL = pd.Timestamp("2200-12-31")  # the last day of a span that has not ended
REVIEW_WINDOW = pd.Timedelta(days=92)  # the ~3 months before a review the early-spans check reads
SHOWN = 3  # days (or reviews) a warning line names


def known_index(name: str) -> str | None:
    """The known index a list's name says: ``csi300``, ``CSI300``, ``csi300.txt`` and
    ``csi300_early_spans.txt`` are ``csi300``; ``csi3000`` or ``my_list.txt``: ``None``."""
    stem = Path(str(name)).name.lower()
    for key in INDICES:
        if stem == key or (stem.startswith(key) and not stem[len(key)].isalnum()):
            return key
    return None


def known_names() -> str:
    return ", ".join(INDICES)


@cache
def package_history(index: str) -> tuple[dict[str, tuple[tuple[pd.Timestamp, pd.Timestamp], ...]], str]:
    """``({code: spans}, source)`` of a known index from the package: canonical codes
    (``sh.600000``), both ends member days; ``source`` names the package, its version and the
    index."""
    if index not in INDICES:
        raise DataError(f"{index}: not an index of the {PACKAGE} package; known: {known_names()}")
    try:
        import index_constitution
    except ImportError:
        raise DataError(f"{index}: the {PACKAGE} package, which holds the index's members, is not "
                        f"installed (pip install {PACKAGE})") from None
    table = index_constitution.load(index, "history")
    spans: dict[str, list] = {}
    for symbol, start, out in zip(table["symbol"], table["opt-in"], table["opt-out"], strict=True):
        last = STILL if pd.isna(out) else pd.Timestamp(out) - pd.Timedelta(days=1)
        if pd.isna(start) or pd.Timestamp(start) > last:
            continue
        spans.setdefault(canonical_code(str(symbol)), []).append((pd.Timestamp(start), last))
    source = f"{PACKAGE} {metadata.version(PACKAGE)}, {INDICES[index][0]} history"
    return {code: tuple(sorted(s)) for code, s in sorted(spans.items())}, source


def review_days(dates) -> pd.DatetimeIndex:
    """The days of ``dates`` on which a CSI review takes effect: the first trading day after
    the second Friday of June and of December (only those with a trading day before them)."""
    dates = pd.DatetimeIndex(dates)
    if not len(dates):
        return dates
    out = []
    for year in range(dates[0].year, dates[-1].year + 1):
        for month in (6, 12):
            first = pd.Timestamp(year, month, 1)
            friday = first + pd.Timedelta(days=(4 - first.day_of_week) % 7 + 7)
            i = dates.searchsorted(friday, side="right")
            if 0 < i < len(dates):
                out.append(dates[i])
    return pd.DatetimeIndex(out)


def _level_starts(days: pd.DatetimeIndex, count: np.ndarray, flagged: np.ndarray) -> list[str]:
    """``DAY (N)`` for the first flagged day of each run of one count, the first few."""
    out = []
    for i in np.flatnonzero(flagged):
        if i == 0 or not flagged[i - 1] or count[i] != count[i - 1]:
            out.append(f"{days[i].date()} ({count[i]})")
        if len(out) == SHOWN:
            break
    return out


def _days(n: int) -> str:
    return f"{n:,} day{'s' if n != 1 else ''}"


def _names(n: int) -> str:
    return f"{n:,} name{'s' if n != 1 else ''}"


def list_warnings(universe, dates, codes, index: str | None = None, reference=None,
                  others=()) -> list[str]:
    """The warnings of a membership list (a :class:`~forecaster.data.market.universe.Universe`)
    over the calendar ``dates`` (the days outside the list's first and last member days are not
    read) of the data's stocks ``codes``.

    Args:
        index: the known index the list is (its size); ``None``: the list's own usual count
            (the count of most of its days; none when no count holds half of them).
        reference: the package's list of that index, against which missing members are named
            (the early-spans check; ``None``: not made).
        others: lists of indices this one cannot share a member with.
    """
    dates = pd.DatetimeIndex(dates)
    spans = [span for s in universe.spans.values() for span in s]
    if not spans or not len(dates):
        return []
    first, last = min(a for a, _ in spans), max(b for _, b in spans)
    days = dates[(dates >= first) & (dates <= last)]
    if not len(days):
        return []
    lines = []
    label = f"universe {universe.name} ({universe.source})"
    dated = universe.kind != "list"
    own = universe.mask(days, universe.codes)
    count = own.sum(axis=1)
    size = INDICES[index][1] if index else None
    if size is None and dated:
        values, times = np.unique(count, return_counts=True)
        size = int(values[times.argmax()]) if times.max() * 2 >= len(days) else None
    whose = f"{INDICES[index][0]}'s {size}" if index else f"its usual {size}"
    # Short days: fewer members with data than ``size`` by more than the members the data lack,
    # i.e. the list itself holds fewer than ``size``.
    have = np.isin(np.asarray(universe.codes, dtype=object), np.asarray(list(map(str, codes)), dtype=object))
    in_data = own[:, have].sum(axis=1)
    short = (size - in_data > count - in_data) if size and dated else np.zeros(len(days), dtype=bool)
    if short.any():
        lines.append(f"{label}: on {int(short.sum()):,} of {len(days):,} days the list holds fewer "
                     f"members than {whose} (a shortfall of the list, not of the data): "
                     + ", ".join(_level_starts(days, count, short)))
    for other_name, other in others:
        common = sorted(set(universe.spans) & set(other.spans))
        if not common:
            continue
        both = universe.mask(days, common) & other.mask(days, common)
        shared = both.sum(axis=1)
        if not shared.any():
            continue
        names = [c for c, on in zip(common, both[int(np.flatnonzero(shared)[0])], strict=True) if on]
        title = INDICES[index][0] if index else universe.name
        n_names = int(both.any(axis=0).sum())
        lines.append(f"{label}: shares members with {other_name} ({other.source}) on "
                     f"{_days(int((shared > 0).sum()))}, {_names(n_names)} in all, though "
                     f"{title} and {INDICES.get(other_name, (other_name,))[0]} are disjoint (one of the "
                     "lists is wrong): " + ", ".join(_level_starts(days, shared, shared > 0))
                     + f"; e.g. {', '.join(names[:5])}")
    if reference is not None and short.any():
        lines += _early_spans(universe, days, short, reference, label)
    return lines


def _early_spans(universe, days: pd.DatetimeIndex, short: np.ndarray, reference, label: str) -> list[str]:
    """The early-spans line: before each review, the first short day on which every member that
    ``reference`` has leave at that review is already missing from the list."""
    codes = sorted(set(universe.spans) | set(reference.spans))
    own, ref = universe.mask(days, codes), reference.mask(days, codes)
    reviews = review_days(days)
    found = []
    for review in reviews:
        r = days.get_loc(review)
        for i in np.flatnonzero(short & (days >= review - REVIEW_WINDOW) & (days < review)):
            missing = ref[i] & ~own[i]
            leaving = ref[i] & ~ref[r]
            if leaving.any() and not (leaving & ~missing).any():
                found.append((days[i], review, int(missing.sum()), int(leaving.sum()),
                              [c for c, m in zip(codes, leaving, strict=True) if m]))
                break
    if not found:
        return []
    shown = "; ".join(f"{d.date()}: {m} missing, {'exactly' if m == n else 'all of'} the {n} leaving "
                      f"on {r.date()}{'' if m == n else ' among them'}" for d, r, m, n, _ in found[:SHOWN])
    return [f"{label}: spans end before the next review: before {len(found)} of {len(reviews)} reviews "
            f"a short day already lacks every member that leaves at the review ({reference.source}): "
            f"{shown}; e.g. {', '.join(found[0][4][:5])}"]
