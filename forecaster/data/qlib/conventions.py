"""The conventions of a Qlib data folder: its instruments' names and fields, and how its
``$change`` and ``$volume`` are held, detected from its data.

Instruments are named ``SH600000`` (:func:`qlib_code`; :func:`from_qlib_code` the other way) and
hold the fields :data:`FIELDS`.

Qlib's own folders (``scripts/dump_bin.py``) hold ``$change`` as a fraction (close / previous
close - 1) and ``$volume`` divided by ``$factor``; community folders differ. Neither is taken
on trust:

* ``$change`` is compared, stock by stock, with the return of consecutive adjusted closes: a
  median ratio of 1 is a fraction, of 100 percent (divided by 100 when read); anything else
  stops with an error naming the field and the stock. A stock with too few moving days to
  tell follows the folder's majority.
* ``$volume`` is compared with ``$factor`` across every step of the factor (splits, bonus
  issues, dividends): a volume divided by the factor stays level across a step, share volume
  jumps with it. The slope of volume steps on factor steps is tested against 0 and 1 with its
  standard error (:func:`volume_divided`); where the data cannot tell (too few steps, or a
  slope that neither value explains) the folder is read as Qlib's and the load summary says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.data.market.exchange import canonical_code
from forecaster.data.sources import DataError

PRICE_FIELDS = ("open", "high", "low", "close")
FIELDS = (*PRICE_FIELDS, "volume", "amount", "factor", "change")
# Market values (yuan, never adjusted), read where a stock has them: they may cover fewer days
# than its prices (a second source that ends earlier), NaN on the days they lack.
VALUE_FIELDS = ("float_mv", "total_mv")
MIN_DAYS = 5  # moving days a stock needs for its $change to be checked
MIN_EVENTS = 3  # factor steps the folder needs for its $volume to be checked
MIN_STEP = 1e-4  # a factor step (log) counted as a corporate action (float32 noise is ~1e-7)
AROUND = 10  # bar days each side of a step whose median volume is compared
Z = 3.0  # standard errors within which a slope is taken as 0 or 1 (two-sided p of about 0.003)
_EXCHANGES = ("sh.", "sz.", "bj.")  # canonical codes Qlib names SH600000 (others: upper-cased)


def qlib_code(code: str) -> str:
    """``sh.600000`` -> ``SH600000`` (Qlib's instrument name); other codes (``syn.000001``)
    upper-cased as they are."""
    canon = canonical_code(code)
    return canon.replace(".", "").upper() if canon[:3] in _EXCHANGES else canon.upper()


def from_qlib_code(name: str) -> str:
    """``SH600000`` -> ``sh.600000``; other names lower-cased (``SYN.000001`` -> ``syn.000001``)."""
    canon = canonical_code(name)
    return canon if canon[:3] in _EXCHANGES else name.strip().lower()



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
    """``[(log factor step, log volume step)]`` at each step of one stock's factor (every
    corporate action: dividends, splits, bonus issues): the step of the median log volume of
    the ``AROUND`` bar days after against before."""
    keep = volume.notna() & factor.notna() & (volume > 0) & (factor > 0)
    v, f = np.log(volume[keep].to_numpy(dtype=float)), np.log(factor[keep].to_numpy(dtype=float))
    out = []
    for i in np.flatnonzero(np.abs(np.diff(f)) > MIN_STEP) + 1:
        if i >= AROUND and i + AROUND <= len(v):
            after, before = np.median(v[i:i + AROUND]), np.median(v[i - AROUND:i])
            out.append((float(f[i] - f[i - 1]), float(after - before)))
    return out


@dataclass(frozen=True)
class VolumeTest:
    """The regression of volume steps on factor steps through the origin (``slope`` and its
    standard error ``se``, from ``n`` steps) and what it decided: ``divided`` ``True`` (Qlib's
    convention: slope about 0), ``False`` (share volume: about 1) or ``None`` (the data cannot
    tell: read as Qlib's, and said so)."""

    slope: float
    se: float
    n: int
    divided: bool | None

    def text(self) -> str:
        return f"slope {self.slope:+.2f} +- {self.se:.2f} over {self.n} factor step(s)"


def volume_divided(steps: list[tuple[float, float]]) -> VolumeTest:
    """Whether ``$volume`` is divided by ``$factor``, from the folder's :func:`volume_steps`.

    A volume divided by the factor stays level across a factor step (slope 0), share volume
    jumps with it (slope 1). Each step's volume change is noise of about +-0.4 in log volume,
    so the slope is estimated by least squares through the origin over every step (a large
    split weighs most, a small dividend little) with its standard error from the residuals
    (outliers past 5 robust deviations left out); the nearer of 0 and 1 is taken once the other
    lies more than ``Z`` standard errors away. Otherwise ``divided`` is ``None``."""
    if len(steps) < MIN_EVENTS:
        return VolumeTest(float("nan"), float("nan"), len(steps), None)
    df, dv = np.array(steps, dtype=float).T
    keep = np.ones(len(df), bool)
    for _ in range(2):  # a suspension or news day beside a step is no split's effect
        slope = float(df[keep] @ dv[keep] / (df[keep] @ df[keep]))
        resid = dv - slope * df
        mad = 1.4826 * float(np.median(np.abs(resid[keep] - np.median(resid[keep])))) or 1e-9
        keep = np.abs(resid) <= 5 * mad
    n = int(keep.sum())
    sxx = float(df[keep] @ df[keep])
    slope = float(df[keep] @ dv[keep] / sxx)
    resid = dv[keep] - slope * df[keep]
    sigma = float(np.sqrt(resid @ resid / max(n - 1, 1)))
    se = sigma / np.sqrt(sxx) if sxx > 0 else float("inf")
    # the nearer value, once the other is rejected (real volume rises a little after a split,
    # so a broad market's slope sits near, not at, 0)
    far0, far1 = abs(slope) > Z * se, abs(slope - 1) > Z * se
    divided = True if slope < 0.5 and far1 else False if slope >= 0.5 and far0 else None
    return VolumeTest(slope, se, n, divided)


def convention_notes(scales: dict[str, float | None], volume: VolumeTest, upper: int) -> list[str]:
    """The load summary's lines on what was detected and converted."""
    n_percent = sum(s == 0.01 for s in scales.values())
    n_unknown = sum(s is None for s in scales.values())
    notes = []
    if n_percent:
        notes.append(f"$change in percent in {n_percent} stock(s): divided by 100")
    if n_unknown:
        notes.append(f"$change of {n_unknown} stock(s) with fewer than {MIN_DAYS} moving days: read as the "
                     "other stocks'")
    if volume.n < MIN_EVENTS:
        notes.append(f"$volume against $factor: {volume.n} factor step(s), too few to check; read as divided "
                     "by $factor (Qlib's convention)")
    elif volume.divided is None:
        notes.append(f"$volume against $factor: cannot tell whether divided ({volume.text()}; expected 0 "
                     "if divided, 1 if share volume); read as divided by $factor (Qlib's convention)")
    elif not volume.divided:
        notes.append(f"$volume not divided by $factor ({volume.text()}): read as share volume")
    if upper:
        notes.append(f"{upper} feature folder(s) in upper case (e.g. features/SH600000): read as such")
    return notes
