"""forecaster: a causal Transformer (built on :mod:`seq2seq.core`) forecasting daily A-share
log returns."""

from .estimator import CausalTransformerForecaster

__all__ = ["CausalTransformerForecaster"]
__version__ = "0.1.0"
