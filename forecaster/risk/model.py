"""A point-in-time factor risk model: daily cross-sectional regressions of returns on the
exposures known the evening before, then, for any day, the factor covariance and specific
variances estimated from the regressions of that day and the days before it.

The factors are a market factor (exposure 1 for every stock: the country factor of Barra's
models), the style exposures handed to :meth:`RiskModel.fit` (usually
:func:`forecaster.risk.exposures.style_exposures`), industry factors where industries are handed
in (0/1 exposures; their returns constrained, as Barra's are, to a market-value-weighted sum of
zero, so the market factor stays the market's), and ``n_statistical`` statistical factors:
principal components of the regressions' residuals over the trailing window, which stand in for
what the data lack (industries, where none are given).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.checks import check_int
from forecaster.risk.estimators import (
    age_weights,
    factor_covariance,
    specific_variance,
    statistical_factors,
)
from forecaster.risk.exposures import STYLES

log = logging.getLogger(__name__)

MIN_STOCKS_PER_FACTOR = 2  # a day's regression needs this many stocks per factor (and 10 at least)
MIN_INDUSTRY_STOCKS = 3  # an industry's factor return is estimated on a day it has this many stocks
INDUSTRY_PREFIX = "industry:"  # industry factors are named "industry:<group>"
STAT_PREFIX = "stat_"


def style_count(factor_names) -> int:
    """How many of ``factor_names`` lead as market and styles (not industries, not statistical)."""
    return sum(not (n.startswith(INDUSTRY_PREFIX) or n.startswith(STAT_PREFIX)) for n in factor_names)


def universe_key(universe: np.ndarray | None) -> str:
    """What a model fitted over the universe mask ``universe`` ``[T, N]`` (None: every stock)
    is cached under: its shape and a digest of its bits, so another universe fits anew."""
    if universe is None:
        return "all"
    mask = np.asarray(universe, dtype=bool)
    digest = hashlib.blake2b(np.packbits(mask).tobytes(), digest_size=16).hexdigest()
    return f"{mask.shape[0]}x{mask.shape[1]}:{digest}"


@dataclass
class RiskSnapshot:
    """The risk model on one day, for the stocks it covers.

    Attributes:
        date: the day (the model as known at its close, for the returns of the next day).
        stocks: ``[n]`` int column indices into the panel's stocks.
        exposures: ``[n, k]`` exposures: the market factor, the styles, then the statistical
            factors (the order of ``factor_names``).
        factor_cov: ``[k, k]`` daily factor covariance (symmetric, positive semi-definite).
        specific_var: ``[n]`` daily specific variance (> 0).
        factor_names: ``[k]`` names of the factors.
        shrinkage: the intensity the factor covariance's correlations were shrunk by.
    """

    date: pd.Timestamp
    stocks: np.ndarray
    exposures: np.ndarray
    factor_cov: np.ndarray
    specific_var: np.ndarray
    factor_names: tuple[str, ...]
    shrinkage: float = 0.0

    @property
    def n_style(self) -> int:
        """The leading columns that are the market and the styles (:func:`style_count`)."""
        return style_count(self.factor_names)

    def covariance(self) -> np.ndarray:
        """``[n, n]`` the stocks' daily return covariance ``X F X' + diag(D)``."""
        x = self.exposures
        cov = x @ self.factor_cov @ x.T
        cov[np.diag_indices_from(cov)] += self.specific_var
        return cov

    def variance(self, w: np.ndarray) -> float:
        """The daily variance ``w' V w`` of holdings ``w`` ``[n]`` (weights of the covered
        stocks, in ``stocks``' order), without forming ``V``: ``b' F b + sum(w**2 D)`` with
        ``b = X' w``."""
        w = np.asarray(w, dtype=float)
        if w.shape != self.specific_var.shape:
            raise ValueError(f"w must have shape {self.specific_var.shape} (one weight per covered "
                             f"stock), got {w.shape}")
        b = self.exposures.T @ w
        return float(b @ self.factor_cov @ b + (w * w) @ self.specific_var)

    def factor_variance(self, w: np.ndarray) -> float:
        """The part ``b' F b`` of :meth:`variance` the factors explain."""
        b = self.exposures.T @ np.asarray(w, dtype=float)
        return float(b @ self.factor_cov @ b)


