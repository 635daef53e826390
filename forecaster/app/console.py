"""What a run says on the console when it ends (``backtest``, ``run`` and ``score``), and the
exit status of a run whose model under test failed."""

from __future__ import annotations

import click
import pandas as pd


def exit_status(report, result) -> int:
    """0, or 1 after saying why: the model under test produced no forecast, or failed on a
    fold (said after the report: it says what ran; a baseline's failure leaves the status
    alone)."""
    if report.model not in result.predictions["model"].unique():
        click.echo(f"Error: the {report.model} produced no forecast on any fold (see the first lines of "
                   "the verdict and 'failed'/'skipped' in metrics.json)", err=True)
        return 1
    main_failed = sorted(fold for fold, name in result.failed if name == report.model)
    if main_failed:
        click.echo(f"Error: {report.model} failed on {len(main_failed)} of {len(result.folds)} fold(s) "
                   f"({_folds_text(main_failed)}): its figures lack those folds; the report is written "
                   "(FAILED above, 'failed' in metrics.json)", err=True)
        return 1
    return 0


def _folds_text(folds: list[int], most: int = 5) -> str:
    """``"fold 3"``, ``"folds 0, 1, 2"``, ``"folds 0, 1, 2, 3, 4 and 7 more"``."""
    shown = ", ".join(map(str, folds[:most]))
    if len(folds) > most:
        shown += f" and {len(folds) - most} more"
    return f"fold{'s' if len(folds) > 1 else ''} {shown}"


def failure_lines(failed: dict, model: str, most: int = 10) -> list[str]:
    """One line per model and fold that failed (``{(fold, name): summary}``), the model under
    test first, then by name and fold; past ``most`` lines, how many more."""
    order = sorted(failed, key=lambda key: (key[1] != model, key[1], key[0]))
    lines = [f"FAILED: {name} on fold {fold}: {failed[(fold, name)]}" for fold, name in order[:most]]
    if len(order) > most:
        lines.append(f"FAILED: {len(order) - most} more model-fold run(s) ('failed' in metrics.json)")
    return lines


def echo_report(report, notes, files, out) -> None:
    """The console's account of a report: first the models that failed on a fold (each with the
    fold and the first line of its error), then the summary table, what it could not compute,
    the verdict and ``notes``, and the files written."""
    for line in failure_lines(report.failed, report.model):
        click.echo(line)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        table = report.summary_table()
        click.echo(table.to_string(na_rep="n/c", float_format="{:+.4f}".format))
    for line in _not_computed_lines(table, report):
        click.echo(line)
    click.echo("")
    for line in report.verdict + list(notes):
        click.echo(f"- {line}")
    click.echo(f"report: {', '.join(f.name for f in files)} in {out}")


def _not_computed_lines(table: pd.DataFrame, report) -> list[str]:
    """``n/c`` cells of the summary table with the reason, grouped per model and reason."""
    lines = []
    for model in table.index:
        known = report.not_computed.get(model, {})
        by_reason: dict[str, list[str]] = {}
        for col in table.columns[table.loc[model].isna().to_numpy()]:
            itself = col.endswith(" vs)") and model == report.model
            why = known.get(col) or ("the model under test itself" if itself else "no variation or too "
                                     "little data (e.g. a constant forecast or a flat equity curve)")
            by_reason.setdefault(why, []).append(col)
        lines += [f"n/c = not computed: {model} {', '.join(cols)} ({why})" for why, cols in by_reason.items()]
    return lines


def model_lines(exp) -> list[str]:
    """What a panel run's Transformer uses, as resolved (its preset's rules, each replaced by the
    value given: ``--epochs 1`` says 1 epoch); with another model under test, the Transformer
    baseline's, and which options typed set it."""
    from forecaster.app.fields import OPTIONS, model_params, option_flag
    from forecaster.models.panel.sizing import SizeRules
    from forecaster.models.registry import DEFAULT_MODEL

    if not exp.panel:
        return []
    own = exp.model_name == DEFAULT_MODEL
    params = exp.model if own else {**model_params(True), **exp.baseline}
    line = SizeRules().describe(params["preset"], {**params, "features": exp.features.names or None},
                                blend=exp.features.blend, warm_start=exp.walk_forward.warm_start)
    if own:
        return [line]
    lines = [f"the Transformer baseline: {line}"]
    typed = [k for k in exp.baseline if k != "preset"]
    if typed:
        named = ", ".join(option_flag(k) if exp.source == OPTIONS else f"[model] {k}" for k in typed)
        lines.append(f"{named}: of the Transformer; with {exp.model_name} under test "
                     f"{'they apply' if len(typed) > 1 else 'it applies'} to the Transformer baseline")
    return lines
