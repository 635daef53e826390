"""Style exposures of a point-in-time risk model (Barra CNE5's styles, reduced to what daily
bars and a market value allow), each known at the day's close.

Every raw exposure of day ``t`` is computed from rows ``<= t`` only (running sums along the
time axis, no statistic over the whole panel), then standardised across that day's universe.
The windows:

* ``size``: log of the day's market value (yuan). Without a market value the proxy is the log
  of the 20-day mean traded value (close x volume), which ranks stocks much as their size does
  but also carries their liquidity.
* ``beta``: slope of the stock's daily returns on the market's over the last 252 days,
  exponentially weighted with a half-life of 63 days (a regression with an intercept). The
  market of day ``t`` is the universe of day ``t - 1`` weighted by its market value of day
  ``t - 1`` (equal weights without a market value). At least 63 returns in the window.
* ``residual_volatility``: the standard deviation of that regression's residuals (same window,
  weights and minimum). Not orthogonalised to beta or size.
* ``momentum``: the log return over days ``t-252 .. t-21`` (the sum of ``log(1 + r)`` over rows
  ``t-251 .. t-21``), at least 63 returns in those 231 rows; a day without a return counts as
  no price change.
* ``liquidity``: log of the 21-day mean turnover (``volume * close / market_value``); without a
  market value the log of the 21-day mean traded value (``volume * close``), which is then close
  to the size proxy. At least 10 days with a value in the 21.
* ``reversal``: the log return of the last 5 days (sum of ``log(1 + r)`` over rows
  ``t-4 .. t``).

A stock without a bar on day ``t`` (close not finite, or volume not positive: suspended) has
NaN exposures that day. Standardisation, per day and style: over the universe's stocks with a
finite value, z-score (market-value weighted mean, equal-weighted population sd), clip at
+-3, and z-score again so the weighted mean is 0 and the sd 1. Stocks outside the universe keep
an exposure on the universe's scale (clipped alike).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

STYLES = ("size", "beta", "momentum", "residual_volatility", "liquidity", "reversal")

REGRESSION_WINDOW = 252  # days of beta and residual volatility
REGRESSION_HALF_LIFE = 63
MIN_REGRESSION_DAYS = 63  # returns needed in the window (and in momentum's)
MOMENTUM_WINDOW = 252  # momentum: log return over rows t-251 .. t-LAG
MOMENTUM_LAG = 21
LIQUIDITY_WINDOW = 21
SIZE_PROXY_WINDOW = 20
MIN_VALUE_DAYS = 10  # days with a value in the liquidity (and size-proxy) window
REVERSAL_WINDOW = 5
WINSOR = 3.0
MIN_UNIVERSE = 3  # stocks with a value a day's standardisation needs
BLOCK = 256  # stocks (days) computed (standardised) at a time: bounds the working memory


def _check_panel(returns, close, volume, market_value, universe) -> tuple[int, int]:
    shape = np.shape(returns)
    if len(shape) != 2:
        raise ValueError(f"returns must be [days, stocks], got shape {shape}")
    for name, value in (("close", close), ("volume", volume), ("market_value", market_value),
                        ("universe", universe)):
        if value is not None and np.shape(value) != shape:
            raise ValueError(f"{name} must have the shape of returns {shape}, got {np.shape(value)}")
    return shape


def _ew_sum(x: np.ndarray, half_life: float, window: int) -> np.ndarray:
    """``[T, N]``: ``y[t] = sum_{j < window} decay**j * x[t - j]`` with ``decay = 0.5 **
    (1 / half_life)``, as the recursion ``y[t] = decay * y[t-1] + x[t]`` less the term that left
    the window (causal: row ``t`` reads rows ``<= t``)."""
    decay = 0.5 ** (1.0 / half_life)
    full = lfilter([1.0], [1.0, -decay], x, axis=0)
    out = full.copy()
    out[window:] -= decay ** window * full[:-window]
    return out


def _rolling_sum(x: np.ndarray, window: int) -> np.ndarray:
    """``[T, N]`` sums of the last ``window`` rows (fewer at the start), by a running sum."""
    total = np.cumsum(x, axis=0)
    out = total.copy()
    out[window:] -= total[:-window]
    return out


def market_returns(returns: np.ndarray, market_value: np.ndarray | None,
                   universe: np.ndarray) -> np.ndarray:
    """``[T]`` the market's daily return: day ``t``'s returns of the universe of day ``t - 1``,
    weighted by market value of day ``t - 1`` (equal weights when ``market_value`` is None);
    NaN on day 0 and on days without such a stock."""
    prev = np.zeros_like(universe)
    prev[1:] = universe[:-1]
    if market_value is None:
        weight = prev.astype(float)
    else:
        weight = np.zeros(returns.shape)
        weight[1:] = np.where(prev[1:] & (market_value[:-1] > 0), market_value[:-1], 0.0)
    weight = np.where(np.isfinite(returns), np.nan_to_num(weight), 0.0)
    total = weight.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (weight * np.nan_to_num(returns)).sum(axis=1) / total
    return np.where(total > 0, out, np.nan)


def _beta_and_residual_vol(returns: np.ndarray, market: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``[T, N]`` exponentially weighted beta on ``market`` and residual sd (NaN below the
    minimum number of returns)."""
    seen = np.isfinite(returns) & np.isfinite(market)[:, None]
    y = np.where(seen, returns, 0.0)
    x = np.where(seen, np.nan_to_num(market)[:, None], 0.0)
    sums = {name: _ew_sum(v, REGRESSION_HALF_LIFE, REGRESSION_WINDOW)
            for name, v in (("w", seen.astype(float)), ("x", x), ("y", y), ("xx", x * x),
                            ("xy", x * y), ("yy", y * y))}
    count = _rolling_sum(seen.astype(float), REGRESSION_WINDOW)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = sums["w"]
        mx, my = sums["x"] / w, sums["y"] / w
        var_x = sums["xx"] / w - mx * mx
        cov = sums["xy"] / w - mx * my
        var_y = sums["yy"] / w - my * my
        beta = cov / var_x
        res_var = np.maximum(var_y - beta * cov, 0.0)
    enough = (count >= MIN_REGRESSION_DAYS) & (var_x > 0)
    return np.where(enough, beta, np.nan), np.where(enough, np.sqrt(res_var), np.nan)


