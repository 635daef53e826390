"""``forecaster score``: predictions made elsewhere (Qlib's ``pred.pkl``, a CSV
``date,code,score``) scored as this toolkit scores its own models.

``forecaster score PRED --report REPORT_DIR --out R`` lays them beside a run's models, on that
run's data, label, universe and forecast days (read back from its ``experiment.toml`` and
predictions), with the paired tests against the run's Transformer; ``forecaster score PRED DATA
--out R`` scores them alone on DATA. The file's rows are matched to stock-days by
:mod:`forecaster.evaluation.external`; :func:`~forecaster.evaluation.scoring.score_run` computes
every statistic and backtest and :func:`~forecaster.reporting.report.write_report` writes the
folder R, as for a run.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pandas as pd

from forecaster.app.options import SectionedCommand, experiment_options, raw_sections
from forecaster.evaluation.external import DATE_CONVENTIONS, DATES_MEANING

# The options of `score PRED DATA`: how the data are read, which stocks are scored, the label,
# and the backtest (each defined once on its config dataclass, as backtest's).
_DATA_OPTIONS = {
    "data": ("on_bad", "strict", "index_constituents", "cache", "trust_code_column", "universe",
             "max_file_mb"),
    "walk_forward": ("horizon", "label"),
}


@click.command("score", cls=SectionedCommand)
@click.argument("pred", type=click.Path(exists=True, dir_okay=False))
@click.argument("data", required=False, type=click.Path(exists=True))
@click.option(
    "--report",
    "report_dir",
    type=click.Path(exists=True, file_okay=False),
    help="A run's report folder: score PRED beside its models, on its data, label, universe and "
    "days, with the paired tests against its model under test (instead of DATA).",
)
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Report folder to write.")
@click.option(
    "--name",
    default=None,
    help="The model's name in the report (default: PRED's file name without its suffix).",
)
@click.option(
    "--dates",
    type=click.Choice(DATE_CONVENTIONS),
    default="signal",
    show_default=True,
    help="What PRED's dates mean: signal = the day the score was computed, traded the next "
    "trading day (Qlib's pred.pkl); target = the day forecast (this toolkit's predictions).",
)
@click.option(
    "--date-format",
    default=None,
    help="How PRED's dates are written (a strftime format, e.g. %d/%m/%Y); by default the one format "
    "that reads every date of the column (ISO, compact, day- or month-first), refused when both orders fit.",
)
@click.option("--overwrite", is_flag=True, help="--out holds an earlier report: remove its files first.")
@experiment_options(
    sections=("data", "walk_forward", "strategy", "costs", "market", "backtest"), only=_DATA_OPTIONS
)
def score(pred, data, report_dir, out, name, dates, date_format, overwrite, **options):
    """Score PRED, predictions made elsewhere, as a run's models are scored: daily rank IC,
    ICIR, quantiles, IC by horizon, year and board, the backtest and the report folder.

    Most used: PRED, --report REPORT_DIR (or DATA), --out, --dates target.

    PRED is Qlib's pred.pkl (index (datetime, instrument), column score; SH600000 is read as
    sh.600000), a Parquet file or a CSV with columns date, code, score. A pickle can run code:
    PRED is read by an unpickler that rebuilds pandas and numpy objects only, and a pickle that
    asks for anything else is refused, naming it (convert such a file to Parquet or CSV).
    With --report REPORT_DIR it is scored on that run's stock-days beside its models; with
    DATA (a folder, or a Qlib folder, as backtest takes) alone, on the tradeable label of the
    data's stocks (--universe to choose).
    Rows on days, codes or stock-days the run does not score, and stock-days without a score,
    are counted and named, never dropped unsaid.
    """
    from forecaster.app.outputs import check_apart, check_output
    from forecaster.evaluation.external import read_external

    raw = raw_sections(options)
    if bool(report_dir) == bool(data):
        raise click.UsageError("give either DATA or --report REPORT_DIR (one of them)")
    if report_dir and raw:
        given = ", ".join(f"[{s}] {k}" for s, keys in raw.items() for k in keys)
        raise click.UsageError(
            f"--report scores on the run's own data, universe and label; {given} cannot be given with it"
        )
    name = name or Path(pred).name.split(".")[0]
    inputs = [pred, report_dir, data]
    check_apart([out], inputs)
    check_output(out, overwrite=overwrite, resume_with=None)
    scores = read_external(pred, date_format)  # before the data are loaded: a bad file is said at once
    for note in scores.attrs.get("notes", []):
        click.echo(note, err=True)
    if report_dir:
        exp, loaded, run, result = _from_report(report_dir, name)
    else:
        raw.setdefault("data", {})["path"] = str(data)
        exp, loaded, run, result = _alone(raw)
    check_apart([out], [loaded.source if Path(loaded.source).exists() else None])
    click.echo(loaded.summary, err=True)
    scored = _score(pred, scores, name, dates, exp, loaded, run, result, out, overwrite, report_dir)
    _echo(*scored, out)


def _from_report(report_dir: str, name: str):
    """The run in ``report_dir``: its experiment, data (loaded again), stock-days and result."""
    from forecaster.app.experiment import read_toml
    from forecaster.app.pipeline import EXPERIMENT_FILE, prepare
    from forecaster.evaluation.walkforward import WalkForwardResult
    from forecaster.models.registry import DEFAULT_MODEL
    from forecaster.reporting.report import read_predictions

    folder = Path(report_dir)
    needed = [folder / EXPERIMENT_FILE, folder / "metrics.json"]
    lacking = [p.name for p in needed if not p.is_file()]
    if lacking:
        raise click.ClickException(
            f"--report {folder}: no {' or '.join(lacking)} (not a report folder of "
            "`forecaster backtest` or `run`?)"
        )
    pred = read_predictions(folder)
    models = set(pred["model"].unique())
    raw = read_toml(folder / EXPERIMENT_FILE)
    main = raw.get("model", {}).get("name", DEFAULT_MODEL)  # the run's model under test
    if main not in models:
        raise click.ClickException(
            f"--report {folder}: its predictions hold no {main}, its model under test (models: "
            f"{', '.join(sorted(models))}); the paired tests compare with it"
        )
    if name in models:
        raise click.ClickException(
            f"--name {name}: the run already has a model of that name; choose another --name"
        )
    metrics = json.loads((folder / "metrics.json").read_text())
    exp, loaded = prepare(raw, str(folder / EXPERIMENT_FILE))
    if not exp.panel:
        raise click.ClickException(
            f"--report {folder}: a run of one stock; external predictions are scored "
            "on a panel (a folder of stocks)"
        )
    folds = pd.DataFrame(metrics.get("folds", []))
    for col in ("train_start", "train_end", "test_start", "test_end"):
        if col in folds:
            folds[col] = pd.to_datetime(folds[col])

    def keyed(d: dict) -> dict:
        return {(int(k.split(":", 1)[0]), k.split(":", 1)[1]): v for k, v in d.items()}

    members = {int(f): sorted(g["code"].unique()) for f, g in pred.groupby("fold")}
    result = WalkForwardResult(
        pred,
        folds,
        exp.walk_forward,
        skipped=keyed(metrics.get("skipped", {})),
        failed=keyed(metrics.get("failed", {})),
        members=members,
    )
    mine = pred[pred["model"] == exp.model_name]
    run = pd.MultiIndex.from_arrays([mine.index, mine["code"].to_numpy()])
    return exp, loaded, run, result


def _alone(raw: dict):
    """DATA with the options given: its experiment, data, and the stock-days a score may fall
    on (every stock with a bar, or the universe's members, each day)."""
    from forecaster.app.pipeline import prepare
    from forecaster.evaluation.walkforward import WalkForwardResult

    exp, loaded = prepare(raw)
    if not exp.panel:
        raise click.ClickException(
            f"{exp.data.path}: one stock; external predictions are scored on a panel (a folder of stocks)"
        )
    grid = loaded.panel
    ok = (
        grid.listed if loaded.universe is None else grid.listed & loaded.universe.mask(grid.dates, grid.codes)
    )
    day, col = np.nonzero(ok)
    run = pd.MultiIndex.from_arrays([grid.dates[day], np.asarray(grid.codes)[col]])
    empty = pd.DataFrame(
        columns=["code", "model", "fold", "forecast"], index=pd.DatetimeIndex([], name="date")
    )
    return exp, loaded, run, WalkForwardResult(empty, pd.DataFrame(), exp.walk_forward)


def _score(pred, scores, name, dates, exp, loaded, run, result, out, overwrite, report_dir):
    """Align, score, backtest and write the folder ``out``."""
    import dataclasses

    from forecaster.app.experiment import build_models
    from forecaster.app.outputs import check_output
    from forecaster.app.pipeline import end_run
    from forecaster.data.market.universe import coverage_line
    from forecaster.evaluation.assembly import assemble
    from forecaster.evaluation.external import ExternalScores, align
    from forecaster.evaluation.universe import universe_counts, universe_line
    from forecaster.portfolio.rules import check_capital
    from forecaster.portfolio.total_return import attach_dividends

    grid = loaded.panel
    aligned = align(scores, grid.dates, grid.codes, run, dates)
    problems = [*scores.attrs.get("notes", []), *aligned.lines()]
    if not len(aligned.rows):
        raise click.ClickException(
            f"{pred}: no prediction falls on a stock-day of the "
            f"{'run' if report_dir else 'data'} (--dates {dates}); "
            + "; ".join(line.split(":")[0] for line in problems)
        )
    rows = aligned.rows.assign(model=name)
    if report_dir:  # each row in the fold the run forecast its stock-day in
        mine = result.predictions[result.predictions["model"] == exp.model_name]
        fold = pd.Series(
            mine["fold"].to_numpy(), index=pd.MultiIndex.from_arrays([mine.index, mine["code"].to_numpy()])
        )
        rows["fold"] = fold.reindex(
            pd.MultiIndex.from_arrays([rows.index, rows["code"].to_numpy()])
        ).to_numpy()
        models = {**build_models(exp), name: ExternalScores()}
    else:
        rows["fold"] = 0
        first, last = rows.index.min(), rows.index.max()
        before = grid.dates[max(grid.dates.get_loc(first) - 1, 0)]
        result.folds = pd.DataFrame(
            [
                {
                    "fold": 0,
                    "train_start": before,
                    "train_end": before,
                    "test_start": first,
                    "test_end": last,
                    "n_test_days": rows.index.nunique(),
                }
            ]
        )
        result.members = {0: sorted(rows["code"].unique())}
        models = {name: ExternalScores()}
    ext = assemble([rows[["code", "model", "fold", "forecast"]]], grid, loaded.frames, exp.walk_forward)
    if report_dir:
        _check_same_data(result.predictions, grid, loaded.frames, exp, report_dir)
    result = dataclasses.replace(
        result, predictions=pd.concat([result.predictions, ext]) if len(result.predictions) else ext
    )
    if loaded.universe is not None:
        grid.members = loaded.universe.mask(grid.dates, grid.codes)
    first = pd.DatetimeIndex(result.predictions.index).min()
    check_capital(exp.backtest.capital, grid, first, exp.backtest.market.lot_size)  # before a write
    if exp.backtest.dividend_data:
        problems += attach_dividends(grid, exp.backtest.dividend_data)
    # [strategy] industries: read, checked and attached to this panel by prepare, before any write
    folder = check_output(out, overwrite=overwrite, resume_with=None)  # again: nothing written yet
    meaning = DATES_MEANING[dates]
    head = [f"{name}: scored from {pred} ({aligned.summary()}); {meaning}", *problems]

    def notes(report) -> None:
        if report_dir:  # the run's own account of its stocks (the walk-forward's members are not stored)
            universe = Path(report_dir) / "universe.csv"
            if universe.is_file():
                report.universe = pd.read_csv(
                    universe,
                    parse_dates=["first_date", "last_date", "first_forecast"],
                    dtype={"code": str, "reason": str},
                    keep_default_na=False,
                    na_values={"first_date": [""], "last_date": [""], "first_forecast": [""]},
                )
                report.notes = [
                    universe_line(universe_counts(report.universe)) if n.startswith("universe: ") else n
                    for n in report.notes
                ]
        if loaded.universe is not None:
            days = pd.DatetimeIndex(result.predictions.index.unique()).sort_values()
            head.append(coverage_line(loaded.universe.coverage(days, grid.codes)))
        report.notes[0:0] = head

    external = {
        "file": str(Path(pred).resolve()),
        "name": name,
        "dates": dates,
        "dates_meaning": meaning,
        "report": str(Path(report_dir).resolve()) if report_dir else None,
        "matched": len(aligned.rows),
        "rows": aligned.n_file,
        "run_stock_days": aligned.n_run,
        "not_scored": aligned.counts,
        "examples": aligned.examples,
    }
    report, files = end_run(exp, loaded, result, models, folder.claim, notes=notes,
                            extra=lambda report: {"external": external},
                            main=exp.model_name if report_dir else name)
    return report, head, files



def _check_same_data(pred: pd.DataFrame, grid, frames, exp, report_dir) -> None:
    """The run's outcomes, recomputed on the data loaded now, must be the ones it stored: data
    changed since the run would score the two models on different labels."""
    from forecaster.evaluation.assembly import assemble

    mine = pred[pred["model"] == exp.model_name]
    again = assemble([mine[["code", "model", "fold", "forecast"]]], grid, frames, exp.walk_forward)
    stored = mine.sort_values("code", kind="stable").sort_index(kind="stable")
    again = again.sort_values("code", kind="stable").sort_index(kind="stable")
    a, b = stored["actual"].to_numpy(dtype=float), again["actual"].to_numpy(dtype=float)
    differ = ~np.isclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True)
    if differ.any():
        i = int(np.flatnonzero(differ)[0])
        raise click.ClickException(
            f"--report {report_dir}: the data at {exp.data.path or 'the run'} differ from the run's: "
            f"{int(differ.sum())} outcome(s) recomputed differ from its predictions file, e.g. "
            f"{stored['code'].iloc[i]} {stored.index[i].date()} ({a[i]:+.6f} stored, {b[i]:+.6f} now)"
        )


def _echo(report, head, files, out) -> None:
    """The console's account: what was matched and not, the summary table, verdict, notes."""
    from forecaster.app.console import echo_report

    for line in head:
        click.echo(line, err=True)
    echo_report(report, report.notes[len(head):], files, out)
