"""An experiment end to end: load the data, walk forward, score, backtest, write the report
folder (with the resolved ``experiment.toml`` that reproduces it). ``forecaster backtest``
and ``forecaster run`` both call :func:`run_experiment`."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd

from forecaster.app.experiment import (
    DataConfig,
    Experiment,
    build_models,
    build_section,
    experiment_dict,
    resolve,
    to_toml,
)
from forecaster.app.fields import OPTIONS, ConfigError, config_error
from forecaster.app.outputs import check_output
from forecaster.data import DataError, default_series_path, load_csv, load_dir, synthetic_panel
from forecaster.data.market.delisting import instrument_ends
from forecaster.data.market.universe import Universe, coverage_line, resolve_universe
from forecaster.data.minute.features import attach_intraday
from forecaster.data.minute.session import is_bar_frame
from forecaster.data.panel import Panel
from forecaster.data.qlib.reader import read_qlib
from forecaster.data.sources import is_qlib_folder
from forecaster.evaluation.backends import check_reachable
from forecaster.evaluation.index_book import index_book
from forecaster.evaluation.index_daily import index_view
from forecaster.evaluation.memory import memory_summary, peak_gb, reset_peak
from forecaster.evaluation.scoring import Report, score_run
from forecaster.evaluation.universe import restrict_to_members
from forecaster.evaluation.walkforward import WalkForwardResult, fold_store, make_folds, walk_forward
from forecaster.features.factors import check_available, inputs_note
from forecaster.models.panel.model import PanelTransformer
from forecaster.portfolio.fitted_weights import attach_index_series
from forecaster.portfolio.index_series import attach_index, index_for, split_indices
from forecaster.portfolio.index_weights import benchmark_weights, check_covers
from forecaster.portfolio.industry_groups import attach_industries, industry_names, last_groups
from forecaster.portfolio.rules import check_capital
from forecaster.portfolio.strategy import top_k_warning
from forecaster.portfolio.total_return import attach_dividends, dividend_returns
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
    seconds: float = 0.0  # reading the files
    panel_seconds: float = 0.0  # aligning them into the Panel
    universe: Universe | None = None  # [data] universe: the stocks scored and traded, by day
    indices: dict = field(default_factory=dict)  # index series kept out of the stocks: {code: frame}
    train_universe: Universe | None = None  # [data] train_universe: the stock-days learnt
    features_note: str = ""  # what the data's columns did to the models' features
    ends: dict = field(default_factory=dict)  # a Qlib folder's instruments end dates: {code: day}

    @cached_property
    def panel(self) -> Panel:
        started = time.perf_counter()
        panel = Panel.from_frames(self.frames)  # the one place a run builds its Panel
        panel.ends = self.ends or None  # a stock whose instruments end early is delisted there
        self.panel_seconds = time.perf_counter() - started
        return panel


def load_data(data: DataConfig) -> Loaded:
    """A folder (panel; a Qlib data folder too), a CSV (one stock), a generated panel, or, for no
    path, the embedded synthetic series. A folder's index series are kept apart (``indices``)."""
    loaded = _load_data(data)
    loaded.frames, loaded.indices = split_indices(loaded.frames)
    if loaded.indices:
        loaded.summary += (f"\n{len(loaded.indices)} index series kept out of the stocks (not trained on, "
                           f"scored or traded; the universe's index, if among them, is a second "
                           f"benchmark): {', '.join(sorted(loaded.indices))}")
    return loaded