@dataclass
class RiskModelConfig:
    """Options of :class:`RiskModel` (checked when built; a bad value is a ``ValueError``
    naming the field).

    Attributes:
        window: trailing days (regressions) the factor covariance, statistical factors and
            specific variances of a day are estimated from, the day itself included.
        half_life: half-life in days of the exponential weights of the factor covariance.
        specific_half_life: half-life in days of the exponential weights of specific variances.
        newey_west_lags: lags of the Newey-West (Bartlett) correction of the factor
            covariance for serial correlation (0: none).
        n_statistical: principal components of the style regressions' residuals added as
            factors (0: none).
        shrinkage: intensity in ``[0, 1]`` by which the factor correlations are shrunk toward
            zero (variances kept); None: estimated each day (Ledoit-Wolf's form for a diagonal
            target, :func:`forecaster.risk.estimators.shrinkage_intensity`).
        min_history: days with a regression, within the window, a day needs before it has a
            snapshot.
        specific_prior_days: weight, in days of observations, of the cross-sectional mean a
            stock's specific variance is shrunk toward (``n_eff / (n_eff + prior)`` stays its
            own).
        remove_estimation_error: subtract from the factor covariance the covariance of the
            factor returns' estimation errors, EWMA-weighted as the factor returns are: for each
            day's regression the sandwich ``P diag(e**2 / (1 - h)) P'`` (HC2: residuals ``e``,
            leverages ``h``, ``P`` the map from returns to factor returns), for the statistical
            factors ``B' diag(D) B / m**2``. Without it the factor covariance carries the
            estimates' noise, and a book close to a factor-mimicking portfolio has its specific
            risk counted twice (in the factor returns and in the specific variances).
    """

    window: int = 252
    half_life: int = 90
    specific_half_life: int = 42
    newey_west_lags: int = 2
    n_statistical: int = 5
    shrinkage: float | None = None
    min_history: int = 126
    specific_prior_days: float = 20.0
    remove_estimation_error: bool = True

    def __post_init__(self) -> None:
        check_int("window", self.window, minimum=2)
        check_int("half_life", self.half_life)
        check_int("specific_half_life", self.specific_half_life)
        check_int("newey_west_lags", self.newey_west_lags, minimum=0)
        check_int("n_statistical", self.n_statistical, minimum=0)
        check_int("min_history", self.min_history, minimum=2)
        if self.min_history > self.window:
            raise ValueError(f"min_history must be at most window ({self.window}), got {self.min_history}")
        if self.newey_west_lags >= self.min_history:
            raise ValueError(f"newey_west_lags must be below min_history ({self.min_history}), "
                             f"got {self.newey_west_lags}")
        if self.shrinkage is not None and (isinstance(self.shrinkage, bool)
                                           or not isinstance(self.shrinkage, (int, float))
                                           or not 0.0 <= self.shrinkage <= 1.0):
            raise ValueError(f"shrinkage must be None or a number in [0, 1], got {self.shrinkage!r}")
        prior = self.specific_prior_days
        if isinstance(prior, bool) or not isinstance(prior, (int, float)) or not 0.0 <= prior < np.inf:
            raise ValueError(f"specific_prior_days must be a number >= 0, got {prior!r}")
        if not isinstance(self.remove_estimation_error, bool):
            raise ValueError("remove_estimation_error must be True or False, "
                             f"got {self.remove_estimation_error!r}")


