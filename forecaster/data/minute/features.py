"""Daily features of a panel from minute bars.

:func:`daily_features` turns a folder of bar frames (:mod:`forecaster.data.minute.session`)
into daily features of a panel (realised volatility, the last half hour's return, the close
against the day's VWAP, and the share of the day's volume in its first and last half hours,
where the call auctions trade), each from the bars of its own day only and each defined in
minutes, not bars: a feature the bar length cannot measure (the last 30 minutes of 60-minute
bars) is missing, and said so. :func:`attach_intraday` joins them to a panel's daily frames;
:func:`daily_bars` aggregates bars to daily rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.minute.session import (
    LAST_MINUTES,
    OPEN_MINUTES,
    SESSION_MINUTES,
    bar_minutes,
    is_bar_frame,
)

# name -> what it is; each is a column of the daily frame built by daily_features and a feature
# of forecaster.features.factors.
INTRADAY_FEATURES: dict[str, str] = {
    "intraday_vol": "realised volatility: sqrt of the sum of squared bar log returns, the first bar's "
                    "from its own open (the overnight gap left out)",
    "last30_return": "log return of the last 30 minutes (close against the close at 14:30; missing "
                     "where the bars do not close at 14:30)",
    "vwap_deviation": "log(close / VWAP of the day's bars)",
    "open_volume_share": "share of the day's volume in its first 30 minutes (the opening auction and "
                         "bars closing by 10:00; missing where the bars do not close at 10:00)",
    "close_volume_share": "share of the day's volume in its last 30 minutes (bars closing after 14:30, "
                          "the closing auction; missing where the bars do not close at 14:30)",
}
# The features that need a bar closing at a given session minute (bar lengths dividing 30).
NEEDS_HALF_HOURS = ("last30_return", "open_volume_share", "close_volume_share")


def measurable(minutes: int) -> list[str]:
    """The :data:`INTRADAY_FEATURES` that ``minutes``-long bars can measure (those of
    :data:`NEEDS_HALF_HOURS` need bars closing at 10:00 and 14:30)."""
    return [name for name in INTRADAY_FEATURES
            if name not in NEEDS_HALF_HOURS or (minutes and LAST_MINUTES % minutes == 0)]


def daily_features(frame: pd.DataFrame) -> pd.DataFrame:
    """The daily features of :data:`INTRADAY_FEATURES` from one stock's bar frame, one row per
    trading day (indexed by ``date``), each from that day's bars only (vectorised over bars).

    Defined in minutes: ``last30_return`` and the volume shares need bars closing at 10:00 and
    14:30 and are NaN where there are none (60-minute bars; a day missing that bar). A day
    without volume (suspended) has NaN volume shares and VWAP deviation; a day whose bars did
    not trade has NaN realised volatility.
    """
    if not is_bar_frame(frame):
        raise ValueError("daily_features needs a bar frame (minute bars indexed by 'time')")
    day = frame["day"]
    first = frame["first_bar"].to_numpy(bool)
    base = np.where(first, frame["open"].to_numpy(float), frame["preclose"].to_numpy(float))
    log_ret = pd.Series(np.log(frame["close"].to_numpy(float) / base), index=frame.index)
    if "suspended" in frame.columns:
        log_ret = log_ret.where(~frame["suspended"].to_numpy(bool))
    grouped = pd.DataFrame({"day": day, "sq": log_ret**2, "n": log_ret.notna()}).groupby("day")
    rv = np.sqrt(grouped["sq"].sum()).where(grouped["n"].sum() > 0)
    minutes = (frame["time_of_day"] * SESSION_MINUTES).round(6)
    by_day = frame.groupby("day")
    close = by_day["close"].last()
    # the close at 14:30 exactly: NaN on a day (or at a bar length) without a bar closing then
    at_1430 = frame["close"].where(minutes == SESSION_MINUTES - LAST_MINUTES).groupby(day).last()
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
        has_open = (minutes == OPEN_MINUTES).groupby(day).any()
        has_last = (minutes == SESSION_MINUTES - LAST_MINUTES).groupby(day).any()
        opening = frame["volume"].where(minutes <= OPEN_MINUTES, 0.0).groupby(day).sum()
        closing = frame["volume"].where(minutes > SESSION_MINUTES - LAST_MINUTES, 0.0).groupby(day).sum()
        out["open_volume_share"] = (opening / volume).where(traded & has_open)
        out["close_volume_share"] = (closing / volume).where(traded & has_last)
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
    out["suspended"] = by_day["suspended"].all().astype(bool)
    if "code" in frame.columns:
        out["code"] = frame["code"].iloc[0]
    out.index = pd.DatetimeIndex(out.index, name="date")
    return out


def attach_intraday(frames: dict[str, pd.DataFrame], bars: dict[str, pd.DataFrame]
                    ) -> tuple[dict[str, pd.DataFrame], str]:
    """Daily frames ``{code: frame}`` with the :func:`daily_features` of each stock's bar
    frame joined by date, and a line saying what matched: stocks without bars, bar files
    without a daily file, trading days without bars (their intraday features stay NaN, which
    the models treat as missing, never as zero), the first bars whose return now comes from
    the daily ``preclose`` (:func:`~forecaster.data.minute.returns.pair_daily`), and the
    features the bar length cannot measure.

    Raises:
        ValueError: a bar frame holds daily rows, or the files' bar lengths differ (the
            features would partly measure each file's bar length).
    """
    from forecaster.data.minute.returns import pair_daily

    not_bars = [c for c, f in bars.items() if not is_bar_frame(f)]
    if not_bars:
        raise ValueError(f"intraday data must be minute bars; {len(not_bars)} file(s) hold daily "
                         f"rows, e.g. {not_bars[:3]}")
    lengths: dict[int, list[str]] = {}
    for code, frame in bars.items():
        lengths.setdefault(bar_minutes(frame), []).append(code)
    if len(lengths) > 1:
        listed = "; ".join(f"{m}-minute bars: {len(c)} file(s), e.g. {', '.join(sorted(c)[:3])}"
                           for m, c in sorted(lengths.items()))
        raise ValueError(f"the minute-bar files have different bar lengths ({listed}); expected one bar "
                         "length per folder, since the intraday features would partly measure each file's "
                         "bar length: put each length in a folder of its own, or resample to one length")
    minutes = next(iter(lengths), 0)
    out, without, days_missing, days, paired = {}, [], 0, 0, 0
    for code, frame in frames.items():  # a join per stock, as files come
        if code not in bars:
            without.append(code)
            out[code] = frame
            continue
        minute, used = pair_daily(bars[code], frame)
        paired += used["days"]
        features = daily_features(minute).reindex(frame.index)
        trading = ~frame["suspended"].to_numpy(bool) if "suspended" in frame else np.ones(len(frame), bool)
        days += int(trading.sum())
        days_missing += int((features["intraday_vol"].isna().to_numpy() & trading).sum())
        out[code] = frame.drop(columns=[c for c in features.columns if c in frame.columns]).join(features)
    unused = sorted(set(bars) - set(frames))
    if bars and len(without) == len(frames):  # --intraday given, and not one feature from it
        read = ", ".join(sorted(bars)[:5]) + (" ..." if len(bars) > 5 else "")
        daily = ", ".join(sorted(frames)[:5]) + (" ..." if len(frames) > 5 else "")
        raise ValueError(f"no minute-bar file matched a stock of the daily data: {len(bars)} bar file(s) "
                         f"read as {read}; daily stocks {daily} (a bar file is matched by the code in its "
                         "name or its code column)")
    matched = sorted(set(bars) & set(frames))
    line = (f"intraday features from {minutes}-minute bars for {len(frames) - len(without)} of {len(frames)} "
            f"stocks (bar files matched: {', '.join(matched[:5])}{' ...' if len(matched) > 5 else ''}); "
            f"{days_missing} of {days} trading stock-days without bars (features left empty); "
            f"{paired} first bars' returns from the daily files' preclose")
    missing = [name for name in INTRADAY_FEATURES if name not in measurable(minutes)]
    if missing:
        line += (f"; {', '.join(missing)} left empty: {minutes}-minute bars do not close at 10:00 and "
                 "14:30, so they cannot measure a half hour")
    if without:
        line += f"; no bars for {len(without)} stock(s), e.g. {without[:5]}"
    if unused:
        line += f"; {len(unused)} bar file(s) without a daily file not used, e.g. {unused[:5]}"
    return out, line