def _load_data(data: DataConfig) -> Loaded:
    path, on_bad = data.path, data.on_bad
    if data.synthetic_stocks:
        frames = synthetic_panel(data.synthetic_stocks, data.synthetic_days, signal_ic=data.synthetic_ic,
                                 seed=data.synthetic_seed)
        rows = sum(len(f) for f in frames.values())
        return Loaded(frames, f"synthetic_panel({data.synthetic_stocks}, {data.synthetic_days}, "
                      f"signal_ic={data.synthetic_ic}, seed={data.synthetic_seed})",
                      f"synthetic panel: {len(frames)} stocks, {rows} rows (generated, not market data)")
    if path and is_qlib_folder(path):
        started = time.perf_counter()
        qlib = read_qlib(path, cache=data.cache)
        frames, rows = qlib.frames, sum(len(f) for f in qlib.frames.values())
        notes = "".join(f"; {note}" for note in qlib.notes)
        summary = (f"{path}: Qlib data folder, {len(frames)} stocks, {rows} rows (prices unadjusted "
                   f"from $factor), read in {time.perf_counter() - started:.1f} s{notes}")
        frames, summary = _with_intraday(data, frames, summary)
        return Loaded(frames, str(Path(path).resolve()), summary, ends=instrument_ends(path))
    if path and Path(path).is_dir():
        loaded = load_dir(path, on_bad=on_bad, cache=data.cache, trust_code_column=data.trust_code_column,
                          strict=data.strict, max_file_mb=data.max_file_mb)
        bars = [c for c, f in loaded.frames.items() if is_bar_frame(f)]
        if bars:
            raise DataError(f"{path}: {len(bars)} file(s) hold minute bars (e.g. {bars[0]}); a panel "
                            "is daily: pass minute bars as --intraday DIR ([data] intraday) beside a "
                            "folder of daily files, or one stock's bars as a file")
        # stocks, rows, suspended days, dropped rows, trusted code columns, entries not read
        frames, summary = _with_intraday(data, loaded.frames, loaded.summary())
        return Loaded(frames, str(Path(path).resolve()), summary)
    if data.intraday:
        raise ConfigError("--intraday needs DATA to be a folder of daily files (a panel)")
    file = Path(path) if path else default_series_path()
    frame, report = load_csv(file, on_bad=on_bad, trust_code_column=data.trust_code_column,
                             strict=data.strict, max_file_mb=data.max_file_mb)
    return Loaded({str(frame["code"].iloc[0]): frame}, str(file.resolve()), report.summary())


def _with_intraday(data: DataConfig, frames: dict, summary: str) -> tuple[dict, str]:
    """The daily frames of a folder (of files, or Qlib's) with ``[data] intraday``'s minute-bar
    features attached, and the load summary with what was read; as given without it."""
    if not data.intraday:
        return frames, summary
    if not Path(data.intraday).is_dir():
        what = "is a file" if Path(data.intraday).is_file() else "does not exist"
        raise DataError(f"--intraday {data.intraday}: {what}; expected a folder of minute-bar "
                        "files (one per stock, beside the daily folder DATA)")
    minute = load_dir(data.intraday, on_bad=data.on_bad, cache=data.cache,
                      trust_code_column=data.trust_code_column, strict=data.strict,
                      max_file_mb=data.max_file_mb)
    try:
        frames, line = attach_intraday(frames, minute.frames)
    except ValueError as exc:
        raise DataError(f"--intraday {data.intraday}: {exc}") from None
    return frames, f"{summary}\n{minute.summary()}\n{line}"


def prepare(raw: Mapping[str, Mapping], source: str = "<options>") -> tuple[Experiment, Loaded]:
    """Load the data an experiment names and resolve every default against it (a relative
    path becomes absolute, so the resolved experiment runs from anywhere)."""
    raw = {k: dict(v) for k, v in raw.items()}
    data = raw.setdefault("data", {})
    for key in ("path", "intraday"):
        if data.get(key):
            data[key] = str(Path(data[key]).resolve())
    for key in ("universe", "train_universe"):  # a file (a market's name stays a name)
        if data.get(key) and Path(data[key]).is_file():
            data[key] = str(Path(data[key]).resolve())
    dividends = raw.get("backtest", {}).get("dividend_data")
    if dividends:  # read from anywhere the resolved experiment is run
        raw["backtest"]["dividend_data"] = str(Path(dividends).resolve())
    industries = raw.get("strategy", {}).get("industries")
    if industries:  # likewise
        raw["strategy"]["industries"] = str(Path(industries).resolve())
    started = time.perf_counter()
    loaded = load_data(build_section("data", data, source))
    loaded.seconds = time.perf_counter() - started
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
    load_universes(exp.data, loaded)
    if exp.panel:
        members = loaded.universe.mask(loaded.panel.dates, loaded.panel.codes).sum(axis=1).max() \
            if loaded.universe is not None else len(loaded.frames)
        warning = top_k_warning(exp.backtest.strategy, int(members))
        if warning:
            loaded.summary += "\n" + warning
    if exp.backtest.strategy.industries:  # read and checked before a write; the industry features read it
        attach_industries(loaded.panel, exp.backtest.strategy.industries, exp.data.max_file_mb)
    if exp.panel:  # features the data cannot give: said before the run, not found after it
        names = exp.features.names or PanelTransformer.rules.default_features(
            len(loaded.frames), exp.model.get("preset", "auto"))
        if exp.features.names:  # asked for by name: each must be computable
            try:
                check_available(loaded.panel, names)
            except ValueError as exc:
                raise config_error(source, "features", f"names: {exc}", ("names",)) from None
        if exp.features.blend:  # the second set of inputs, checked and said the same way
            try:
                check_available(loaded.panel, exp.features.blend)
            except ValueError as exc:
                raise config_error(source, "features", f"blend: {exc}", ("blend",)) from None
        loaded.features_note = inputs_note(loaded.panel, names, exp.features.blend)
        if loaded.features_note:
            loaded.summary += "\n" + loaded.features_note
    return exp, loaded


