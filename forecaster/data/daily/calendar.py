"""One date check for every entry point: no day that cannot exist.

* :func:`impossible_days`: a row dated after today (a mistyped year) or on a Saturday or Sunday
  from 1995-05-01 (the exchanges have not traded on weekends since China's five-day week began;
  before it Saturdays, and a few Sundays swapped for holidays, were trading days) -- per file,
  when it is read, as any bad row: an error naming the file, line and column, or with
  ``on_bad="drop"`` dropped and counted.
* :func:`lonely_days`: across a folder, a day that one file has while at least
  :data:`MIN_WITNESSES` other files trade around it (a bar within :data:`WITNESS_DAYS` calendar
  days before it and after it) and none of them has it (a phantom row: it would add a trading day
  to every stock). A stock alone in its early years, before the others list, is no such day, nor
  one that trades while the others are suspended (layouts such as xbx's have no row on a
  suspended day: a file without bars around the day is no witness).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MIN_WITNESSES = 3  # other files trading around a day, all without it, before the day is refused
FIVE_DAY_WEEK = pd.Timestamp("1995-05-01")  # no weekend trading from this day on
WITNESS_DAYS = 7  # a witness has a bar this many calendar days before the day and after it


def impossible_days(stamps: pd.DatetimeIndex, today: pd.Timestamp | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(after_today, weekend)`` ``[rows]`` bool for the rows' dates or bar stamps."""
    today = pd.Timestamp.today().normalize() if today is None else pd.Timestamp(today).normalize()
    days = stamps.normalize()
    return np.asarray(days > today), np.asarray((stamps.day_of_week >= 5) & (days >= FIVE_DAY_WEEK))


def lonely_days(frames: dict[str, pd.DataFrame]) -> dict[str, list[pd.Timestamp]]:
    """``{code: [day]}``: the days that only that stock's frame holds while at least
    :data:`MIN_WITNESSES` other frames trade around them (a bar within :data:`WITNESS_DAYS`
    calendar days on either side) without holding them."""
    if len(frames) <= MIN_WITNESSES:
        return {}
    days = [f.index.normalize().unique() for f in frames.values()]
    counts = pd.concat([pd.Series(1, index=d) for d in days]).groupby(level=0).sum()
    alone = counts.index[counts.to_numpy() == 1]
    if not len(alone):
        return {}
    window = pd.Timedelta(days=WITNESS_DAYS)
    # [frames x lonely days]: a bar within the window before the day, and one after it
    before = np.array([d.searchsorted(alone) > d.searchsorted(alone - window) for d in days])
    after = np.array([d.searchsorted(alone + window, side="right") > d.searchsorted(alone, side="right")
                      for d in days])
    around = before & after
    holds = np.array([alone.isin(d) for d in days])
    witnesses = (around & ~holds).sum(axis=0)  # the frame holding the day lacks nothing
    out: dict[str, list[pd.Timestamp]] = {}
    for i, code in enumerate(frames):
        for k in np.flatnonzero(holds[i] & (witnesses >= MIN_WITNESSES)):
            out.setdefault(code, []).append(alone[k])
    return out
