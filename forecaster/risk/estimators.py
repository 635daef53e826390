"""The estimators of one risk-model day, pure functions of a trailing window of rows (the
last row is the day itself): exponential weights, the factor covariance (EWMA less the
estimates' noise, Newey-West, shrinkage of the correlations toward zero), statistical factors
(principal components of residual returns) and specific variances (EWMA, shrunk toward the
cross-sectional mean, floored)."""

from __future__ import annotations

import numpy as np
from scipy.linalg import eigh
from scipy.sparse.linalg import ArpackNoConvergence, eigsh

SPECIFIC_FLOOR = 0.01  # specific variance floor, as a fraction of the day's median
MIN_EIGEN = 1e-12  # factor covariance eigenvalues are clipped at this fraction of the largest


def ew_weights(n: int, half_life: float) -> np.ndarray:
    """``[n]`` weights ``0.5 ** ((n - 1 - s) / half_life)``: 1 on the last row, halving every
    ``half_life`` rows back."""
    return age_weights(np.arange(n - 1, -1, -1), half_life)


def age_weights(age: np.ndarray, half_life: float) -> np.ndarray:
    """Weights ``0.5 ** (age / half_life)`` of rows ``age`` days old."""
    return 0.5 ** (np.asarray(age, dtype=float) / half_life)


def _lag_product(f: np.ndarray, w: np.ndarray, lag: int) -> np.ndarray:
    """``[k, k]`` ``sum_s w_s f_s f_{s-lag}'`` over the rows ``s >= lag``."""
    return (f[lag:] * w[lag:, None]).T @ f[:-lag] if lag else (f * w[:, None]).T @ f


def shrinkage_intensity(f: np.ndarray, w: np.ndarray, cov: np.ndarray) -> float:
    """Ledoit-Wolf intensity (Schaefer-Strimmer's form for a diagonal target) of the
    off-diagonal entries toward zero: ``sum_{i != j} Var(s_ij) / sum_{i != j} s_ij**2``, where
    ``Var(s_ij)`` is the variance of the weighted mean ``s_ij = sum_s w_s f_si f_sj``
    (``sum w = 1``) estimated from the rows; clipped to ``[0, 1]``."""
    k = cov.shape[0]
    if k < 2:
        return 0.0
    off = ~np.eye(k, dtype=bool)
    products = f[:, :, None] * f[:, None, :]  # [n, k, k]
    var = np.einsum("s,sij->ij", w * w, (products - cov) ** 2)
    denominator = float((cov[off] ** 2).sum())
    if denominator <= 0:
        return 1.0
    return float(np.clip(var[off].sum() / denominator, 0.0, 1.0))


