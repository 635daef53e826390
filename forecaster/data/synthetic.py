"""A deterministic synthetic daily price series, so every command runs with no data at all.

Returns follow an AR(1) mean with GARCH(1,1) volatility; closes respect the main board's 10%
price limit and the 0.01 CNY tick; a few days are suspended. It is synthetic: a small AR
coefficient gives a model something to find, unlike real markets where little is there.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd


@dataclass
class SyntheticConfig:
    """Parameters of the generator (defaults give ~2% daily volatility)."""

    n_days: int = 1200
    start: str = "2020-01-02"
    code: str = "sh.600000"
    initial_price: float = 10.0
    ar: float = 0.08
    omega: float = 8e-6
    alpha: float = 0.08
    beta: float = 0.90
    limit: float = 0.10
    suspension_rate: float = 0.004
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_days < 2:
            raise ValueError(f"n_days must be >= 2, got {self.n_days}")
        if not 0 <= self.alpha + self.beta < 1:
            raise ValueError("alpha + beta must be in [0, 1) for a stationary GARCH")
        if self.initial_price <= 0 or not 0 < self.limit < 1:
            raise ValueError("initial_price must be positive and limit in (0, 1)")


def synthetic_prices(config: SyntheticConfig | None = None) -> pd.DataFrame:
    """Generate the series as a baostock-style export (baostock's column names).

    Returns:
        DataFrame with columns ``date, code, open, high, low, close, preclose, volume, amount,
        adjustflag, turn, tradestatus, pctChg, isST``, one row per weekday.
    """
    c = config or SyntheticConfig()
    rng = np.random.default_rng(c.seed)
    n = c.n_days
    dates = pd.bdate_range(c.start, periods=n)
    var = c.omega / (1 - c.alpha - c.beta)
    shocks = rng.standard_normal(n)
    suspended = rng.random(n) < c.suspension_rate
    suspended[0] = False
    close = np.empty(n)
    preclose = np.empty(n)
    prev_close, prev_ret, prev_eps = c.initial_price, 0.0, 0.0
    for t in range(n):
        var = c.omega + c.alpha * prev_eps**2 + c.beta * var
        eps = np.sqrt(var) * shocks[t]
        ret = 0.0 if suspended[t] else c.ar * prev_ret + eps
        up = np.floor(prev_close * (1 + c.limit) * 100 + 1e-6) / 100
        down = np.ceil(prev_close * (1 - c.limit) * 100 - 1e-6) / 100
        price = float(np.clip(np.round(prev_close * np.exp(ret), 2), down, up))
        preclose[t], close[t] = prev_close, price
        realised = np.log(price / prev_close)
        prev_ret, prev_eps, prev_close = realised, realised - c.ar * prev_ret, price
    up = np.floor(preclose * (1 + c.limit) * 100 + 1e-6) / 100
    down = np.ceil(preclose * (1 - c.limit) * 100 - 1e-6) / 100
    gap = rng.normal(0, 0.004, n)
    open_ = np.clip(np.round(preclose * np.exp(gap), 2), down, up)
    wick = np.abs(rng.normal(0, 0.008, (2, n)))
    high = np.clip(np.round(np.maximum(open_, close) * np.exp(wick[0]), 2), None, up)
    low = np.clip(np.round(np.minimum(open_, close) * np.exp(-wick[1]), 2), down, None)
    volume = np.round(1e7 * np.exp(rng.normal(0, 0.3, n)) * (1 + 20 * np.abs(np.log(close / preclose))))
    for arr in (open_, high, low):
        arr[suspended] = preclose[suspended]
    volume[suspended] = 0
    amount = np.round(volume * (open_ + close) / 2, 2)
    return pd.DataFrame({
        "date": dates.strftime("%Y-%m-%d"),
        "code": c.code,
        "open": open_, "high": high, "low": low, "close": close, "preclose": preclose,
        "volume": volume.astype(np.int64), "amount": amount, "adjustflag": 3,
        "turn": np.round(volume / 1e9 * 100, 6),
        "tradestatus": (~suspended).astype(int),
        "pctChg": np.round((close / preclose - 1) * 100, 6),
        "isST": 0,
    })


def default_series_path() -> Path:
    """The embedded series ``data/synthetic_ashare.csv`` of the repository; outside a checkout
    (a non-editable install) the same series is generated into a temporary folder."""
    path = Path(__file__).resolve().parents[2] / "data" / "synthetic_ashare.csv"
    if path.is_file():
        return path
    fallback = Path(tempfile.gettempdir()) / "forecaster-synthetic_ashare.csv"
    if not fallback.is_file():
        synthetic_prices().to_csv(fallback, index=False, float_format="%.4f")
    return fallback
