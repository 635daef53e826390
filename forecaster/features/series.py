"""Daily log returns and the optional input features, computed causally (row t uses data up
to day t only)."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

FEATURES = ("log_return", "range", "gap", "volume_change", "turnover_change", "time_of_day", "first_bar")
# Features of minute bars only (forecaster.data.minute.session): when in the session a bar closes, and
# whether it is the day's first bar (its return carries the overnight move).
BAR_FEATURES = ("time_of_day", "first_bar")


class UnadjustedReturnsWarning(UserWarning):
    """Returns were computed from consecutive closes of prices that may be unadjusted."""


def log_returns(frame: pd.DataFrame, source: str = "the data") -> pd.Series:
    """Daily log returns ``[days]`` named ``log_return``.

    ``log(close / preclose)`` when ``preclose`` exists (robust to ex-dividend gaps in
    unadjusted prices); else ``log(adj_close_t / adj_close_{t-1})``; else consecutive closes
    with an :class:`UnadjustedReturnsWarning`. The first day is NaN without ``preclose``.
    """
    if "preclose" in frame.columns and frame["preclose"].notna().all():
        r = np.log(frame["close"] / frame["preclose"])
    elif "adj_close" in frame.columns and frame["adj_close"].notna().all():
        r = np.log(frame["adj_close"] / frame["adj_close"].shift(1))
    else:
        warnings.warn(
            f"{source}: no preclose or adjusted close; returns come from consecutive closes, "
            "so ex-dividend and split days of unadjusted prices show false jumps",
            UnadjustedReturnsWarning,
            stacklevel=2,
        )
        r = np.log(frame["close"] / frame["close"].shift(1))
    return r.rename("log_return")


def mask_suspended(values: pd.Series, frame: pd.DataFrame) -> pd.Series:
    """``values`` ``[days]`` with suspended days set to NaN: a suspended day has no trade, so
    its (zero) return is no outcome to train on or score. Minute bars: suspended bars, and a
    day's first bar whose overnight gap is flagged as a likely corporate action
    (``gap_excluded``: the gap is no return), too."""
    masked = np.zeros(len(frame), bool)
    for column in ("suspended", "gap_excluded"):
        if column in frame.columns:
            masked |= frame[column].astype(bool).to_numpy()
    return values.where(~masked) if masked.any() or "suspended" in frame.columns else values


def _change_when_trading(values: pd.Series, trading: pd.Series) -> pd.Series:
    """``log1p`` change against the previous trading day; 0 on suspended days, whose volume
    and turnover are zero or empty and carry no information."""
    level = np.log1p(values.where(trading))
    change = level[trading].diff()
    return change.reindex(values.index).where(trading, 0.0)


def make_features(frame: pd.DataFrame, features: tuple[str, ...] = ("log_return",),
                  source: str = "the data") -> pd.DataFrame:
    """Feature table ``[days, len(features)]`` in the order asked for.

    Features: ``log_return``; ``range`` = log(high/low); ``gap`` = log(open/previous close);
    ``volume_change`` and ``turnover_change`` = change of log1p(volume or turnover) against the
    previous trading day (0 on suspended days, counted in the log). Minute bars
    (:mod:`forecaster.data.minute.session`) also have ``time_of_day`` (trading minutes since 09:30
    over 240) and ``first_bar`` (1 on a day's first bar); on minute bars ``log_return`` is the
    bar's return and ``gap`` is 0 but on first bars.
    """
    unknown = [f for f in features if f not in FEATURES]
    if unknown or not features:
        raise ValueError(f"unknown features {unknown}; choose from {FEATURES}")
    ret = log_returns(frame, source)
    trading = ~frame["suspended"] if "suspended" in frame.columns else pd.Series(True, frame.index)
    out = {}
    for name in features:
        if name in BAR_FEATURES:
            if name not in frame.columns:
                raise ValueError(f"{source}: feature {name!r} needs minute bars (a baostock or akshare "
                                 "minute export); these rows are daily")
            out[name] = frame[name].astype(float)
        elif name == "log_return":
            out[name] = ret
        elif name == "range":
            out[name] = np.log(frame["high"] / frame["low"])
        elif name == "gap":
            prev = frame["preclose"] if "preclose" in frame.columns else frame["close"].shift(1)
            out[name] = np.log(frame["open"] / prev)
        else:
            column = "volume" if name == "volume_change" else "turnover"
            if column not in frame.columns:
                raise ValueError(f"{source}: feature {name!r} needs a {column!r} column")
            out[name] = _change_when_trading(frame[column], trading)
            n = int((~trading).sum())
            if n:
                log.info("%s: %s set to 0 on %d suspended days", source, name, n)
    return pd.DataFrame(out, index=frame.index)
