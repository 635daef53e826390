"""The ``forecaster`` command: backtest, run, compare, export-qlib, fetch, and the daily
commands train, predict and plot (:mod:`forecaster.app.daily`)."""

from __future__ import annotations

import json
import logging
import shlex
import signal
import sys
import threading
from pathlib import Path

import click
import pandas as pd

from forecaster.app import daily, plot_run, score_cmd
from forecaster.app.console import echo_report, exit_status, model_lines
from forecaster.app.errors import error_line, input_errors
from forecaster.app.options import DATE, SectionedCommand, experiment_options, raw_sections
from forecaster.app.outputs import check_apart, check_output, check_output_file
from seq2seq.core import atomic_write
from seq2seq.core.outputs import release_locks


class _Commands(click.Group):
    """Bad input never ends in a traceback: the project's typed errors of input, files and
    checkpoints (:func:`~forecaster.app.errors.input_errors`) become one ``Error: ...`` line and
    exit status 1 (``-vv`` logs the traceback as well). Any other exception, a bare
    ``ValueError`` included, is a bug: it keeps its traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except input_errors() as exc:
            logging.getLogger(__name__).debug("traceback", exc_info=True)
            raise error_line(exc) from exc
        finally:  # the output folder a command claimed is free once it ends
            release_locks()


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ashare-seq2seq-toolkit")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def main(verbose: int) -> None:
    """Rank A-share stocks for the next trading day with a panel Transformer, and test it.

    DATA is a folder of daily bars (one file per stock, baostock/akshare/xbx layouts, or a
    Qlib data folder). backtest (or run, from an experiment file) walks forward through it:
    refits on the past, scores each day's stocks, compares with factor and model baselines
    by daily rank IC and backtests the top-k strategy with A-share costs and rules, writing
    a report folder. train fits a model for daily use, predict writes tomorrow's ranked list
    and orders, plot its figures; compare sets reports side by side, export-qlib hands
    scores to Qlib, score reads another model's predictions (a Qlib pred.pkl) beside a run,
    fetch downloads bars. One CSV instead of a folder forecasts one stock.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


for _command in (daily.train, daily.predict, plot_run.plot, score_cmd.score):
    main.add_command(_command)
train, predict, plot = daily.train, daily.predict, plot_run.plot


def _interrupted(out: str) -> None:
    """Ctrl-C: say what is kept and how to resume, and exit 130 (as a shell does)."""
    folds = Path(out) / "folds"
    done = len(list(folds.glob("fold_*.json")))  # a fold's JSON is written last (fold_files)
    args = [a for a in sys.argv[1:] if a != "--resume"]
    click.echo(f"\ninterrupted: {done} finished fold(s) kept in {folds}; resume with:\n  "
               + shlex.join(["forecaster", *args, "--resume"]), err=True)
    sys.exit(130)


def _run(raw: dict, source: str, out: str, overwrite: bool = False) -> None:
    """Resolve, run and report an experiment (``backtest`` and ``run``)."""
    from forecaster.app.pipeline import prepare, run_experiment

    resume = bool(raw.get("run", {}).get("resume") or raw.get("walk_forward", {}).get("resume"))
    data = raw.get("data", {})
    # A resumed run may read its own experiment.toml (the same experiment, rewritten as it was).
    own = (source != "<options>" and resume
           and Path(source).resolve() == (Path(out) / "experiment.toml").resolve())
    check_apart([out], [data.get("path"), data.get("intraday"),
                        None if source == "<options>" or own else source])
    check_output(out, overwrite=overwrite, resume=resume)
    exp, loaded = prepare(raw, source)  # bad input: one line (_Commands)
    click.echo(loaded.summary, err=True)
    wf = exp.walk_forward
    click.echo(f"walk-forward: {wf.scheme} window, refit every {wf.retrain_every} days, horizon "
               f"{wf.horizon}; strategy {exp.backtest.strategy.rule}", err=True)
    for line in model_lines(exp):  # the Transformer's settings as resolved, not the preset's defaults
        click.echo(line, err=True)
    interrupted = []

    def on_sigint(signum, frame):
        # Remembered as well as raised: a KeyboardInterrupt raised inside a finaliser or a
        # callback is swallowed by Python, and the run must still end as interrupted.
        interrupted.append(signum)
        raise KeyboardInterrupt

    main_thread = threading.current_thread() is threading.main_thread()  # signals: main thread only
    previous = signal.signal(signal.SIGINT, on_sigint) if main_thread else None
    try:
        result, report, files = run_experiment(exp, loaded, out, overwrite=overwrite)
    except KeyboardInterrupt:
        _interrupted(out)
    finally:
        if main_thread:
            signal.signal(signal.SIGINT, previous)
    if interrupted:
        _interrupted(out)
    echo_report(report, report.notes, files, out)
    status = exit_status(report, result)
    if status:
        sys.exit(status)


