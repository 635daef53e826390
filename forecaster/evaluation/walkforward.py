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

A model that raises on a fold does not stop the run: :class:`~forecaster.checks.NotEnoughData`
in ``fit`` (too few rows, days or stocks for it) is recorded as *skipped*; any other exception
(a bad parameter, a bug: a plain ``ValueError`` too) as *failed*, with its type, the first line
of its message and where it was raised; the other models and folds go on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import os
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

from forecaster.checks import ConfigError, NotEnoughData
from forecaster.data.panel import Panel
from forecaster.evaluation.assembly import assemble, compact_codes, fold_part
from forecaster.evaluation.backends import ray_session, release_freed_heap, run_local, run_ray, stop_local
from forecaster.evaluation.fold_inputs import fold_inputs, fold_members, with_feature_store
from forecaster.evaluation.fold_store import FoldOutput, FoldStore, data_fingerprint, run_description
from forecaster.evaluation.folds import Fold, WalkForwardConfig, make_folds
from forecaster.evaluation.memory import PhasePeaks, peak_gb, reset_peak
from forecaster.evaluation.progress import FoldClock
from forecaster.evaluation.warm_start import in_waves
from forecaster.models.interface import input_kind
from forecaster.models.panel.sizing import SizeRules

log = logging.getLogger(__name__)

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
        failed: ``{(fold, name): "ExceptionType: first line of its message (at file:line in
            function)"}`` for models that raised anything but ``NotEnoughData`` on a fold.
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
        memory: peak resident memory in GB (Linux): ``main_process_gb`` ``{phase: GB}`` of
            this process (``feature_store``, ``folds``, ``assembly``), ``fold_worker_gb``
            ``{fold: GB}`` of the worker that ran each fold, ``workers`` (folds at once; 0: in
            this process). :func:`forecaster.evaluation.memory.memory_summary` reads them.
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
    memory: dict = field(default_factory=dict)


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
    _one_off_imports()
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


def _one_off_imports() -> None:
    """What a process imports once, before the models' clocks start: torch's optimizers import
    ``torch._dynamo`` (some 800 modules) on their first step, which would otherwise be timed as
    the first fold's fit in every worker (and read by the progress estimate as per-fold work)."""
    import torch._dynamo  # noqa: F401


class _Skip(Exception):
    """A model could not be fit on a fold for lack of data (its ``fit`` raised NotEnoughData)."""


