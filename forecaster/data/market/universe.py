"""Point-in-time universes: which stocks belong to an index (or any list) on each day.

A universe is an index's name or a file (:func:`resolve_universe`). A name (``csi300``, ``csi500``)
reads, inside a Qlib data folder that has it, ``instruments/NAME.txt`` (the folder's own list
wins), and otherwise the index's point-in-time history in the ``index-constitution`` package
(:mod:`forecaster.data.market.indices`), on any data: a folder of CSVs, a Qlib folder without that
file, ``predict``'s data. A universe file is one of

* a Qlib instruments file (``CODE<TAB>start<TAB>end`` a line, as ``instruments/csi300.txt``;
  a stock may have several lines, one per span of membership; ``SH600000`` is ``sh.600000``);
* a CSV ``code,start,end`` (a header line ``code,start,end`` is optional);
* a plain list of codes, one a line: always members.

Dates are ``YYYY-MM-DD`` and both ends are member days. Blank lines
and lines starting with ``#`` are skipped; any other line that does not fit the file's format
stops with a :class:`~forecaster.data.sources.DataError` naming the file, the line and what was
expected. :meth:`Universe.mask` gives the ``[days, stocks]`` membership of a Panel's calendar
and codes; :meth:`Universe.check` the warnings of the list (short days, overlap with an index it
cannot share members with, spans that end before the next review), whatever its source.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.market.indices import (
    DISJOINT,
    INDICES,
    PACKAGE,
    STILL,
    known_index,
    known_names,
    list_warnings,
    package_history,
)
from forecaster.data.qlib.conventions import from_qlib_code
from forecaster.data.sources import DataError, is_qlib_folder

log = logging.getLogger(__name__)

ALWAYS = (pd.Timestamp("1900-01-01"), STILL)  # a plain list's codes: always


@dataclass
class Universe:
    """Membership spans by stock.

    Attributes:
        name: what the report calls it (``csi300`` for ``instruments/csi300.txt`` or the
            package's list, else the file's name).
        source: the file read, or the package (its version and index).
        spans: ``{code: [(first day, last day), ...]}`` (canonical codes, both ends member
            days; :data:`ALWAYS` for a plain list's codes).
        kind: ``"qlib"``, ``"csv"``, ``"list"`` or ``"package"`` (``index-constitution``).
        warnings: what :meth:`check` found (one line per kind).
    """

    name: str
    source: str
    spans: dict[str, list[tuple[pd.Timestamp, pd.Timestamp]]] = field(default_factory=dict)
    kind: str = "list"
    warnings: list[str] = field(default_factory=list)

    @property
    def codes(self) -> list[str]:
        return sorted(self.spans)

    def check_overlaps(self, codes, option: str, spec: str) -> None:
        """Stop with a :class:`DataError` naming ``option`` when none of this universe's codes is
        among ``codes`` (the data's stocks): a universe from another market, or codes written
        another way, would otherwise score or train on nothing."""
        codes = list(codes)
        if not any(str(code) in self.spans for code in codes):
            raise DataError(f"{option} {spec}: none of its {len(self.spans)} codes (e.g. "
                            f"{', '.join(self.codes[:3])}) is a stock of the data "
                            f"(e.g. {', '.join(map(str, codes[:3]))})")

    def describe(self, option: str = "--universe") -> str:
        """Where the list came from, in one line (the run prints it)."""
        return (f"{option} {self.name}: members by day from {self.source}; {len(self.spans):,} stocks, "
                f"{sum(len(s) for s in self.spans.values()):,} spans of membership")

    def check(self, dates, codes, data_path: str | Path | None = None) -> list[str]:
        """Check the list over the calendar ``dates`` of the data's stocks ``codes``
        (:func:`~forecaster.data.market.indices.list_warnings`): the index it is (by its name),
        against the package's list of that index, and against the lists of the indices it cannot
        share members with (the Qlib folder ``data_path``'s own, else the package's). Each
        warning is logged and kept in :attr:`warnings`."""
        index = known_index(self.name)
        reference = others = None
        if index:
            reference = None if self.kind == "package" else package_universe(index)
            others = []
            for other in DISJOINT[index]:
                try:
                    others.append((other, resolve_universe(other, data_path)))
                except DataError:  # an unreadable list of another index: not this run's concern
                    continue
        self.warnings = list_warnings(self, dates, codes, index, reference, others or ())
        for line in self.warnings:
            log.warning(line)
        return self.warnings

    def mask(self, dates, codes) -> np.ndarray:
        """``[days, stocks]`` bool: stock ``codes[j]`` is a member on ``dates[i]``."""
        dates = pd.DatetimeIndex(dates)
        out = np.zeros((len(dates), len(codes)), dtype=bool)
        for j, code in enumerate(codes):
            for first, last in self.spans.get(str(code), ()):
                lo, hi = dates.searchsorted(first), dates.searchsorted(last, side="right")
                out[lo:hi, j] = True
        return out

    def learn_mask(self, dates, codes, outside: float = 0.0) -> np.ndarray:
        """``[days, stocks]``: what a model learns of each stock-day's label as a training
        universe (:attr:`forecaster.data.panel.Panel.learn`): :meth:`mask` when ``outside`` is
        0, else float32 weights, 1 for a member and ``outside`` for any other stock."""
        member = self.mask(dates, codes)
        return member if outside == 0 else np.where(member, 1.0, float(outside)).astype(np.float32)

    def members_between(self, start, end) -> list[str]:
        """Codes that are members on some day of ``start..end`` (calendar days)."""
        start, end = pd.Timestamp(start), pd.Timestamp(end)
        return sorted(c for c, spans in self.spans.items()
                      if any(first <= end and last >= start for first, last in spans))

    def coverage(self, dates, codes) -> dict:
        """How the data cover the universe: members per day in the data (min, median, max over
        the days ``dates``), the universe's codes, those with data, and the members of the
        period ``dates[0]..dates[-1]`` the data lack (survivorship: a count, not a guess)."""
        dates = pd.DatetimeIndex(dates)
        per_day = self.mask(dates, codes).sum(axis=1) if len(dates) else np.zeros(0, int)
        have = set(map(str, codes))
        period = self.members_between(dates[0], dates[-1]) if len(dates) else []
        missing = [c for c in period if c not in have]
        return {"name": self.name, "source": self.source, "kind": self.kind, "codes": len(self.spans),
                "codes_in_data": sum(c in have for c in self.spans),
                "members_per_day": {"min": int(per_day.min()) if len(per_day) else 0,
                                    "median": float(np.median(per_day)) if len(per_day) else 0.0,
                                    "max": int(per_day.max()) if len(per_day) else 0},
                "members_in_period": len(period), "members_without_data": len(missing),
                "members_without_data_examples": missing[:10], "warnings": list(self.warnings)}


def coverage_line(cov: dict) -> str:
    """One sentence for the report from :meth:`Universe.coverage`."""
    d = cov["members_per_day"]
    return (f"universe {cov['name']} ({cov['source']}): members per day in the data min {d['min']}, "
            f"median {d['median']:g}, max {d['max']}; {cov['members_without_data']} of the "
            f"{cov['members_in_period']} stocks that were members during these days have no data "
            f"(survivorship: scores, benchmark and backtest cover only the members with data)")


FILE_FORMS = ("a Qlib instruments file (CODE<TAB>start<TAB>end), a CSV code,start,end or a list of "
              "codes")


def package_universe(index: str) -> Universe:
    """A known index's members from the ``index-constitution`` package."""
    spans, source = package_history(index)
    return Universe(index, source, {code: list(s) for code, s in spans.items()}, "package")


def resolve_universe(spec: str, data_path: str | Path | None = None, option: str = "--universe") -> Universe:
    """The universe ``spec`` names: a file; or a name: inside a Qlib data folder ``data_path``
    that has it, the folder's own list (``csi300`` -> ``DATA/instruments/csi300.txt``), else a
    known index's members from the ``index-constitution`` package (``csi300``, ``csi500``)."""
    path = Path(spec)
    if path.is_file():
        return read_universe(path)
    qlib = bool(data_path) and is_qlib_folder(data_path)
    name = spec[:-4] if qlib and spec.endswith(".txt") else spec
    if qlib:
        market = Path(data_path) / "instruments" / f"{name}.txt"
        if market.is_file():
            return read_universe(market, name=name)
    if name.lower() in INDICES:
        return package_universe(name.lower())
    what = "a folder" if path.is_dir() else "no such file"
    if qlib:
        known = sorted(p.stem for p in (Path(data_path) / "instruments").glob("*.txt"))
        what += (f", no instruments/{name}.txt in the Qlib folder {data_path} (it has: "
                 f"{', '.join(known) or 'none'})")
    raise DataError(f"{option} {spec}: {what}, and not an index name; expected an index name ("
                    f"{known_names()}: a Qlib folder's instruments/NAME.txt, else the {PACKAGE} "
                    f"package's members) or a file: {FILE_FORMS}")


def _date(text: str, where: str, expected: str) -> pd.Timestamp:
    try:
        return pd.Timestamp(pd.to_datetime(text.strip(), format="%Y-%m-%d"))
    except (ValueError, TypeError):
        raise DataError(f"{where}: {text.strip()!r} is not a date YYYY-MM-DD; expected {expected}") from None


def read_universe(path: str | Path, name: str | None = None) -> Universe:
    """Read a universe file (the three formats of the module docstring, told apart by the
    first line that is not blank or a comment: a tab, a comma, or neither)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a UTF-8 text file; expected a universe file (Qlib instruments, "
                        "CSV code,start,end or a list of codes)") from None
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)
             if line.strip() and not line.strip().startswith("#")]
    if not lines:
        raise DataError(f"{path}: empty; expected a universe file (Qlib instruments CODE<TAB>start<TAB>end, "
                        "a CSV code,start,end or a list of codes)")
    first = lines[0][1]
    kind = "qlib" if "\t" in first else "csv" if "," in first else "list"
    expected = {"qlib": "CODE<TAB>start<TAB>end (a Qlib instruments file, as its first line)",
                "csv": "code,start,end (a CSV, as its first line)",
                "list": "one code a line (a list of codes, as its first line)"}[kind]
    if ((kind == "csv" and [p.strip().lower() for p in first.split(",")] == ["code", "start", "end"])
            or (kind == "list" and first.lower() == "code")):
        lines = lines[1:]  # a header
    spans: dict[str, list] = {}
    for n, line in lines:
        where = f"{path}: line {n}"
        if kind == "list":
            parts = [line]
            if "\t" in line or "," in line or len(line.split()) != 1:
                raise DataError(f"{where}: {line!r}; expected {expected}")
        else:
            parts = [p.strip() for p in line.split("\t" if kind == "qlib" else ",")]
            if len(parts) != 3 or not parts[0]:
                raise DataError(f"{where}: {line!r}; expected {expected}")
        code = from_qlib_code(parts[0])
        if kind == "list":
            spans[code] = [ALWAYS]
            continue
        start, end = _date(parts[1], where, expected), _date(parts[2], where, expected)
        if start > end:
            raise DataError(f"{where}: start {parts[1]} is after end {parts[2]}; expected {expected}")
        spans.setdefault(code, []).append((start, end))
    if not spans:
        raise DataError(f"{path}: no code; expected {expected}")
    return Universe(name or path.name, str(path), dict(sorted(spans.items())), kind)