class RiskModel:
    """A point-in-time factor risk model (:mod:`forecaster.risk.model`): :meth:`fit` runs the
    daily regressions, :meth:`snapshot` gives the model as known at a day's close."""

    def __init__(self, config: RiskModelConfig | None = None):
        self.config = RiskModelConfig() if config is None else config
        if not isinstance(self.config, RiskModelConfig):
            raise TypeError(f"config must be a RiskModelConfig, got {type(self.config).__name__}")

    def fit(self, returns: np.ndarray, exposures: np.ndarray, universe: np.ndarray | None,
            dates: pd.DatetimeIndex, weights: np.ndarray | None = None,
            industries: np.ndarray | None = None, industry_names=()) -> RiskModel:
        """Daily cross-sectional regressions of day ``t``'s returns on the exposures known at
        day ``t - 1``'s close, for ``t >= 1``: factor returns and residuals.

        Args:
            returns: ``[T, N]`` simple daily returns (NaN: no bar).
            exposures: ``[T, N, S]`` style exposures known at each day's close (NaN: none).
            universe: ``[T, N]`` bool: the stocks day ``t - 1``'s universe puts in day ``t``'s
                regression; None: every stock with exposures and a return.
            dates: ``[T]`` the days.
            weights: ``[T, N]`` market values: the regression of day ``t`` is weighted by the
                square root of day ``t - 1``'s (a stock without a positive one left out); None:
                ordinary least squares.
            industries: ``[T, N]`` int: each stock's industry known at each day's close, an
                index into ``industry_names`` (-1: none, the stock loads on no industry); None:
                no industry factors.
            industry_names: ``[G]`` the industries' names (factors ``industry:<name>``).

        A regression needs ``max(10, 2 k)`` stocks (``k`` = 1 + S factors), else its day has NaN
        factor returns. An industry enters day ``t``'s regression with at least
        :data:`MIN_INDUSTRY_STOCKS` of its stocks in it (else its factor return that day is 0 and
        its stocks load on none); the industries' returns are constrained to sum to zero weighted
        by their stocks' market values (their counts without ``weights``). Residuals are kept for
        every stock with exposures and a return, in the regression or not; with them each day's
        sandwich estimate of its factor returns' error covariance (:class:`RiskModelConfig`'s
        ``remove_estimation_error``). Fitted: ``dates_``, ``exposures_`` (the array given),
        ``industries_``, ``factor_returns_`` ``[T, 1 + S + G]`` (NaN on day 0 and days without a
        regression), ``residuals_`` ``[T, N]``, ``factor_noise_`` ``[T, 1 + S + G, 1 + S + G]``.
        Nothing of day ``t`` reads a row after ``t``.
        """
        returns = np.asarray(returns, dtype=float)
        exposures = np.asarray(exposures, dtype=float)
        if returns.ndim != 2:
            raise ValueError(f"returns must be [days, stocks], got shape {returns.shape}")
        n_days, n_stocks = returns.shape
        if exposures.ndim != 3 or exposures.shape[:2] != returns.shape:
            raise ValueError(f"exposures must be [days, stocks, styles] = [{n_days}, {n_stocks}, S], "
                             f"got shape {exposures.shape}")
        for name, value in (("universe", universe), ("weights", weights)):
            if value is not None and np.shape(value) != returns.shape:
                raise ValueError(f"{name} must have the shape of returns {returns.shape}, "
                                 f"got {np.shape(value)}")
        if len(dates) != n_days:
            raise ValueError(f"dates must hold one day per row of returns ({n_days}), got {len(dates)}")
        n_styles = exposures.shape[2]
        styles = STYLES if n_styles == len(STYLES) else tuple(f"style_{i}" for i in range(n_styles))
        names = tuple(str(g) for g in industry_names)
        if industries is not None:
            industries = np.asarray(industries)
            if industries.shape != returns.shape or not np.issubdtype(industries.dtype, np.integer):
                raise ValueError(f"industries must be [days, stocks] integers of the shape of returns "
                                 f"{returns.shape}, got {industries.dtype} {industries.shape}")
            if len(industries) and (industries.max() >= len(names) or industries.min() < -1):
                raise ValueError(f"industries must index industry_names (0..{len(names) - 1}) or be -1")
        else:
            names = ()
        n_ind = len(names)
        k = 1 + n_styles + n_ind
        has_x = np.isfinite(exposures).all(axis=2)
        factor_returns = np.full((n_days, k), np.nan)
        residuals = np.full(returns.shape, np.nan)
        factor_noise = np.full((n_days, k, k), np.nan)
        needed = max(10, MIN_STOCKS_PER_FACTOR * (1 + n_styles))
        for t in range(1, n_days):
            known = has_x[t - 1] & np.isfinite(returns[t])
            used = known.copy() if universe is None else known & np.asarray(universe[t - 1], dtype=bool)
            if weights is not None:
                w_prev = np.nan_to_num(np.asarray(weights[t - 1], dtype=float))
                used &= w_prev > 0
                cap = np.where(used, w_prev, 0.0)
            else:
                cap = used.astype(float)
            if used.sum() < needed:
                continue
            label = None if industries is None else industries[t - 1]
            beta, residual, noise = _regress(returns[t], exposures[t - 1], known, used, cap, label, n_ind)
            factor_returns[t], residuals[t, known], factor_noise[t] = beta, residual, noise
        self.dates_ = pd.DatetimeIndex(dates)
        self.exposures_ = exposures
        self.industries_ = industries
        self.factor_returns_ = factor_returns
        self.residuals_ = residuals
        self.factor_noise_ = factor_noise
        self.style_names_ = ("market", *styles)
        self.industry_names_ = tuple(INDUSTRY_PREFIX + g for g in names)
        self._regressed = np.cumsum(np.isfinite(factor_returns).all(axis=1))
        log.debug("risk model fitted: %d days, %d stocks, %d style factors, %d days regressed",
                  n_days, n_stocks, k, int(self._regressed[-1]) if n_days else 0)
        return self

    @property
    def factor_names(self) -> tuple[str, ...]:
        """The factors of every snapshot: market, the styles, the industries, ``stat_1 .. stat_p``."""
        stats = tuple(f"{STAT_PREFIX}{i + 1}" for i in range(self.config.n_statistical))
        return (*self.style_names_, *self.industry_names_, *stats)

    def snapshot(self, t: int) -> RiskSnapshot | None:
        """The model as known at day ``t``'s close (regressions of days ``<= t`` only); None
        before ``min_history`` days with a regression in the window.

        Covered: the stocks with all style exposures on day ``t`` (in the universe or not).
        Exposures: 1 (market), day ``t``'s styles, day ``t``'s industry (0/1), and the loadings of
        the principal components of the covered stocks' residuals over the window (stocks with
        residuals on at least half the window's regressed days; the others load 0). Factor
        covariance: the styles' and industries' factor returns (an industry's 0 on a day it was
        not estimated) and the components' (the residuals projected on the loadings) over the
        window, EWMA (``half_life``), less the estimates' noise (``remove_estimation_error``),
        Newey-West, shrunk. Specific variance: the residuals less their components' part, EWMA
        (``specific_half_life``), shrunk toward the cross-sectional mean, floored
        (:func:`forecaster.risk.estimators.specific_variance`).
        """
        if not hasattr(self, "factor_returns_"):
            raise RuntimeError("fit the risk model before asking for a snapshot")
        n_days = len(self.dates_)
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < n_days:
            # a day before the data must not wrap, as a negative index would, to the last day
            raise IndexError(f"day {t!r} is outside the fitted days 0..{n_days - 1}")
        t = int(t)
        cfg = self.config
        lo = max(0, t - cfg.window + 1)
        before = self._regressed[lo - 1] if lo else 0
        regressed_days = int(self._regressed[t] - before)
        if regressed_days < cfg.min_history:
            return None
        x_today = self.exposures_[t]
        stocks = np.flatnonzero(np.isfinite(x_today).all(axis=1))
        if len(stocks) == 0:
            return None
        style_f = self.factor_returns_[lo:t + 1]
        rows = lo + np.flatnonzero(np.isfinite(style_f).all(axis=1))  # days with a regression
        resid = self.residuals_[np.ix_(rows, stocks)]  # [regressed days, n]
        eligible = np.isfinite(resid).sum(axis=0) >= regressed_days / 2
        loadings, stat_f = statistical_factors(resid, cfg.n_statistical, eligible)
        stat_full = np.full((len(style_f), cfg.n_statistical), np.nan)
        stat_full[rows - lo] = stat_f
        specific = resid - stat_f @ loadings.T  # NaN where the stock had no residual
        specific_var = specific_variance(specific, age_weights(t - rows, cfg.specific_half_life),
                                         cfg.specific_prior_days)
        noise = None
        if cfg.remove_estimation_error:
            w = age_weights(t - rows, cfg.half_life)
            style_noise = np.einsum("s,sij->ij", w / w.sum(), self.factor_noise_[rows])
            m = max(int(eligible.sum()), 1)
            stat_noise = (loadings.T * specific_var) @ loadings / m ** 2
            noise = np.zeros((len(self.factor_names),) * 2)
            k = style_f.shape[1]
            noise[:k, :k], noise[k:, k:] = style_noise, stat_noise
        factor_cov, delta = factor_covariance(np.concatenate([style_f, stat_full], axis=1), cfg.half_life,
                                              cfg.newey_west_lags, cfg.shrinkage, noise)
        dummies = np.zeros((len(stocks), len(self.industry_names_)))
        if self.industries_ is not None:
            label = self.industries_[t, stocks]
            dummies[np.flatnonzero(label >= 0), label[label >= 0]] = 1.0
        exposures = np.concatenate([np.ones((len(stocks), 1)), x_today[stocks], dummies, loadings], axis=1)
        return RiskSnapshot(date=self.dates_[t], stocks=stocks, exposures=exposures,
                            factor_cov=factor_cov, specific_var=specific_var,
                            factor_names=self.factor_names, shrinkage=delta)


