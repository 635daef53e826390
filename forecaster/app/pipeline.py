"""An experiment end to end: load the data, walk forward, score, backtest, write the report
folder (with the resolved ``experiment.toml`` that reproduces it). ``forecaster backtest``
and ``forecaster run`` both call :func:`run_experiment`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pandas as pd

from forecaster.app.experiment import (
    ConfigError,
    DataConfig,
    Experiment,
    build_models,
    build_section,
    experiment_dict,
    resolve,
    to_toml,
)
from forecaster.app.outputs import check_output
from forecaster.data import DataError, default_series_path, load_csv, load_dir, synthetic_panel
from forecaster.data.intraday import attach_intraday, is_bar_frame
from forecaster.data.panel import Panel
from forecaster.data.qlib import is_qlib_folder, qlib_frames
from forecaster.evaluation.scoring import Report, score_run
from forecaster.evaluation.walkforward import WalkForwardResult, fold_store, make_folds, walk_forward
from forecaster.reporting.report import write_report
from seq2seq.core import atomic_write

log = logging.getLogger(__name__)

EXPERIMENT_FILE = "experiment.toml"


@dataclass
class Loaded:
    """Prices of an experiment: ``frames`` ``{code: frame}``, where they came from, and a
    one-line summary of what was loaded (rows, suspended days, dropped rows); ``panel``, the
    frames aligned once into a :class:`~forecaster.data.panel.Panel`, is what the
    walk-forward, the scoring and the backtests all read."""

    frames: dict[str, pd.DataFrame]
    source: str
    summary: str

    @cached_property
    def panel(self) -> Panel:
        return Panel.from_frames(self.frames)  # the one place a run builds its Panel


def load_data(data: DataConfig) -> Loaded:
    """A folder (panel; a Qlib data folder too), a CSV (one stock), a generated panel, or, for no
    path, the embedded synthetic series."""
    path, on_bad = data.path, data.on_bad
    if data.synthetic_stocks:
        frames = synthetic_panel(data.synthetic_stocks, data.synthetic_days, signal_ic=data.synthetic_ic,
                                 seed=data.synthetic_seed)
        rows = sum(len(f) for f in frames.values())
        return Loaded(frames, f"synthetic_panel({data.synthetic_stocks}, {data.synthetic_days}, "
                      f"signal_ic={data.synthetic_ic}, seed={data.synthetic_seed})",
                      f"synthetic panel: {len(frames)} stocks, {rows} rows (generated, not market data)")
    if path and is_qlib_folder(path):
        frames = qlib_frames(path)
        rows = sum(len(f) for f in frames.values())
        return Loaded(frames, str(Path(path).resolve()),
                      f"{path}: Qlib data folder, {len(frames)} stocks, {rows} rows (prices unadjusted "
                      "from $factor)")
    if path and Path(path).is_dir():
        loaded = load_dir(path, on_bad=on_bad, cache=data.cache, trust_code_column=data.trust_code_column,
                          strict=data.strict)
        bars = [c for c, f in loaded.frames.items() if is_bar_frame(f)]
        if bars:
            raise DataError(f"{path}: {len(bars)} file(s) hold minute bars (e.g. {bars[0]}); a panel "
                            "is daily: pass minute bars as --intraday DIR ([data] intraday) beside a "
                            "folder of daily files, or one stock's bars as a file")
        # stocks, rows, suspended days, dropped rows, trusted code columns, entries not read
        summary, frames = loaded.summary(), loaded.frames
        if data.intraday:
            if not Path(data.intraday).is_dir():
                what = "is a file" if Path(data.intraday).is_file() else "does not exist"
                raise DataError(f"--intraday {data.intraday}: {what}; expected a folder of minute-bar "
                                "files (one per stock, beside the daily folder DATA)")
            minute = load_dir(data.intraday, on_bad=on_bad, cache=data.cache,
                              trust_code_column=data.trust_code_column, strict=data.strict)
            try:
                frames, line = attach_intraday(frames, minute.frames)
            except ValueError as exc:
                raise DataError(f"--intraday {data.intraday}: {exc}") from None
            summary = f"{summary}\n{minute.summary()}\n{line}"
        return Loaded(frames, str(Path(path).resolve()), summary)
    if data.intraday:
        raise ConfigError("--intraday needs DATA to be a folder of daily files (a panel)")
    file = Path(path) if path else default_series_path()
    frame, report = load_csv(file, on_bad=on_bad, trust_code_column=data.trust_code_column,
                             strict=data.strict)
    return Loaded({str(frame["code"].iloc[0]): frame}, str(file.resolve()), report.summary())


def prepare(raw: Mapping[str, Mapping], source: str = "<options>") -> tuple[Experiment, Loaded]:
    """Load the data an experiment names and resolve every default against it (a relative
    path becomes absolute, so the resolved experiment runs from anywhere)."""
    raw = {k: dict(v) for k, v in raw.items()}
    data = raw.setdefault("data", {})
    for key in ("path", "intraday"):
        if data.get(key):
            data[key] = str(Path(data[key]).resolve())
    loaded = load_data(build_section("data", data, source))
    frame = next(iter(loaded.frames.values()))
    if len(loaded.frames) == 1 and is_bar_frame(frame):
        # Minute bars: folds count trading days, and a file of bars rarely spans the two
        # years the daily defaults train on.
        n_days = int(frame["day"].nunique())
        walk = raw.setdefault("walk_forward", {})
        walk.setdefault("train_days", min(500, max(20, n_days // 2)))
        walk.setdefault("retrain_every", 21)
    exp = resolve(raw, len(loaded.frames), source)
    _check_dates(exp, loaded)
    build_models(exp)  # every model option (the device too) checked before any output or work
    return exp, loaded


def _check_dates(exp: Experiment, loaded: Loaded) -> None:
    """``[walk_forward] start/end`` must fall within the data (format and order are checked
    by the config itself)."""
    first = min(f.index[0] for f in loaded.frames.values())
    last = max(f.index[-1] for f in loaded.frames.values())
    wf = exp.walk_forward
    if wf.start is not None and wf.start > last:
        raise ConfigError(f"{exp.source}: [walk_forward] start {wf.start.date()} is after the data's "
                          f"last day {last.date()}")
    if wf.end is not None and wf.end < first:
        raise ConfigError(f"{exp.source}: [walk_forward] end {wf.end.date()} is before the data's "
                          f"first day {first.date()}")


def run_experiment(exp: Experiment, loaded: Loaded, out: str | Path, overwrite: bool = False
                   ) -> tuple[WalkForwardResult, Report, list[Path]]:
    """Walk forward, score and backtest; write the report folder ``out`` (finished folds in
    ``out/folds`` as they come, so ``walk_forward.resume`` can continue an interrupted run).

    A folder that already holds files is refused (:func:`forecaster.app.outputs.check_output`)
    unless the run resumes there or ``overwrite`` removes the earlier run's files first."""
    # Everything is validated before the folder is touched: a refused run (a bad option, a
    # resume of another run, no fold) leaves an earlier report exactly as it was.
    folder = check_output(out, overwrite=overwrite, resume=exp.walk_forward.resume)
    models = build_models(exp)
    make_folds(loaded.panel.dates, exp.walk_forward)  # raises when no fold fits the calendar
    store = fold_store(loaded.frames, models, exp.walk_forward, folder.path / "folds")
    store.check(exp.walk_forward.resume)
    out = folder.claim()
    with atomic_write(out / EXPERIMENT_FILE, "w") as f:  # first: the run is reproducible even if cut
        f.write(to_toml(exp))
    result = walk_forward(loaded.frames, models, exp.walk_forward, panel=loaded.panel, store=store)
    report = score_run(result, loaded.panel, models, "transformer", exp.backtest,
                          exp.walk_forward.horizon, index_constituents=exp.data.index_constituents)
    files = write_report(report, result, out, extra={"data": loaded.source,
                                                     "experiment": experiment_dict(exp)})
    return result, report, [out / EXPERIMENT_FILE, *files]
