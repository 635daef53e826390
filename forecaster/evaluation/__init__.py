"""Evaluation: expanding-window walk-forward over folds (local processes or Ray), the fold
store that lets a run resume, and the scoring of every model's out-of-sample forecasts
(statistics, tests and backtests) that a report renders."""
