"""Walk-forward evaluation that never leaks.

The calendar is the union of the stocks' trading days. Fold ``i`` has a training cut-off
``cut_i`` (the last day whose data, return included, any model of the fold may see); models,
scalers and baselines are fit on rows up to ``cut_i`` only (the last ``train_days`` of them
with ``scheme="rolling"``), then forecast the days ``cut_i + purge .. cut_i + purge +
retrain_every - 1`` (every ``step``-th). ``purge >= horizon`` keeps the last training target
away from the first forecast. Cut-offs advance by ``retrain_every`` days, so the test blocks
tile the calendar after the first ``train_days``.

Folds run in parallel processes (joblib, ``n_jobs``); each task runs torch with
``threads_per_task`` threads, so results are identical whatever ``n_jobs`` is. Given a
``checkpoint_dir``, each finished fold is written there at once (:mod:`forecaster.evaluation.fold_store`)
and ``resume=True`` continues an interrupted run from its finished folds.

A model that raises on a fold does not stop the run: a ``ValueError`` in ``fit`` (too little
data for it) is recorded as *skipped*, any other exception as *failed* with a summary of
where it was raised; the other models and folds go on.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import tempfile
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from joblib import effective_n_jobs
from sklearn.base import clone
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from forecaster.checks import check_choice, check_date
from forecaster.data.intraday import is_bar_calendar
from forecaster.data.panel import Panel, PanelFiles
from forecaster.evaluation.backends import BACKENDS, release_freed_heap, run_local, run_ray, stop_local
from forecaster.evaluation.fold_store import FoldOutput, FoldStore, data_fingerprint, run_description
from forecaster.evaluation.warm_start import in_waves
from forecaster.features.labels import EXECUTIONS, by_forecast_date, close_to_close, tradeable_label
from forecaster.features.series import log_returns, mask_suspended
from forecaster.models.interface import input_kind
from forecaster.models.panel.sizing import SizeRules

log = logging.getLogger(__name__)

SCHEMES = ("expanding", "rolling")
LABELS = ("tradeable", "close")


@dataclass
class WalkForwardConfig:
    """Fold layout and execution of a walk-forward run.

    Attributes:
        scheme: ``"expanding"`` (all history up to the cut-off) or ``"rolling"``.
        train_days: trading days (days of the data's calendar, not calendar days) before the
            first cut-off; the window length when rolling.
        retrain_every: trading days between refits, i.e. days forecast per fold (63 ~
            quarterly, 21 ~ monthly).
        purge: trading days from a cut-off to its first forecast; ``None`` means ``horizon``.
        step: forecast every ``step``-th day of each block.
        horizon: the forecast horizon H of the models (days ahead).
        min_stock_days: a stock joins a fold only with this many days up to the cut-off.
        margin_days: days of history before each block given to ``predict`` (>= the longest
            input window any model needs).
        n_jobs: parallel processes (joblib semantics, -1 = all cores; 1 runs in this process).
        threads_per_task: torch threads inside each task.
        start, end: optional bounds (dates) on the forecast days.
        label: what ``actual`` is. ``"tradeable"``: the return a strategy earns from the
            execution on the forecast date to the execution ``horizon`` days later (see
            :mod:`forecaster.features.labels`; masked where the trade cannot be made), with the
            close-to-close return of the same days as ``actual_close``. ``"close"``: the
            close-to-close log return of the day forecast (the single-stock models' target).
        execution: ``"next_open"`` or ``"close"``, for the tradeable label.
        resume: continue the run stored in ``walk_forward``'s ``checkpoint_dir`` from its
            finished folds (refused if its data or configuration differ from this run's).
        backend: ``"local"`` (joblib processes, ``n_jobs``) or ``"ray"`` (every fold a task
            on a Ray cluster, the data in its object store once; see
            :mod:`forecaster.evaluation.backends`). Results are identical.
        address: the Ray cluster to use (``"HOST:6379"``); empty starts a local one.
        warm_start: 0: every fold fits its models from scratch. ``s`` > 0: fold ``k``'s
            panel Transformer starts from the networks fold ``k - s`` ended with and trains
            its ``warm_epochs`` on the fold's whole history (:mod:`.warm_start`); ``s`` folds
            run at a time (so ``s`` >= the workers keeps them busy). ``None``: past 500
            stocks (a whole market) 2, or the number of workers if larger; else 0
            (:class:`~forecaster.models.panel.sizing.SizeRules`; with 2: on the Shenzhen market
            rank IC 0.0967 / ICIR 1.034 against 0.0961 / 1.006 for full refits in 23.0 minutes
            against 39.1; on cn_qlib's 2025-2026 CSI 300 members 0.0603 / 0.311 against 0.0593 /
            0.295, docs/scale.md).
    """

    scheme: str = "expanding"
    train_days: int = 500
    retrain_every: int = 63
    purge: int | None = None
    step: int = 1
    horizon: int = 1
    min_stock_days: int = 120
    margin_days: int = 130
    n_jobs: int = -1
    threads_per_task: int = 1
    start: pd.Timestamp | None = None
    end: pd.Timestamp | None = None
    progress: bool = True
    label: str = "tradeable"
    execution: str = "next_open"
    resume: bool = False
    backend: str = "local"
    address: str = ""
    warm_start: int | None = None

    def __post_init__(self) -> None:
        check_choice("scheme", self.scheme, SCHEMES)
        for name in ("train_days", "retrain_every", "step", "horizon", "min_stock_days",
                     "margin_days", "threads_per_task"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.purge is None:
            self.purge = self.horizon
        if self.purge < self.horizon:
            raise ValueError(f"purge ({self.purge}) must be at least the horizon ({self.horizon}): "
                             "otherwise the last training target overlaps the first forecast")
        check_choice("label", self.label, LABELS)
        check_choice("execution", self.execution, EXECUTIONS)
        check_choice("backend", self.backend, BACKENDS)
        if self.warm_start is not None and int(self.warm_start) < 0:
            raise ValueError(f"warm_start must be >= 0 (0: no warm start), got {self.warm_start}")
        if self.n_jobs == 0:
            raise ValueError("n_jobs must not be 0 (use 1 for serial, -1 for all cores)")
        self.start = check_date("start", self.start, allow_none=True)
        self.end = check_date("end", self.end, allow_none=True)
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ValueError(f"start ({self.start.date()}) is after end ({self.end.date()})")


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
            folds.append(Fold(len(folds), calendar[start], calendar[cut], calendar[block]))
        cut += config.retrain_every
    if not folds:
        first = config.start.date() if config.start else "the first day"
        last = config.end.date() if config.end else "the last day"
        within = f" between start {first} and end {last}" if config.start or config.end else ""
        raise ValueError(f"no fold fits: the data hold {len(calendar)} trading days, and train_days="
                         f"{config.train_days} (--train-days) plus purge={config.purge} leave no day to "
                         f"forecast{within}; lower --train-days or give more data")
    return folds


def _bar_fold(fold: Fold, bars: pd.DatetimeIndex, days: pd.DatetimeIndex) -> Fold:
    """A fold of trading days as a fold of the bars of those days."""
    train_start = bars[days.searchsorted(fold.train_start)]
    cut = bars[days.searchsorted(fold.cut, side="right") - 1]
    return Fold(fold.fold, train_start, cut, bars[days.isin(fold.test_days)])


@dataclass
class WalkForwardResult:
    """Forecasts of every model on every fold.

    Attributes:
        predictions: index ``date`` (the day forecast); columns ``code, model, fold,
            forecast, actual`` and, with the tradeable label, ``actual_close`` (see
            :class:`WalkForwardConfig`; NaN where no outcome can be scored).
        folds: one row per fold (train_start, train_end, test_start, test_end, n_test_days,
            n_stocks).
        models: ``{(fold, name): fitted model}`` when run with ``keep_models=True`` (folds
            taken from a resumed run have none).
        skipped: ``{(fold, name): reason}`` for models that could not be fit on a fold
            (``(fold, "name:stocks")`` for stocks a per-stock model left out).
        failed: ``{(fold, name): "ExceptionType: message (at file:line in function)"}`` for
            models that raised on a fold.
        excluded: ``{(fold, name): [codes]}``, stocks a model left out of a fold it ran on.
        members: ``{fold: [codes]}``, the stocks with ``min_stock_days`` rows up to each
            fold's cut-off (the others were not given to the fold's models).
        seconds: ``{(fold, name): seconds}`` a model took to fit and forecast a fold (in its
            worker; folds resumed from a checkpoint written before this field have none).
        n_resumed: folds taken from a checkpoint rather than run.
        timings: wall seconds of running the folds (``folds``) and of assembling their
            forecasts with the labels (``assembly``).
        outside: ``{code: reason}``, stocks whose every forecast lay outside the run's
            universe (:func:`forecaster.evaluation.universe.restrict_to_members`).
    """

    predictions: pd.DataFrame
    folds: pd.DataFrame
    config: WalkForwardConfig
    models: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    excluded: dict = field(default_factory=dict)
    members: dict = field(default_factory=dict)
    n_resumed: int = 0
    seconds: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    outside: dict = field(default_factory=dict)


def point_forecast(pred) -> pd.Series:
    """A point forecast from a model's output (Series, or mean / middle quantile column)."""
    if isinstance(pred, pd.Series):
        return pred
    return pred["mean"] if "mean" in pred.columns else pred.iloc[:, pred.shape[1] // 2]


def _run_fold(fold: Fold, models: dict, train: dict, test: dict, threads: int, keep: bool,
              warm: dict | None = None):
    """Fit every model on ``train`` (``{"frames": {code: frame}, "panel": Panel or None}``)
    and forecast the fold's days from ``test``, with ``threads`` torch threads (restored
    afterwards: with ``n_jobs=1`` this is the caller's own process). Returns the fold's
    :class:`FoldOutput` and ``{(fold, name): model}`` when ``keep``. ``warm``: ``None`` (no
    warm start) or ``{name: state}`` an earlier fold ended with (:mod:`.warm_start`); each
    warm-startable model then starts from its state and reports its own in the output."""
    previous = torch.get_num_threads()
    if threads != previous:
        torch.set_num_threads(threads)
    # OpenMP/BLAS pools too (gradient boosting): spinning threads beyond the task's share
    # of the cores make small fits many times slower on a busy machine.
    limits = threadpool_limits(limits=threads)
    try:
        output, kept = FoldOutput(fold.fold, []), {}
        for name, template in models.items():
            start = time.perf_counter()
            try:
                model = _fit_and_forecast(fold, name, template, train, test, output,
                                          None if warm is None else warm.get(name))
                if warm is not None and hasattr(model, "warm_state"):
                    output.states[name] = model.warm_state()
            except _Skip as exc:
                output.skipped[(fold.fold, name)] = str(exc)
                continue
            except Exception as exc:  # one model's bug must not sink a long run: record it
                output.failed[(fold.fold, name)] = failure_summary(exc)
                continue
            finally:
                output.seconds[(fold.fold, name)] = time.perf_counter() - start
            if keep:
                kept[(fold.fold, name)] = model
        return output, kept
    finally:
        limits.restore_original_limits()
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)


class _Skip(Exception):
    """A model could not be fit on a fold for lack of data (its ``fit`` raised ValueError)."""


def failure_summary(exc: BaseException) -> str:
    """``"Type: message (at file:line in function)"``, the frame that raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return f"{type(exc).__name__}: {exc}"
    last = frames[-1]
    return f"{type(exc).__name__}: {exc} (at {Path(last.filename).name}:{last.lineno} in {last.name})"


def _fit_and_forecast(fold: Fold, name: str, template, train: dict, test: dict, output: FoldOutput,
                      init: dict | None = None):
    """Fit a fresh copy of ``template`` (started from ``init``, an earlier fold's state, when
    given) and append its forecast rows to ``output``."""
    model = clone(template)
    if init is not None and hasattr(model, "warm_from"):
        model.warm_from(init)
    panel_model = input_kind(model) == "panel"
    try:
        model.fit(train["panel"] if panel_model else train["frames"])
    except ValueError as exc:  # e.g. too little history for this model on this fold
        raise _Skip(str(exc)) from exc
    if panel_model:
        # One (date, code) Series for every stock; keep the fold's forecast days.
        long = model.predict(test["panel"])
        long = long[long.index.get_level_values("date").isin(fold.test_days)].dropna()
        output.rows.append(pd.DataFrame({"code": long.index.get_level_values("code"), "model": name,
                                         "fold": fold.fold, "forecast": long.to_numpy()},
                                        index=pd.DatetimeIndex(long.index.get_level_values("date"))))
        return model
    # A model may leave out stocks it had too little training data for (excluded_).
    left_out = set(getattr(model, "excluded_", ()))
    if left_out:
        output.excluded[(fold.fold, name)] = sorted(left_out)
        output.skipped[(fold.fold, f"{name}:stocks")] = f"left out {sorted(left_out)}"
    frames = train["frames"]
    preds = model.predict({c: f for c, f in test["frames"].items() if c in frames and c not in left_out})
    # One part per model and fold, not per stock: a whole market's thousands of small frames
    # cost more to pickle, gather and index than their rows.
    codes, days, values = [], [], []
    for code, pred in preds.items():
        point = point_forecast(pred).reindex(fold.test_days).dropna()
        codes.append(np.full(len(point), code, dtype=object))
        days.append(point.index.to_numpy("datetime64[ns]"))
        values.append(point.to_numpy(np.float64))
    if codes:
        output.rows.append(pd.DataFrame({"code": np.concatenate(codes), "model": name, "fold": fold.fold,
                                         "forecast": np.concatenate(values)},
                                        index=pd.DatetimeIndex(np.concatenate(days))))
    return model


def fold_members(grid: Panel, folds: list[Fold], min_stock_days: int) -> dict[int, list[str]]:
    """``{fold: codes}``: the stocks with at least ``min_stock_days`` bars from the fold's
    training start to its cut-off (vectorised: cumulative bar counts over the calendar)."""
    counts = np.vstack([np.zeros((1, len(grid.codes)), int), np.cumsum(grid.listed, axis=0)])
    out = {}
    for f in folds:
        lo, hi = grid.dates.searchsorted(f.train_start), grid.dates.searchsorted(f.cut, side="right")
        out[f.fold] = [str(c) for c in grid.codes[(counts[hi] - counts[lo]) >= min_stock_days]]
    return out


def _fold_inputs(panel: dict, grid: Panel | PanelFiles, fold: Fold, codes: list[str],
                 config: WalkForwardConfig, kinds: set[str]):
    """The inputs of one fold's models for the stocks ``codes``: rows up to the cut-off for
    training, and the forecast block with ``margin_days`` of history before it (in-memory
    copies; ``grid`` given as files is mapped only while they are cut)."""
    if isinstance(grid, PanelFiles):
        grid = grid.open()
    calendar = grid.dates
    train, test = {}, {}
    if "frames" in kinds:
        for code in codes:
            frame = panel[code]
            train[code] = frame.loc[fold.train_start : fold.cut]
            first = frame.index.searchsorted(fold.test_days[0])
            test[code] = frame.iloc[max(0, first - config.margin_days) :].loc[: fold.test_days[-1]]
    train_panel = test_panel = None
    if "panel" in kinds:
        first = max(0, int(calendar.searchsorted(fold.test_days[0])) - config.margin_days)
        train_panel = grid.slice(fold.train_start, fold.cut).take(codes)
        test_panel = grid.slice(calendar[first], fold.test_days[-1]).take(codes)
    return {"frames": train, "panel": train_panel}, {"frames": test, "panel": test_panel}


def _fold_task(shared, fold: Fold, codes, config, kinds, models, threads: int, keep: bool,
               warm: dict | None = None):
    """One fold, run where the whole data set is at hand (a joblib worker, mapping the
    panel's files, or a Ray task): slice, fit, forecast."""
    train, test = _fold_inputs(*shared, fold, codes, config, kinds)
    result = _run_fold(fold, models, train, test, threads, keep, warm)
    del train, test
    release_freed_heap()  # a worker waits between folds (and after the last) holding only this
    return result


def fold_store(data: Mapping[str, pd.DataFrame] | Panel, models: dict, config: WalkForwardConfig,
               checkpoint_dir: str | Path, train_members: np.ndarray | None = None) -> FoldStore:
    """The store of a run's finished folds in ``checkpoint_dir``, fingerprinted by ``data``
    (``{code: frame}`` or the Panel ``walk_forward`` would fingerprint), the configuration and
    the training universe (folds trained on other stock-days are not resumed);
    ``store.check(config.resume)`` validates a resume without writing."""
    run = run_description(config, models)
    if train_members is not None:
        mask = np.packbits(np.asarray(train_members, dtype=bool))
        run["train_members"] = hashlib.sha256(mask.tobytes()).hexdigest()[:16]
    return FoldStore(checkpoint_dir, {"data": data_fingerprint(data), "run": run})


def walk_forward(data: pd.DataFrame | Mapping[str, pd.DataFrame] | Panel, models: dict,
                 config: WalkForwardConfig | None = None, keep_models: bool = False,
                 checkpoint_dir: str | Path | None = None, panel: Panel | None = None,
                 store: FoldStore | None = None, train_members: np.ndarray | None = None
                 ) -> WalkForwardResult:
    """Run every model on every fold.

    Args:
        data: one canonical frame, a panel ``{code: frame}``, or a built
            :class:`~forecaster.data.panel.Panel` (panel models and the tradeable label only; the
            caller can then drop its frames, which at whole-market size are as large as the
            panel itself).
        models: ``{name: estimator}``, cloned for each fold. Frame models (the single-stock
            forecaster, time-series baselines, ``PerStock(...)``) get ``{code: frame}`` and
            return ``{code: Series}``; panel models (``input_kind = "panel"``: the panel
            Transformer, factor scores, gradient boosting) get a
            :class:`~forecaster.data.panel.Panel` slice and return a ``(date, code)`` Series.
        config: fold layout and parallelism; ``config.resume`` continues the run stored in
            ``checkpoint_dir``.
        keep_models: also return each fold's fitted models (for inspection and tests).
        checkpoint_dir: folder for finished folds (written as they finish), so a crash or
            Ctrl-C loses only the folds in progress.
        panel: the :class:`~forecaster.data.panel.Panel` of ``data`` when the caller has built
            it already (the pipeline builds it once and hands it to the scoring and the
            backtests too); otherwise it is built here.
        store: the run's :func:`fold_store`, when the caller built it to check a resume before
            writing anything (instead of ``checkpoint_dir``).
        train_members: ``[days, stocks]`` bool on the panel's calendar: models learn only the
            labels of these stock-days (a training universe; features still see every stock);
            ``None``: every stock-day. The forecasts and their ``actual`` are not affected.

    Raises:
        forecaster.evaluation.fold_store.ResumeError: resuming a run whose data or configuration differ.
        ValueError: no fold fits the calendar, no model produced any forecast, or a Panel
            given with a frame model or the close label.
    """
    config = config or WalkForwardConfig()
    kinds = {input_kind(m) for m in models.values()}
    if isinstance(data, Panel):
        needs_frames = [name for name, m in models.items() if input_kind(m) == "frames"]
        if needs_frames or config.label == "close":
            raise ValueError("walk_forward was given a Panel, but "
                             + (f"model(s) {needs_frames} read {{code: frame}}" if needs_frames
                                else "label='close' reads the frames")
                             + "; pass the frames instead")
        frames_in, grid = {}, data
    else:
        frames_in = dict(data) if isinstance(data, Mapping) else {str(data["code"].iloc[0]): data}
        # the one aligned panel: panel models' input and the labels
        grid = panel if panel is not None else Panel.from_frames(frames_in)
    if config.warm_start is None:  # by the market's breadth, as the experiment resolves it
        config = dataclasses.replace(config, warm_start=SizeRules().warm_start(grid.n_stocks,
                                                                               effective_n_jobs(config.n_jobs)))
    folds = make_folds(grid.dates, config)
    if config.resume and checkpoint_dir is None and store is None:
        raise ValueError("resume needs a checkpoint folder (the report folder of the interrupted run)")
    done: dict[int, FoldOutput] = {}
    if store is None and checkpoint_dir is not None:
        store = fold_store(frames_in or grid, models, config, checkpoint_dir, train_members)
    if store is not None:
        done = store.start(config.resume)
    members = fold_members(grid, folds, config.min_stock_days)
    empty = [f.fold for f in folds if not members[f.fold]]
    if empty:
        log.warning("%d fold(s) have no stock with %d training days: %s", len(empty),
                    config.min_stock_days, empty)
    todo = [f for f in folds if members[f.fold] and f.fold not in done]
    tasks = [(fold, members[fold.fold], config, kinds, models, config.threads_per_task, keep_models)
             for fold in todo]
    # Frames travel only when a frame model needs them; the panel goes once to Ray's object
    # store, or into files that every joblib worker maps while it cuts its fold (rather than
    # a pickled copy of each fold's slice per task).
    frames = frames_in if "frames" in kinds else {}
    # the folds' panel: the training universe travels with it; the labels of the scores
    # (_assemble, below) are read on the run's own panel
    folds_grid = grid if train_members is None else dataclasses.replace(
        grid, learn=np.asarray(train_members, dtype=bool), _cache={})
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="forecaster-panel-") as folder:
        if config.backend == "ray":
            def run(wave):
                return run_ray(_fold_task, (frames, folds_grid), wave, config.threads_per_task,
                               config.address or None)
        else:
            shared = folds_grid.to_files(folder) if todo and config.n_jobs != 1 else folds_grid

            def run(wave):  # waves of a warm-started run keep the workers (and their imports)
                return run_local(_fold_task, (frames, shared), wave, config.n_jobs,
                                 stop=not config.warm_start)
        if config.warm_start:  # folds wait for the fold they start from
            results = in_waves(run, tasks, config.warm_start, {k: o.states for k, o in done.items()})
        else:
            results = run(tasks)
        outputs, kept = _collect(results, store, done, len(todo), config.progress)
        if config.warm_start and config.backend != "ray" and config.n_jobs != 1:
            stop_local()
    folds_seconds = time.perf_counter() - started
    rows, skipped, failed, excluded, seconds = [], {}, {}, {}, {}
    for output in sorted(outputs, key=lambda o: o.fold):
        rows.extend(output.rows)
        skipped.update(output.skipped)
        failed.update(output.failed)
        excluded.update(output.excluded)
        seconds.update(getattr(output, "seconds", {}))
    for (fold, name), reason in sorted(skipped.items()):
        log.warning("fold %d: %s skipped: %s", fold, name, reason)
    for (fold, name), reason in sorted(failed.items()):
        log.error("fold %d: %s FAILED: %s", fold, name, reason)
    if not rows:
        raise ValueError("no model produced any forecast"
                         + (f" ({len(failed)} model-fold(s) failed, e.g. {next(iter(failed.values()))})"
                            if failed else ""))
    del outputs, output  # the per-fold parts: as large as the predictions at whole-market size
    started = time.perf_counter()
    predictions = _assemble(rows, grid, frames_in, config)
    release_freed_heap()  # the parts' heap, for whatever the caller does next
    timings = {"folds": folds_seconds, "assembly": time.perf_counter() - started}
    folds_table = pd.DataFrame([{**f.as_row(), "n_stocks": len(members[f.fold])} for f in folds])
    return WalkForwardResult(predictions, folds_table, config, kept, skipped, failed, excluded, members,
                             n_resumed=len(done), seconds=seconds, timings=timings)


def _assemble(rows: list[pd.DataFrame], grid: Panel, panel: dict, config: WalkForwardConfig
              ) -> pd.DataFrame:
    """The folds' forecast rows as one frame in (model, code, date) order, with the realised
    label(s). ``rows`` is emptied as it is read.

    Column by column, on integer positions: at whole-market size (30 M rows) a concat of
    the parts, a hashed ``code`` column and a sorted copy of the whole frame each cost
    gigabytes, and the parts are freed as they are read."""
    names = np.array(sorted(set().union(*(part["model"].unique() for part in rows))), dtype=object)
    code_index, name_index = pd.Index(grid.codes), pd.Index(names)
    day, code, model, fold, forecast = [], [], [], [], []
    rows.reverse()  # popped from the end: first part first
    while rows:
        part = rows.pop()
        day.append(grid.dates.get_indexer(part.index).astype(np.int32))
        code.append(code_index.get_indexer(part["code"]).astype(np.int32))
        model.append(name_index.get_indexer(part["model"]).astype(np.int16))
        fold.append(part["fold"].to_numpy(np.int64))
        forecast.append(part["forecast"].to_numpy(np.float64))
        if (day[-1] < 0).any() or (code[-1] < 0).any():  # a model forecast a day or stock not in the data
            raise ValueError(f"model {part['model'].iloc[0]!r} returned dates or codes outside the panel")
    del part
    day, code, model = np.concatenate(day), np.concatenate(code), np.concatenate(model)
    order = np.lexsort((day, code, model))  # stable: a fold's rows keep their order
    day, code, model = day[order], code[order], model[order]
    columns = {"code": _take_strings(grid.codes, code), "model": _take_strings(names, model),
               "fold": np.concatenate(fold)[order], "forecast": np.concatenate(forecast)[order]}
    del fold, forecast, order
    index = pd.DatetimeIndex(grid.dates[day], name="date")
    if config.label == "tradeable":
        label, _ = tradeable_label(grid, config.horizon, config.execution)
        columns["actual"] = _at(by_forecast_date(label), day, code)
        columns["actual_close"] = _at(by_forecast_date(close_to_close(grid, config.horizon)), day, code)
    else:
        keys = pd.MultiIndex.from_arrays([index, columns["code"]])
        columns["actual"] = _actuals(panel).reindex(keys).to_numpy()
    return pd.DataFrame(columns, index=index, copy=False)


def _take_strings(values: np.ndarray, positions: np.ndarray):
    """``values[positions]`` as a string column. Where pandas keeps strings in Arrow (pandas
    3 with pyarrow) the gather happens there: no Python object per row."""
    default = pd.Series(["x"]).dtype  # the string dtype this pandas infers
    if isinstance(default, pd.StringDtype) and default.storage == "pyarrow":
        import pyarrow as pa

        return pd.array(pa.array(values.astype(str)).take(pa.array(positions)), dtype=default)
    return values[positions]


def _collect(results, store: FoldStore | None, done: dict, n_todo: int, progress: bool):
    """Take the folds' results as they finish, writing each to ``store`` at once; returns
    ``(outputs, kept models)``, the resumed ``done`` outputs first."""
    outputs, kept = list(done.values()), {}
    with tqdm(total=n_todo + len(done), initial=len(done), desc="walk-forward", unit="fold",
              disable=not progress, dynamic_ncols=True) as bar:
        for output, fold_kept in results:
            if store is not None:
                store.save(output)
            outputs.append(output)
            kept.update(fold_kept)
            bar.update(1)
    return outputs, kept


def _at(values: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``values [D, N]`` at positions ``(rows[i], cols[i])``; NaN where a position is -1 (a
    date or code the panel lacks). Position lookups, not a (date, code) index of every cell:
    at whole-market size that index alone is millions of entries."""
    out = np.full(len(rows), np.nan)
    ok = (rows >= 0) & (cols >= 0)
    out[ok] = values[rows[ok], cols[ok]]
    return out


def _actuals(panel: dict[str, pd.DataFrame]) -> pd.Series:
    """Realised log returns indexed by ``(date, code)``; NaN on suspended days, which no
    forecast is scored on."""
    parts = []
    for code, frame in panel.items():
        r = mask_suspended(log_returns(frame, code), frame)
        parts.append(pd.Series(r.to_numpy(), index=pd.MultiIndex.from_arrays(
            [frame.index, [code] * len(frame)], names=["date", "code"])))
    return pd.concat(parts)
