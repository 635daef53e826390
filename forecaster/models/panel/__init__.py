"""Panel models: the cross-sectional panel Transformer and its baselines; input a
:class:`~forecaster.data.panel.Panel`."""
