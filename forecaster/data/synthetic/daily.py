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

from forecaster.checks import ConfigError, check_int
from forecaster.data.market.exchange import MAIN_BOARD_ST_CHANGE, float_market_value, round_price


@dataclass
class SyntheticConfig:
    """Parameters of the generator (defaults give ~2% daily volatility)."""

    n_days: int = 1200
    start: str = "2020-01-02"
    code: str = "syn.000000"  # no listed stock has a syn. code; main-board limits
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
            raise ConfigError(f"n_days must be >= 2, got {self.n_days}")
        if not 0 <= self.alpha + self.beta < 1:
            raise ConfigError("alpha + beta must be in [0, 1) for a stationary GARCH")
        if self.initial_price <= 0 or not 0 < self.limit < 1:
            raise ConfigError("initial_price must be positive and limit in (0, 1)")


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
    path = Path(__file__).resolve().parents[3] / "data" / "synthetic_ashare.csv"
    if path.is_file():
        return path
    fallback = Path(tempfile.gettempdir()) / "forecaster-synthetic_ashare.csv"
    if not fallback.is_file():
        synthetic_prices().to_csv(fallback, index=False, float_format="%.4f")
    return fallback


# --- A synthetic panel of many stocks with a planted, recoverable signal ----------------------

PANEL_SECTORS = 8
PANEL_MARKET_VOL = 0.012  # daily sd of the market factor (its GARCH's unconditional level)
PANEL_SECTOR_VOL = 0.008
PANEL_IDIO_VOL = (0.01, 0.03)  # range of the stocks' idiosyncratic vol levels
PANEL_BETA = (0.6, 1.4)
PANEL_GARCH = (0.08, 0.90)  # (alpha, beta) of every GARCH(1,1) recursion
PANEL_OVERNIGHT_SHARE = 0.25  # share of each day's variance realised overnight (preclose -> open)
PANEL_VOLUME_SIGNAL = 0.5  # log volume loads the signal with this coefficient
PANEL_VOLUME_NOISE = 0.15
PANEL_SUSPENSION_RATE = 0.005  # share of stock-days suspended, in spells of ~3 days
PANEL_SUSPENSION_SPELL = 3.0
PANEL_LATE_SHARE = 0.15  # stocks that list after the first day
PANEL_ST_SHARE = 0.03  # stocks with a special-treatment period
PANEL_DELIST_BELOW = 1.0  # the 1-yuan rule: 20 consecutive closes below 1 CNY delist a stock
PANEL_DELIST_DAYS = 20
PANEL_QUARTER = 63  # trading days between fundamentals updates (valuation ratios)
_PANEL_CALIBRATION_PAIRS = 2048  # pairs of stocks a day that calibrate the signal's loading
_PANEL_FLOATS = ["open", "high", "low", "close", "preclose", "volume", "amount", "adjust_flag", "turnover",
                 "trade_status", "pct_chg", "is_st", "pe_ttm", "pb_mrq", "ps_ttm"]


def _panel_dates(start: str, n_days: int) -> pd.DatetimeIndex:
    """Weekdays from ``start``, built like :func:`load_csv` parses dates (same unit, no freq)."""
    try:
        days = pd.bdate_range(start, periods=n_days)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"start must be a date like '2018-01-02', got {start!r}") from exc
    return pd.DatetimeIndex(pd.to_datetime(days.strftime("%Y-%m-%d"), format="%Y-%m-%d"), name="date")


