"""A point-in-time risk model (Barra CNE5-style, reduced to what daily bars and a market value
allow): style exposures (:mod:`~forecaster.risk.exposures`), daily factor regressions, factor
covariance and specific variances from trailing windows (:mod:`~forecaster.risk.model`,
:mod:`~forecaster.risk.estimators`), and the bias statistic that checks them
(:mod:`~forecaster.risk.bias`). Imports the package's data and metrics parts only."""

from forecaster.risk.bias import bias_statistic, book_outcomes, rolling_bias
from forecaster.risk.exposures import STYLES, style_exposures
from forecaster.risk.model import RiskModel, RiskModelConfig, RiskSnapshot, universe_key

__all__ = [
    "STYLES",
    "RiskModel",
    "RiskModelConfig",
    "RiskSnapshot",
    "bias_statistic",
    "book_outcomes",
    "rolling_bias",
    "style_exposures",
    "universe_key",
]
