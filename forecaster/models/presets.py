"""The default model sets of a walk-forward run, defined once for the CLI, the benchmarks
and the Python API."""

from __future__ import annotations

from forecaster.models.panel.baselines import panel_baselines
from forecaster.models.panel.model import PanelTransformer
from forecaster.models.stock.baselines import ARForecast, HistoricalMean, RidgeForecast, ZeroForecast


def panel_models(horizon: int = 1, execution: str = "next_open", random_state: int = 0,
                 time_series: bool = True, **transformer) -> dict:
    """The panel Transformer (named ``transformer``; ``transformer`` keywords override its
    defaults) and the cross-sectional baselines on the same folds (factor scores, ``gbm``,
    ``lightgbm`` where the package is installed, ``ridge_features``: on the Transformer's
    ``features``); with ``time_series`` and
    ``horizon == 1`` also the per-stock time-series baselines (their forecasts are of one
    day's return, so longer labels would not match them)."""
    models = {"transformer": PanelTransformer(horizon=horizon, execution=execution,
                                              random_state=random_state, **transformer)}
    models.update(panel_baselines(horizon=horizon, execution=execution, random_state=random_state,
                                  features=transformer.get("features"),
                                  preset=transformer.get("preset", "auto")))
    if time_series and horizon == 1:
        models.update({"zero": ZeroForecast(), "hist_mean": HistoricalMean(), "ar5": ARForecast(p=5),
                       "ridge": RidgeForecast(window=60)})
    return models


def single_stock_transformer(horizon: int = 1, progress: bool = False, **overrides):
    """The single-stock Transformer of a walk-forward run: lighter than the class defaults
    (``forecaster train``), since it is refit on every fold. ``overrides`` replace any
    parameter."""
    from forecaster.models.stock.estimator import CausalTransformerForecaster

    params = dict(window=40, d_model=32, n_heads=4, n_layers=2, max_epochs=8, patience=3, lr=1e-3,
                  train_stride=1, positional="sinusoidal", random_state=0)
    params.update(overrides)
    return CausalTransformerForecaster(horizon=horizon, progress=progress, **params)
