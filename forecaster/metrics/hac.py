"""Tests of forecasts against each other and of a mean: Diebold-Mariano (HAC variance with
``h - 1`` lags, Harvey-Leybourne-Newbold small-sample correction) and the Newey-West HAC test
behind the paired IC-difference test; plus the alignment helpers they share.

Missing values: pairs where either side is NaN are dropped (and counted) rather than propagated,
because walk-forward folds and stock panels routinely have holes.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

# --------------------------------------------------------------------------------------------------
# alignment helpers


def to_1d(x, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


def align_pair(first, second, names: tuple[str, str], extra=None):
    """Align two 1-D inputs (and an optional third aligned like ``first``) and drop NaN pairs.

    Two Series are aligned on their index (outer join, so a date present in only one of them
    counts as a dropped pair); anything else is aligned by position. ``extra`` follows ``first``:
    a Series is aligned on its index, an array by position with ``first``. NaNs in ``extra`` do
    not drop rows.

    Returns ``(a, b, extra_or_None, n_dropped)`` as float arrays.
    """
    both_series = isinstance(first, pd.Series) and isinstance(second, pd.Series)
    if both_series and not first.index.equals(second.index):
        for s, name in ((first, names[0]), (second, names[1])):
            if not s.index.is_unique:
                raise ValueError(f"{name} has a duplicated index; cannot align on it")
        index = first.index.union(second.index)
        a = first.reindex(index).to_numpy(dtype=float)
        b = second.reindex(index).to_numpy(dtype=float)
        if extra is not None:
            if not isinstance(extra, pd.Series):
                # positional with `first`: give it first's index before re-indexing
                extra = pd.Series(to_1d(extra, "extra"), index=first.index)
            extra = extra.reindex(index)
    else:
        a, b = to_1d(first, names[0]), to_1d(second, names[1])
        if len(a) != len(b):
            raise ValueError(f"{names[0]} and {names[1]} differ in length: {len(a)} != {len(b)}")
        index = first.index if isinstance(first, pd.Series) else None
        if isinstance(extra, pd.Series) and index is not None and not extra.index.equals(index):
            extra = extra.reindex(index)
    if extra is not None:
        extra = to_1d(extra, "extra")
        if len(extra) != len(a):
            raise ValueError(f"extra input has length {len(extra)}, expected {len(a)}")
    keep = ~(np.isnan(a) | np.isnan(b))
    n_dropped = int((~keep).sum())
    return a[keep], b[keep], (None if extra is None else extra[keep]), n_dropped


def corr(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation; NaN (silently) when n < 2 or either input is constant."""
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    xc, yc = x - x.mean(), y - y.mean()
    r = float(np.dot(xc, yc) / math.sqrt(np.dot(xc, xc) * np.dot(yc, yc)))
    return float(np.clip(r, -1.0, 1.0))


# --------------------------------------------------------------------------------------------------
# Diebold-Mariano


def hln_factor(n: int, horizon: int) -> float:
    """Harvey-Leybourne-Newbold (1997) factor ``sqrt((n + 1 - 2h + h(h-1)/n) / n)``."""
    arg = (n + 1 - 2 * horizon + horizon * (horizon - 1) / n) / n
    return math.sqrt(arg) if arg > 0 else math.nan


def _long_run_variance(d: np.ndarray, lags: int, kernel: str = "bartlett") -> float:
    """HAC long-run variance of a 1-D series ``d`` (no NaNs, order = time).

    ``gamma_k = sum_t (d_t - dbar)(d_{t-k} - dbar) / n`` for ``k = 0..lags`` and
    ``V = gamma_0 + 2 sum_{k=1}^{lags} w_k gamma_k``, with Bartlett (Newey-West) weights
    ``w_k = 1 - k / (lags + 1)`` or rectangular weights ``w_k = 1`` (the DM kernel).
    ``V / n`` is the HAC variance of the mean of ``d`` (statsmodels' ``cov_type="HAC"`` on a
    constant with ``use_correction=False``). Bartlett's V is never negative; the rectangular one
    can be.
    """
    if kernel not in ("bartlett", "rectangular"):
        raise ValueError(f"kernel must be 'bartlett' or 'rectangular', got {kernel!r}")
    n = len(d)
    u = d - d.mean()
    gammas = [float(np.dot(u[k:], u[: n - k])) / n for k in range(int(lags) + 1)]
    if kernel == "rectangular":
        return gammas[0] + 2.0 * sum(gammas[1:])
    return gammas[0] + 2.0 * sum((1.0 - k / (lags + 1)) * g for k, g in enumerate(gammas[1:], start=1))