def failure_summary(exc: BaseException) -> str:
    """``"Type: first line of the message (at file:line in function)"``, the frame that raised."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return text
    last = frames[-1]
    return f"{text} (at {Path(last.filename).name}:{last.lineno} in {last.name})"


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
    except NotEnoughData as exc:  # too little history for this model on this fold; any other
        raise _Skip(str(exc)) from exc  # error (a plain ValueError too) is the model's failure
    if panel_model:
        # One (date, code) Series for every stock; keep the fold's forecast days.
        long = model.predict(test["panel"])
        long = long[long.index.get_level_values("date").isin(fold.test_days)].dropna()
        output.rows.append(fold_part(long.index.get_level_values("date"), compact_codes(long.index), name,
                                 fold.fold, long.to_numpy()))
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
        output.rows.append(fold_part(np.concatenate(days), np.concatenate(codes), name, fold.fold,
                                 np.concatenate(values)))
    return model


def _fold_task(shared, fold: Fold, codes, config, kinds, models, threads: int, keep: bool,
               warm: dict | None = None):
    """One fold, run where the whole data set is at hand (a joblib worker, mapping the
    panel's files, or a Ray task): slice, fit, forecast."""
    in_worker = config.backend == "ray" or effective_n_jobs(config.n_jobs) != 1
    if in_worker:
        reset_peak()  # this fold's own peak (a worker's VmHWM would hold its earlier folds')
    train, test = fold_inputs(*shared, fold, codes, config, kinds)
    result = _run_fold(fold, models, train, test, threads, keep, warm)
    if in_worker:
        result[0].peak_gb = peak_gb()
    for part in (train, test):
        if part["panel"] is not None and part["panel"].features is not None:
            part["panel"].features.store.close()  # its file may be removed once the run ends
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
        members = np.asarray(train_members)
        # a bool universe hashes as before (resumes of earlier runs hold); weights by value
        data_bytes = (np.packbits(members).tobytes() if members.dtype == bool
                      else np.ascontiguousarray(members, dtype=np.float32).tobytes())
        run["train_members"] = hashlib.sha256(data_bytes).hexdigest()[:16]
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
            labels of these stock-days (a training universe; features still see every stock),
            or float weights of each stock-day's label (:attr:`Panel.learn`); ``None``: every
            stock-day alike. The forecasts and their ``actual`` are not affected.

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
        config = dataclasses.replace(config, warm_start=SizeRules().warm_start(grid.n_stocks))
    folds = make_folds(grid.dates, config)
    if config.resume and checkpoint_dir is None and store is None:
        raise ValueError("resume needs a checkpoint folder (the report folder of the interrupted run)")
    done: dict[int, FoldOutput] = {}
    if store is None and checkpoint_dir is not None:
        store = fold_store(frames_in or grid, models, config, checkpoint_dir, train_members)
    if store is not None:
        done = store.start(config.resume)
        store.check_contents(done, folds, grid.codes)
    members = fold_members(grid, folds, config.min_stock_days)
    empty = [f.fold for f in folds if not members[f.fold]]
    if folds and len(empty) == len(folds):  # the cause named, not "no model produced any forecast"
        # what membership counted: the bars inside each fold's training window
        spans = [(grid.dates.searchsorted(f.train_start), grid.dates.searchsorted(f.cut, side="right"))
                 for f in folds]
        most = max(int(np.max(grid.listed[lo:hi].sum(axis=0), initial=0)) for lo, hi in spans)
        window = ("in its training window (--scheme rolling, --train-days "
                  f"{config.train_days})" if config.scheme == "rolling" else "up to its cut-off")
        raise ConfigError(f"no fold has a stock with --min-stock-days {config.min_stock_days} rows {window} "
                          f"(the most any stock has in one fold's is {most}); lower --min-stock-days"
                          + (" or raise --train-days" if config.scheme == "rolling" else "")
                          + " or give more data")
    if empty:
        log.warning("%d fold(s) have no stock with %d training days (--min-stock-days): %s", len(empty),
                    config.min_stock_days, empty)
    todo = [f for f in folds if members[f.fold] and f.fold not in done]
    tasks = [(fold, members[fold.fold], config, kinds, models, config.threads_per_task, keep_models)
             for fold in todo]
    # Frames travel only when a frame model needs them; the panel goes once to Ray's object
    # store, or into files that every joblib worker maps while it cuts its fold (rather than
    # a pickled copy of each fold's slice per task).
    frames = frames_in if "frames" in kinds else {}
    # the folds' panel: the training universe travels with it; the labels of the scores
    # (assembly.assemble) are read on the run's own panel
    folds_grid = grid if train_members is None else dataclasses.replace(
        grid, learn=np.asarray(train_members), _cache={})
    started = time.perf_counter()
    peaks = PhasePeaks()
    spilled: list[Panel] = []
    with tempfile.TemporaryDirectory(prefix="forecaster-panel-") as folder, contextlib.ExitStack() as stack:
        # The features once for every fold: a file the joblib workers read, or in memory (one
        # process, or Ray's object store, which ships it with the panel).
        if todo:
            on_file = config.backend != "ray" and config.n_jobs != 1
            folds_grid = with_feature_store(folds_grid, models, Path(folder) / "features.f32" if on_file
                                            else None)
            peaks.end("feature_store")
        if config.backend == "ray":
            # One connection and one copy in the object store for every wave; this process
            # then lets go of the folds' panel and its feature store (the labels are read on
            # the run's own panel).
            shared_ref = None
            if todo:
                ray = stack.enter_context(ray_session(config.address or None))
                shared_ref, folds_grid = ray.put((frames, folds_grid)), None

            def run(wave):
                return run_ray(_fold_task, shared_ref, wave, config.threads_per_task)
        else:
            shared = folds_grid.to_files(folder) if todo and config.n_jobs != 1 else folds_grid
            if shared is not folds_grid:
                # the caller's panel too when it shares the arrays (each spilled once)
                shares = grid is not folds_grid and grid.fields is folds_grid.fields
                spilled = [folds_grid, grid] if shares else [folds_grid]
            for g in spilled:  # the workers read the files: this process lets go of its copy
                g.spill(shared)

            def run(wave):  # waves of a warm-started run keep the workers (and their imports)
                return run_local(_fold_task, (frames, shared), wave, config.n_jobs,
                                 stop=not config.warm_start)
        if config.warm_start:  # folds wait for the fold they start from
            results = in_waves(run, tasks, config.warm_start, {k: o.states for k, o in done.items()})
        else:
            results = run(tasks)
        clock = _fold_clock(grid.dates, [f for f in folds if members[f.fold]], config.warm_start,
                            _workers(config, len(todo)))
        try:
            outputs, kept = _collect(results, store, done, len(todo), config.progress, clock)
            peaks.end("folds")
        finally:  # read back before the files go: the caller's panel once, the folds' view shares it
            for g in spilled:
                g.unspill(like=grid if g is not grid and any(p is grid for p in spilled) else None)
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
    if not rows and not failed:  # every model skipped on every fold: the data are too thin
        raise NotEnoughData(f"no model produced any forecast: {len(skipped)} model-fold(s) skipped, e.g. "
                            f"{next(iter(skipped.values()), 'no fold')}")
    if not rows:  # every model failed: each failure is logged above; worth a bug report
        raise ValueError(f"no model produced any forecast ({len(failed)} model-fold(s) failed, e.g. "
                         f"{next(iter(failed.values()))})")
    fold_peaks = {o.fold: o.peak_gb for o in outputs if getattr(o, "peak_gb", None) is not None}
    del outputs, output  # the per-fold parts: as large as the predictions at whole-market size
    started = time.perf_counter()
    predictions = assemble(rows, grid, frames_in, config)
    release_freed_heap()  # the parts' heap, for whatever the caller does next
    timings = {"folds": folds_seconds, "assembly": time.perf_counter() - started}
    peaks.end("assembly")
    in_process = config.backend != "ray" and effective_n_jobs(config.n_jobs) == 1
    workers = 0 if in_process else _workers(config, len(todo))
    memory = {"main_process_gb": peaks.peaks, "workers": workers,
              "fold_worker_gb": fold_peaks}
    folds_table = pd.DataFrame([{**f.as_row(), "n_stocks": len(members[f.fold])} for f in folds])
    return WalkForwardResult(predictions, folds_table, config, kept, skipped, failed, excluded, members,
                             n_resumed=len(done), seconds=seconds, timings=timings, memory=memory)


def _workers(config: WalkForwardConfig, n_todo: int) -> int:
    """Folds that run at once: joblib's workers, or on Ray the folds up to this machine's
    cores (how long the run takes and what it reports, never what it computes)."""
    if config.backend == "ray":
        return min(n_todo, os.cpu_count() or 1)
    return effective_n_jobs(config.n_jobs)


def _fold_clock(dates: pd.DatetimeIndex, folds: list[Fold], warm_start: int, workers: int = 1) -> FoldClock:
    """The progress bar's clock: each fold's training days, which folds start warm (fold ``k``
    from fold ``k - warm_start``, as :func:`in_waves` runs them) and ``workers`` at once."""
    numbers = {f.fold for f in folds}
    days = {f.fold: int(dates.searchsorted(f.cut, side="right") - dates.searchsorted(f.train_start))
            for f in folds}
    warm = {k for k in numbers if warm_start and k - warm_start in numbers}
    return FoldClock(days, warm, workers=workers, stride=warm_start or 0)


def _collect(results, store: FoldStore | None, done: dict, n_todo: int, progress: bool,
             clock: FoldClock | None = None):
    """Take the folds' results as they finish, writing each to ``store`` at once; returns
    ``(outputs, kept models)``, the resumed ``done`` outputs first. The bar shows the folds done,
    the time elapsed and ``clock``'s estimate of the time left."""
    outputs, kept = list(done.values()), {}
    for fold in done:
        if clock is not None:
            clock.finish(fold, 0.0)  # resumed: not one of this run's
    started = time.perf_counter()
    with tqdm(total=n_todo + len(done), initial=len(done), desc="walk-forward", unit="fold",
              disable=not progress, dynamic_ncols=True,
              bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} folds [{elapsed}{postfix}]",  # ", " + postfix
              postfix=clock.describe(0.0) if clock is not None else None) as bar:
        for output, fold_kept in results:
            if store is not None:
                store.save(output)
            outputs.append(output)
            kept.update(fold_kept)
            release_freed_heap()  # what unpickling the fold's output left in glibc's heap
            if clock is not None:
                now = time.perf_counter() - started
                clock.finish(output.fold, sum(getattr(output, "seconds", {}).values()), at=now)
                bar.set_postfix_str(clock.describe(now), refresh=False)
            bar.update(1)
    return outputs, kept