def _signal_loading(target_ic: float, mu_diff: np.ndarray, var_sum: np.ndarray, valid: np.ndarray
                    ) -> np.ndarray:
    """The loading ``k`` per day that gives a cross-sectional Spearman correlation of ``target_ic``
    between a standard-normal signal ``s`` and ``y = k * s + noise``.

    Each stock's noise is ``N(mu_i, var_i)`` (the realised common factors and its conditional
    idiosyncratic variance), so a day's noise is a mixture with density ``f``. To first order
    in ``k`` the Spearman correlation is ``6 k J / sqrt(pi)`` with ``J = integral f^2``, the
    mean over pairs ``i != j`` of ``N(mu_i - mu_j; 0, var_i + var_j)``, estimated here from
    ``[days x pairs]`` arrays ``mu_diff``, ``var_sum`` and ``valid`` (both stocks listed). The
    Gaussian case's factor (Spearman ``(6/pi) asin(r/2)`` of a Pearson ``r``) carries it to
    larger targets.
    """
    if target_ic == 0:
        return np.zeros(len(mu_diff))
    dens = np.exp(-0.5 * mu_diff**2 / var_sum) / np.sqrt(2 * np.pi * var_sum)
    count = valid.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        j = np.where(valid, dens, 0.0).sum(axis=1) / count
    if not (count > 0).any():
        return np.zeros(len(mu_diff))
    j = np.where(count > 0, j, np.median(j[count > 0]))  # days without a listed pair: no IC
    first_order = np.sqrt(np.pi) / 6.0  # k * J per unit of Spearman correlation
    pearson = 2.0 * np.sin(np.pi * abs(target_ic) / 6.0)
    gaussian = (pearson / np.sqrt(1.0 - pearson**2)) / (np.pi * abs(target_ic) / 3.0)
    return np.sign(target_ic) * abs(target_ic) * first_order * gaussian / j


