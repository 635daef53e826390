"""Checks of a risk model's forecasts: the bias statistic (the standard deviation of realised
returns over their predicted standard deviation: 1 when the model is calibrated, above 1 when it
under-predicts risk) and the books it is read on."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from forecaster.risk.model import RiskModel, RiskSnapshot


def _standardised(realised, predicted_sd) -> np.ndarray:
    realised = np.asarray(realised, dtype=float)
    predicted_sd = np.asarray(predicted_sd, dtype=float)
    if realised.shape != predicted_sd.shape:
        raise ValueError(f"realised and predicted_sd must have one shape, got {realised.shape} "
                         f"and {predicted_sd.shape}")
    ok = np.isfinite(realised) & np.isfinite(predicted_sd) & (predicted_sd > 0)
    return np.where(ok, realised / np.where(ok, predicted_sd, 1.0), np.nan)


def bias_statistic(realised: np.ndarray, predicted_sd: np.ndarray) -> float:
    """The sample standard deviation (ddof 1) of ``realised / predicted_sd`` over the entries
    where both are finite and the prediction positive (any shape, one entry a book-day); NaN
    with fewer than two."""
    z = _standardised(realised, predicted_sd)
    z = z[np.isfinite(z)]
    return float(np.std(z, ddof=1)) if len(z) >= 2 else float("nan")


def rolling_bias(realised: np.ndarray, predicted_sd: np.ndarray, window: int = 63) -> np.ndarray:
    """``[T]`` the bias statistic of ``realised / predicted_sd`` (``[T]`` or ``[T, books]``) over
    the ``window`` rows ending at each row (NaN until a window holds two finite entries)."""
    z = _standardised(realised, predicted_sd)
    z = z.reshape(len(z), -1)
    seen = np.isfinite(z)
    zero = np.where(seen, z, 0.0)

    def trailing(x):
        total = np.cumsum(x.sum(axis=1))
        total[window:] = total[window:] - total[:-window]
        return total

    n, s1, s2 = trailing(seen.astype(float)), trailing(zero), trailing(zero * zero)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = (s2 - s1 * s1 / n) / (n - 1)
    return np.where(n >= 2, np.sqrt(np.maximum(var, 0.0)), np.nan)


Book = Callable[[RiskSnapshot, int], np.ndarray]


def book_outcomes(model: RiskModel, returns: np.ndarray, days, book: Book) -> tuple[np.ndarray, np.ndarray]:
    """``(realised, predicted_sd)``, each ``[len(days), m]``: the books ``book(snapshot, t)``
    returns (``[n]`` or ``[m, n]`` weights of the snapshot's stocks) formed at day ``t``'s close,
    their return over day ``t + 1`` (a stock without a return that day counts 0: its price did
    not move) and the standard deviation the snapshot of day ``t`` predicts for them. Rows of
    days without a snapshot or without a next day are NaN."""
    returns = np.asarray(returns, dtype=float)
    days = list(days)
    rows: list[tuple[int, np.ndarray, np.ndarray]] = []
    width = 1
    for i, t in enumerate(days):
        snap = model.snapshot(t) if t + 1 < len(returns) else None
        if snap is None:
            continue
        w = np.atleast_2d(np.asarray(book(snap, t), dtype=float))
        nxt = np.nan_to_num(returns[t + 1, snap.stocks])
        b = w @ snap.exposures
        predicted = np.einsum("mk,kl,ml->m", b, snap.factor_cov, b) + (w * w) @ snap.specific_var
        rows.append((i, w @ nxt, np.sqrt(predicted)))
        width = max(width, len(w))
    realised = np.full((len(days), width), np.nan)
    predicted_sd = np.full((len(days), width), np.nan)
    for i, r, p in rows:
        realised[i, :len(r)] = r
        predicted_sd[i, :len(p)] = p
    return realised, predicted_sd
