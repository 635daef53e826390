"""Minute bars: the A-share session and the bar frame.

A *bar frame* (what :func:`forecaster.data.load_csv` returns for a minute export, in any of
the layouts of :mod:`forecaster.data.minute.formats`) is indexed by ``time``, each bar's
closing stamp, and holds ``open, high, low, close`` (``volume`` in shares, ``amount`` where
exported) plus the session columns:

- ``day``: the trading day the bar belongs to;
- ``bar``: its position within the day (0 = the day's first bar);
- ``first_bar``: the day's first bar, whose return (from the previous day's last close, or
  the daily file's ``preclose``) carries the overnight move and the opening auction, not a few
  minutes of trading;
- ``time_of_day``: trading minutes since 09:30 at the bar's close, over the session's 240
  (the lunch break 11:30-13:00 is not trading time), in ``[0, 1]``;
- ``preclose``: the previous bar's close (the first bar of the file: its own open; a first
  bar after an overnight gap flagged as a likely corporate action: its own open too);
- ``suspended``: the bar did not trade (all-zero prices as baostock writes a suspended
  stock's bars, or zero volume at the previous close): never a target;
- ``gap_excluded``: a day's first bar whose overnight gap no price limit explains (a likely
  ex-rights day; :mod:`forecaster.data.minute.returns`): never a target either.

The session rule: bars close within 09:30-11:30 and 13:00-15:00 (the opening call auction
is merged into the first bar), stamped at their close. The daily features computed from bar
frames are in :mod:`forecaster.data.minute.features`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MORNING = ("09:30", "11:30")
AFTERNOON = ("13:00", "15:00")
SESSION_MINUTES = 240
LAST_MINUTES = 30  # "the last half hour": bars closing after 14:30
OPEN_MINUTES = 30  # "the first half hour": bars closing by 10:00
SESSION_RULE = ("bars stamped at their close within 09:30-11:30 and 13:00-15:00 (the lunch break is "
                "not trading time; the opening call auction is part of the day's first bar)")


def is_bar_frame(frame: pd.DataFrame) -> bool:
    """Whether ``frame`` holds minute bars (indexed by ``time``) rather than daily rows."""
    return frame.index.name == "time"


def is_bar_calendar(stamps) -> bool:
    """Whether stamps (a calendar, a forecast index) are minute bars: any past midnight."""
    stamps = pd.DatetimeIndex(stamps)
    return bool(len(stamps)) and bool((stamps != stamps.normalize()).any())


def session_minutes(stamps: pd.DatetimeIndex) -> np.ndarray:
    """Trading minutes since 09:30 at each stamp, lunch excluded (``[0, 240]``); -1 for a
    stamp outside 09:30-11:30 and 13:00-15:00."""
    minute = stamps.hour * 60 + stamps.minute + stamps.second / 60.0
    minute = np.asarray(minute, dtype=float)
    am = (minute >= 570) & (minute <= 690)
    pm = (minute >= 780) & (minute <= 900)
    return np.where(am, minute - 570, np.where(pm, minute - 780 + 120, -1.0))


def add_session_columns(frame: pd.DataFrame, suspended: np.ndarray | None = None) -> pd.DataFrame:
    """``frame`` (sorted bars indexed by ``time``, inside the session) with the session columns
    of the module docstring. ``suspended``: bars known to be suspended (all-zero prices given
    the previous close); bars without volume at the previous close are suspended too."""
    stamps = pd.DatetimeIndex(frame.index)
    day = stamps.normalize()
    out = frame.copy()
    out["day"] = day
    new_day = np.r_[True, day[1:] != day[:-1]]
    starts = np.flatnonzero(new_day)
    position = np.arange(len(frame)) - np.repeat(starts, np.diff(np.r_[starts, len(frame)]))
    out["bar"] = position
    out["first_bar"] = new_day
    out["time_of_day"] = session_minutes(stamps) / SESSION_MINUTES
    close = out["close"].to_numpy(float)
    previous = np.r_[out["open"].iloc[0], close[:-1]]
    out["preclose"] = previous
    stopped = np.zeros(len(out), bool) if suspended is None else np.asarray(suspended, bool).copy()
    if "volume" in out.columns:
        prices = out[["open", "high", "low", "close"]].to_numpy(float)
        flat = (np.abs(prices - previous[:, None]) < 1e-9).all(axis=1)
        stopped |= (out["volume"].to_numpy(float) == 0) & flat
    out["suspended"] = stopped
    if "gap_excluded" not in out.columns:
        out["gap_excluded"] = False
    return out


def bar_minutes(frame: pd.DataFrame) -> int:
    """The bars' length in minutes: the most common gap between bars within a day."""
    minutes = session_minutes(pd.DatetimeIndex(frame.index))
    same_day = ~frame["first_bar"].to_numpy()
    gaps = np.diff(minutes)[same_day[1:]]
    gaps = gaps[gaps > 0]
    return int(pd.Series(gaps).mode().iloc[0]) if len(gaps) else 0