def synthetic_panel(n_stocks: int = 50, n_days: int = 1000, signal_ic: float = 0.05, seed: int = 0,
                    start: str = "2018-01-02", return_signal: bool = False
                    ) -> dict[str, pd.DataFrame] | tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """A deterministic panel of synthetic A-share stocks with a planted signal.

    Log returns are ``beta * market + sector + idiosyncratic`` (GARCH(1,1) market and
    idiosyncratic volatilities), split into an overnight (preclose -> open) and an intraday
    (open -> close) part. The signal ``s[t, i] ~ N(0, 1)`` is revealed at day ``t``'s close
    through the volume, ``log volume = log base + 0.5 s + N(0, 0.15^2) + market volume factor``,
    and priced into day ``t+1``'s intraday return as ``k_t * s[t, i]``, with ``k_t`` set so that
    the daily cross-sectional Spearman correlation between ``s[t]`` and the open-to-open label
    ``log(open[t+2] / open[t+1])`` is ``signal_ic`` on average (``0``: a null panel). A
    stock's own bars reveal ``s``: its log volume against its trailing mean volume.

    A-share conventions: prices on the 0.01 tick, closes inside the daily limit (10%, 5% for ST
    before 2025-07-07, see :mod:`forecaster.portfolio.rules`), preclose = previous close (no corporate
    actions), short suspension spells (``open = high = low = close = preclose``, zero volume,
    ``trade_status = 0``; the moves missed are priced in at the reopening), ~15% of stocks
    listed late, a few ST periods, delisting after 20 closes below 1 CNY, and valuation ratios
    (``pe_ttm`` negative for loss makers) with some empty cells.

    Args:
        n_stocks: number of stocks (codes ``syn.000001`` ...), >= 1.
        n_days: weekdays in the calendar from ``start``, >= 2.
        signal_ic: the planted rank IC, ``|signal_ic| < 0.5``.
        seed: the random seed; the panel is a function of all the arguments, and panels that
            differ only in ``signal_ic`` share all their random draws (the same noise).
        start: the first date.
        return_signal: also return the signal.

    Returns:
        ``{code: frame}`` sorted by code, each frame the canonical frame :func:`load_dir` reads
        back from :func:`write_synthetic_panel`'s CSVs (only the days the stock is listed);
        with ``return_signal`` also the signal ``[date x code]`` on the union calendar, ``NaN``
        where the stock has no bar or is suspended (no volume reveals it, nothing is priced).
    """
    check_int("n_stocks", n_stocks)
    check_int("n_days", n_days, minimum=2)
    check_int("seed", seed, minimum=0)
    if not isinstance(signal_ic, (int, float, np.floating)) or not abs(float(signal_ic)) < 0.5:
        raise ConfigError(f"signal_ic must be a number with |signal_ic| < 0.5, got {signal_ic!r}")
    if seed < 0:
        raise ConfigError(f"seed must be >= 0, got {seed}")

    n, T, ic = int(n_stocks), int(n_days), float(signal_ic)
    dates = _panel_dates(start, T)
    rng = np.random.default_rng(seed)
    codes = [f"syn.{i + 1:06d}" for i in range(n)]

    # Stocks: factor loadings, vol levels, prices, volumes, listing, ST periods.
    beta = rng.uniform(*PANEL_BETA, n)
    sector = rng.integers(0, PANEL_SECTORS, n)
    idio_var = rng.uniform(*PANEL_IDIO_VOL, n) ** 2
    price0 = np.round(np.exp(rng.uniform(np.log(5.0), np.log(50.0), n)), 2)
    log_base_volume = rng.uniform(np.log(2e6), np.log(1e8), n)
    float_shares = np.exp(log_base_volume) / rng.uniform(0.003, 0.05, n)  # turnover 0.3%-5% a day
    first = np.zeros(n, dtype=np.int64)
    late = rng.random(n) < PANEL_LATE_SHARE
    if T >= 40:
        first = np.where(late, rng.integers(1, (3 * T) // 4, n), 0)
    has_st = rng.random(n) < PANEL_ST_SHARE
    st_start = first + (rng.random(n) * (T - first)).astype(np.int64)
    st_end = np.where(has_st, st_start + rng.integers(60, 250, n), -1)
    wick = 0.4 * np.sqrt(idio_var)

    # Pass 1: the return shocks (GARCH on the latent shocks, so they do not depend on prices).
    q = PANEL_OVERNIGHT_SHARE
    a, b = PANEL_GARCH
    h_m, h_e = PANEL_MARKET_VOL**2, idio_var.copy()
    overnight, intraday = np.empty((T, n)), np.empty((T, n))
    market = np.empty((T, 2))  # the realised market factor, overnight and intraday
    sectors = np.empty((T, 2, PANEL_SECTORS))
    h_idio = np.empty((T, n), dtype=np.float32)  # conditional idiosyncratic variance of each day
    sd = np.sqrt(np.array([[q], [1 - q]]))
    for t in range(T):
        z = rng.standard_normal((2, 1 + PANEL_SECTORS + n))
        market[t] = np.sqrt(h_m) * sd[:, 0] * z[:, 0]
        sectors[t] = PANEL_SECTOR_VOL * sd * z[:, 1:1 + PANEL_SECTORS]
        idio = np.sqrt(h_e) * sd * z[:, 1 + PANEL_SECTORS:]
        common = beta * market[t][:, None] + sectors[t][:, sector]
        overnight[t] = common[0] + idio[0]
        intraday[t] = common[1] + idio[1]
        h_idio[t] = h_e
        h_m = PANEL_MARKET_VOL**2 * (1 - a - b) + a * market[t].sum() ** 2 + b * h_m
        h_e = idio_var * (1 - a - b) + a * idio.sum(axis=0) ** 2 + b * h_e

    # The loading k_t of s[t] (priced into day t+1's intraday return). The label's noise is day
    # t+1's intraday and day t+2's overnight return: for stock i, N(mu_i, var_i) given the
    # realised market and sector factors. Random pairs of stocks estimate the J of
    # _signal_loading (pairs rather than a subset of stocks: its 1/J is then nearly unbiased).
    t1 = np.minimum(np.arange(T) + 1, T - 1)
    t2 = np.minimum(np.arange(T) + 2, T - 1)
    common_market = market[t1, 1] + market[t2, 0]
    common_sector = sectors[t1, 1] + sectors[t2, 0]
    pair_a = rng.integers(0, n, (T, _PANEL_CALIBRATION_PAIRS))
    pair_b = (pair_a + rng.integers(1, n, pair_a.shape)) % n if n > 1 else pair_a
    days = np.arange(T)[:, None]
    mu, var = [], []
    for i in (pair_a, pair_b):
        mu.append(beta[i] * common_market[:, None] + common_sector[days, sector[i]])
        var.append((1 - q) * h_idio[t1[:, None], i] + q * h_idio[t2[:, None], i])
    valid = (first[pair_a] <= days) & (first[pair_b] <= days)
    k = _signal_loading(ic, mu[0] - mu[1], var[0] + var[1], valid)
    del h_idio, mu, var, pair_a, pair_b, valid

    # Pass 2: prices, path by path through the limits, ticks, suspensions and delistings.
    names = ("open", "high", "low", "close", "preclose", "volume", "amount")
    bars = {name: np.empty((T, n)) for name in names}
    signal = np.empty((T, n))
    listed = np.zeros((T, n), dtype=bool)
    suspended = np.zeros((T, n), dtype=bool)
    is_st = (np.arange(T)[:, None] >= st_start) & (np.arange(T)[:, None] < st_end)
    st_limit = dates < MAIN_BOARD_ST_CHANGE
    close, planted = price0.copy(), np.zeros(n)
    pending = np.zeros(n)  # moves missed while suspended, priced in at the reopening
    spell = np.zeros(n, dtype=np.int64)
    below = np.zeros(n, dtype=np.int64)
    delisted = np.zeros(n, dtype=bool)
    volume_factor = 0.0
    for t in range(T):
        live = (first <= t) & ~delisted
        starts = (rng.random(n) < PANEL_SUSPENSION_RATE / PANEL_SUSPENSION_SPELL) & (first < t) & (spell == 0)
        spell[starts] = rng.geometric(1.0 / PANEL_SUSPENSION_SPELL, int(starts.sum()))
        halt = live & (spell > 0)
        spell = np.maximum(spell - 1, 0)
        s = rng.standard_normal(n)
        noise = rng.standard_normal((3, n))
        volume_factor = 0.95 * volume_factor + 0.05 * rng.standard_normal()

        pre = close
        lim = np.where(is_st[t] & st_limit[t], 0.05, 0.10)
        up, down = round_price(pre * (1 + lim)), np.maximum(round_price(pre * (1 - lim)), 0.01)
        open_ = np.clip(round_price(pre * np.exp(overnight[t] + pending)), down, up)
        close_ = np.clip(round_price(open_ * np.exp(intraday[t] + planted)), down, up)
        top, bottom = np.maximum(open_, close_), np.minimum(open_, close_)
        high = np.clip(round_price(top * np.exp(wick * np.abs(noise[0]))), top, up)
        low = np.clip(round_price(bottom * np.exp(-wick * np.abs(noise[1]))), down, bottom)
        for arr in (open_, close_, high, low):
            arr[halt] = pre[halt]
        volume = np.round(np.exp(log_base_volume + PANEL_VOLUME_SIGNAL * s
                                 + PANEL_VOLUME_NOISE * noise[2] + volume_factor))
        volume[halt] = 0.0
        amount = np.round(volume * (open_ + high + low + close_) / 4, 2)

        pending = np.where(halt, pending + overnight[t] + intraday[t], 0.0)
        trades = live & ~halt
        planted = np.where(trades, k[t] * s, 0.0)
        for name, arr in zip(names, (open_, high, low, close_, pre, volume, amount), strict=True):
            bars[name][t] = arr  # cells of stocks not listed are never read
        signal[t] = np.where(trades, s, np.nan)
        listed[t], suspended[t] = live, halt
        close = np.where(live, close_, close)
        below = np.where(live & (close < PANEL_DELIST_BELOW), below + 1, np.where(live, 0, below))
        delisted |= below >= PANEL_DELIST_DAYS
    del overnight, intraday

    # Fundamentals per quarter: eps (negative for loss makers and ST stocks), book and sales.
    n_q = T // PANEL_QUARTER + 1
    eps0 = price0 / np.exp(rng.normal(np.log(20.0), 0.6, n))
    eps0 = np.where((rng.random(n) < 0.12) | has_st, -eps0 / 3, eps0)
    flips = np.cumsum(rng.random((n_q, n)) < 0.03, axis=0) % 2
    eps = eps0 * np.exp(np.cumsum(rng.normal(0, 0.15, (n_q, n)), axis=0)) * np.where(flips, -1.0, 1.0)
    bps = price0 / np.exp(rng.normal(np.log(2.0), 0.5, n)) * np.exp(
        np.cumsum(rng.normal(0.01, 0.03, (n_q, n)), axis=0))
    sps = price0 / np.exp(rng.normal(np.log(2.5), 0.8, n)) * np.exp(
        np.cumsum(rng.normal(0.01, 0.05, (n_q, n)), axis=0))
    quarter = np.arange(T) // PANEL_QUARTER
    blank = np.zeros((3, T, n), dtype=bool)  # empty valuation cells: ~0.2% at random
    blank.flat[rng.integers(0, blank.size, rng.binomial(blank.size, 0.002))] = True
    blank |= ((np.arange(T)[:, None] - first) < 20)[None] & late[None]  # no report yet

    per_stock = {name: np.ascontiguousarray(bars.pop(name).T) for name in names}
    is_st_t, suspended_t, listed_t = (np.ascontiguousarray(a.T) for a in (is_st, suspended, listed))
    blank = np.ascontiguousarray(blank.transpose(0, 2, 1))  # [3 x stocks x days]
    per_share = [np.ascontiguousarray(a.T) for a in (eps, bps, sps)]  # [stocks x quarters]
    frames = {}
    for i, code in enumerate(codes):
        rows = np.flatnonzero(listed_t[i])
        lo, hi = rows[0], rows[-1] + 1
        c = {name: per_stock[name][i, lo:hi] for name in names}
        halted = suspended_t[i, lo:hi]
        columns = [c["open"], c["high"], c["low"], c["close"], c["preclose"], c["volume"], c["amount"],
                   np.full(hi - lo, 3.0),  # adjust_flag: unadjusted (there are no corporate actions)
                   np.round(c["volume"] / float_shares[i] * 100, 6),  # turnover, percent
                   (~halted).astype(float),  # trade_status
                   np.round((c["close"] / c["preclose"] - 1) * 100, 6),  # pct_chg
                   is_st_t[i, lo:hi].astype(float)]
        for j in range(3):  # pe_ttm, pb_mrq, ps_ttm
            ratio = np.round(c["close"] / per_share[j][i, quarter[lo:hi]], 6)
            ratio[blank[j, i, lo:hi]] = np.nan
            columns.append(ratio)
        frame = pd.DataFrame(np.vstack(columns).T, index=dates[lo:hi], columns=_PANEL_FLOATS, copy=False)
        frame.insert(0, "code", code)
        # as the loader derives it from a baostock file's turn: the frame a written file loads to
        frame["float_mv"] = float_market_value(frame["volume"], frame["close"], frame["turnover"])
        frame["suspended"] = halted | (c["volume"] == 0)
        frames[code] = frame
    if not return_signal:
        return frames
    days = listed.any(axis=1)
    return frames, pd.DataFrame(signal[days], index=dates[days], columns=pd.Index(codes, name="code"))


_BAOSTOCK_NAMES = {
    "open": "open", "high": "high", "low": "low", "close": "close", "preclose": "preclose",
    "volume": "volume", "amount": "amount", "adjust_flag": "adjustflag", "turnover": "turn",
    "trade_status": "tradestatus", "pct_chg": "pctChg", "is_st": "isST", "pe_ttm": "peTTM",
    "pb_mrq": "pbMRQ", "ps_ttm": "psTTM",
}


def write_synthetic_panel(folder: str | Path, **kwargs) -> list[Path]:
    """Write :func:`synthetic_panel` (``kwargs`` are its arguments) as baostock-format CSVs,
    ``folder/syn.000001.csv`` ..., which :func:`forecaster.data.load_dir` reads back as the same
    frames (empty cells for missing valuation ratios).

    Returns:
        The paths written, in code order.
    """
    frames = synthetic_panel(**{**kwargs, "return_signal": False})
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for code, frame in frames.items():
        out = frame.drop(columns="suspended").rename(columns=_BAOSTOCK_NAMES)
        for col in ("volume", "adjustflag", "tradestatus", "isST"):
            out[col] = out[col].astype(np.int64)
        out.insert(0, "date", frame.index.strftime("%Y-%m-%d"))
        out = out[["date", "code", *[c for c in _BAOSTOCK_NAMES.values()]]]
        path = folder / f"{code}.csv"
        out.to_csv(path, index=False)
        paths.append(path)
    return paths
