"""The fold layout of a walk-forward run: its configuration and the cut of the calendar.

Fold ``i`` has a training cut-off ``cut_i`` (the last day whose data, return included, any
model of the fold may see) and forecasts the days ``cut_i + purge .. cut_i + purge +
retrain_every - 1`` (every ``step``-th); cut-offs advance by ``retrain_every`` days.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.checks import ConfigError, check_choice, check_date
from forecaster.configs import documented, option
from forecaster.data.minute.session import is_bar_calendar
from forecaster.evaluation.backends import BACKENDS
from forecaster.features.labels import EXECUTIONS

SCHEMES = ("expanding", "rolling")
LABELS = ("tradeable", "close")


@documented
@dataclass
class WalkForwardConfig:
    """Fold layout and execution of a walk-forward run."""

    scheme: str = option("expanding", '"expanding" (all history up to the cut-off) or "rolling".')
    train_days: int = option(500,
        "trading days (days of the data's calendar, not calendar days) before the first cut-off; the window "
        "length when rolling.")
    retrain_every: int = option(63,
        "trading days between refits, i.e. days forecast per fold (63 ~ quarterly, 21 ~ monthly).")
    purge: int | None = option(None, "trading days from a cut-off to its first forecast; None means horizon.")
    step: int = option(1, "forecast every step-th day of each block.")
    horizon: int = option(1, "the forecast horizon H of the models (days ahead).")
    min_stock_days: int = option(120, "a stock joins a fold only with this many days up to the cut-off.")
    margin_days: int = option(130,
        "days of history before each block given to predict (>= the longest input window any model needs).")
    n_jobs: int = option(-1,
        "folds fitted at once, in worker processes (-1: one per core; 1: in this process).")
    threads_per_task: int = option(1, "torch threads inside each fold.")
    start: pd.Timestamp | None = option(None, "the first day forecast may be (a date; none: no bound).")
    end: pd.Timestamp | None = option(None, "the last day forecast may be (a date; none: no bound).")
    progress: bool = True
    label: str = option("tradeable",
        'what actual is. "tradeable": the return a strategy earns from the execution on the forecast date to '
        "the execution horizon days later (masked where the trade cannot be made: suspended, limit-up at a "
        'buy, no bar), with the close-to-close return of the same days as actual_close. "close": the '
        "close-to-close log return of the day forecast (the single-stock models' target).")
    execution: str = option("next_open", '"next_open" or "close", for the tradeable label.')
    resume: bool = option(False,
        "continue an interrupted run from the finished folds it saved in its report folder's folds/ (refused "
        "if its data or configuration differ from this run's).")
    backend: str = option("local",
        '"local" (worker processes, n_jobs) or "ray" (every fold a task on a Ray cluster, the data in its '
        "object store once). Results are identical.")
    address: str = option("", 'the Ray cluster to use ("HOST:6379"); empty starts a local one.')
    warm_start: int | None = option(None,
        "0: every fold fits its models from scratch. s > 0: fold k's panel Transformer starts from the "
        "networks fold k - s ended with and trains its warm_epochs on the fold's whole history; s folds run "
        "at a time (so s >= the workers keeps them busy). None: past 500 stocks (a whole market) 2, else 0, "
        "from the data alone: whatever n_jobs and the machine, the same folds start from the same states.")

    def __post_init__(self) -> None:
        check_choice("scheme", self.scheme, SCHEMES)
        for name in ("train_days", "retrain_every", "step", "horizon", "min_stock_days",
                     "margin_days", "threads_per_task"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.purge is None:
            self.purge = self.horizon
        if self.purge < self.horizon:
            raise ConfigError(f"purge ({self.purge}) must be at least the horizon ({self.horizon}): "
                             "otherwise the last training target overlaps the first forecast")
        check_choice("label", self.label, LABELS)
        check_choice("execution", self.execution, EXECUTIONS)
        check_choice("backend", self.backend, BACKENDS)
        if self.warm_start is not None and int(self.warm_start) < 0:
            raise ConfigError(f"warm_start must be >= 0 (0: no warm start), got {self.warm_start}")
        if self.n_jobs == 0:
            raise ConfigError("n_jobs must not be 0 (use 1 for serial, -1 for all cores)")
        self.start = check_date("start", self.start, allow_none=True)
        self.end = check_date("end", self.end, allow_none=True)
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ConfigError(f"start ({self.start.date()}) is after end ({self.end.date()})")


@dataclass
class Fold:
    """One refit: training rows ``train_start..cut``, forecasts on ``test_days``.
    ``signal_start`` is the trading day before the first test day, whose close the first
    forecast is made after (what Qlib dates a score by; None for folds of minute bars)."""

    fold: int
    train_start: pd.Timestamp
    cut: pd.Timestamp
    test_days: pd.DatetimeIndex
    signal_start: pd.Timestamp | None = None

    def as_row(self) -> dict:
        row = {"fold": self.fold, "train_start": self.train_start, "train_end": self.cut,
               "test_start": self.test_days[0], "test_end": self.test_days[-1],
               "n_test_days": len(self.test_days)}
        if self.signal_start is not None:
            row["signal_start"] = self.signal_start
        return row


def make_folds(calendar: pd.DatetimeIndex, config: WalkForwardConfig) -> list[Fold]:
    """Cut the calendar (sorted trading days) into folds; see the module docstring.

    A calendar of minute bars is cut by trading day: ``train_days``, ``retrain_every``,
    ``purge`` and ``step`` count days, a fold trains on every bar up to its cut-off day's close
    and forecasts every bar of its test days (the first bar of a day from the previous day's
    last bar)."""
    calendar = pd.DatetimeIndex(calendar).sort_values().unique()
    if is_bar_calendar(calendar):
        days = calendar.normalize()
        return [_bar_fold(f, calendar, days) for f in make_folds(days.unique(), config)]
    lo = calendar.searchsorted(pd.Timestamp(config.start)) if config.start else 0
    hi = calendar.searchsorted(pd.Timestamp(config.end), side="right") if config.end else len(calendar)
    folds, cut = [], config.train_days - 1
    while True:
        first = max(cut + config.purge, lo)
        if first >= hi:
            break
        block = np.arange(first, min(cut + config.purge + config.retrain_every, hi))[:: config.step]
        if len(block):
            start = max(0, cut - config.train_days + 1) if config.scheme == "rolling" else 0
            folds.append(Fold(len(folds), calendar[start], calendar[cut], calendar[block],
                              calendar[block[0] - 1]))
        cut += config.retrain_every
    if not folds:
        first = config.start.date() if config.start else "the first day"
        last = config.end.date() if config.end else "the last day"
        within = f" between start {first} and end {last}" if config.start or config.end else ""
        # name what the user typed: a purge nobody set is the horizon's
        purge = (f"--horizon {config.horizon} (the purge gap between a cut-off and its first forecast)"
                 if config.purge == config.horizon else f"--purge {config.purge}")
        fixes = "lower --train-days" + (" or --horizon" if config.horizon > 1 else "")
        if config.horizon >= len(calendar) // 2:
            fixes = f"choose a --horizon well below the {len(calendar)} days of the data"
        raise ConfigError(f"no fold fits: the data hold {len(calendar)} trading days, and --train-days "
                         f"{config.train_days} plus {purge} leave no day to forecast{within}; {fixes}, "
                         "or give more data")
    return folds


def _bar_fold(fold: Fold, bars: pd.DatetimeIndex, days: pd.DatetimeIndex) -> Fold:
    """A fold of trading days as a fold of the bars of those days."""
    train_start = bars[days.searchsorted(fold.train_start)]
    cut = bars[days.searchsorted(fold.cut, side="right") - 1]
    return Fold(fold.fold, train_start, cut, bars[days.isin(fold.test_days)])
