"""The enhanced book's alpha: forecast scores -> expected active returns.

Grinold's rule, ``alpha_i = ic * sigma_i * z_i``: ``sigma`` the stock's specific daily sd, ``ic``
a stated information coefficient, ``z`` a cross-sectional standard score of the forecast in one
of three shapes (``alpha_shape``):

* ``zscore``: the scores' z-score, winsorised at +-3 (linear in the score);
* ``rank``: the normal scores of the ranks (van der Waerden's ``Phi^-1((rank - 1/2) / m)``), so
  one outlying score carries no more than its rank;
* ``tails``: those rank scores in the top and bottom fifth (:data:`TAIL`) only, 0 in between: a
  view on the names the forecast ranks far apart, none on the middle.

Each shape has mean 0 and sd 1 over the names scored, so ``ic`` means the same in each.

At the holding horizon (``alpha_halflife`` ``h`` > 0, in forecast rows): the score handed to
the book on row ``t`` is the exponentially decayed mean of each stock's z-scores on the
:func:`window_rows` rows ``t - L + 1 .. t`` (weights ``2**(-lag / h)`` over the rows that scored
it; ten half-lives, past which a row's weight is under 0.1 %), taken only where row ``t``
scores the stock, so a slow forecast's views are summed over the days they stay true and a
day's noise is averaged out. It reads no row after ``t``, and the backtest and ``predict``
(:func:`holding_scores`: the model's scores of the window's days) read the same rows.
"""

from __future__ import annotations

import math

import numpy as np

ALPHA_SHAPES = ("zscore", "rank", "tails")
TAIL = 0.2  # the share of the scored names in each tail of the "tails" shape


def standard_scores(scores: np.ndarray, shape: str = "zscore") -> np.ndarray:
    """``[n]`` standard scores of ``scores`` ``[n]`` in ``shape`` (module docstring); 0 where
    a score is NaN (no view), all 0 when fewer than two names are scored or all alike."""
    scores = np.asarray(scores, dtype=float)
    ok = np.isfinite(scores)
    z = np.zeros_like(scores, dtype=float)
    if ok.sum() < 2 or not np.nanstd(scores[ok]) > 0:
        return z
    if shape == "zscore":
        z[ok] = (scores[ok] - scores[ok].mean()) / scores[ok].std()
        return np.clip(z, -3.0, 3.0)
    from scipy.special import ndtri
    from scipy.stats import rankdata

    m = int(ok.sum())
    r = rankdata(scores[ok])  # ties averaged
    normal = ndtri((r - 0.5) / m)
    normal -= normal.mean()  # 0 but for ties and rounding
    if shape == "tails":
        k = max(1, int(math.floor(TAIL * m)))
        normal[(r > k) & (r <= m - k)] = 0.0
    elif shape != "rank":
        raise ValueError(f"alpha shape {shape!r}: expected one of {', '.join(ALPHA_SHAPES)}")
    sd = normal.std()
    z[ok] = normal / sd if sd > 0 else 0.0
    return z


def alpha_of(scores: np.ndarray, specific_sd: np.ndarray, ic: float, shape: str = "zscore") -> np.ndarray:
    """``[n]`` expected daily active returns from scores ``[n]`` (NaN: no view, alpha 0):
    ``ic * specific_sd * z``, ``z`` the scores' :func:`standard_scores` in ``shape``."""
    return ic * specific_sd * standard_scores(scores, shape)


def window_rows(halflife: float) -> int:
    """The rows the decayed mean of ``halflife`` reads, the row itself included: ten half-lives
    (1 for ``halflife`` 0)."""
    return max(1, math.ceil(10 * halflife)) if halflife > 0 else 1


def decayed_scores(scores: np.ndarray, halflife: float) -> np.ndarray:
    """``[rows, stocks]`` the holding-horizon scores of forecast rows ``scores`` ``[rows,
    stocks]`` (module docstring): row ``t`` the decayed mean of each stock's z-scores
    (:func:`standard_scores`) on the :func:`window_rows` rows up to ``t``, NaN where row ``t``
    has no score. ``halflife`` 0: the scores as given."""
    scores = np.asarray(scores, dtype=float)
    if halflife <= 0 or not len(scores):
        return scores.copy()
    from scipy.signal import lfilter

    has = np.isfinite(scores)
    z = np.stack([standard_scores(row) for row in scores])
    taps = 0.5 ** (np.arange(window_rows(halflife)) / halflife)
    # sum over lags < L of taps[lag] * x[t - lag], down each column: the weighted sums, their weights
    total = lfilter(taps, [1.0], np.where(has, z, 0.0), axis=0)
    weight = lfilter(taps, [1.0], has.astype(float), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / weight
    return np.where(has, mean, np.nan)


def holding_scores(today: np.ndarray, recent: np.ndarray | None, halflife: float) -> np.ndarray:
    """``[stocks]`` the signal day's holding-horizon scores from its scores ``today`` and the
    forecast rows before it ``recent`` ``[rows, stocks]`` (the same stocks; the last
    :func:`window_rows` - 1 are read): :func:`decayed_scores`' last row. ``halflife`` 0 or no
    ``recent``: ``today``."""
    today = np.asarray(today, dtype=float)
    if halflife <= 0 or recent is None:
        return today.copy()
    recent = np.asarray(recent, dtype=float).reshape(-1, len(today))
    before = recent[len(recent) - min(len(recent), window_rows(halflife) - 1):]
    return decayed_scores(np.vstack([before, today[None]]), halflife)[-1]
