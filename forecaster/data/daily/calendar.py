"""One date check for every entry point: no day that cannot exist.

* :func:`impossible_days`: a row dated after today (a mistyped year) or on a Saturday or Sunday
  (the exchanges never trade then) -- per file, when it is read, as any bad row: an error naming
  the file, line and column, or with ``on_bad="drop"`` dropped and counted.
* :func:`lonely_days`: across a folder, a day that one file has while at least
  :data:`MIN_WITNESSES` other files cover that period and none of them has it (a phantom row:
  it would add a trading day to every stock). A stock alone in its early years, before the
  others list, is no such day.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MIN_WITNESSES = 3  # other files spanning a day, all without it, before the day is refused


def impossible_days(stamps: pd.DatetimeIndex, today: pd.Timestamp | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(after_today, weekend)`` ``[rows]`` bool for the rows' dates or bar stamps."""
    today = pd.Timestamp.today().normalize() if today is None else pd.Timestamp(today).normalize()
    days = stamps.normalize()
    return np.asarray(days > today), np.asarray(stamps.day_of_week >= 5)


def lonely_days(frames: dict[str, pd.DataFrame]) -> dict[str, list[pd.Timestamp]]:
    """``{code: [day]}``: the days that only that stock's frame holds while at least
    :data:`MIN_WITNESSES` other frames span them (first to last row) without holding them."""
    if len(frames) <= MIN_WITNESSES:
        return {}
    counts = pd.concat([pd.Series(1, index=f.index.normalize().unique()) for f in frames.values()]
                       ).groupby(level=0).sum()
    alone = counts.index[counts.to_numpy() == 1]
    if not len(alone):
        return {}
    firsts = np.array([f.index[0].normalize().value for f in frames.values()])
    lasts = np.array([f.index[-1].normalize().value for f in frames.values()])
    out: dict[str, list[pd.Timestamp]] = {}
    for code, frame in frames.items():
        mine = alone[alone.isin(frame.index.normalize())]
        for day in mine:
            spanning = int(((firsts <= day.value) & (lasts >= day.value)).sum()) - 1  # less its own
            if spanning >= MIN_WITNESSES:
                out.setdefault(code, []).append(day)
    return out
