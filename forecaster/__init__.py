"""forecaster: causal Transformers (built on :mod:`seq2seq.core`) for daily A-share returns:
one stock's log returns (:class:`CausalTransformerForecaster`) and the cross-section of a
panel of stocks (:class:`PanelTransformer`)."""

__all__ = ["CausalTransformerForecaster", "PanelTransformer"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Imported on first use so that forecaster.data, .backtest and .metrics load without torch.
    if name == "CausalTransformerForecaster":
        from .estimator import CausalTransformerForecaster

        return CausalTransformerForecaster
    if name == "PanelTransformer":
        from .panel_model import PanelTransformer

        return PanelTransformer
    raise AttributeError(f"module 'forecaster' has no attribute {name!r}")