def dm_from_differential(d, horizon: int, use_correction: bool = True) -> dict[str, float]:
    """DM test on a loss-differential series ``d`` (NaNs dropped, order = time)."""
    if int(horizon) != horizon or horizon < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    horizon = int(horizon)
    d = to_1d(d, "d")
    d = d[~np.isnan(d)]
    n = len(d)
    out = {"dm_stat": math.nan, "p_value": math.nan, "p_value_better": math.nan,
           "mean_loss_diff": float(d.mean()) if n else math.nan, "n": n, "horizon": horizon}
    # need the h-1 autocovariances and a non-degenerate d (identical forecasts give d == 0)
    if n < 2 or horizon >= n or np.ptp(d) == 0:
        return out
    # autocovariances divided by n (DM 1995), rectangular weights over lags 1..h-1
    v = _long_run_variance(d, horizon - 1, kernel="rectangular")
    if not v > 0:
        return out
    stat = float(d.mean() / math.sqrt(v / n))
    if use_correction:
        factor = hln_factor(n, horizon)
        if math.isnan(factor):
            return out
        stat *= factor
        dist = stats.t(df=n - 1)
    else:
        dist = stats.norm()  # the original DM (1995) asymptotic normal test
    out["dm_stat"] = stat
    out["p_value"] = float(2.0 * dist.sf(abs(stat)))
    out["p_value_better"] = float(dist.cdf(stat))
    return out


def diebold_mariano(e_model, e_benchmark, horizon: int = 1, power: float = 2, *,
                    use_correction: bool = True) -> dict[str, float]:
    """Diebold-Mariano test of equal predictive accuracy of two forecasts of the same targets.

    Args:
        e_model, e_benchmark: forecast errors, 1-D arrays (by position) or Series (aligned on
            the index); pairs with a NaN are dropped.
        horizon: forecast horizon h; the long-run variance uses lags 1..h-1.
        power: loss ``|e|^power`` (2 = squared error).
        use_correction: apply the Harvey-Leybourne-Newbold small-sample correction and Student-t
            with n-1 df (default). False gives the original DM statistic with normal p-values.

    Formulas:
        ``d_t = |e_model_t|^p - |e_benchmark_t|^p``, ``gamma_k = sum_t (d_t - dbar)(d_{t-k} - dbar) / n``,
        ``V = gamma_0 + 2 sum_{k=1}^{h-1} gamma_k``, ``DM = dbar / sqrt(V / n)``;
        corrected ``DM * sqrt((n + 1 - 2h + h(h-1)/n) / n)``.

    Returns:
        ``dm_stat`` (negative = model has the lower loss), ``p_value`` (two-sided),
        ``p_value_better`` (one-sided, H1: model better, = CDF(stat)), ``mean_loss_diff``,
        ``n``, ``horizon``. NaN statistic and p-values when V <= 0 (e.g. identical forecasts).
    """
    a, b, _, _ = align_pair(e_model, e_benchmark, ("e_model", "e_benchmark"))
    d = np.abs(a) ** power - np.abs(b) ** power
    return dm_from_differential(d, horizon, use_correction=use_correction)



def newey_west_lags(n: int, horizon: int = 1) -> int:
    """Default HAC lags: ``max(horizon - 1, floor(4 (n / 100)^(2/9)))``.

    The Newey-West (1994) rule of thumb, raised to ``h - 1`` because overlapping ``h``-day labels
    make consecutive daily statistics MA(h-1) even without any predictability.
    """
    if int(horizon) != horizon or horizon < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    return max(int(horizon) - 1, math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0))) if n > 0 else int(horizon) - 1


def hac_mean_test(d: np.ndarray, lags: int | None, horizon: int) -> dict[str, float]:
    """Newey-West (Bartlett) t-test of ``mean(d) == 0``; ``d`` without NaNs, in time order.

    Returns ``mean, t_stat, p_value`` (two-sided normal), ``p_value_greater`` (H1: mean > 0),
    ``n``, ``lags``. Fewer than 3 observations, or a zero variance (e.g. ``d`` constant): NaN
    statistic and p-values. Lags are capped at ``n - 1``.
    """
    n = len(d)
    if lags is None:
        lags = newey_west_lags(n, horizon)
    elif int(lags) != lags or lags < 0:
        raise ValueError(f"lags must be a non-negative integer or None, got {lags!r}")
    lags = int(min(int(lags), max(n - 1, 0)))
    out = {"mean": float(d.mean()) if n else math.nan, "t_stat": math.nan, "p_value": math.nan,
           "p_value_greater": math.nan, "n": n, "lags": lags}
    # a constant d (up to rounding) has no variance: the t-statistic is undefined, not huge
    if n < 3 or np.ptp(d) <= 8 * np.finfo(float).eps * float(np.abs(d).max()):
        return out
    v = _long_run_variance(d, lags, kernel="bartlett")
    if not v > 0:
        return out
    t = float(d.mean() / math.sqrt(v / n))
    out.update(t_stat=t, p_value=float(2.0 * stats.norm.sf(abs(t))), p_value_greater=float(stats.norm.sf(t)))
    return out




def holm(p_values) -> np.ndarray:
    """Holm's step-down adjustment of a family of p-values (NaN kept as NaN, left out of the
    family): the adjusted ``p_(i)`` of the ``i``-th smallest of ``m`` is the running maximum of
    ``(m - i + 1) p_(i)``, capped at 1. Rejecting where the adjusted value is below ``alpha``
    holds the family-wise error rate at ``alpha``. Returns an array in the input's order."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    if not len(ok):
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    scaled = (m - np.arange(m)) * p[order]
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out