@main.command(cls=SectionedCommand)
@click.argument("data", required=False, type=click.Path(exists=True))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Report folder to write.")
@click.option("--overwrite", is_flag=True, help="--out holds an earlier report: remove its files first "
              "(without this, a folder that holds files is refused; --resume continues it).")
@experiment_options()
def backtest(data, out, overwrite, **options):
    """Walk-forward evaluation against baselines, then an A-share backtest and a report.

    Most used: DATA, --out, --universe csi300, --strategy enhanced (with --capital), --resume.

    DATA is one CSV (one stock: the single-stock Transformer and time-series baselines on
    close-to-close returns) or a folder of CSVs (a panel: the cross-sectional panel
    Transformer against factor scores, a composite, gradient boosting and ridge on the same
    features, scored by daily rank IC on the tradeable label); default: the embedded
    synthetic series. Every option is a key of an experiment file (`forecaster run`): its help
    ends with [section: default]; the report folder keeps the resolved experiment.toml.

    Each finished fold is saved in OUT/folds as the run goes: after a crash, kill or Ctrl-C,
    the same command with --resume continues from there. A model that fails on a fold is
    recorded and the run goes on (a model skipped for too little data is not a failure); the
    failures are listed first, and once the report is written the exit status is 1 when the
    model under test (--model; the Transformer by default) failed on any fold (a failing
    baseline, the Transformer among them under another --model, leaves it 0).
    """
    raw = raw_sections(options)
    if data:
        raw.setdefault("data", {})["path"] = str(data)
    _run(raw, "<options>", out, overwrite)


