"""The conventions of a Qlib data folder, detected from its data.

Qlib's own folders (``scripts/dump_bin.py``) hold ``$change`` as a fraction (close / previous
close - 1) and ``$volume`` divided by ``$factor``; community folders differ. Neither is taken
on trust:

* ``$change`` is compared, stock by stock, with the return of consecutive adjusted closes: a
  median ratio of 1 is a fraction, of 100 percent (divided by 100 when read); anything else
  stops with an error naming the field and the stock. A stock with too few moving days to
  tell follows the folder's majority.
* ``$volume`` is compared with ``$factor`` across the folder's share splits and bonus issues
  (a step of the factor of 20 % or more): share volume jumps with the split, so a volume
  divided by the factor stays level across it, and one that is not jumps with the factor.
  Without enough such events the folder is read as Qlib's (and the load summary says it could
  not be checked).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.loading import DataError

MIN_DAYS = 5  # moving days a stock needs for its $change to be checked
MIN_EVENTS = 3  # factor steps the folder needs for its $volume to be checked
STEP = np.log(1.2)  # a factor step this large (either way) is a split or bonus issue
AROUND = 10  # bar days each side of a step whose median volume is compared


def change_scale(close: pd.Series, change: pd.Series, where: str) -> float | None:
    """What ``$change`` must be multiplied by to be a fraction (1 or 0.01), judged against
    consecutive adjusted closes ``close`` (both on the calendar, NaN without a bar); ``None``
    when too few days moved to tell. A ``$change`` that is neither stops with an error."""
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (close / close.shift(1) - 1).to_numpy()
        c = change.to_numpy(dtype=float)
        ok = np.isfinite(r) & np.isfinite(c) & (np.abs(r) > 0.003)
        if ok.sum() < MIN_DAYS:
            return None
        ratio = float(np.median(c[ok] / r[ok]))
    if abs(ratio - 1) < 0.1:
        return 1.0
    if abs(ratio - 100) < 10:
        return 0.01
    raise DataError(f"{where}: $change does not match consecutive adjusted closes: the median of $change / "
                    f"(close / previous close - 1) is {ratio:.4g} over {int(ok.sum())} days; expected 1 (a "
                    "fraction, Qlib's convention) or 100 (percent)")


def volume_steps(volume: pd.Series, factor: pd.Series) -> list[tuple[float, float]]:
    """``[(log factor step, log volume step)]`` at each split or bonus issue of one stock:
    the step of the median log volume of the ``AROUND`` bar days after against before."""
    keep = volume.notna() & factor.notna() & (volume > 0) & (factor > 0)
    v, f = np.log(volume[keep].to_numpy(dtype=float)), np.log(factor[keep].to_numpy(dtype=float))
    out = []
    for i in np.flatnonzero(np.abs(np.diff(f)) > STEP) + 1:
        if i >= AROUND and i + AROUND <= len(v):
            after, before = np.median(v[i:i + AROUND]), np.median(v[i - AROUND:i])
            out.append((float(f[i] - f[i - 1]), float(after - before)))
    return out


def volume_divided(steps: list[tuple[float, float]], where: str) -> bool | None:
    """Whether ``$volume`` is divided by ``$factor`` (Qlib's convention), from the folder's
    :func:`volume_steps`; ``None`` when there are too few to tell. The median of volume step
    over factor step is about 0 for a divided volume and about 1 for share volume; a folder
    in between stops with an error naming the field."""
    if len(steps) < MIN_EVENTS:
        return None
    slope = float(np.median([dv / df for df, dv in steps]))
    if abs(slope) < 0.35:
        return True
    if abs(slope - 1) < 0.35:
        return False
    raise DataError(f"{where}: cannot tell whether $volume is divided by $factor: across {len(steps)} splits "
                    f"and bonus issues the volume moved {slope:.2f} times the factor (expected about 0: "
                    "divided, Qlib's convention; or about 1: share volume)")


def convention_notes(scales: dict[str, float | None], divided: bool | None, n_steps: int,
                     upper: int) -> list[str]:
    """The load summary's lines on what was detected and converted."""
    n_percent = sum(s == 0.01 for s in scales.values())
    n_unknown = sum(s is None for s in scales.values())
    notes = []
    if n_percent:
        notes.append(f"$change in percent in {n_percent} stock(s): divided by 100")
    if n_unknown:
        notes.append(f"$change of {n_unknown} stock(s) with fewer than {MIN_DAYS} moving days: read as the "
                     "other stocks'")
    if divided is None:
        notes.append(f"$volume against $factor: {n_steps} split(s) or bonus issue(s), too few to check; read "
                     "as divided by $factor (Qlib's convention)")
    elif not divided:
        notes.append(f"$volume not divided by $factor (checked on {n_steps} splits and bonus issues): read "
                     "as share volume")
    if upper:
        notes.append(f"{upper} feature folder(s) in upper case (e.g. features/SH600000): read as such")
    return notes