def _regress(y: np.ndarray, styles: np.ndarray, known: np.ndarray, used: np.ndarray, cap: np.ndarray,
             label: np.ndarray | None, n_ind: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One day's regression of the returns ``y`` ``[N]`` on the market, the ``styles`` ``[N, S]``
    and the industries ``label`` ``[N]`` (-1: none; None: no industries) over the ``used``
    stocks, weighted by ``sqrt(cap)``: ``(factor returns [1 + S + n_ind], residuals of the
    ``known`` stocks, the factor returns' HC2 error covariance)``.

    The industries' returns satisfy ``sum_g cap_g f_g = 0`` (``cap_g``: their used stocks'
    ``cap``): solved as the unconstrained regression on ``X R`` with ``f = R g``, ``R`` writing
    the largest industry's return through the others', so the dummies and the market column are
    not collinear."""
    n_base = 1 + styles.shape[1]
    k = n_base + n_ind
    x = np.concatenate([np.ones((len(y), 1)), styles], axis=1)
    lift = np.eye(n_base)  # R: the free parameters to every factor's return
    present = np.zeros(0, int)
    if label is not None and n_ind:
        inside = used & (label >= 0)
        count = np.bincount(label[inside], minlength=n_ind)
        present = np.flatnonzero(count >= MIN_INDUSTRY_STOCKS)
    if len(present) >= 2:
        column = np.full(n_ind, -1)
        column[present] = np.arange(len(present))
        dummies = np.zeros((len(y), len(present)))
        rows = np.flatnonzero((label >= 0) & (column[np.maximum(label, 0)] >= 0))
        dummies[rows, column[label[rows]]] = 1.0
        weight = dummies[used].T @ cap[used]  # [present] the industries' market values
        ref = int(np.argmax(weight))
        free = np.delete(np.arange(len(present)), ref)
        block = np.zeros((len(present), len(free)))
        block[free, np.arange(len(free))] = 1.0
        block[ref] = -weight[free] / weight[ref]
        lift = np.block([[lift, np.zeros((n_base, len(free)))],
                         [np.zeros((len(present), n_base)), block]])
        x = np.concatenate([x, dummies], axis=1)
    else:
        present = np.zeros(0, int)  # one industry alone is the market: no industry factor
    xu, yu = x[used] @ lift, y[used]
    xw = xu * np.sqrt(cap[used])[:, None]
    try:
        projection = np.linalg.solve(xw.T @ xu, xw.T)  # [free, used]: free parameters = P y
    except np.linalg.LinAlgError:
        projection = np.linalg.pinv(xw.T @ xu) @ xw.T
    beta_free = projection @ yu
    leverage = np.einsum("ik,ki->i", xu, projection)  # HC2: e**2 / (1 - h) is unbiased
    spread = (yu - xu @ beta_free) ** 2 / np.clip(1.0 - leverage, 1e-3, None)
    full = lift @ projection  # [factors present, used]
    beta = full @ yu
    where = np.concatenate([np.arange(n_base), n_base + present])
    out, noise = np.zeros(k), np.zeros((k, k))
    out[where] = beta
    noise[np.ix_(where, where)] = (full * spread) @ full.T
    return out, y[known] - x[known] @ beta, noise
