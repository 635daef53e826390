"""forecaster: a causal Transformer (built on :mod:`seq2seq.core`) forecasting daily A-share
log returns."""

__all__ = ["CausalTransformerForecaster"]
__version__ = "0.1.0"


def __getattr__(name: str):
    # Imported on first use so that forecaster.data, .backtest and .metrics load without torch.
    if name == "CausalTransformerForecaster":
        from .estimator import CausalTransformerForecaster

        return CausalTransformerForecaster
    raise AttributeError(f"module 'forecaster' has no attribute {name!r}")