def load_universes(data: DataConfig, loaded: Loaded) -> None:
    """Read ``[data] universe`` and ``train_universe`` into ``loaded`` (before any output:
    a bad file stops the run with its line); a universe with no stock in the data is an error.
    A name is the Qlib folder's own list, else the ``index-constitution`` package's; the load
    summary says which, and each list is checked over the data's calendar (its warnings are
    logged, kept for the report's notes and ``metrics.json``)."""
    for key, option in (("universe", "--universe"), ("train_universe", "--train-universe")):
        spec = getattr(data, key)
        if not spec:
            continue
        if len(loaded.frames) < 2:
            raise ConfigError(f"{option} needs a panel (a folder of stocks); the data hold one stock")
        if key == "train_universe" and spec == data.universe:  # one list, read and checked once
            loaded.train_universe = loaded.universe
            loaded.summary += f"\n{option}: the same list as --universe"
            continue
        universe = resolve_universe(spec, data.path or None, option)
        universe.check_overlaps(loaded.frames, option, spec)
        warnings = universe.check(loaded.panel.dates, loaded.panel.codes, data.path or None)
        loaded.summary += (f"\n{universe.describe(option)}"
                           + (f"; {len(warnings)} warning(s) on the list" if warnings else ""))
        setattr(loaded, key, universe)
        code = index_for(universe.name, loaded.indices) if key == "universe" else None
        if code is not None:  # the fitted benchmark weights (the default then) read it
            attach_index_series(loaded.panel, code, loaded.indices[code],
                                universe.mask(loaded.panel.dates, loaded.panel.codes))


def _check_dates(exp: Experiment, loaded: Loaded) -> None:
    """``[walk_forward] start/end`` must fall within the data (format and order are checked
    by the config itself)."""
    first = min(f.index[0] for f in loaded.frames.values())
    last = max(f.index[-1] for f in loaded.frames.values())
    wf = exp.walk_forward
    if wf.start is not None and wf.start > last:
        # named as the user gave it: --start on the command line, [walk_forward] start in a file
        raise config_error(exp.source, "walk_forward", f"start {wf.start.date()} is after the data's "
                           f"last day {last.date()}", ("start",))
    if wf.end is not None and wf.end < first:
        raise config_error(exp.source, "walk_forward", f"end {wf.end.date()} is before the data's "
                           f"first day {first.date()}", ("end",))


def check_benchmark(exp: Experiment, loaded: Loaded, first_test_day: pd.Timestamp) -> None:
    """Refuse, before any work, an enhanced book without a benchmark (no universe and no
    weights file: every stock of the data at float_mv weights is no index's book) and weights
    that are bad or leave ``first_test_day`` without a benchmark."""
    spec = exp.backtest.benchmark_weights
    is_file = bool(spec) and Path(str(spec)).is_file()
    if exp.backtest.strategy.rule == "enhanced" and loaded.universe is None and not is_file:
        given = f" ({spec} over every stock of the data is no index's book)" if spec else ""
        if exp.source == OPTIONS:
            raise ConfigError("--strategy enhanced needs a benchmark: an index universe (--universe csi300, "
                              "or a membership file) or --benchmark-weights FILE (date,code,weight)" + given)
        raise ConfigError(f"{exp.source}: [strategy] rule = \"enhanced\" needs a benchmark: [data] universe "
                          "(an index's name or a membership file) or [backtest] benchmark_weights = a file "
                          "date,code,weight" + given)
    check_covers(benchmark_weights(loaded.panel, spec), loaded.panel, first_test_day)


def run_timings(loaded: Loaded, result: WalkForwardResult, report: Report) -> dict:
    """Where a run's time went, in seconds: loading the files, building the Panel, the
    walk-forward's folds (wall) and each model's fits and forecasts within them (summed over
    folds, in the workers: with several workers these add up to more than the wall time), the
    assembly of the forecasts, the statistics, the backtests (``report`` is added when the
    report files are written)."""
    models: dict[str, float] = {}
    for (_, name), seconds in result.seconds.items():
        models[name] = models.get(name, 0.0) + seconds
    return {"load": loaded.seconds, "panel": loaded.panel_seconds, **result.timings,
            **report.timings,
            "models": dict(sorted(models.items(), key=lambda kv: -kv[1]))}


