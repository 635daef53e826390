"""Delisted stocks, told from suspended ones, and what a stock's name says of its status.

A-share names carry the stock's status on the day (the '邢不行' layout keeps the name of each
day, :data:`~forecaster.data.daily.formats.XBX`): ``ST``, ``*ST``, ``SST``, ``S*ST`` and ``PT``
mark special treatment (ST price limits); a ``退`` anywhere (``退市保千``, ``乐视退``) marks the
delisting period (退市整理期: the last weeks of trading before the stock leaves the exchange);
``XD``/``XR``/``DR`` mark an ex-dividend / ex-rights day and ``N``/``C`` a new listing's first
days (neither is ST). :func:`name_status` reads them.

A stock whose bars stop for good before the data end is **delisted**, not suspended
(:func:`decide`), when

* its last bars carry a ``退`` name (it was in its delisting period), or
* an instruments file says its membership of the market ends there (a Qlib folder's
  ``instruments/all.txt``, :func:`instrument_ends`), or
* its bars never resume while the other stocks go on for more than ``quiet_days`` (20)
  trading days. Without a ``退`` name or an instruments end, such a stop is **suspended or
  delisted** (:data:`QUIET_REASON`: ``suspended or delisted (no bar since 2015-10-15)``): a
  suspension that long is no proof of a delisting (in 2015 hundreds of stocks were suspended
  for months, e.g. sh.600690 from 2015-10-16), and a merger ends the bars the same way. It is
  treated as gone (not bought after its last day) but named as what the data show, and a
  holding in it is never written down (:mod:`forecaster.portfolio.delisted`).

A stock whose bars stop less than ``quiet_days`` before the data end without either mark is not
called delisted (the data cannot say yet). From the signal day a ``退`` name is seen (and from
the last day of a delisted stock) the delisting is **known**: the backtest and ``predict`` buy
no such stock (:mod:`forecaster.portfolio.backtest`, :mod:`forecaster.portfolio.next_day`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

QUIET_DAYS = 20  # trading days without a bar, while others trade, that make a stop a delisting
DELISTING_MARK = "退"
# Marks of the day's name: ex-dividend/ex-rights (XD, XR, DR) and new listings (N, C) come first.
_DAY_MARK = re.compile(r"^(XD|XR|DR)")
_NEW_MARK = re.compile(r"^[NC](?=[^A-Za-z])")
_ST_MARK = re.compile(r"^(S\*ST|SST|\*ST|ST|PT)")
COLUMNS = ("code", "delisted", "last_day", "known_from", "reason")
# The reason of a stop confirmed by neither a 退 name nor an instruments end (module docstring)
QUIET_REASON = "suspended or delisted (no bar since {day})"
# Why a delisted stock's label is masked (the label's counts, forecaster.features.labels; the
# report names them, forecaster.portfolio.delisted)
KNOWN_ON_SIGNAL_DAY = "delisting known on the signal day"
DELISTED_BEFORE_EXIT = "delisted before the exit"


def name_status(names: pd.Series) -> pd.DataFrame:
    """What each day's name says: columns ``is_st`` (``ST``, ``*ST``, ``SST``, ``S*ST``, ``PT``
    after any ``XD``/``XR``/``DR`` and ``N``/``C`` mark), ``delisting`` (a ``退`` in the name),
    ``ex_mark`` (an ``XD``/``XR``/``DR`` day) and ``new_listing`` (an ``N``/``C`` day), each
    1.0 or 0.0, indexed like ``names``."""
    text = names.astype(str).str.strip().str.replace("＊", "*", regex=False)
    ex = text.str.match(_DAY_MARK)
    bare = text.str.replace(_DAY_MARK, "", regex=True)
    new = bare.str.match(_NEW_MARK)
    bare = bare.where(~new, bare.str[1:])
    return pd.DataFrame({"is_st": bare.str.match(_ST_MARK).astype(float),
                         "delisting": text.str.contains(DELISTING_MARK, regex=False).astype(float),
                         "ex_mark": ex.astype(float), "new_listing": new.astype(float)}, index=names.index)


def instrument_ends(folder: str | Path, market: str = "all") -> dict[str, pd.Timestamp]:
    """``{code: last day}`` of a Qlib folder's ``instruments/<market>.txt`` (``CODE<TAB>start
    <TAB>end``; a code's last span), codes as the folder's reader names them (``SH600000`` ->
    ``sh.600000``); empty without the file."""
    from forecaster.data.qlib.conventions import from_qlib_code

    path = Path(folder) / "instruments" / f"{market}.txt"
    if not path.is_file():
        return {}
    ends: dict[str, pd.Timestamp] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("\t")
        if len(parts) >= 3:
            try:
                end = pd.Timestamp(parts[2].strip())
            except ValueError:
                continue
            code = from_qlib_code(parts[0])
            ends[code] = max(end, ends.get(code, end))
    return ends


@dataclass
class Delistings:
    """What :func:`decide` found.

    Attributes:
        table: one row per stock that is delisted or in its delisting period at the data's end
            (columns :data:`COLUMNS`: ``delisted``, its ``last_day`` (last bar), ``known_from``
            (the first signal day the delisting is known: the first day of its last ``退`` run,
            else its last day) and ``reason``); ``delisted`` is True for every stop for good,
            a ``quiet`` one included.
        period: ``[D, N]`` the day's name carries ``退`` (the delisting period).
        known: ``[D, N]`` the delisting is known at that day's close: the last name seen says
            ``退``, or the stock is delisted and the day is its last or later.
        last: ``[N]`` the row of a delisted stock's last bar, ``-1`` for the others.
        codes: ``[N]`` the stocks.
        in_period: ``[N]`` the stock's bars stop in its ``退`` delisting period.
        quiet: ``[N]`` its bars stop for good with neither a ``退`` name nor an instruments end:
            suspended or delisted, the data cannot say which (:data:`QUIET_REASON`).
    """

    table: pd.DataFrame
    period: np.ndarray
    known: np.ndarray
    last: np.ndarray
    codes: np.ndarray
    in_period: np.ndarray | None = None
    quiet: np.ndarray | None = None

    def __post_init__(self):
        none = np.zeros(len(self.codes), dtype=bool)
        self.in_period = none if self.in_period is None else np.asarray(self.in_period, bool)
        self.quiet = none.copy() if self.quiet is None else np.asarray(self.quiet, bool)

    @property
    def delisted(self) -> np.ndarray:
        """``[N]`` bool: the stock is delisted."""
        return self.last >= 0

    def any(self) -> bool:
        return bool(self.known.any())

    def take(self, codes, rows: np.ndarray | None = None) -> Delistings:
        """The stocks ``codes`` (in that order) on the rows ``rows`` (bool ``[D]``, or all;
        ``last`` counted on those rows, each stock's last bar being among them)."""
        where = {c: i for i, c in enumerate(self.codes)}
        index = np.array([where[c] for c in codes], dtype=int)
        period, known, last = self.period[:, index], self.known[:, index], self.last[index]
        in_period, quiet = self.in_period[index], self.quiet[index]
        if rows is not None:
            rows = np.asarray(rows, dtype=bool)
            kept = np.cumsum(rows) - 1  # a row's position among the kept rows
            last = np.where(last >= 0, kept[np.maximum(last, 0)], -1)
            period, known = period[rows], known[rows]
        table = self.table[self.table["code"].isin(set(codes))].reset_index(drop=True)
        return Delistings(table, period, known, last, np.asarray(list(codes), dtype=object), in_period, quiet)


def decide(dates: pd.DatetimeIndex, codes, listed: np.ndarray, period: np.ndarray | None = None,
           ends: dict | None = None, quiet_days: int = QUIET_DAYS) -> Delistings:
    """Which stocks are delisted (see the module docstring), from the calendar ``dates``
    ``[D]``, the stocks ``codes`` ``[N]``, which have a bar each day (``listed`` ``[D, N]``),
    the delisting-period marks (``period`` ``[D, N]``, 1 on a ``退`` day, NaN without a bar) and
    instruments end dates (``ends`` ``{code: day}``)."""
    listed = np.asarray(listed, dtype=bool)
    n_days, n = listed.shape
    if period is None:
        flag = np.zeros((n_days, n))
    else:
        flag = np.where(listed, np.nan_to_num(np.asarray(period, dtype=float)), np.nan)
    marked = np.nan_to_num(flag) == 1
    # The delisting is known while the last name seen says 退 (a later name without it resets).
    known = pd.DataFrame(flag).ffill().fillna(0.0).to_numpy() == 1
    seen = listed.any(axis=0)
    last_row = np.where(seen, n_days - 1 - np.argmax(listed[::-1], axis=0), -1)
    last = np.full(n, -1)
    in_period, quiet = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    rows = []
    ends = ends or {}
    for i in range(n):
        j = int(last_row[i])
        if j < 0:
            continue
        code = str(codes[i])
        tail = marked[max(0, j - quiet_days + 1):j + 1, i].any()  # a 退 name in its last bars
        end = ends.get(code)
        after = n_days - 1 - j  # trading days of the data after its last bar
        ended = end is not None and pd.Timestamp(end) < dates[-1]
        if tail:  # the first of these that holds is the reason given
            start = _run_start(marked[:, i], listed[:, i], j)
            reasons = [f"'{DELISTING_MARK}' name from {dates[start].date()} (delisting period)"]
        elif ended:
            reasons = [f"instruments end {pd.Timestamp(end).date()}"]
        else:  # a long stop alone: suspended or delisted (module docstring)
            reasons = [QUIET_REASON.format(day=dates[j].date())] if after > quiet_days else []
        delisted = after > 0 and (tail or ended or after > quiet_days)
        if not delisted and not known[j, i]:
            continue
        known_from = dates[_run_start(marked[:, i], listed[:, i], j)] if tail else dates[j]
        if delisted:
            last[i] = j
            known[j:, i] = True
            in_period[i], quiet[i] = tail, not (tail or ended)
        else:
            reasons.append("in its delisting period at the data's end")
        rows.append((code, bool(delisted), dates[j], known_from, "; ".join(reasons)))
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    return Delistings(table, marked, known, last, np.asarray([str(c) for c in codes], dtype=object),
                      in_period, quiet)


def _run_start(marked: np.ndarray, listed: np.ndarray, j: int) -> int:
    """The first row of the run of ``退`` bars ending at or before row ``j`` (days without a bar
    inside the run do not end it)."""
    bars = np.flatnonzero(listed[:j + 1])
    start = None
    for k in bars[::-1]:
        if marked[k]:
            start = int(k)
        elif start is not None:
            break
    return j if start is None else start


def is_quiet(reason: str) -> bool:
    """Whether a table row's ``reason`` is a stop confirmed by neither a ``退`` name nor an
    instruments end (suspended or delisted)."""
    return str(reason).startswith(QUIET_REASON.split("{")[0])


def describe(table: pd.DataFrame, quiet: bool = False) -> str:
    """The delisted stocks in words (``""`` for none): ``sh.600074 (last day 2020-05-26: '退'
    name from 2020-04-14 (delisting period))``; with ``quiet``, the stops that are suspended or
    delisted instead: ``sh.600690 (no bar since 2015-10-15)``."""
    gone = table[table["delisted"]] if len(table) else table
    if quiet:
        return ", ".join(f"{r.code} (no bar since {pd.Timestamp(r.last_day).date()})"
                         for r in gone.itertuples() if is_quiet(r.reason))
    return ", ".join(f"{r.code} (last day {pd.Timestamp(r.last_day).date()}: {r.reason})"
                     for r in gone.itertuples() if not is_quiet(r.reason))
