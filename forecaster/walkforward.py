"""Walk-forward evaluation that never leaks.

The calendar is the union of the stocks' trading days. Fold ``i`` has a training cut-off
``cut_i`` (the last day whose data, return included, any model of the fold may see); models,
scalers and baselines are fit on rows up to ``cut_i`` only (the last ``train_days`` of them
with ``scheme="rolling"``), then forecast the days ``cut_i + purge .. cut_i + purge +
retrain_every - 1`` (every ``step``-th). ``purge >= horizon`` keeps the last training target
away from the first forecast. Cut-offs advance by ``retrain_every`` days, so the test blocks
tile the calendar after the first ``train_days``.

Folds run in parallel processes (joblib, ``n_jobs``); each task runs torch with
``threads_per_task`` threads, so results are identical whatever ``n_jobs`` is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
from joblib import Parallel, delayed
from sklearn.base import clone
from tqdm.auto import tqdm

from .features import log_returns, mask_suspended
from .interface import input_kind
from .labels import EXECUTIONS, by_forecast_date, close_to_close, tradeable_label
from .panel import Panel

log = logging.getLogger(__name__)

SCHEMES = ("expanding", "rolling")
LABELS = ("tradeable", "close")


@dataclass
class WalkForwardConfig:
    """Fold layout and execution of a walk-forward run.

    Attributes:
        scheme: ``"expanding"`` (all history up to the cut-off) or ``"rolling"``.
        train_days: calendar days before the first cut-off; the window length when rolling.
        retrain_every: days between refits, i.e. days forecast per fold (21 ~ monthly).
        purge: days from a cut-off to its first forecast; ``None`` means ``horizon``.
        step: forecast every ``step``-th day of each block.
        horizon: the forecast horizon H of the models (days ahead).
        min_stock_days: a stock joins a fold only with this many days up to the cut-off.
        margin_days: days of history before each block given to ``predict`` (>= the longest
            input window any model needs).
        n_jobs: parallel processes (joblib semantics, -1 = all cores).
        threads_per_task: torch threads inside each task.
        start, end: optional bounds (dates) on the forecast days.
        label: what ``actual`` is. ``"tradeable"``: the return a strategy earns from the
            execution on the forecast date to the execution ``horizon`` days later (see
            :mod:`forecaster.labels`; masked where the trade cannot be made), with the
            close-to-close return of the same days as ``actual_close``. ``"close"``: the
            close-to-close log return of the day forecast (the single-stock models' target).
        execution: ``"next_open"`` or ``"close"``, for the tradeable label.
    """

    scheme: str = "expanding"
    train_days: int = 500
    retrain_every: int = 21
    purge: int | None = None
    step: int = 1
    horizon: int = 1
    min_stock_days: int = 120
    margin_days: int = 130
    n_jobs: int = 1
    threads_per_task: int = 1
    start: str | None = None
    end: str | None = None
    progress: bool = True
    label: str = "tradeable"
    execution: str = "next_open"

    def __post_init__(self) -> None:
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {self.scheme!r}")
        for name in ("train_days", "retrain_every", "step", "horizon", "min_stock_days",
                     "margin_days", "threads_per_task"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.purge is None:
            self.purge = self.horizon
        if self.purge < self.horizon:
            raise ValueError(f"purge ({self.purge}) must be at least the horizon ({self.horizon}): "
                             "otherwise the last training target overlaps the first forecast")
        if self.label not in LABELS:
            raise ValueError(f"label must be one of {LABELS}, got {self.label!r}")
        if self.execution not in EXECUTIONS:
            raise ValueError(f"execution must be one of {EXECUTIONS}, got {self.execution!r}")
        if self.n_jobs == 0:
            raise ValueError("n_jobs must not be 0 (use 1 for serial, -1 for all cores)")


@dataclass
class Fold:
    """One refit: training rows ``train_start..cut``, forecasts on ``test_days``."""

    fold: int
    train_start: pd.Timestamp
    cut: pd.Timestamp
    test_days: pd.DatetimeIndex

    def as_row(self) -> dict:
        return {"fold": self.fold, "train_start": self.train_start, "train_end": self.cut,
                "test_start": self.test_days[0], "test_end": self.test_days[-1],
                "n_test_days": len(self.test_days)}


def make_folds(calendar: pd.DatetimeIndex, config: WalkForwardConfig) -> list[Fold]:
    """Cut the calendar (sorted trading days) into folds; see the module docstring."""
    calendar = pd.DatetimeIndex(calendar).sort_values().unique()
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
            folds.append(Fold(len(folds), calendar[start], calendar[cut], calendar[block]))
        cut += config.retrain_every
    if not folds:
        raise ValueError(f"no fold fits: {len(calendar)} days, train_days={config.train_days}, "
                         f"purge={config.purge}")
    return folds


@dataclass
class WalkForwardResult:
    """Forecasts of every model on every fold.

    Attributes:
        predictions: index ``date`` (the day forecast); columns ``code, model, fold,
            forecast, actual`` and, with the tradeable label, ``actual_close`` (see
            :class:`WalkForwardConfig`; NaN where no outcome can be scored).
        folds: one row per fold (train_start, train_end, test_start, test_end, n_test_days,
            n_stocks).
        models: ``{(fold, name): fitted model}`` when run with ``keep_models=True``.
        skipped: ``{(fold, name): reason}`` for models that could not be fit on a fold.
    """

    predictions: pd.DataFrame
    folds: pd.DataFrame
    config: WalkForwardConfig
    models: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)


def point_forecast(pred) -> pd.Series:
    """A point forecast from a model's output (Series, or mean / middle quantile column)."""
    if isinstance(pred, pd.Series):
        return pred
    return pred["mean"] if "mean" in pred.columns else pred.iloc[:, pred.shape[1] // 2]


def _run_fold(fold: Fold, models: dict, train: dict, test: dict, threads: int, keep: bool):
    """``train``/``test``: ``{"frames": {code: frame}, "panel": Panel or None}``."""
    """Fit every model on ``train`` and forecast the fold's days from ``test``, with
    ``threads`` torch threads (restored afterwards: with ``n_jobs=1`` this is the caller's
    own process)."""
    previous = torch.get_num_threads()
    if threads != previous:
        torch.set_num_threads(threads)
    try:
        return _fit_and_forecast(fold, models, train, test, keep)
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


def _fit_and_forecast(fold: Fold, models: dict, train: dict, test: dict, keep: bool):
    rows, kept, skipped = [], {}, {}
    for name, template in models.items():
        model = clone(template)
        panel_model = input_kind(model) == "panel"
        try:
            model.fit(train["panel"] if panel_model else train["frames"])
        except ValueError as exc:  # e.g. too little history for this model on this fold
            skipped[(fold.fold, name)] = str(exc)
            continue
        if panel_model:
            # One (date, code) Series for every stock; keep the fold's forecast days.
            long = model.predict(test["panel"])
            long = long[long.index.get_level_values("date").isin(fold.test_days)].dropna()
            rows.append(pd.DataFrame({"code": long.index.get_level_values("code"), "model": name,
                                      "fold": fold.fold, "forecast": long.to_numpy()},
                                     index=pd.DatetimeIndex(long.index.get_level_values("date"))))
            if keep:
                kept[(fold.fold, name)] = model
            continue
        # A model may leave out stocks it had too little training data for (excluded_).
        left_out = set(getattr(model, "excluded_", ()))
        if left_out:
            skipped[(fold.fold, f"{name}:stocks")] = f"left out {sorted(left_out)}"
        frames = train["frames"]
        preds = model.predict({c: f for c, f in test["frames"].items() if c in frames and c not in left_out})
        for code, pred in preds.items():
            point = point_forecast(pred).reindex(fold.test_days).dropna()
            rows.append(pd.DataFrame({"code": code, "model": name, "fold": fold.fold,
                                      "forecast": point.to_numpy()}, index=point.index))
        if keep:
            kept[(fold.fold, name)] = model
    return fold.fold, rows, kept, skipped


def walk_forward(data: pd.DataFrame | Mapping[str, pd.DataFrame], models: dict,
                 config: WalkForwardConfig | None = None, keep_models: bool = False
                 ) -> WalkForwardResult:
    """Run every model on every fold.

    Args:
        data: one canonical frame, or a panel ``{code: frame}``.
        models: ``{name: estimator}``, cloned for each fold. Frame models (the single-stock
            forecaster, time-series baselines, ``PerStock(...)``) get ``{code: frame}`` and
            return ``{code: Series}``; panel models (``input_kind = "panel"``: the panel
            Transformer, factor scores, gradient boosting) get a
            :class:`~forecaster.panel.Panel` slice and return a ``(date, code)`` Series.
        config: fold layout and parallelism.
        keep_models: also return each fold's fitted models (for inspection and tests).
    """
    config = config or WalkForwardConfig()
    panel = dict(data) if isinstance(data, Mapping) else {str(data["code"].iloc[0]): data}
    grid = Panel.from_frames(panel)  # the one aligned panel: panel models' input and the labels
    calendar = grid.dates
    folds = make_folds(calendar, config)
    any_panel = any(input_kind(m) == "panel" for m in models.values())
    tasks = []
    for fold in folds:
        train, test = {}, {}
        for code, frame in panel.items():
            rows = frame.loc[fold.train_start : fold.cut]
            if len(rows) < config.min_stock_days:
                continue
            train[code] = rows
            first = frame.index.searchsorted(fold.test_days[0])
            test[code] = frame.iloc[max(0, first - config.margin_days) :].loc[: fold.test_days[-1]]
        train_panel = test_panel = None
        if any_panel and train:
            codes = sorted(train)
            first = max(0, int(calendar.searchsorted(fold.test_days[0])) - config.margin_days)
            train_panel = grid.slice(fold.train_start, fold.cut).take(codes)
            test_panel = grid.slice(calendar[first], fold.test_days[-1]).take(codes)
        tasks.append((fold, {"frames": train, "panel": train_panel}, {"frames": test, "panel": test_panel}))
    n_stocks = {fold.fold: len(train["frames"]) for fold, train, _ in tasks}
    empty = [fold.fold for fold, train, _ in tasks if not train["frames"]]
    if empty:
        log.warning("%d fold(s) have no stock with %d training days: %s", len(empty),
                    config.min_stock_days, empty)
    jobs = (delayed(_run_fold)(fold, models, train, test, config.threads_per_task, keep_models)
            for fold, train, test in tasks if train["frames"])
    results = Parallel(n_jobs=config.n_jobs, return_as="generator_unordered")(jobs)
    rows, kept, skipped = [], {}, {}
    with tqdm(total=sum(1 for _, t, _ in tasks if t["frames"]), desc="walk-forward", unit="fold",
              disable=not config.progress, dynamic_ncols=True) as bar:
        for _, fold_rows, fold_kept, fold_skipped in results:
            rows.extend(fold_rows)
            kept.update(fold_kept)
            skipped.update(fold_skipped)
            bar.update(1)
    for (fold, name), reason in sorted(skipped.items()):
        log.warning("fold %d: %s skipped: %s", fold, name, reason)
    if not rows:
        raise ValueError("no model produced any forecast")
    predictions = pd.concat(rows)
    predictions.index.name = "date"
    keys = pd.MultiIndex.from_arrays([predictions.index, predictions["code"]])
    if config.label == "tradeable":
        label, _ = tradeable_label(grid, config.horizon, config.execution)
        predictions["actual"] = _long(by_forecast_date(label), grid).reindex(keys).to_numpy()
        predictions["actual_close"] = _long(by_forecast_date(close_to_close(grid, config.horizon)),
                                            grid).reindex(keys).to_numpy()
    else:
        predictions["actual"] = _actuals(panel).reindex(keys).to_numpy()
    predictions = (predictions.reset_index()
                   .sort_values(["model", "code", "date"], kind="stable").set_index("date"))
    folds_table = pd.DataFrame([{**f.as_row(), "n_stocks": n_stocks[f.fold]} for f in folds])
    return WalkForwardResult(predictions, folds_table, config, kept, skipped)


def _long(values, panel: Panel) -> pd.Series:
    """``[D, N]`` values as a Series indexed by ``(date, code)``."""
    index = pd.MultiIndex.from_product([panel.dates, panel.codes], names=["date", "code"])
    return pd.Series(values.ravel(), index=index)


def _actuals(panel: dict[str, pd.DataFrame]) -> pd.Series:
    """Realised log returns indexed by ``(date, code)``; NaN on suspended days, which no
    forecast is scored on."""
    parts = []
    for code, frame in panel.items():
        r = mask_suspended(log_returns(frame, code), frame)
        parts.append(pd.Series(r.to_numpy(), index=pd.MultiIndex.from_arrays(
            [frame.index, [code] * len(frame)], names=["date", "code"])))
    return pd.concat(parts)
