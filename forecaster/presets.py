"""The default model sets of a walk-forward run, defined once for the CLI, the benchmarks
and the Python API."""

from __future__ import annotations

from .baselines import ARForecast, HistoricalMean, RidgeForecast, ZeroForecast
from .panel_baselines import panel_baselines
from .panel_model import PanelTransformer


def panel_models(horizon: int = 1, execution: str = "next_open", random_state: int = 0,
                 time_series: bool = True, **transformer) -> dict:
    """The panel Transformer (named ``transformer``; ``transformer`` keywords override its
    defaults) and the cross-sectional baselines on the same folds; with ``time_series`` and
    ``horizon == 1`` also the per-stock time-series baselines (their forecasts are of one
    day's return, so longer labels would not match them)."""
    models = {"transformer": PanelTransformer(horizon=horizon, execution=execution,
                                              random_state=random_state, **transformer)}
    models.update(panel_baselines(horizon=horizon, execution=execution, random_state=random_state))
    if time_series and horizon == 1:
        models.update({"zero": ZeroForecast(), "hist_mean": HistoricalMean(), "ar5": ARForecast(p=5),
                       "ridge": RidgeForecast(window=60)})
    return models
