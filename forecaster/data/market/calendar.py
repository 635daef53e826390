"""The exchange's trading calendar: the day a signal day's orders trade on.

:func:`next_trading_day` is the one lookup. It reads the Shanghai Stock Exchange's sessions
(``XSHG``, the calendar of both Shanghai and Shenzhen) from the maintained
``exchange-calendars`` package, holidays included: signals after the close of 2025-01-27 trade
on 2025-02-05, after the Spring Festival. The package records the holidays of a range of
years only (from 1991 to a last year it names); for a day outside that range the next weekday
is returned with a note saying so, never an error.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import NamedTuple

import pandas as pd

EXCHANGE = "XSHG"  # Shanghai; Shenzhen keeps the same trading days
FIRST_YEAR = "1991-01-01"  # the package's holiday table starts with the exchange


class TradingDay(NamedTuple):
    """The next trading day and how it was found."""

    date: pd.Timestamp  # midnight of the day
    note: str  # "" when the exchange's calendar knows it; else why it is only the next weekday


@lru_cache(maxsize=1)
def _calendar():
    """The XSHG calendar over every year the package knows (built once), or the reason it cannot be
    had."""
    try:
        import exchange_calendars
    except ImportError:
        return None, "the exchange-calendars package is not installed"
    with warnings.catch_warnings():  # the package reads tz-aware Series.values, which pandas 3 deprecates
        warnings.filterwarnings("ignore", message="Series.values returning an ndarray")
        return exchange_calendars.get_calendar(EXCHANGE, start=FIRST_YEAR), ""


def next_trading_day(day) -> TradingDay:
    """The exchange's first trading day after ``day`` (a date or timestamp; its time of day is
    ignored), by the XSHG calendar: weekends and the exchange's holidays skipped.

    Outside the years whose holidays the calendar records (after its last session, before its
    first) the date is the next weekday and ``note`` says that holidays are not known there;
    the caller shows the note as a warning."""
    day = pd.Timestamp(day).normalize()
    if day.tzinfo is not None:
        day = day.tz_localize(None)
    weekday = (day + pd.offsets.BDay(1)).normalize()
    calendar, why = _calendar()
    if calendar is None:
        return TradingDay(weekday, f"{why}: the trading day after {day.date()} is taken as the next "
                                   f"weekday, {weekday.date()}; a holiday is not skipped")
    first, last = calendar.first_session, calendar.last_session
    if first <= day < last:
        return TradingDay(calendar.date_to_session(day + pd.Timedelta(days=1), direction="next"), "")
    where = f"after {last.date()}" if day >= last else f"before {first.date()}"
    return TradingDay(weekday, f"the exchange calendar ({EXCHANGE}, exchange-calendars) records no holidays "
                               f"{where}: the trading day after {day.date()} is taken as the next weekday, "
                               f"{weekday.date()}; check it against the exchange's holiday notice")
