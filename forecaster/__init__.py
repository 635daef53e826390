"""forecaster: a causal Transformer (built on :mod:`seq2seq.core`) forecasting daily A-share
log returns."""

__version__ = "0.1.0"
