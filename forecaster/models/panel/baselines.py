"""Cross-sectional baselines a sceptic tries first, on the same panel, features and folds as
the panel Transformer: factor scores (no training) and gradient boosting (scikit-learn's, and
LightGBM with Qlib's Alpha158 benchmark settings) / ridge on the last day's features with
per-day normalised labels.

All are panel models: ``fit(panel)`` on the training slice, ``predict(panel)`` -> scores
indexed by ``(forecast date, code)`` (see :func:`forecaster.models.panel.model.scores_to_series`).
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Ridge

from forecaster.checks import NotEnoughData, check_choice
from forecaster.features.factors import (
    FACTORS,
    available_features,
    factor_score,
    feature_tensor,
    lookback,
    resolve_features,
)
from forecaster.features.labels import EXECUTIONS, normalise_per_day, tradeable_label
from forecaster.features.processors import make_processor
from forecaster.models.panel.model import as_panel
from forecaster.models.panel.scores import scores_to_series
from forecaster.models.panel.sizing import PRESETS, SizeRules

log = logging.getLogger(__name__)

LAGGED_RETURNS = 4  # daily returns of the days before the last, as extra columns


class FactorScore(BaseEstimator):
    """A classic factor's score (see :data:`forecaster.features.factors.FACTORS`); nothing is fitted."""

    is_return_forecast = False
    input_kind = "panel"

    def __init__(self, factor="low_vol_20d"):
        self.factor = factor

    def fit(self, data) -> FactorScore:
        if self.factor not in FACTORS:
            raise ValueError(f"unknown factor {self.factor!r}; choose from {list(FACTORS)}")
        self.fitted_ = True
        return self

    def predict(self, data) -> pd.Series:
        if not hasattr(self, "fitted_"):
            raise NotFittedError("FactorScore is not fitted yet; call fit first")
        panel = as_panel(data)
        rows = np.arange(panel.n_days - 1)
        scores = np.where(panel.listed, factor_score(panel, self.factor), np.nan)[rows]
        return scores_to_series(scores, panel, rows)


ESTIMATORS = ("gbm", "ridge", "lightgbm")

# LightGBM as in Qlib's published benchmark (examples/benchmarks/LightGBM/
# workflow_config_lightgbm_Alpha158.yaml, model LGBModel of qlib/contrib/model/gbdt.py): these
# keywords, 1000 boosting rounds at most, stopped after 50 rounds without a better l2 on the
# validation segment. As there, ``subsample`` is passed without ``bagging_freq``, which leaves
# LightGBM's bagging off; ``num_threads`` (20 there) is ``n_jobs`` here.
LIGHTGBM_PARAMS = {"objective": "mse", "colsample_bytree": 0.8879, "learning_rate": 0.2, "subsample": 0.8789,
                   "lambda_l1": 205.6999, "lambda_l2": 580.9768, "max_depth": 8, "num_leaves": 210}
LIGHTGBM_ROUNDS = 1000
LIGHTGBM_EARLY_STOPPING = 50
# Qlib validates on the two years after seven years of training (~22%): here the latest 20% of
# the training days, after a gap that keeps the training labels out of the validation days.
LIGHTGBM_VALID_SHARE = 0.2


def lightgbm_available() -> bool:
    """Whether the optional ``lightgbm`` package imports (``pip install '.[lightgbm]'``)."""
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        return False
    return True


