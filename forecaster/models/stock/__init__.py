"""Single-stock models: the causal Transformer forecaster, the seed recipe and time-series
baselines; input ``{code: frame}``."""
