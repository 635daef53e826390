"""Models by name: the model under test (``--model NAME``, ``[model] name``) and the
baselines a run compares it with.

A model is a class with ``fit``/``predict`` (:mod:`forecaster.models.interface`) and one
:func:`register` line below. Its keyword parameters are those of its constructor; a run hands
it ``horizon``, ``execution`` and ``features`` where the constructor takes them and the user
did not set them (so every model of a run forecasts the same label from the same inputs)::

    register("my_model", MyModel)                      # a panel model
    register("my_ar", MyAR, one_stock=MyAR)            # also for one stock's file
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from forecaster.features.factors import FACTORS
from forecaster.models.panel.baselines import FactorScore, FeatureRegressor
from forecaster.models.panel.model import PanelTransformer
from forecaster.models.stock.baselines import (
    ARForecast,
    HistoricalMean,
    RidgeForecast,
    ZeroForecast,
    seed_recipe,
)

DEFAULT_MODEL = "transformer"
# What a run hands a model (where its constructor takes them and the user did not set them).
RUN_KEYS = ("horizon", "execution", "features")


@dataclass(frozen=True)
class Registered:
    """A model's name and how it is built.

    Attributes:
        name: the name reports, verdicts and exports give it.
        panel: builds the model for a folder of stocks (``None``: not for a panel).
        one_stock: builds it for one stock's file (``None``: not for one stock).
        fixed: keywords the name fixes (``lightgbm``: ``FeatureRegressor(estimator="lightgbm")``).
    """

    name: str
    panel: Callable | None
    one_stock: Callable | None = None
    fixed: Mapping = field(default_factory=dict)

    def factory(self, panel: bool) -> Callable:
        built = self.panel if panel else self.one_stock
        if built is None:
            kind = "a folder of stocks" if panel else "one stock"
            raise ValueError(f"{self.name} is not a model for {kind}")
        return built

    def parameters(self, panel: bool) -> dict[str, object]:
        """``{keyword: default}`` a user may set (the run's and the name's own left out)."""
        sig = inspect.signature(self.factory(panel))
        return {k: (None if p.default is inspect.Parameter.empty else p.default)
                for k, p in sig.parameters.items()
                if k not in self.fixed and k not in RUN_KEYS and k != "self"
                and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}

    def build(self, panel: bool, run: Mapping | None = None, **kwargs):
        """The estimator: ``kwargs``, the name's fixed keywords, and of ``run`` (``horizon``,
        ``execution``, ``features``) those the constructor takes and ``kwargs`` do not set."""
        factory = self.factory(panel)
        takes = inspect.signature(factory).parameters
        given = {k: v for k, v in (run or {}).items() if k in takes and k not in kwargs}
        return factory(**self.fixed, **given, **kwargs)


MODELS: dict[str, Registered] = {}


def register(name: str, panel: Callable | None, one_stock: Callable | None = None, **fixed) -> None:
    """Make ``name`` a model a run can test or compare (see the module's docstring)."""
    if name in MODELS:
        raise ValueError(f"a model named {name!r} is registered already")
    MODELS[name] = Registered(name, panel, one_stock, dict(fixed))


def model_names(panel: bool) -> list[str]:
    """The registered names usable on a folder of stocks (``panel``) or one stock."""
    return [n for n, m in MODELS.items() if (m.panel if panel else m.one_stock) is not None]


def registered(name: str, panel: bool) -> Registered:
    """The model named ``name``; an unknown name, or one not for this kind of data, is a
    ``ValueError`` naming what is known."""
    model = MODELS.get(name)
    kind = "a folder of stocks" if panel else "one stock's file"
    known = ", ".join(model_names(panel))
    if model is None:
        raise ValueError(f"unknown model {name!r}; expected one of: {known}")
    if (model.panel if panel else model.one_stock) is None:
        raise ValueError(f"{name!r} is not a model for {kind}; expected one of: {known}")
    return model


def _one_stock_transformer(horizon: int = 1, features=None, **params):
    """One stock's Transformer as a walk-forward refits it (lighter than the class defaults)."""
    from forecaster.models.presets import single_stock_transformer

    return single_stock_transformer(horizon=horizon, **({"features": features} if features else {}), **params)


register("transformer", PanelTransformer, one_stock=_one_stock_transformer)
register("gbm", FeatureRegressor, estimator="gbm")
register("lightgbm", FeatureRegressor, estimator="lightgbm")
register("ridge_features", FeatureRegressor, estimator="ridge")
for _factor in FACTORS:
    register(_factor, FactorScore, factor=_factor)
register("zero", ZeroForecast, one_stock=ZeroForecast)
register("hist_mean", HistoricalMean, one_stock=HistoricalMean)
register("ar5", ARForecast, one_stock=ARForecast)
register("ridge", RidgeForecast, one_stock=RidgeForecast)
register("seed", seed_recipe, one_stock=seed_recipe)