def learnt_line(universe: Universe, outside: float) -> str:
    """What the models learnt under a training universe, for a run's notes."""
    where = f"{universe.name} ({universe.source})"
    if outside == 0:
        return f"models learnt only the labels of the members of {where} on each day"
    return (f"models learnt the labels of the members of {where} on each day at weight 1 and every "
            f"other stock's at weight {outside:g}")


def index_benchmark(report: Report, exp: Experiment, loaded: Loaded) -> None:
    """The universe's index (when the data hold its series) beside each backtest, and the main
    model's strategy against it in the verdict (``run_experiment`` and ``forecaster score``)."""
    code = index_for(loaded.universe.name, loaded.indices) if loaded.universe is not None else None
    if code is not None and report.backtests:
        report.backtests = attach_index(report.backtests, code, loaded.indices[code], exp.backtest.execution,
                                        exp.backtest.capital)
        main = report.backtests.get(report.model)
        if main is not None:
            m, i = main.metrics, main.index_metrics
            report.verdict.append(f"{report.model} strategy after costs against {main.index_name}: "
                                  f"{m['annual_return']:+.2%} against {i['annual_return']:+.2%} a year, "
                                  f"Sharpe {m['sharpe']:.2f} against {i['sharpe']:.2f}")


def _index_book(report: Report, exp: Experiment, loaded: Loaded, result: WalkForwardResult, grid) -> dict:
    """The main model's book against its universe's index series (an enhanced book without
    one: against the members at the benchmark weights), in the verdict
    (:mod:`forecaster.evaluation.index_book`); its figures for ``metrics.json``."""
    code = index_for(loaded.universe.name, loaded.indices) if loaded.universe is not None else None
    enhanced = exp.backtest.strategy.rule == "enhanced"
    if (code is None and not enhanced) or report.model not in report.backtests:
        return {}
    mine = result.predictions[result.predictions["model"] == report.model]
    forecast = mine.pivot_table(index=mine.index, columns="code", values="forecast", aggfunc="first")
    keep: dict = {}
    lines, facts = index_book(report, forecast.sort_index(), grid, exp.backtest, code,
                              loaded.indices[code] if code is not None else None, keep=keep)
    report.verdict.extend(lines)
    if code is not None:  # the index with its dividends was estimated: the large ones listed
        report.dividends = dividend_returns(grid).large
    report.index_view = index_view(report, grid, exp.backtest, facts, keep.get("topk"),
                                   keep.get("topk_name", "top-k"))
    if report.index_view is not None and len(report.index_view.active_top):
        from forecaster.app.next_day_marks import stock_names

        view = report.index_view
        view.names = stock_names(loaded.source, list(view.active_top.index))
        book = report.backtests.get(report.model)
        enhanced = book.enhanced if book is not None else None
        if enhanced is not None and enhanced.groups is not None:  # the run's industries: names and groups
            view.names = {**industry_names(grid), **view.names}
            view.industry_of = last_groups(enhanced.groups, enhanced.group_names, view.active_top.index)
    return facts


def end_run(exp: Experiment, loaded: Loaded, result: WalkForwardResult, models: dict, claim,
            notes=None, extra=None, main: str | None = None, written: bool = False
            ) -> tuple[Report, list[Path]]:
    """The end of every run (``backtest``, ``run`` and ``score``): the statistics, backtests
    and verdict of ``result`` for the model under test (``main``, by default
    ``exp.model_name``; ``score`` of a file alone: the file's model), ``notes(report)`` (the
    caller's account of what ran), the universe's index beside the books, then the report
    folder ``claim()`` returns: ``experiment.toml`` (unless ``written`` there already), the
    report files, and in ``metrics.json`` the data, the experiment, the index book and
    ``extra(report)``. Returns the report and the files."""
    grid = loaded.panel
    report = score_run(result, grid, models, main or exp.model_name, exp.backtest, exp.walk_forward.horizon,
                       index_constituents=exp.data.index_constituents)
    if notes is not None:
        notes(report)
    index_benchmark(report, exp, loaded)
    book = _index_book(report, exp, loaded, result, grid)
    out = claim()  # only now: a run that failed above leaves an earlier report as it was
    if not written:  # (a walk-forward writes it at its start: reproducible even if cut)
        with atomic_write(out / EXPERIMENT_FILE, "w") as f:
            f.write(to_toml(exp))
    facts = {"data": loaded.source, "experiment": experiment_dict(exp),
             **(extra(report) if extra is not None else {})}
    if book:
        facts["index_book"] = book
    files = write_report(report, result, out, extra=facts)
    return report, [out / EXPERIMENT_FILE, *files]


