"""Statistics of forecasts, pure functions of arrays and frames (nothing else in the package
is imported here): point metrics and Diebold-Mariano on return forecasts, cross-sectional
information coefficients, quantile portfolios and HAC tests."""

from forecaster.metrics.cross_section import (
    TRADING_DAYS,
    daily_ic,
    ic_by_horizon,
    ic_difference_test,
    ic_summary,
    quantile_returns,
    quantile_summary,
)
from forecaster.metrics.forecast import (
    dm_table,
    groups_of,
    loss_differential,
    point_metrics,
    stat_text,
    summarise,
)
from forecaster.metrics.hac import diebold_mariano, hln_factor, holm, newey_west_lags

__all__ = [
    "TRADING_DAYS",
    "daily_ic",
    "diebold_mariano",
    "dm_table",
    "groups_of",
    "hln_factor",
    "holm",
    "ic_by_horizon",
    "ic_difference_test",
    "ic_summary",
    "loss_differential",
    "newey_west_lags",
    "point_metrics",
    "quantile_returns",
    "quantile_summary",
    "stat_text",
    "summarise",
]