def _mean_of_last(values: np.ndarray, window: int) -> np.ndarray:
    """``[T, N]`` mean of the finite values of the last ``window`` rows (NaN below
    :data:`MIN_VALUE_DAYS` of them)."""
    seen = np.isfinite(values)
    total = _rolling_sum(np.where(seen, values, 0.0), window)
    count = _rolling_sum(seen.astype(float), window)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count >= MIN_VALUE_DAYS, total / count, np.nan)


def _log_positive(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(x > 0, np.log(np.where(x > 0, x, 1.0)), np.nan)


def raw_exposures(returns: np.ndarray, close: np.ndarray, volume: np.ndarray,
                  market_value: np.ndarray | None, market: np.ndarray) -> np.ndarray:
    """``[T, N, len(STYLES)]`` the styles before standardisation (see the module's windows),
    NaN on days without a bar; ``market`` ``[T]`` is the market's return
    (:func:`market_returns`). Each stock's column reads that stock's rows (and the market's)
    only."""
    returns = np.asarray(returns, dtype=float)
    close = np.asarray(close, dtype=float)
    volume = np.asarray(volume, dtype=float)
    bar = np.isfinite(close) & (np.nan_to_num(volume) > 0)
    out = np.full((*returns.shape, len(STYLES)), np.nan)
    traded = np.where(np.isfinite(close) & np.isfinite(volume), close * volume, np.nan)
    if market_value is None:
        out[..., 0] = _log_positive(_mean_of_last(traded, SIZE_PROXY_WINDOW))
        out[..., 4] = _log_positive(_mean_of_last(traded, LIQUIDITY_WINDOW))
    else:
        market_value = np.asarray(market_value, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            turnover = np.where(market_value > 0, traded / market_value, np.nan)
        out[..., 0] = _log_positive(market_value)
        out[..., 4] = _log_positive(_mean_of_last(turnover, LIQUIDITY_WINDOW))
    out[..., 1], out[..., 3] = _beta_and_residual_vol(returns, market)
    with np.errstate(invalid="ignore"):
        log_r = np.log1p(returns)
    seen = np.isfinite(log_r)
    log_r = np.where(seen, log_r, 0.0)
    span = MOMENTUM_WINDOW - MOMENTUM_LAG
    if len(returns) > MOMENTUM_LAG:
        count = _rolling_sum(seen.astype(float), span)[:-MOMENTUM_LAG]
        momentum = _rolling_sum(log_r, span)[:-MOMENTUM_LAG]
        out[MOMENTUM_LAG:, :, 2] = np.where(count >= MIN_REGRESSION_DAYS, momentum, np.nan)
    out[..., 5] = _rolling_sum(log_r, REVERSAL_WINDOW)
    out[~bar] = np.nan
    return out


def standardise(x: np.ndarray, universe: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
    """``x`` (``[T, N]`` or ``[T, N, S]``) z-scored per day (and style) over the universe's
    (``[T, N]``) finite values: ``weight``-weighted mean (``[T, N]``; equal without weights or
    where a day has none), equal-weighted population sd; clipped at +-:data:`WINSOR` and
    z-scored again. NaN where a day has fewer than :data:`MIN_UNIVERSE` such stocks."""
    squeeze = x.ndim == 2
    v = np.ascontiguousarray(np.moveaxis(x[..., None] if squeeze else x, 2, 1))  # [T, S, N]
    member = np.asarray(universe, dtype=bool)[:, None, :] & np.isfinite(v)
    count = member.sum(axis=2, keepdims=True)
    equal = member.astype(float)
    if weight is None:
        w = equal
    else:
        w_in = np.nan_to_num(np.asarray(weight, dtype=float))[:, None, :]
        w = np.where(member & (w_in > 0), w_in, 0.0)
        w = np.where(w.sum(axis=2, keepdims=True) > 0, w, equal)
    w /= np.maximum(w.sum(axis=2, keepdims=True), np.finfo(float).tiny)
    valid = count >= MIN_UNIVERSE

    def zscore(raw):
        values = np.where(member, raw, 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            centre = np.einsum("tsn,tsn->ts", w, values)[..., None]
            dev = np.where(member, raw - values.sum(axis=2, keepdims=True) / count, 0.0)
            sd = np.sqrt(np.einsum("tsn,tsn->ts", dev, dev)[..., None] / count)
            return np.where(valid & (sd > 0), (raw - centre) / sd, np.nan)

    out = np.moveaxis(zscore(np.clip(zscore(v), -WINSOR, WINSOR)), 1, 2)
    return out[..., 0] if squeeze else out


def style_exposures(returns: np.ndarray, close: np.ndarray, volume: np.ndarray,
                    market_value: np.ndarray | None, universe: np.ndarray | None = None) -> np.ndarray:
    """``[days, stocks, len(STYLES)]`` style exposures known at each day's close (day ``t``
    reads rows ``<= t`` only), standardised across the day's universe.

    Args:
        returns: ``[days, stocks]`` simple daily close-to-close returns (NaN: no bar).
        close, volume: ``[days, stocks]`` close price and volume (traded value = close x volume).
        market_value: ``[days, stocks]`` (float) market value in yuan, or None. None changes two
            styles: ``size`` is then the log of the 20-day mean traded value (a proxy), and
            ``liquidity`` the log of the 21-day mean traded value instead of turnover; the
            market of beta and the standardisation's mean are equal-weighted.
        universe: ``[days, stocks]`` bool, the stocks each day's standardisation (and market)
            is over; None: every stock with a bar.

    The windows and minimum histories are the module's (:mod:`forecaster.risk.exposures`).
    Per day and style: winsorised at +-3 sd, mean 0 over the universe (weighted by market value
    where given, else equal), population sd 1; NaN where the stock has too little history or no
    bar.
    """
    _check_panel(returns, close, volume, market_value, universe)
    returns = np.asarray(returns, dtype=float)
    close = np.asarray(close, dtype=float)
    volume = np.asarray(volume, dtype=float)
    market_value = None if market_value is None else np.asarray(market_value, dtype=float)
    universe = (np.isfinite(close) & (np.nan_to_num(volume) > 0) if universe is None
                else np.asarray(universe, dtype=bool))
    n_days, n_stocks = returns.shape
    market = market_returns(returns, market_value, universe)
    out = np.empty((n_days, n_stocks, len(STYLES)))
    for lo in range(0, n_stocks, BLOCK):  # stock blocks: each column reads its own rows only
        cols = slice(lo, lo + BLOCK)
        out[:, cols] = raw_exposures(returns[:, cols], close[:, cols], volume[:, cols],
                                     None if market_value is None else market_value[:, cols], market)
    for lo in range(0, n_days, BLOCK):  # day blocks: each day standardised on its own
        rows = slice(lo, lo + BLOCK)
        out[rows] = standardise(out[rows], universe[rows],
                                None if market_value is None else market_value[rows])
    return out