@main.command("run", cls=SectionedCommand)
@click.argument("experiment", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Report folder to write.")
@click.option("--resume", is_flag=True, help="Continue the interrupted run in --out (same as "
              "[run] resume = true).")
@click.option("--overwrite", is_flag=True, help="--out holds an earlier report: remove its files first.")
def run_command(experiment, out, resume, overwrite):
    """Run the experiment file EXPERIMENT (TOML: [data], [features], [model], [models],
    [walk_forward], [strategy], [costs], [market], [backtest]; keys as the backtest options).

    Most used: EXPERIMENT, --out, --resume (after a crash), --overwrite."""
    from forecaster.app.experiment import read_toml

    raw = read_toml(experiment)  # a ConfigError: one line (_Commands)
    if resume:
        raw.setdefault("run", {})["resume"] = True
    _run(raw, str(experiment), out, overwrite)


@main.command(cls=SectionedCommand)
@click.argument("reports", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Also write the table as CSV here, and a PNG of it beside (same name, .png).")
@click.option("--overwrite", is_flag=True, help="--out (or its PNG) exists: replace it.")
def compare(reports, out, overwrite):
    """Key figures of several report folders side by side: the model under test's rank IC
    and ICIR, the best baseline, excess return after costs, turnover and costs.

    Most used: REPORT_DIR..., --out cmp.csv.
    """
    from forecaster.reporting.compare import compare_reports, plot_comparison

    if out:  # before any work: never inside a report read, never over a file without --overwrite
        out = Path(out)
        check_apart([out, out.with_suffix(".png")], reports)
        for path in (out, out.with_suffix(".png")):
            check_output_file(path, overwrite=overwrite)
    table = compare_reports(list(reports))  # a report it cannot read: one line (_Commands)
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        click.echo(table.to_string(float_format=lambda v: f"{v:+.4f}"))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(out, "w") as f:
            table.to_csv(f)
        click.echo(f"wrote {out} and {plot_comparison(table, out.with_suffix('.png'))}")


@main.command("export-qlib", cls=SectionedCommand)
@click.argument("report", type=click.Path(exists=True, file_okay=False))
@click.option("--model", default=None, help="Which model's scores (default: the run's model under test).")
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Pickle to write (default REPORT/qlib_pred.pkl).")
@click.option("--dates", type=click.Choice(["signal", "target"]), default="signal", show_default=True,
              help="How rows are dated: signal = the day whose close the score is made after (Qlib's "
                   "convention, traded the next day); target = the day forecast (the report's own dates).")
@click.option("--overwrite", is_flag=True, help="--out exists and no export wrote it: replace it.")
def export_qlib(report, model, out, dates, overwrite):
    """Write a report's predictions as the frame Qlib's SignalRecord and PortAnaRecord read: a
    pickled DataFrame indexed by (datetime, instrument) (SH600000-style names) with a 'score'
    column, dated as Qlib dates scores (--dates signal), for Qlib's analysis and backtest.

    Most used: REPORT_DIR, --dates signal|target, --out.
    """
    from forecaster.data.qlib.writer import qlib_predictions
    from forecaster.reporting.report import read_predictions

    out = Path(out) if out else Path(report) / "qlib_pred.pkl"
    check_output_file(out, overwrite=overwrite)
    model = model or _model_under_test(Path(report))
    starts = _signal_starts(Path(report)) if dates == "signal" else None
    frame = qlib_predictions(read_predictions(report), model, signal_starts=starts)
    with atomic_write(out) as f:
        frame.to_pickle(f)
    days = frame.index.get_level_values("datetime")
    click.echo(f"wrote {len(frame)} scores of {model} ({days.min().date()}..{days.max().date()}, "
               f"{frame.index.get_level_values('instrument').nunique()} instruments) to {out}, dated "
               + ("by signal day (Qlib's convention: made after that close, traded the next day)"
                  if starts is not None else "by the day forecast (read back with score --dates target)"))


def _model_under_test(report: Path) -> str:
    """The report's model under test (``metrics.json``'s ``model``; a report without one: the
    Transformer)."""
    from forecaster.models.registry import DEFAULT_MODEL

    try:
        return json.loads((report / "metrics.json").read_text()).get("model") or DEFAULT_MODEL
    except (OSError, ValueError):
        return DEFAULT_MODEL  # the predictions' own check names what is missing


def _signal_starts(report: Path) -> list:
    """Each fold's signal day before its first forecast, from REPORT's metrics.json (one-line
    errors for a report that cannot give them)."""
    try:
        metrics = json.loads((report / "metrics.json").read_text())
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"{report}: cannot read metrics.json ({exc}); not a report folder?") \
            from exc
    folds = metrics.get("folds") or []
    step = (metrics.get("walk_forward") or {}).get("step", 1)
    if step != 1 or not folds or any("signal_start" not in f for f in folds):
        why = (f"its walk-forward forecast every {step}th day" if step != 1
               else "it was written before reports kept each fold's signal day")
        raise click.ClickException(f"{report}: cannot date the scores by signal day ({why}); export "
                                   "with --dates target (each row dated the day it forecasts) or run the "
                                   "report again")
    return [f["signal_start"] for f in folds]


@main.command(cls=SectionedCommand)
@click.argument("codes", nargs=-1)
@click.option("--start", required=True, type=DATE, help="First day.")
@click.option("--end", required=True, type=DATE, help="Last day.")
@click.option("--out", "out", required=True, type=click.Path(),
              help="One code: the CSV to write. Several (or --codes-file): the folder, one <code>.csv each.")
@click.option("--source", type=click.Choice(["baostock", "akshare"]), default="baostock", show_default=True,
              help="Where the bars come from (both optional extras, online).")
@click.option("--frequency", type=click.Choice(["d", "1", "5", "15", "30", "60"]), default="d",
              show_default=True, help="d daily, or minutes a bar (1 with akshare only).")
@click.option("--adjustflag", type=click.Choice(["1", "2", "3"]), default="3", show_default=True,
              help="3 unadjusted, 2 forward-, 1 backward-adjusted (what that means for returns is printed "
                   "after the fetch: minute bars have no preclose).")
@click.option("--codes-file", type=click.Path(exists=True, dir_okay=False),
              help="Fetch the codes in this file (one a line, or a CSV with a code column) into --out.")
@click.option("--pause", type=float, default=0.5, show_default=True,
              help="Folder mode: seconds between requests (be polite to shared servers).")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Folder mode: keep the codes whose file is already in --out.")
@click.option("--overwrite", is_flag=True, help="One code: replace the CSV --out if it exists.")
def fetch(codes, start, end, out, source, frequency, adjustflag, codes_file, pause, resume, overwrite):
    """Download bars of CODES (e.g. sh.600000) with baostock or akshare, as files that
    `forecaster backtest` reads: one code to the CSV --out, several to the folder --out.

    Most used: CODES, --start, --end, --out, --source akshare.
    """
    from forecaster.data.fetch import FetchError, adjustment_note, fetch_bars, fetch_folder, read_codes

    codes = list(codes) + (read_codes(codes_file) if codes_file else [])
    if not codes:
        raise click.UsageError("give one or more CODES or --codes-file")
    first, last = str(start.date()), str(end.date())
    try:
        if len(codes) == 1 and not codes_file and not Path(out).is_dir():
            check_output_file(out, overwrite=overwrite)  # before going online
            click.echo(f"wrote {fetch_bars(codes[0], first, last, out, source, frequency, adjustflag)}")
            click.echo(adjustment_note(frequency, adjustflag))
            return
        done = fetch_folder(codes, first, last, out, source, frequency, adjustflag, pause, resume)
    except FetchError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(done.summary())
    click.echo(adjustment_note(frequency, adjustflag))
    if done.failed:
        raise click.ClickException(f"{len(done.failed)} of {len(codes)} code(s) failed; run again to "
                                   "retry them (the others are kept)")


if __name__ == "__main__":
    main()