class FeatureRegressor(BaseEstimator):
    """Gradient boosting (scikit-learn's ``HistGradientBoostingRegressor``, or LightGBM with
    :data:`LIGHTGBM_PARAMS`) or ridge on the last day's processed features plus the previous
    ``LAGGED_RETURNS`` daily returns, regressed on the per-day rank-normalised tradeable label.

    LightGBM holds out the latest :data:`LIGHTGBM_VALID_SHARE` of the training days (after a
    gap of ``horizon + 1`` days, so no training label overlaps them) and stops early on them,
    as Qlib's ``LGBModel`` does with its validation segment; it is deterministic for a given
    ``random_state`` and thread count (``deterministic``, ``force_row_wise``). A panel whose
    ``learn`` holds weights (a training universe with ``train_outside_weight``) weights each
    row by its stock-day's.

    Args:
        estimator: ``"gbm"``, ``"lightgbm"`` or ``"ridge"``.
        horizon, execution: the label, as for the panel Transformer.
        features: names from :data:`forecaster.features.factors.FEATURES` or a set's name
            (``alpha158``, ``alpha360``) (``None``: the panel
            Transformer's default at the panel's size, where the columns allow).
        norm: feature processor (``"robust"`` or ``"rank"``), fitted on the training slice.
        max_rows: training rows kept (the latest), bounding the cost on large panels: when
            it binds, features and their processor are computed from those rows' days only.
        random_state: seed of the boosting.
        n_jobs: LightGBM's threads; ``None``: OpenMP's limit in this process (the walk-forward
            sets it to ``threads_per_task``; otherwise all cores).
        preset: the regime ``features=None`` is resolved in, as the panel Transformer's.
    """

    is_return_forecast = False
    input_kind = "panel"
    # ``features=None`` is resolved as the panel Transformer's: the same features at each size.
    rules = SizeRules()

    def __init__(self, estimator="gbm", horizon=1, execution="next_open", features=None, norm="robust",
                 max_rows=400_000, random_state=0, n_jobs=None, preset="auto"):
        self.estimator = estimator
        self.preset = preset
        self.horizon = horizon
        self.execution = execution
        self.features = features
        self.norm = norm
        self.max_rows = max_rows
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _design(self, panel, fit: bool):
        X = feature_tensor(panel, self.features_)  # [D, N, F]
        if fit:
            self.processor_ = make_processor(self.norm).fit(X, panel.dates)
        self.processor_.transform(X, out=X)
        ret = np.zeros(X.shape[:-1] + (0,), np.float32)
        if "ret_1d" in self.features_:
            r = X[..., self.features_.index("ret_1d")]
            lags = [np.vstack([np.zeros((k,) + r.shape[1:], np.float32), r[:-k]])
                    for k in range(1, LAGGED_RETURNS + 1)]
            ret = np.stack(lags, axis=-1)
        return np.concatenate([X, ret], axis=-1)

    def _model(self):
        if self.estimator == "gbm":
            return HistGradientBoostingRegressor(
                max_iter=200, learning_rate=0.05, max_leaf_nodes=31, min_samples_leaf=200,
                l2_regularization=1.0, early_stopping=False, random_state=self.random_state)
        return Ridge(alpha=10.0)

    def _fit_lightgbm(self, X: np.ndarray, y: np.ndarray, days: np.ndarray, weight: np.ndarray | None):
        """LightGBM on rows ``X, y`` (weighted by ``weight``, None: alike) of training days
        ``days`` (ascending), stopped early on the latest days."""
        try:
            import lightgbm as lgb
        except ImportError as exc:
            raise ImportError("the lightgbm baseline needs the lightgbm package: "
                              "pip install 'ashare-seq2seq-toolkit[lightgbm]'") from exc
        unique = np.unique(days)
        first_valid = unique[-max(1, int(round(LIGHTGBM_VALID_SHARE * len(unique))))]
        valid = days >= first_valid
        # A training row's label ends horizon (+1 for the next-open entry) days after it.
        train = days < first_valid - self.horizon - 1
        if train.sum() < 50 or valid.sum() < 10:
            raise NotEnoughData(f"too little data for lightgbm's validation split: {int(train.sum())} "
                             f"training and {int(valid.sum())} validation stock-days")
        params = {**LIGHTGBM_PARAMS, "seed": int(self.random_state), "deterministic": True,
                  "force_row_wise": True, "num_threads": int(self.n_jobs or 0), "verbosity": -1}
        w = (None, None) if weight is None else (weight[train], weight[valid])
        dtrain = lgb.Dataset(X[train], label=y[train], weight=w[0], params={"verbosity": -1})
        dvalid = lgb.Dataset(X[valid], label=y[valid], weight=w[1], reference=dtrain)
        booster = lgb.train(params, dtrain, num_boost_round=LIGHTGBM_ROUNDS, valid_sets=[dvalid],
                            valid_names=["valid"],
                            callbacks=[lgb.early_stopping(LIGHTGBM_EARLY_STOPPING, verbose=False)])
        self.best_iteration_ = int(booster.best_iteration)
        return booster

    def fit(self, data) -> FeatureRegressor:
        check_choice("estimator", self.estimator, ESTIMATORS)
        check_choice("execution", self.execution, EXECUTIONS)
        check_choice("preset", self.preset, PRESETS)
        panel = as_panel(data)
        names = (resolve_features(panel, self.features) if self.features is not None
                 else available_features(panel, self.rules.default_features(panel.n_stocks,
                                                                             self.preset)))
        label, _ = tradeable_label(panel, self.horizon, self.execution)
        y = normalise_per_day(label, "rank")
        y[: min(lookback(names), panel.n_days)] = np.nan
        ok = np.isfinite(y) & panel.listed
        usable = np.flatnonzero(ok.ravel())
        if len(usable) > self.max_rows:
            # Only the latest max_rows stock-days are fitted: features (and the processor)
            # are computed from their days and the history those need, not the whole panel.
            log.info("%s: fitting the latest %d of %d labelled stock-days (max_rows)", self.estimator,
                     self.max_rows, len(usable))
            first = usable[-self.max_rows] // panel.n_stocks
            start = max(0, first - lookback(names) - LAGGED_RETURNS)
            panel, y, ok = panel.slice(start=panel.dates[start]), y[start:], ok[start:]
        self.features_ = names
        Z = self._design(panel, fit=True)
        rows = np.flatnonzero(ok.ravel())[-self.max_rows:]  # the latest rows
        if len(rows) < 50:
            raise NotEnoughData(f"too little data: {len(rows)} labelled stock-days")
        X, target = Z.reshape(-1, Z.shape[-1])[rows], y.ravel()[rows]
        weight = panel.learn_weights()  # a training universe's: rows weighted in the fit
        weight = None if weight is None else weight.ravel()[rows]
        if weight is not None and (weight == 1).all():  # a bool universe: its outside rows are unlabelled
            weight = None
        if self.estimator == "lightgbm":
            self.model_ = self._fit_lightgbm(X, target, rows // panel.n_stocks, weight)
        else:
            self.model_ = self._model().fit(X, target, sample_weight=weight)
        return self

    def predict(self, data) -> pd.Series:
        if not hasattr(self, "model_"):
            raise NotFittedError("FeatureRegressor is not fitted yet; call fit first")
        panel = as_panel(data)
        Z = self._design(panel, fit=False)
        rows = np.arange(panel.n_days - 1)
        flat = Z[rows].reshape(-1, Z.shape[-1])
        present = panel.listed[rows].ravel()
        scores = np.full(len(flat), np.nan)
        if present.any():
            scores[present] = self.model_.predict(flat[present])
        return scores_to_series(scores.reshape(len(rows), panel.n_stocks), panel, rows)


def panel_baselines(horizon: int = 1, execution: str = "next_open", random_state: int = 0,
                    features=None, preset: str = "auto") -> dict:
    """The cross-sectional baselines of a panel run, by name (``lightgbm`` only where the
    package is installed; otherwise one logged line says it is left out). ``features``: the
    feature regressions' inputs, the Transformer's (``None``: its default at the panel's size),
    so that every learnt model of a run sees the same features."""
    models = {name: FactorScore(name) for name in FACTORS}
    models["gbm"] = FeatureRegressor("gbm", horizon=horizon, execution=execution, features=features,
                                     random_state=random_state, preset=preset)
    if lightgbm_available():
        models["lightgbm"] = FeatureRegressor("lightgbm", horizon=horizon, execution=execution,
                                              features=features, random_state=random_state, preset=preset)
    else:
        log.warning("lightgbm is not installed: the lightgbm baseline is skipped "
                    "(pip install 'ashare-seq2seq-toolkit[lightgbm]')")
    models["ridge_features"] = FeatureRegressor("ridge", horizon=horizon, execution=execution,
                                                features=features, preset=preset)
    return models