def factor_covariance(f: np.ndarray, half_life: float, lags: int, shrinkage: float | None,
                      noise: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """``([k, k] covariance, intensity)`` of the factor returns ``f`` ``[n, k]`` (rows oldest
    first; a row with a NaN is left out): the EWMA second moment about zero (daily means are
    noise beside daily volatility) less ``noise`` ``[k, k]`` (the covariance of the estimates'
    errors, which the estimated factor returns carry on top of the factors'; weighted alike by
    the caller), Newey-West with Bartlett weights over ``lags`` lags, the
    off-diagonal entries shrunk toward zero by ``shrinkage`` (or the intensity
    :func:`shrinkage_intensity` estimates when None), symmetrised and its eigenvalues clipped at
    :data:`MIN_EIGEN` times the largest (positive semi-definite)."""
    n, k = f.shape
    ok = np.isfinite(f).all(axis=1)
    w = ew_weights(n, half_life) * ok
    if w.sum() <= 0:
        return np.full((k, k), np.nan), np.nan
    w = w / w.sum()
    f = np.where(ok[:, None], f, 0.0)
    base = _lag_product(f, w, 0)
    if noise is not None:
        base = base - noise
    cov = base.copy()
    for lag in range(1, min(lags, n - 1) + 1):
        c = _lag_product(f, w, lag)
        cov += (1.0 - lag / (lags + 1.0)) * (c + c.T)
    delta = shrinkage_intensity(f[ok], w[ok], base) if shrinkage is None else float(shrinkage)
    cov = (1.0 - delta) * cov + delta * np.diag(np.diag(cov))
    cov = (cov + cov.T) / 2
    values, vectors = np.linalg.eigh(cov)
    floor = MIN_EIGEN * max(values.max(), 0.0)
    if values.min() < floor:
        cov = (vectors * np.maximum(values, floor)) @ vectors.T
        cov = (cov + cov.T) / 2
    return cov, delta


def statistical_factors(residuals: np.ndarray, n_factors: int,
                        eligible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Principal components of the residual returns ``[n_days, n]`` (rows oldest first):
    ``(loadings [n, n_factors], factor returns [n_days, n_factors])``.

    The ``eligible`` stocks' columns, demeaned (over their finite rows) with NaN then 0, give
    the components (by the eigenvectors of the ``n_days x n_days`` Gram matrix). Loadings are
    scaled to a root mean square of 1 over the eligible stocks, signed so their sum is not
    negative, and 0 for the other stocks; factor returns are the eligible residuals projected on
    them (least squares: ``E B / n_eligible``). Fewer components where the window is too short
    or too few stocks are eligible (the missing columns are 0)."""
    n_days, n = residuals.shape
    loadings = np.zeros((n, n_factors))
    returns = np.zeros((n_days, n_factors))
    m = int(eligible.sum())
    p = min(n_factors, m - 1, n_days - 1)
    if p <= 0:
        return loadings, returns
    e = residuals[:, eligible]  # a copy: demeaned in place
    missing = ~np.isfinite(e)
    e[missing] = 0.0
    e -= e.sum(axis=0) / np.maximum(len(e) - missing.sum(axis=0), 1)  # each column's mean over its values
    e[missing] = 0.0
    values, vectors = top_eigen(e @ e.T, p)
    values, vectors = values[::-1], vectors[:, ::-1]
    keep = values > MIN_EIGEN * max(values[0], 0.0)
    values, vectors = values[keep], vectors[:, keep]
    p = len(values)
    b = (e.T @ vectors) / np.sqrt(values) * np.sqrt(m)  # [m, p], RMS 1
    b *= np.where(b.sum(axis=0) < 0, -1.0, 1.0)
    loadings[eligible, :p] = b
    returns[:, :p] = e @ b / m
    return loadings, returns


def top_eigen(gram: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``p`` largest eigenvalues ``[p]`` (rising) and eigenvectors ``[n, p]`` of the symmetric
    ``gram`` ``[n, n]``: Lanczos (ARPACK, a fixed start: the same answer each run) where ``p`` is
    small beside ``n`` (it needs a few products, not the whole reduction LAPACK makes), LAPACK
    otherwise or when Lanczos does not converge."""
    n = len(gram)
    if n >= 20 and 4 * p < n:
        start = np.random.default_rng(0).standard_normal(n)
        try:
            values, vectors = eigsh(gram, k=p, which="LA", v0=start)
            order = np.argsort(values)
            return values[order], vectors[:, order]
        except ArpackNoConvergence:
            pass
    return eigh(gram, subset_by_index=[n - p, n - 1])


def specific_variance(residuals: np.ndarray, weights: np.ndarray, prior_days: float) -> np.ndarray:
    """``[n]`` daily specific variances from residuals ``[n_days, n]`` (NaN skipped) and the
    rows' ``weights`` ``[n_days]`` (:func:`ew_weights` of their ages): the weighted mean square
    (about zero), shrunk toward the cross-sectional mean of the stocks with a
    value by ``n_eff / (n_eff + prior_days)`` (``n_eff`` the stock's effective number of
    observations, ``(sum w)**2 / sum w**2``; a stock without any takes the mean), floored at
    :data:`SPECIFIC_FLOOR` times the day's median."""
    n_days, n = residuals.shape
    seen = np.isfinite(residuals)
    w = np.asarray(weights, dtype=float)[:, None] * seen
    total = w.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = (w * np.where(seen, residuals, 0.0) ** 2).sum(axis=0) / total
        n_eff = total ** 2 / (w * w).sum(axis=0)
    has = total > 0
    if not has.any():
        return np.full(n, np.nan)
    mean = float(raw[has].mean())
    keep = np.where(has, n_eff / (n_eff + prior_days), 0.0)
    out = keep * np.where(has, raw, 0.0) + (1.0 - keep) * mean
    floor = SPECIFIC_FLOOR * float(np.median(out))
    return np.maximum(out, max(floor, np.finfo(float).tiny))
