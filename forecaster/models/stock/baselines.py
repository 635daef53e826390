"""Baselines any sceptic would ask for, with the forecaster's ``fit``/``predict`` interface.

Each takes one canonical frame or a panel ``{code: frame}`` and forecasts the log return of
each day from data strictly before it (``horizon`` days ahead). Fitted state (means,
coefficients, scalers) comes only from the data given to ``fit``.

Return forecasts: :class:`ZeroForecast`, :class:`HistoricalMean`, :class:`ARForecast`,
:class:`RidgeForecast` (and :class:`forecaster.models.stock.seed.SeedRecipe`). The cross-sectional
factor scores of panels live in :mod:`forecaster.models.panel.baselines`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler

from forecaster.checks import NotEnoughData
from forecaster.features.series import log_returns, mask_suspended


def _panel(data) -> dict[str, pd.DataFrame]:
    return dict(data) if isinstance(data, Mapping) else {"series": data}


def _unpanel(data, out: dict):
    return out if isinstance(data, Mapping) else out["series"]


def _returns(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(returns [days], usable as target [days])``; returns are 0 where unknown."""
    r = mask_suspended(log_returns(frame), frame).to_numpy()
    ok = ~np.isnan(r)
    return np.nan_to_num(r), ok


class _Baseline(BaseEstimator):
    """Per-stock baseline: subclasses implement ``_fit_one`` and ``_predict_one``."""

    is_return_forecast = True
    horizon: int

    def fit(self, data):
        if getattr(self, "horizon", 1) < 1:
            raise ValueError(f"horizon must be >= 1, got {self.horizon}")
        self.params_ = {code: self._fit_one(frame) for code, frame in _panel(data).items()}
        return self

    def predict(self, data):
        if not hasattr(self, "params_"):
            raise NotFittedError(f"{type(self).__name__} is not fitted yet; call fit first")
        out = {}
        for code, frame in _panel(data).items():
            if code not in self.params_:
                raise ValueError(f"{type(self).__name__}: no fitted state for {code!r}")
            values = self._predict_one(frame, self.params_[code])
            out[code] = pd.Series(values, index=frame.index, name="forecast").dropna()
        return _unpanel(data, out)

    def _shifted(self, values: np.ndarray) -> np.ndarray:
        """Move a signal computed at the end of day t to the day it forecasts, t + horizon."""
        out = np.full(len(values), np.nan)
        h = self.horizon
        out[h:] = values[:-h] if h < len(values) else []
        return out

    def _fit_one(self, frame):  # stateless by default
        return {}


class ZeroForecast(_Baseline):
    """Tomorrow's log return is 0: the random walk, the forecast to beat."""

    reference = "zero"  # the report finds the zero reference by this role, whatever its name

    def __init__(self, horizon=1):
        self.horizon = horizon

    def _predict_one(self, frame, params):
        return self._shifted(np.zeros(len(frame)))


class HistoricalMean(_Baseline):
    """The mean log return of the training days."""

    reference = "mean"  # the report's R^2 against the mean uses the model with this role

    def __init__(self, horizon=1):
        self.horizon = horizon

    def _fit_one(self, frame):
        r, ok = _returns(frame)
        return {"mean": float(r[ok].mean()) if ok.any() else 0.0}

    def _predict_one(self, frame, params):
        return self._shifted(np.full(len(frame), params["mean"]))


class ARForecast(_Baseline):
    """AR(p) by least squares: ``r_{t+h} = a + sum_i b_i r_{t-i+1}`` (direct h-step)."""

    def __init__(self, p=5, horizon=1):
        self.p = p
        self.horizon = horizon

    def _design(self, r: np.ndarray) -> np.ndarray:
        lags = sliding_window_view(r, self.p)[:, ::-1]  # row j: r[j+p-1], ..., r[j]
        return np.column_stack([np.ones(len(lags)), lags])

    def _fit_one(self, frame):
        r, ok = _returns(frame)
        p, h = self.p, self.horizon
        if len(r) < p + h + 2:
            raise NotEnoughData(f"AR({p}) needs more than {p + h + 1} days, got {len(r)}")
        X = self._design(r)[: len(r) - p - h + 1]  # rows end at days p-1 .. n-h-1
        y, use = r[p - 1 + h :], ok[p - 1 + h :]
        coef, *_ = np.linalg.lstsq(X[use], y[use], rcond=None)
        return {"coef": coef}

    def _predict_one(self, frame, params):
        r, _ = _returns(frame)
        signal = np.full(len(r), np.nan)
        if len(r) >= self.p:
            signal[self.p - 1 :] = self._design(r) @ params["coef"]
        return self._shifted(signal)


class RidgeForecast(_Baseline):
    """Ridge regression (scikit-learn) of the return ``horizon`` days ahead on the last
    ``window`` daily log returns, standardised with training statistics."""

    def __init__(self, window=60, alpha=10.0, horizon=1):
        self.window = window
        self.alpha = alpha
        self.horizon = horizon

    def _fit_one(self, frame):
        r, ok = _returns(frame)
        L, h = self.window, self.horizon
        if len(r) < L + h + 2:
            raise NotEnoughData(f"ridge on {L}-day windows needs more than {L + h + 1} days, got {len(r)}")
        X = sliding_window_view(r, L)[: len(r) - L - h + 1]
        y, use = r[L - 1 + h :], ok[L - 1 + h :]
        scaler = StandardScaler().fit(X[use])
        model = Ridge(alpha=self.alpha).fit(scaler.transform(X[use]), y[use])
        return {"scaler": scaler, "model": model}

    def _predict_one(self, frame, params):
        r, _ = _returns(frame)
        signal = np.full(len(r), np.nan)
        if len(r) >= self.window:
            X = params["scaler"].transform(sliding_window_view(r, self.window))
            signal[self.window - 1 :] = params["model"].predict(X)
        return self._shifted(signal)


def default_baselines(window: int = 60, horizon: int = 1, seed: bool = True) -> dict:
    """The time-series baselines of a single-stock walk-forward run (panels:
    :func:`forecaster.models.presets.panel_models`)."""
    models = {
        "zero": ZeroForecast(horizon=horizon),
        "hist_mean": HistoricalMean(horizon=horizon),
        "ar5": ARForecast(p=5, horizon=horizon),
        "ridge": RidgeForecast(window=window, horizon=horizon),
    }
    if seed:
        models["seed"] = seed_recipe()
    return models


def seed_recipe(max_epochs: int = 3, random_state: int = 0) -> PerStock:
    """The seed recipe baseline, one network per stock (three epochs a fold: the recipe's
    faults, not its training length, are the point)."""
    from forecaster.models.stock.seed import SeedRecipe

    return PerStock(SeedRecipe(max_epochs=max_epochs, random_state=random_state))


class PerStock(BaseEstimator):
    """One clone of ``model`` per stock of a panel (e.g. the seed recipe, or per-stock
    Transformers next to the global one)."""

    def __init__(self, model):
        self.model = model

    @property
    def is_return_forecast(self) -> bool:
        return getattr(self.model, "is_return_forecast", True)

    def fit(self, data):
        from sklearn.base import clone

        self.models_ = {code: clone(self.model).fit(frame) for code, frame in _panel(data).items()}
        return self

    def predict(self, data):
        if not hasattr(self, "models_"):
            raise NotFittedError("PerStock is not fitted yet; call fit first")
        out = {}
        for code, frame in _panel(data).items():
            if code not in self.models_:
                raise ValueError(f"PerStock: no model fitted for {code!r}")
            out[code] = self.models_[code].predict(frame)
        return _unpanel(data, out)
