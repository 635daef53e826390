"""Synthetic minute bars with two planted, known effects (for tests and benchmarks):

- an *intraday pattern*: within a day, each bar's return continues the previous bar's with
  coefficient ``bar_ic`` (an AR(1) that restarts every morning), so a model of the bars can
  reach a per-bar IC of about ``bar_ic`` on bars 2.. of a day and nothing on the first two
  (the overnight move is pure noise);
- a *daily signal hidden in the bars*: a stock's last 30 minutes drift with a daily signal
  ``s`` whose cross-sectional rank IC with the next day's open-to-open return is about
  ``signal_ic`` (the drift is put into the next day's bars after the open). The bar before
  the last half hour moves the other way by as much, so the day's open-to-close return does
  not show it: a model that sees the last half hour
  (:func:`forecaster.data.minute.features.daily_features`) can rank on it.

Nothing of day ``d + 1`` is drawn from information a feature of day ``d`` could not see
other than the planted link itself.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.minute.session import LAST_MINUTES, add_session_columns

DAILY_VOL = 0.02


def bar_stamps(days: pd.DatetimeIndex, bar_minutes: int) -> pd.DatetimeIndex:
    """Closing stamps of every bar of ``days`` (``240 / bar_minutes`` a day, 09:30-11:30 and
    13:00-15:00)."""
    if bar_minutes < 1 or 120 % bar_minutes:
        raise ValueError(f"bar_minutes must divide 120 (1, 5, 15, 30, 60...), got {bar_minutes}")
    half = 120 // bar_minutes
    offsets = np.r_[570 + bar_minutes * np.arange(1, half + 1), 780 + bar_minutes * np.arange(1, half + 1)]
    stamps = days.values[:, None] + (offsets[None, :] * 60_000_000_000).astype("timedelta64[ns]")
    return pd.DatetimeIndex(stamps.ravel(), name="time")


def synthetic_intraday(n_stocks: int = 20, n_days: int = 250, bar_minutes: int = 5, bar_ic: float = 0.1,
                       signal_ic: float = 0.1, seed: int = 0, start: str = "2024-01-02"
                       ) -> dict[str, pd.DataFrame]:
    """Bar frames ``{code: frame}`` (codes ``syn.000001``...) as :func:`forecaster.data.load_csv`
    returns them for a minute export; see the module docstring for what is planted.

    Args:
        n_stocks, n_days: stocks and trading days (business days from ``start``).
        bar_minutes: bar length (5: 48 bars a day).
        bar_ic: within-day AR(1) coefficient of bar returns (|bar_ic| < 1).
        signal_ic: cross-sectional correlation of the daily signal with the next day's return.
    """
    if not -1 < bar_ic < 1 or not 0 <= signal_ic < 1:
        raise ValueError(f"need |bar_ic| < 1 and 0 <= signal_ic < 1, got {bar_ic}, {signal_ic}")
    rng = np.random.default_rng(seed)
    days = pd.bdate_range(start, periods=n_days)
    n_bars = 240 // bar_minutes
    stamps = bar_stamps(days, bar_minutes)
    daily_vol = DAILY_VOL * np.exp(rng.normal(0, 0.3, n_stocks))  # [N]
    sigma = daily_vol / np.sqrt(n_bars)
    shape = (n_stocks, n_days, n_bars)
    noise = rng.standard_normal(shape) * sigma[:, None, None]
    returns = np.empty(shape)
    returns[..., 0] = rng.standard_normal((n_stocks, n_days)) * daily_vol[:, None] * 0.5  # overnight
    previous = np.zeros((n_stocks, n_days))  # the AR restarts each morning
    for b in range(1, n_bars):  # a loop over the day's bars, vectorised over stocks and days
        returns[..., b] = bar_ic * previous + noise[..., b]
        previous = returns[..., b]
    # The daily signal: the last half hour drifts with s, the next day's session pays it.
    signal = rng.standard_normal((n_stocks, n_days))
    last = max(1, LAST_MINUTES // bar_minutes)
    drift = signal * sigma[:, None] * np.sqrt(last)  # the last half hour's move, [N, D]
    returns[..., n_bars - last:] += (drift / last)[..., None]
    # ...undone by the bar just before it, so neither the day's return nor its VWAP shows much
    returns[..., n_bars - last - 1] -= drift
    pay = signal_ic / np.sqrt(1 - signal_ic**2) * daily_vol[:, None] * signal  # [N, D] next day
    returns[:, 1:, 1:] += (pay[:, :-1] / (n_bars - 1))[..., None]
    flat = returns.reshape(n_stocks, -1)
    log_close = np.log(10.0) + np.cumsum(flat, axis=1)
    # A bar opens at the previous close; a first bar at the overnight gap, then trades the rest
    # of its return.
    first = np.arange(n_days * n_bars) % n_bars == 0
    own = rng.standard_normal((n_stocks, n_days)) * sigma[:, None] * 0.5
    gap = np.zeros_like(flat)
    gap[:, first] = returns[..., 0] - own
    close, open_ = np.exp(log_close), np.exp(log_close - flat + gap)
    wiggle = np.abs(rng.standard_normal((2, n_stocks, n_days * n_bars))) * sigma[:, None] * 0.3
    high = np.maximum(open_, close) * np.exp(wiggle[0])
    low = np.minimum(open_, close) * np.exp(-wiggle[1])
    b = np.arange(n_bars)
    profile = 1 + 2 * (np.exp(-b / 3) + np.exp(-(n_bars - 1 - b) / 3))  # U-shaped, auctions heavy
    lots = np.round(1e4 * profile[None, None, :] * np.exp(rng.normal(0, 0.3, shape)))
    volume = lots.reshape(n_stocks, -1) * 100
    frames = {}
    for i in range(n_stocks):  # one frame per stock, as files are
        code = f"syn.{i + 1:06d}"
        frame = pd.DataFrame({"open": open_[i].round(4), "high": high[i].round(4), "low": low[i].round(4),
                              "close": close[i].round(4), "volume": volume[i],
                              "amount": (volume[i] * (open_[i] + close[i]) / 2).round(2)}, index=stamps)
        frame = add_session_columns(frame)
        frame["code"] = code
        frames[code] = frame
    return frames


def write_minute_csv(frame: pd.DataFrame, path, fmt: str = "baostock") -> None:
    """Write one bar frame as a baostock minute export (``date,time,code,open,...``, ``time``
    as YYYYMMDDHHMMSSsss) or an akshare one (``时间,开盘,收盘,最高,最低,成交量,成交额``,
    volume in lots)."""
    stamps = pd.DatetimeIndex(frame.index)
    price = {c: frame[c].to_numpy() for c in ("open", "high", "low", "close", "amount")}
    if fmt == "baostock":
        out = pd.DataFrame({"date": stamps.strftime("%Y-%m-%d"), "time": stamps.strftime("%Y%m%d%H%M%S000"),
                            "code": frame["code"].to_numpy(),
                            **{c: price[c] for c in ("open", "high", "low", "close")},
                            "volume": frame["volume"].astype("int64").to_numpy(), "amount": price["amount"],
                            "adjustflag": 3})
    elif fmt == "akshare":
        lots = (frame["volume"] / 100).round().astype("int64").to_numpy()
        out = pd.DataFrame({"时间": stamps.strftime("%Y-%m-%d %H:%M:%S"), "开盘": price["open"],
                            "收盘": price["close"], "最高": price["high"], "最低": price["low"],
                            "成交量": lots, "成交额": price["amount"]})
    else:
        raise ValueError(f"fmt must be 'baostock' or 'akshare', got {fmt!r}")
    out.to_csv(path, index=False)
