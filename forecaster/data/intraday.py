"""Minute bars: the A-share session, bar frames and the daily features computed from them.

A *bar frame* (what :func:`forecaster.data.load_csv` returns for a baostock 5/15/30/60-minute
or an akshare minute export) is indexed by ``time``, each bar's closing stamp, and holds
``open, high, low, close`` (``volume``, ``amount`` where exported) plus the session columns:

- ``day``: the trading day the bar belongs to;
- ``bar``: its position within the day (0 = the day's first bar);
- ``first_bar``: the day's first bar, whose return (from the previous day's last close)
  carries the overnight move and the opening auction, not a few minutes of trading;
- ``time_of_day``: trading minutes since 09:30 at the bar's close, over the session's 240
  (the lunch break 11:30-13:00 is not trading time), in ``[0, 1]``;
- ``preclose``: the previous bar's close (the first bar of the file: its own open);
- ``suspended``: the whole day traded no volume.

:func:`daily_features` turns a folder of bar frames into daily features of a panel
(realised volatility, the last half hour's return, the close against the day's VWAP, and the
share of the day's volume in its first and last bars, where the opening and closing call
auctions trade), each from the bars of its own day only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MORNING = ("09:30", "11:30")
AFTERNOON = ("13:00", "15:00")
SESSION_MINUTES = 240
LAST_MINUTES = 30  # "the last half hour": bars closing after 14:30

# name -> what it is; each is a column of the daily frame built by daily_features and a feature
# of forecaster.features.factors.
INTRADAY_FEATURES: dict[str, str] = {
    "intraday_vol": "realised volatility: sqrt of the sum of squared bar log returns, the "
                    "overnight (first-bar) return left out",
    "last30_return": "log return of the last 30 minutes (close against the close at 14:30)",
    "vwap_deviation": "log(close / VWAP of the day's bars)",
    "open_volume_share": "share of the day's volume in its first bar (the opening auction and "
                         "the first minutes)",
    "close_volume_share": "share of the day's volume in its last bar (the closing auction and "
                          "the last minutes)",
}


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


def add_session_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (sorted bars indexed by ``time``, inside the session) with the session columns
    of the module docstring."""
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
    out["preclose"] = np.r_[out["open"].iloc[0], close[:-1]]
    if "volume" in out.columns:
        day_volume = out.groupby("day")["volume"].transform("sum").to_numpy()
        out["suspended"] = ~(day_volume > 0)
    else:
        out["suspended"] = False
    return out


def bar_minutes(frame: pd.DataFrame) -> int:
    """The bars' length in minutes: the most common gap between bars within a day."""
    minutes = session_minutes(pd.DatetimeIndex(frame.index))
    same_day = ~frame["first_bar"].to_numpy()
    gaps = np.diff(minutes)[same_day[1:]]
    gaps = gaps[gaps > 0]
    return int(pd.Series(gaps).mode().iloc[0]) if len(gaps) else 0


def daily_features(frame: pd.DataFrame) -> pd.DataFrame:
    """The daily features of :data:`INTRADAY_FEATURES` from one stock's bar frame, one row per
    trading day (indexed by ``date``), each from that day's bars only (vectorised over bars).

    A day without volume (suspended) has NaN volume shares; a day with a single bar has NaN
    realised volatility.
    """
    if not is_bar_frame(frame):
        raise ValueError("daily_features needs a bar frame (minute bars indexed by 'time')")
    day = frame["day"]
    log_ret = np.log(frame["close"] / frame["preclose"]).where(~frame["first_bar"])
    grouped = pd.DataFrame({"day": day, "sq": log_ret**2, "n": log_ret.notna()}).groupby("day")
    rv = np.sqrt(grouped["sq"].sum()).where(grouped["n"].sum() > 0)
    minutes = frame["time_of_day"] * SESSION_MINUTES
    # the close at 14:30: the last bar closing by then (NaN on a day with none)
    upto = frame["close"].where(minutes <= SESSION_MINUTES - LAST_MINUTES)
    by_day = frame.groupby("day")
    close = by_day["close"].last()
    at_1430 = upto.groupby(day).last()
    last30 = np.log(close / at_1430)
    out = pd.DataFrame({"intraday_vol": rv, "last30_return": last30})
    if "volume" in frame.columns:
        volume = by_day["volume"].sum()
        if "amount" in frame.columns:
            vwap = by_day["amount"].sum() / volume
        else:  # no traded amount: the volume-weighted mean of the bars' closes
            vwap = (frame["close"] * frame["volume"]).groupby(day).sum() / volume
        traded = volume > 0
        out["vwap_deviation"] = np.log(close / vwap).where(traded)
        out["open_volume_share"] = (by_day["volume"].first() / volume).where(traded)
        out["close_volume_share"] = (by_day["volume"].last() / volume).where(traded)
    out.index = pd.DatetimeIndex(out.index, name="date")
    return out.replace([np.inf, -np.inf], np.nan)


def daily_bars(frame: pd.DataFrame) -> pd.DataFrame:
    """One stock's bar frame aggregated to canonical daily rows (open of the first bar, close
    of the last, high, low, volume and amount over the day, preclose = the previous day's
    close), indexed by ``date``."""
    by_day = frame.groupby("day")
    out = pd.DataFrame({"open": by_day["open"].first(), "high": by_day["high"].max(),
                        "low": by_day["low"].min(), "close": by_day["close"].last()})
    out["preclose"] = np.r_[by_day["preclose"].first().iloc[0], out["close"].to_numpy()[:-1]]
    for column in ("volume", "amount"):
        if column in frame.columns:
            out[column] = by_day[column].sum()
    out["suspended"] = by_day["suspended"].first().astype(bool)
    if "code" in frame.columns:
        out["code"] = frame["code"].iloc[0]
    out.index = pd.DatetimeIndex(out.index, name="date")
    return out


def attach_intraday(frames: dict[str, pd.DataFrame], bars: dict[str, pd.DataFrame]
                    ) -> tuple[dict[str, pd.DataFrame], str]:
    """Daily frames ``{code: frame}`` with the :func:`daily_features` of each stock's bar
    frame joined by date, and a line saying what matched: stocks without bars, bar files
    without a daily file, and trading days without bars (their intraday features stay NaN,
    which the models treat as missing, never as zero)."""
    not_bars = [c for c, f in bars.items() if not is_bar_frame(f)]
    if not_bars:
        raise ValueError(f"intraday data must be minute bars; {len(not_bars)} file(s) hold daily "
                         f"rows, e.g. {not_bars[:3]}")
    out, without, days_missing, days = {}, [], 0, 0
    for code, frame in frames.items():  # a join per stock, as files come
        if code not in bars:
            without.append(code)
            out[code] = frame
            continue
        features = daily_features(bars[code]).reindex(frame.index)
        trading = ~frame["suspended"].to_numpy(bool) if "suspended" in frame else np.ones(len(frame), bool)
        days += int(trading.sum())
        days_missing += int((features["intraday_vol"].isna().to_numpy() & trading).sum())
        out[code] = frame.drop(columns=[c for c in features.columns if c in frame.columns]).join(features)
    unused = sorted(set(bars) - set(frames))
    line = (f"intraday features from minute bars for {len(frames) - len(without)} of {len(frames)} "
            f"stocks; {days_missing} of {days} trading stock-days without bars (features left empty)")
    if without:
        line += f"; no bars for {len(without)} stock(s), e.g. {without[:5]}"
    if unused:
        line += f"; {len(unused)} bar file(s) without a daily file not used, e.g. {unused[:5]}"
    return out, line
