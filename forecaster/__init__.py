"""forecaster: causal Transformers (built on :mod:`seq2seq.core`) for daily A-share returns:
the cross-section of a panel of stocks (:class:`PanelTransformer`) and one stock's log returns
(:class:`CausalTransformerForecaster`), with loaders, walk-forward evaluation, A-share
backtests and reports. See ARCHITECTURE.md for the parts and how data flows through them.

The public names below are imported on first use, so that ``forecaster.data``,
``forecaster.metrics`` and ``forecaster.portfolio`` load without torch.
"""

from importlib import import_module

__version__ = "0.1.0"

# name -> the module that defines it
_PUBLIC = {
    "CausalTransformerForecaster": "forecaster.models.stock.estimator",
    "PanelTransformer": "forecaster.models.panel.model",
    "Panel": "forecaster.data.panel",
    "walk_forward": "forecaster.evaluation.walkforward",
    "WalkForwardConfig": "forecaster.evaluation.folds",
    "WalkForwardResult": "forecaster.evaluation.walkforward",
    "load_csv": "forecaster.data.daily.loading",
    "load_dir": "forecaster.data.daily.folders",
    "synthetic_panel": "forecaster.data.synthetic.daily",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'forecaster' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
