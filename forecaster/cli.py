"""The ``forecaster`` command: train, predict, plot, fetch."""

from __future__ import annotations

import json
import logging
import shlex
import sys
from pathlib import Path

import click
import pandas as pd

from .data import DataError, default_series_path, load_csv
from .features import FEATURES, log_returns

MODEL_FILE = "model.pt"
RUN_FILE = "run.json"


def _load(csv: str | None, on_bad: str = "raise"):
    path = Path(csv) if csv else default_series_path()
    try:
        frame, report = load_csv(path, on_bad=on_bad)
    except (DataError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(report.summary(), err=True)
    return path, frame


def _run_info(run: Path) -> dict:
    info = run / RUN_FILE
    if not (run / MODEL_FILE).is_file() or not info.is_file():
        raise click.ClickException(f"{run}: not a run folder (expected {MODEL_FILE} and {RUN_FILE}); "
                                   "create one with `forecaster train --out RUN_DIR`")
    return json.loads(info.read_text())


def _open_run(run: str, csv: str | None, device: str):
    """The run's model and the frame to apply it to (default: the training CSV)."""
    from .estimator import CausalTransformerForecaster

    run = Path(run)
    info = _run_info(run)
    path, frame = _load(csv or info["csv"], info.get("on_bad", "raise"))
    try:
        model = CausalTransformerForecaster.load(run / MODEL_FILE, device=device)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    return run, path, frame, model


def _predictions_table(model, frame: pd.DataFrame) -> pd.DataFrame:
    pred = model.predict(frame)
    table = pred.to_frame() if isinstance(pred, pd.Series) else pred
    table["actual"] = log_returns(frame).reindex(table.index)
    table["suspended"] = frame["suspended"].reindex(table.index)
    table["in_training"] = table.index <= model.train_end_
    return table


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ashare-seq2seq-toolkit")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def main(verbose: int) -> None:
    """Forecast daily A-share log returns with a causal Transformer.

    With no CSV argument, commands use the embedded deterministic synthetic series.
    """
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


@main.command()
@click.argument("csv", required=False, type=click.Path(dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Run folder to write.")
@click.option("--window", default=60, show_default=True, help="Input days per forecast.")
@click.option("--horizon", default=1, show_default=True, help="Forecast the return H days ahead.")
@click.option("--features", default="log_return", show_default=True,
              help=f"Comma-separated inputs from: {', '.join(FEATURES)}.")
@click.option("--d-model", default=64, show_default=True)
@click.option("--heads", "n_heads", default=4, show_default=True)
@click.option("--layers", "n_layers", default=2, show_default=True)
@click.option("--dropout", default=0.1, show_default=True)
@click.option("--positional", type=click.Choice(["sinusoidal", "learned", "rotary"]),
              default="sinusoidal", show_default=True)
@click.option("--loss", type=click.Choice(["mse", "gaussian", "quantile"]), default="mse",
              show_default=True)
@click.option("--epochs", "max_epochs", default=30, show_default=True)
@click.option("--batch-size", default=256, show_default=True)
@click.option("--lr", default=1e-3, show_default=True)
@click.option("--val-fraction", default=0.15, show_default=True,
              help="Latest share of windows held out for early stopping.")
@click.option("--patience", default=5, show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:N.")
@click.option("--seed", "random_state", default=0, show_default=True)
@click.option("--on-bad", type=click.Choice(["raise", "drop"]), default="raise", show_default=True,
              help="Bad rows: stop with an error, or drop and count them.")
def train(csv, out, features, on_bad, **params):
    """Fit a forecaster on CSV (default: embedded synthetic series) and save it to --out."""
    from .estimator import CausalTransformerForecaster
    from .plots import plot_history

    path, frame = _load(csv, on_bad)
    model = CausalTransformerForecaster(features=tuple(f.strip() for f in features.split(",")),
                                        **params)
    try:
        model.fit(frame)
    except ValueError as exc:
        raise click.ClickException(f"{path}: {exc}") from exc
    run = Path(out)
    run.mkdir(parents=True, exist_ok=True)
    model.save(run / MODEL_FILE)
    pd.DataFrame(model.history_).to_csv(run / "history.csv", index=False)
    plot_history(model.history_, run / "loss.png")
    info = {"csv": str(path.resolve()), "on_bad": on_bad, "train_end": str(model.train_end_.date()),
            "best_epoch": model.best_epoch_, "epochs_run": len(model.history_),
            "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in model.get_params().items()}}
    (run / RUN_FILE).write_text(json.dumps(info, indent=2))
    best = model.history_[model.best_epoch_ - 1]
    click.echo(f"trained on {path.name}: {len(model.history_)} epochs (best {model.best_epoch_}, "
               f"val loss {best.get('val_loss', float('nan')):.4f}), training data up to "
               f"{model.train_end_.date()}; saved {run / MODEL_FILE}")


@main.command()
@click.argument("csv", required=False, type=click.Path(dir_okay=False))
@click.option("--run", "run", required=True, type=click.Path(file_okay=False), help="Run folder from train.")
@click.option("--out", "out", type=click.Path(dir_okay=False),
              help="CSV to write (default RUN/predictions.csv).")
@click.option("--device", default="auto", show_default=True)
def predict(csv, run, out, device):
    """Forecast every day of CSV (default: the training CSV) and the next trading day."""
    from .metrics import point_metrics

    run, path, frame, model = _open_run(run, csv, device)
    table = _predictions_table(model, frame)
    out = Path(out) if out else run / "predictions.csv"
    table.to_csv(out, index_label="date")
    nxt = model.predict_next(frame)
    value = nxt.iloc[0] if isinstance(nxt, pd.Series) else nxt.iloc[0].to_dict()
    test = table[~table["in_training"] & table["actual"].notna() & ~table["suspended"]]
    col = "forecast" if "forecast" in table else table.columns[0]
    if len(test) > 2:
        m = point_metrics(test[col], test["actual"])
        click.echo(f"after the training cut-off ({m['n']} days): MSE {m['mse']:.3e} vs zero forecast "
                   f"{float((test['actual'] ** 2).mean()):.3e} (R^2 vs zero {m['r2_oos_zero']:+.4f}), "
                   f"corr {m['pearson_ic']:+.3f}")
    click.echo(f"wrote {len(table)} forecasts to {out}")
    click.echo(f"next trading day after {frame.index[-1].date()} ({nxt.index[0].date()} if no holiday): "
               f"{value}")


@main.command()
@click.argument("csv", required=False, type=click.Path(dir_okay=False))
@click.option("--run", "run", required=True, type=click.Path(file_okay=False), help="Run folder from train.")
@click.option("--out", "out", type=click.Path(file_okay=False), help="Folder for PNGs (default RUN).")
@click.option("--device", default="auto", show_default=True)
def plot(csv, run, out, device):
    """PNGs: forecast vs actual, implied price path, attention over the last input window."""
    from .plots import plot_attention, plot_forecast_vs_actual, plot_price_path
    from .walkforward import point_forecast

    run, path, frame, model = _open_run(run, csv, device)
    out = Path(out) if out else run
    point = point_forecast(model.predict(frame))
    test = point[point.index > model.train_end_]
    shown = test if len(test) > 20 else point
    files = [
        plot_forecast_vs_actual(shown, log_returns(frame), out / "forecast_vs_actual.png",
                                f"{path.name}: forecasts after the training cut-off {model.train_end_.date()}"
                                if shown is test else f"{path.name}: all forecasts (in-sample included)"),
        plot_price_path(frame, shown, out / "price_path.png"),
        plot_attention(*model.attention(frame), out / "attention.png"),
    ]
    for f in files:
        click.echo(f"wrote {f}")


# CLI spellings of a few fields (the field names are the config file's keys).
_ALIASES = {"n_jobs": "jobs", "commission_rate": "commission", "transfer_fee_rate": "transfer-fee",
            "random_state": "seed", "n_heads": "heads", "n_layers": "layers", "max_epochs": "epochs",
            "names": "features"}
# Sections whose fields are ``backtest`` options, in help order; DATA is the argument.
_OPTION_SECTIONS = ("features", "model", "models", "walk_forward", "strategy", "costs", "market",
                    "backtest", "data")
_SKIP = {"data": ("path",)}


def _model_option_fields():
    """``(name, default, hint, help)`` of the Transformer's parameters: the panel model's and
    the single-stock model's, with both defaults in the help where they differ."""
    from .experiment import field_help, model_class, model_params

    panel, single = model_params(True), model_params(False)
    helps = {**field_help(model_class(False)), **field_help(model_class(True))}
    out = []
    for name in [*panel, *(k for k in single if k not in panel)]:
        p, s1 = panel.get(name, "-"), single.get(name, "-")
        value = next((v for v in (p, s1) if v not in (None, "-")), None)
        if isinstance(value, (tuple, list)):  # e.g. quantiles: set them in a config file
            continue
        if p == "-" or s1 == "-":
            default = f"panel only; {p}" if s1 == "-" else f"one stock only; {s1}"
        else:
            default = f"panel {p}, one stock {s1}" if p != s1 else f"{p}"
        out.append((name, None, type(value).__name__ if value is not None else "str",
                    f"{helps.get(name, '')} [{default}]"))
    return out


def _click_type(hint: str):
    parts = {p.strip() for p in hint.split("|")} - {"None"}
    if parts == {"bool"}:
        return bool
    if parts == {"int"}:
        return int
    if parts & {"float"}:
        return float
    return str


def experiment_options(command):
    """Add one option per field of the experiment's sections (:mod:`forecaster.experiment`):
    the config file and the CLI read the same definitions, defaults and descriptions."""
    from .experiment import option_fields

    params, seen = [], {}
    for section in _OPTION_SECTIONS:
        fields = _model_option_fields() if section == "model" else option_fields(section)
        for name, default, hint, text in fields:
            if name in _SKIP.get(section, ()):
                continue
            flag = _ALIASES.get(name, name.replace("_", "-"))
            if flag in seen:
                raise RuntimeError(f"option --{flag} defined by [{seen[flag]}] and [{section}]")
            seen[flag] = section
            kind = _click_type(hint)
            if section == "features":
                kind = str
                text += " (comma-separated)"
            shown = "" if section == "model" else f" [{'' if default is None else default}]"
            decl = f"--{flag}/--no-{flag}" if kind is bool else f"--{flag}"
            params.append(click.option(decl, f"{section}__{name}", type=None if kind is bool else kind,
                                       default=None, help=f"[{section}] {text}{shown}"))
    for option in reversed(params):  # decorators apply bottom-up
        command = option(command)
    return command


def _raw_sections(options: dict) -> dict[str, dict]:
    """``{section: {key: value}}`` of the options given (``None`` = not given)."""
    raw: dict[str, dict] = {}
    for key, value in options.items():
        if value is None or "__" not in key:
            continue
        section, name = key.split("__", 1)
        if section == "features":
            value = tuple(v.strip() for v in value.split(",") if v.strip())
        raw.setdefault(section, {})[name] = value
    return raw


def _run(raw: dict, source: str, out: str) -> None:
    """Resolve, run and report an experiment (``backtest`` and ``run``)."""
    from .data import DataError
    from .experiment import ConfigError
    from .fold_store import ResumeError
    from .pipeline import prepare, run_experiment

    try:
        exp, loaded = prepare(raw, source)
    except (ConfigError, DataError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(loaded.summary, err=True)
    wf = exp.walk_forward
    click.echo(f"walk-forward: {wf.scheme} window, refit every {wf.retrain_every} days, horizon "
               f"{wf.horizon}; strategy {exp.backtest.strategy.rule}", err=True)
    try:
        result, report, files = run_experiment(exp, loaded, out)
    except KeyboardInterrupt:
        folds = Path(out) / "folds"
        done = len(list(folds.glob("fold_*.pkl")))
        args = [a for a in sys.argv[1:] if a != "--resume"]
        click.echo(f"\ninterrupted: {done} finished fold(s) kept in {folds}; resume with:\n  "
                   + shlex.join(["forecaster", *args, "--resume"]), err=True)
        sys.exit(130)
    except (ResumeError, ConfigError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    with pd.option_context("display.width", 200, "display.max_columns", 20,
                           "display.float_format", "{:+.4f}".format):
        click.echo(report.summary_table().to_string())
    click.echo("")
    for line in report.verdict + report.notes:
        click.echo(f"- {line}")
    click.echo(f"report: {', '.join(f.name for f in files)} in {out}")
    if "transformer" not in set(result.predictions["model"]) and any(
            name == "transformer" for _, name in result.failed):
        click.echo("transformer failed on every fold (see 'failed' in metrics.json)", err=True)
        sys.exit(1)


@main.command()
@click.argument("data", required=False, type=click.Path(exists=True))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Report folder to write.")
@experiment_options
def backtest(data, out, **options):
    """Walk-forward evaluation against baselines, then an A-share backtest and a report.

    DATA is one CSV (one stock: the single-stock Transformer and time-series baselines on
    close-to-close returns) or a folder of CSVs (a panel: the cross-sectional panel
    Transformer against factor scores, a composite, gradient boosting and ridge on the same
    features, scored by daily rank IC on the tradeable label); default: the embedded
    synthetic series. Every option is a key of an experiment file (`forecaster run`), shown
    as [section]; the report folder keeps the resolved experiment.toml.

    Each finished fold is saved in OUT/folds as the run goes: after a crash, kill or Ctrl-C,
    the same command with --resume continues from there. A model that fails on a fold is
    recorded and the run goes on; the exit status is 1 when the Transformer failed on every
    fold.
    """
    raw = _raw_sections(options)
    if data:
        raw.setdefault("data", {})["path"] = str(data)
    _run(raw, "<options>", out)


@main.command("run")
@click.argument("experiment", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Report folder to write.")
@click.option("--resume", is_flag=True, help="Continue the interrupted run in --out (same as "
              "[walk_forward] resume = true).")
def run_command(experiment, out, resume):
    """Run the experiment file EXPERIMENT (TOML: [data], [features], [model], [models],
    [walk_forward], [strategy], [costs], [market], [backtest]; keys as the backtest options)."""
    from .experiment import ConfigError, read_toml

    try:
        raw = read_toml(experiment)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    if resume:
        raw.setdefault("walk_forward", {})["resume"] = True
    _run(raw, str(experiment), out)


@main.command()
@click.argument("reports", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Also write the table as CSV here, and a PNG of it beside (same name, .png).")
def compare(reports, out):
    """Key figures of several report folders side by side: the model under test's rank IC
    and ICIR, the best baseline, excess return after costs, turnover and costs."""
    from .compare import compare_reports, plot_comparison

    try:
        table = compare_reports(list(reports))
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    with pd.option_context("display.width", 220, "display.max_columns", 20):
        click.echo(table.to_string(float_format=lambda v: f"{v:+.4f}"))
    if out:
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(out)
        click.echo(f"wrote {out} and {plot_comparison(table, out.with_suffix('.png'))}")


@main.command()
@click.argument("code")
@click.option("--start", required=True, help="YYYY-MM-DD")
@click.option("--end", required=True, help="YYYY-MM-DD")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="CSV to write.")
@click.option("--adjustflag", type=click.Choice(["1", "2", "3"]), default="3", show_default=True,
              help="3 unadjusted, 2 forward-, 1 backward-adjusted.")
def fetch(code, start, end, out, adjustflag):
    """Download daily bars of CODE (e.g. sh.600000) with baostock."""
    from .data.fetch import FetchError, fetch_baostock

    try:
        path = fetch_baostock(code, start, end, out, adjustflag)
    except FetchError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"wrote {path}")


if __name__ == "__main__":
    main()