def run_experiment(exp: Experiment, loaded: Loaded, out: str | Path, overwrite: bool = False
                   ) -> tuple[WalkForwardResult, Report, list[Path]]:
    """Walk forward, score and backtest; write the report folder ``out`` (finished folds in
    ``out/folds`` as they come, so ``walk_forward.resume`` can continue an interrupted run).

    A folder that already holds files is refused (:func:`forecaster.app.outputs.check_output`)
    unless the run resumes there or ``overwrite`` removes the earlier run's files first."""
    # Everything is validated before the folder is touched: a refused run (a bad option, a
    # resume of another run, no fold) leaves an earlier report exactly as it was.
    folder = check_output(out, overwrite=overwrite, resume=exp.walk_forward.resume)
    load_peak = peak_gb()  # this process's peak so far: loading and building the panel
    models = build_models(exp)
    grid = loaded.panel
    folds = make_folds(grid.dates, exp.walk_forward)  # raises when no fold fits the calendar
    learn = (loaded.train_universe.learn_mask(grid.dates, grid.codes, exp.data.train_outside_weight)
             if loaded.train_universe is not None else None)
    store = fold_store(loaded.frames, models, exp.walk_forward, folder.path / "folds", learn)
    store.check(exp.walk_forward.resume, folds, grid.codes)  # every finished fold's rows, before a write
    if exp.panel and (exp.backtest.benchmark_weights or exp.backtest.strategy.rule == "enhanced"):
        check_benchmark(exp, loaded, folds[0].test_days[0])  # said before any work
    if exp.panel:  # a book that cannot buy one lot: said before any work, never reported as a book
        members = loaded.universe.mask(grid.dates, grid.codes) if loaded.universe is not None else None
        check_capital(exp.backtest.capital, grid, folds[0].signal_start or folds[0].test_days[0],
                      exp.backtest.market.lot_size, members)
    if exp.walk_forward.backend == "ray":  # an address nothing answers at: said within seconds
        check_reachable(exp.walk_forward.address)
    dividend_data = exp.backtest.dividend_data
    dividend_notes = attach_dividends(grid, dividend_data) if dividend_data else []  # checked before a write
    out = folder.claim()
    with atomic_write(out / EXPERIMENT_FILE, "w") as f:  # first: the run is reproducible even if cut
        f.write(to_toml(exp))
    result = walk_forward(loaded.frames, models, exp.walk_forward, panel=grid, store=store,
                          train_members=learn)
    reset_peak()
    universe = {}
    if loaded.universe is not None:
        # The one place a run's forecasts are cut to the day's members: everything scored,
        # backtested and written below covers only them (models trained as walk_forward did).
        grid.members = loaded.universe.mask(grid.dates, grid.codes)
        result, n_outside = restrict_to_members(result, grid)
        if result.predictions.empty:
            raise DataError(f"--universe {exp.data.universe}: no forecast falls on a day a stock of the "
                            "data is a member")
        days = pd.DatetimeIndex(result.predictions.index.unique()).sort_values()
        universe = loaded.universe.coverage(days, grid.codes)
        universe["forecast_rows_outside"] = n_outside

    def notes(report: Report) -> None:
        if universe:
            report.notes.insert(0, coverage_line(universe) + f"; {universe['forecast_rows_outside']} "
                                "forecast rows of non-members were not scored")
        warned = [f"warning: {line}" for u in (loaded.universe, loaded.train_universe) if u is not None
                  for line in u.warnings]  # the lists' checks, after the coverage line
        report.notes[int(bool(universe)):int(bool(universe))] = list(dict.fromkeys(warned))
        if loaded.features_note:
            report.notes.append(loaded.features_note)
        report.notes.extend(dividend_notes)
        if loaded.train_universe is not None:
            report.notes.insert(0, learnt_line(loaded.train_universe, exp.data.train_outside_weight))

    def extra(report: Report) -> dict:
        main = {"load": load_peak, **result.memory.get("main_process_gb", {}), "scoring": peak_gb()}
        facts = {"timings": run_timings(loaded, result, report),
                 "memory": memory_summary({k: v for k, v in main.items() if v is not None},
                                          result.memory.get("fold_worker_gb", {}),
                                          result.memory.get("workers", 0))}
        return {**facts, "index_universe": universe} if universe else facts

    report, files = end_run(exp, loaded, result, models, lambda: out, notes=notes, extra=extra,
                            written=True)
    return result, report, files
