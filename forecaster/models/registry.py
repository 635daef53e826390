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

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from forecaster.checks import ConfigError
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
        needs: ``(package, extra)`` of an optional package the model imports when it fits
            (``lightgbm``: ``("lightgbm", "lightgbm")``), checked before a run tests it.
    """

    name: str
    panel: Callable | None
    one_stock: Callable | None = None
    fixed: Mapping = field(default_factory=dict)
    needs: tuple[str, str] | None = None

    def factory(self, panel: bool) -> Callable:
        built = self.panel if panel else self.one_stock
        if built is None:
            kind = "a folder of stocks" if panel else "one stock"
            raise ConfigError(f"{self.name} is not a model for {kind}")
        return built

    def check_installed(self) -> None:
        """A :class:`ConfigError` with the install line where the optional package the model
        needs does not import (said before a run, not found on every fold)."""
        if self.needs is None:
            return
        package, extra = self.needs
        try:
            importlib.import_module(package)
        except (ImportError, OSError) as exc:  # OSError: installed, but a library it loads is not
            raise ConfigError(f"{self.name} needs the {package} package, which does not import ({exc}): "
                              f"pip install 'ashare-seq2seq-toolkit[{extra}]'") from None

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


def register(name: str, panel: Callable | None, one_stock: Callable | None = None,
             needs: tuple[str, str] | None = None, **fixed) -> None:
    """Make ``name`` a model a run can test or compare (see the module's docstring); ``needs``:
    ``(package, extra)`` of an optional package it imports."""
    if name in MODELS:  # two registrations of one name: a programming error, not input
        raise ValueError(f"a model named {name!r} is registered already")
    MODELS[name] = Registered(name, panel, one_stock, dict(fixed), needs)


def model_names(panel: bool) -> list[str]:
    """The registered names usable on a folder of stocks (``panel``) or one stock."""
    return [n for n, m in MODELS.items() if (m.panel if panel else m.one_stock) is not None]


def registered(name: str, panel: bool) -> Registered:
    """The model named ``name`` as the model under test; an unknown name, one not for this kind
    of data, or one whose optional package is not installed is a :class:`ConfigError` naming
    what is known (or the install line)."""
    model = MODELS.get(name)
    kind = "a folder of stocks" if panel else "one stock's file"
    known = ", ".join(model_names(panel))
    if model is None:
        raise ConfigError(f"unknown model {name!r}; expected one of: {known}")
    if (model.panel if panel else model.one_stock) is None:
        raise ConfigError(f"{name!r} is not a model for {kind}; expected one of: {known}")
    model.check_installed()
    return model


def _one_stock_transformer(horizon: int = 1, features=None, **params):
    """One stock's Transformer as a walk-forward refits it (lighter than the class defaults)."""
    from forecaster.models.presets import single_stock_transformer

    return single_stock_transformer(horizon=horizon, **({"features": features} if features else {}), **params)


register("transformer", PanelTransformer, one_stock=_one_stock_transformer)
register("gbm", FeatureRegressor, estimator="gbm")
register("lightgbm", FeatureRegressor, estimator="lightgbm", needs=("lightgbm", "lightgbm"))
register("ridge_features", FeatureRegressor, estimator="ridge")
for _factor in FACTORS:
    register(_factor, FactorScore, factor=_factor)
register("zero", ZeroForecast, one_stock=ZeroForecast)
register("hist_mean", HistoricalMean, one_stock=HistoricalMean)
register("ar5", ARForecast, one_stock=ARForecast)
register("ridge", RidgeForecast, one_stock=RidgeForecast)
register("seed", seed_recipe, one_stock=seed_recipe)
