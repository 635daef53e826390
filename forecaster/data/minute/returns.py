"""Minute bars' returns across the night, where unadjusted minute files go wrong.

A minute file has no ``preclose``: a day's first bar's return runs from the previous day's
last close, so on an ex-rights day (a dividend, bonus shares, a split) of unadjusted bars it
carries the price adjustment as if it were a return (sz.300015 on 2023-06-08: -0.283, where
the day's true change was -0.80 %).

* :func:`pair_daily`: with a daily file of the same stock (beside the bar file, or the
  ``--intraday`` pairing), each day's first bar's return runs from the daily ``preclose``
  (the previous close adjusted for ex-rights), on the days whose daily close agrees with the
  bars' last close (a daily file of another adjustment is not used, and said so).
* :func:`flag_gaps`: without one, a day whose traded bars reach beyond the board's daily
  price limit around the previous close (by more than
  :data:`~forecaster.data.daily.quality.JUMP_MARGIN` of it plus a tick) is a likely corporate
  action: its first traded bar is flagged ``gap_excluded`` (never a training target, never
  scored) and its return is taken from its own open (the gap is not a return). Gaps within the
  limit (most cash dividends) cannot be told from moves and stay; minute files carry no ST
  flag, so the board's non-ST limit (the wider one) is used; indexes (``sh.000xxx``,
  ``sz.399xxx``) have no limit and are not checked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.daily.quality import JUMP_MARGIN
from forecaster.data.market.exchange import limit_matrix

# A daily close "agrees" with the bars' last close within this share of the price (or a tick).
AGREE = 0.002
# A daily file is used when its closes agree with the bars' on at least this share of days.
AGREE_SHARE = 0.95


def is_index(code: str) -> bool:
    """An index code (Shanghai ``sh.000xxx``, Shenzhen ``sz.399xxx``): no price limit."""
    code = str(code).strip().lower()
    return code.startswith(("sh.000", "sz.399"))


def _first_traded(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, previous)``: each day's first traded bar (positions) and the position of the
    traded bar before it (-1 for the file's first)."""
    traded = np.flatnonzero(~frame["suspended"].to_numpy(bool))
    day = frame["day"].to_numpy()[traded]
    starts = np.r_[True, day[1:] != day[:-1]] if len(traded) else np.zeros(0, bool)
    at = np.flatnonzero(starts)
    return traded[at], np.where(at > 0, traded[np.maximum(at - 1, 0)], -1)


def flag_gaps(frame: pd.DataFrame, code: str) -> tuple[pd.DataFrame, str]:
    """``(frame, check)``: the bar frame with its likely corporate-action gaps flagged (see the
    module docstring; ``gap_excluded`` and ``preclose`` changed in place), and ``""`` where the
    gaps were checked, else why not."""
    if is_index(code):
        return frame, f"not checked: {code} is an index, which has no price limit"
    rows, previous = _first_traded(frame)
    keep = previous >= 0
    rows, previous = rows[keep], previous[keep]
    if not len(rows):
        return frame, ""
    close = frame["close"].to_numpy(float)
    ref = close[previous]
    traded = ~frame["suspended"].to_numpy(bool)
    day = frame["day"]
    high = frame["high"].where(traded).groupby(day).max()
    low = frame["low"].where(traded).groupby(day).min()
    dates = pd.DatetimeIndex(frame["day"].to_numpy()[rows])
    up, down = (a[:, 0] for a in limit_matrix([code], dates, ref[:, None], np.zeros((len(rows), 1))))
    margin = JUMP_MARGIN * ref + 0.01
    with np.errstate(invalid="ignore"):
        beyond = ((high.reindex(dates).to_numpy() > up + margin)
                  | (low.reindex(dates).to_numpy() < down - margin))
    flagged = rows[beyond]
    if len(flagged):
        at = frame.columns.get_loc
        frame.iloc[flagged, at("gap_excluded")] = True
        frame.iloc[flagged, at("preclose")] = frame["open"].to_numpy(float)[flagged]
    return frame, ""


def gap_days(frame: pd.DataFrame) -> list[str]:
    """The days (``YYYY-MM-DD``) whose first bar is flagged ``gap_excluded``."""
    if "gap_excluded" not in frame.columns:
        return []
    return [str(d.date()) for d in pd.DatetimeIndex(frame.loc[frame["gap_excluded"].to_numpy(bool), "day"])]


def daily_preclose(daily: pd.DataFrame) -> pd.Series | None:
    """A daily frame's ``preclose`` (the previous close adjusted for ex-rights), or one derived
    from ``adj_close`` (``close * adj_close[t-1] / adj_close[t]``); ``None`` without either."""
    if "preclose" in daily.columns and daily["preclose"].notna().any():
        return daily["preclose"].astype(float)
    if "adj_close" in daily.columns and daily["adj_close"].notna().any():
        adj = daily["adj_close"].astype(float)
        return daily["close"].astype(float) * adj.shift(1) / adj
    return None


def pair_daily(bars: pd.DataFrame, daily: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """``(bars, used)``: a copy of the bar frame whose days' first traded bars return from the
    daily ``preclose`` (their ``gap_excluded`` flag cleared: the return is right now), and
    ``used``: ``days`` (first bars paired), ``corrected`` (of them, those whose daily preclose
    differs from the previous bar's close: ex-rights days), ``note`` (why the daily file was
    not used, or ``""``)."""
    used = {"days": 0, "corrected": 0, "note": ""}
    pre = daily_preclose(daily)
    if pre is None:
        used["note"] = "it has no preclose (nor an adjusted close), so it cannot correct ex-rights gaps"
        return bars, used
    last = bars.groupby("day")["close"].last()
    common = last.index.intersection(pd.DatetimeIndex(daily.index))
    if not len(common):
        used["note"] = "it shares no day with the bars"
        return bars, used
    theirs = daily["close"].astype(float).reindex(common)
    ours = last.reindex(common)
    agree = (theirs - ours).abs() <= np.maximum(AGREE * ours, 0.011)
    if agree.mean() < AGREE_SHARE:
        used["note"] = (f"its closes differ from the bars' last closes on {int((~agree).sum())} of "
                        f"{len(common)} days (another adjustment?), so its preclose does not fit them")
        return bars, used
    out = bars.copy()
    rows, previous = _first_traded(out)
    days = pd.DatetimeIndex(out["day"].to_numpy()[rows])
    value = pre.reindex(days).to_numpy(float)
    ok = np.isfinite(value) & agree.reindex(days, fill_value=False).to_numpy(bool)
    rows, value, previous = rows[ok], value[ok], previous[ok]
    close = out["close"].to_numpy(float)
    before = np.where(previous >= 0, close[np.maximum(previous, 0)], np.nan)
    at = out.columns.get_loc
    out.iloc[rows, at("preclose")] = value
    out.iloc[rows, at("gap_excluded")] = False
    used["days"] = int(len(rows))
    used["corrected"] = int((np.abs(value - before) > np.maximum(AGREE * value, 0.011)).sum())
    return out, used
