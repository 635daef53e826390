"""The models: sklearn-style estimators with ``fit``/``predict`` (see :mod:`.interface`).

* ``stock/``: one stock's causal Transformer, the seed recipe and time-series baselines.
* ``panel/``: the cross-sectional panel Transformer and its baselines (factor scores,
  gradient boosting and ridge on the same features).
* :mod:`.training`: the training loop shared by both Transformers.
* :mod:`.presets`: the model sets a run compares.
"""
