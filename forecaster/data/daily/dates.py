"""A date column of a file a user hands over (predictions, benchmark weights), read in one format.

A file's dates are written one way. Parsing them value by value (pandas' ``format="mixed"``)
reads ``11/01/2024`` month-first and ``13/01/2024`` day-first in the same column, misdating
every day up to the 12th without a word. :func:`read_date_column` instead tries each format of
:data:`DATE_FORMATS` on the whole column and keeps the one that reads every value; when a
day-first and a month-first reading both do and disagree, it refuses and asks for the format
(``--date-format``). Dates with a time zone (a Parquet column ``2024-01-11 00:00+08:00``) are
converted to Asia/Shanghai, the exchanges' zone, and the zone dropped, with a note.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

from forecaster.data.sources import DataError

EXCHANGE_TZ = "Asia/Shanghai"
# Every format a date column is tried in, whole: ISO and compact first, then the two orders of
# the slash, dash and dot forms (which only the values can tell apart).
DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%Y%m%d", "%Y.%m.%d", "%d/%m/%Y", "%m/%d/%Y", "%d-%m-%Y",
                "%m-%d-%Y", "%d.%m.%Y", "%m.%d.%Y")
_TIMES = ("", " %H:%M:%S", " %H:%M", "T%H:%M:%S")


def read_date_column(values: pd.Series, where: Callable[[int], str], column: str,
                     date_format: str | None = None, option: str | None = "--date-format"
                     ) -> tuple[pd.Series, list[str]]:
    """``(dates, notes)``: ``values`` ``[rows]`` as naive dates, every row in one format.

    Args:
        where: row position -> ``"FILE: line N"``, for the messages.
        column: the column's name, for the messages.
        date_format: a ``strftime`` format to read every value with; ``None``: inferred from
            the whole column (module docstring).
        option: the option that sets ``date_format``, named when both orders fit (``None``:
            there is none; the message asks for ISO dates).

    Raises:
        DataError: a value that is not a date in the column's format (naming its line), or a
            column both day-first and month-first readings fit with different dates.
    """
    notes: list[str] = []
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        return _naive(values, notes, column), notes
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        return pd.to_datetime(values).astype("datetime64[ns]"), notes
    text = values.astype(str).str.strip()
    if date_format is not None:
        dates = pd.to_datetime(text, format=date_format, errors="coerce")
        _refuse_bad(text, dates, where, column, f"a date in {option} {date_format}")
        return _naive(dates, notes, column), notes
    fits = {}
    for day in DATE_FORMATS:
        for time in _TIMES:
            parsed = pd.to_datetime(text, format=day + time, errors="coerce")
            if parsed.notna().all():
                fits[day + time] = parsed
                break
    distinct = {}
    for fmt, parsed in fits.items():
        if not any(parsed.equals(other) for other in distinct.values()):
            distinct[fmt] = parsed
    if len(distinct) > 1:
        formats = list(distinct)
        a, b = distinct[formats[0]], distinct[formats[1]]
        i = int(np.flatnonzero((a != b).to_numpy())[0])
        say = (f"pass {option} {formats[0]} or {formats[1]} to say which (or write the dates as YYYY-MM-DD)"
               if option else "write the dates as YYYY-MM-DD")
        raise DataError(
            f"{where(i)}, column {column}: {text.iloc[i]!r} reads as {a.iloc[i].date()} ({formats[0]}) and "
            f"as {b.iloc[i].date()} ({formats[1]}), and every value of the column fits both; {say}")
    if distinct:
        return next(iter(distinct.values())).astype("datetime64[ns]"), notes
    # no single format fits every value: pandas' inference from the first value, applied to all
    with warnings.catch_warnings():  # pandas' guess of the format: the errors below say what failed
        warnings.simplefilter("ignore", UserWarning)
        try:  # one offset for the column keeps it (+08:00); several are read as UTC
            dates = pd.to_datetime(text, errors="coerce")
        except (ValueError, TypeError):
            try:
                dates = pd.to_datetime(text, errors="coerce", utc=True)
            except (ValueError, TypeError):
                dates = pd.Series(pd.NaT, index=text.index)
    _refuse_bad(text, dates, where, column, "a date (YYYY-MM-DD, or one format for the whole column)")
    return _naive(dates, notes, column), notes


def _refuse_bad(text: pd.Series, dates: pd.Series, where, column: str, wanted: str) -> None:
    bad = np.flatnonzero(dates.isna().to_numpy())
    if len(bad):
        raise DataError(f"{where(bad[0])}, column {column}: {text.iloc[bad[0]]!r} is not {wanted} "
                        f"({len(bad)} such row(s))")


def _naive(dates: pd.Series, notes: list[str], column: str) -> pd.Series:
    """Zone-aware dates converted to the exchanges' zone and the zone dropped (said in
    ``notes``); naive dates as they are."""
    dates = pd.Series(dates)
    if isinstance(dates.dtype, pd.DatetimeTZDtype):
        zone = str(dates.dt.tz)
        dates = dates.dt.tz_convert(EXCHANGE_TZ).dt.tz_localize(None)
        notes.append(f"column {column}: dates with the time zone {zone} converted to {EXCHANGE_TZ} (the "
                     "exchanges' zone) and the zone dropped")
    return dates.astype("datetime64[ns]")
