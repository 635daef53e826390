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


@main.command()
@click.argument("data", required=False, type=click.Path(exists=True))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Report folder to write.")
@click.option("--window", type=int, default=None,
              help="Input days per forecast [panel model: 20; one stock: 40].")
@click.option("--features", default=None,
              help="Comma-separated inputs [panel: every feature of forecaster.factors the columns allow; "
                   f"one stock: log_return, from {', '.join(FEATURES)}].")
@click.option("--d-model", type=int, default=None, help="[panel 32, one stock 32]")
@click.option("--heads", "n_heads", type=int, default=None, help="[4]")
@click.option("--layers", "n_layers", type=int, default=None, help="[2]")
@click.option("--epochs", "max_epochs", type=int, default=None,
              help="Max epochs per fold [panel 20, one stock 8].")
@click.option("--patience", type=int, default=None, help="[panel 4, one stock 3]")
@click.option("--lr", type=float, default=None, help="[1e-3]")
@click.option("--loss", type=click.Choice(["ic", "mse", "pairwise", "listnet"]), default=None,
              help="Panel model: per-day loss [pairwise].")
@click.option("--cross-stock/--no-cross-stock", default=None,
              help="Panel model: attention across the stocks of a day [off].")
@click.option("--n-seeds", type=int, default=None, help="Panel model: ensemble size [1].")
@click.option("--batch-size", default=256, show_default=True, help="One stock: windows per step.")
@click.option("--train-stride", type=int, default=None,
              help="One stock / --per-stock: train on every n-th window [1].")
@click.option("--positional", type=click.Choice(["sinusoidal", "learned", "rotary", "none"]), default=None,
              help="Positions [panel: rotary (or none); one stock: sinusoidal, learned or rotary].")
@click.option("--scheme", type=click.Choice(["expanding", "rolling"]), default="expanding", show_default=True)
@click.option("--train-days", default=500, show_default=True,
              help="Days before the first cut-off (the window length when rolling).")
@click.option("--retrain-every", default=63, show_default=True,
              help="Days between refits (21 ~ monthly, 63 ~ quarterly).")
@click.option("--purge", type=int, default=None, help="Days from cut-off to first forecast [horizon].")
@click.option("--step", default=1, show_default=True, help="Forecast every n-th day of each fold.")
@click.option("--horizon", default=1, show_default=True,
              help="Label horizon H: panels score the return from the next open to the open H days later.")
@click.option("--jobs", "n_jobs", default=-1, show_default=True, help="Parallel processes (-1: all cores).")
@click.option("--seed-recipe/--no-seed-recipe", default=None,
              help="Include the seed recipe baseline [on for one stock, off for panels: it is slow].")
@click.option("--per-stock", is_flag=True,
              help="Panels: also fit one single-stock Transformer per stock (slow).")
@click.option("--execution", type=click.Choice(["next_open", "close"]), default="next_open",
              show_default=True, help="next_open: trade at the open after the forecast; close: idealised.")
@click.option("--mode", type=click.Choice(["long_flat", "long_short"]), default="long_flat",
              show_default=True)
@click.option("--threshold", default=0.0, show_default=True, help="Go long when the forecast exceeds it.")
@click.option("--rule", type=click.Choice(["top_k", "dropout", "threshold"]), default=None,
              help="Portfolio rule [panels: top_k; one stock: threshold]; dropout replaces at most "
                   "--n-drop names per rebalance.")
@click.option("--top-k", type=int, default=None, help="Panels: hold the k best forecasts [n/3, at most 10].")
@click.option("--n-drop", type=int, default=None, help="dropout: names replaced per rebalance at most [1].")
@click.option("--weighting", type=click.Choice(["equal", "rank"]), default=None,
              help="Weights of the held names [equal].")
@click.option("--rebalance-every", type=int, default=None, help="Days between rebalances [horizon].")
@click.option("--capital", default=1_000_000.0, show_default=True, help="CNY.")
@click.option("--commission", default=0.00025, show_default=True, help="Commission rate, both sides.")
@click.option("--min-commission", default=5.0, show_default=True, help="CNY per trade.")
@click.option("--transfer-fee", default=0.00001, show_default=True)
@click.option("--slippage-bps", default=5.0, show_default=True)
@click.option("--device", default="auto", show_default=True)
@click.option("--seed", "random_state", default=0, show_default=True)
@click.option("--on-bad", type=click.Choice(["raise", "drop"]), default="raise", show_default=True)
@click.option("--resume", is_flag=True,
              help="Continue the interrupted run in --out from its finished folds (same data and options).")
@click.option("--index-constituents", is_flag=True,
              help="The folder holds an index's current constituents: state the survivorship bias as a fact.")
def backtest(data, out, features, scheme, train_days, retrain_every, purge, step, horizon, n_jobs,
             seed_recipe, per_stock, execution, mode, threshold, rule, top_k, n_drop, weighting,
             rebalance_every, capital,
             commission, min_commission, transfer_fee, slippage_bps, on_bad, loss, cross_stock, n_seeds,
             resume, index_constituents, **params):
    """Walk-forward evaluation against baselines, then an A-share backtest and a report.

    DATA is one CSV (one stock: the single-stock Transformer and time-series baselines on
    close-to-close returns) or a folder of CSVs (a panel: the cross-sectional panel
    Transformer against factor scores, a composite, gradient boosting and ridge on the same
    features, scored by daily rank IC on the tradeable label); default: the embedded
    synthetic series.

    Each finished fold is saved in OUT/folds as the run goes: after a crash, kill or Ctrl-C,
    the same command with --resume continues from there. A model that fails on a fold is
    recorded and the run goes on; the exit status is 1 when the Transformer failed on every
    fold.
    """
    from .backtest import BacktestConfig
    from .baselines import PerStock, default_baselines
    from .data import load_dir
    from .estimator import CausalTransformerForecaster
    from .fold_store import ResumeError
    from .presets import panel_models
    from .report import build_report, write_report
    from .rules import CostModel
    from .strategy import StrategyConfig
    from .walkforward import WalkForwardConfig, walk_forward

    if data and Path(data).is_dir():
        try:
            frames, reports = load_dir(data, on_bad=on_bad)
        except (DataError, FileNotFoundError) as exc:
            raise click.ClickException(str(exc)) from exc
        click.echo(f"{data}: {len(frames)} stocks, {sum(r.rows_kept for r in reports.values())} rows, "
                   f"{sum(r.suspended_days for r in reports.values())} suspended days", err=True)
        source = str(Path(data).resolve())
    else:
        path, frame = _load(data, on_bad)
        frames = {str(frame["code"].iloc[0]): frame}
        source = str(path.resolve())
    panel = len(frames) > 1
    feature_list = tuple(f.strip() for f in features.split(",")) if features else None
    given = {k: v for k, v in params.items() if v is not None}
    try:
        if panel:
            panel_params = {k: v for k, v in given.items()
                            if k in ("window", "d_model", "n_heads", "n_layers", "max_epochs", "patience",
                                     "lr", "positional")}
            panel_params.update({k: v for k, v in (("loss", loss), ("cross_stock", cross_stock),
                                                   ("n_seeds", n_seeds), ("features", feature_list))
                                 if v is not None})
            models = panel_models(horizon=horizon, execution=execution, random_state=params["random_state"],
                                  device=params["device"], **panel_params)
            models["transformer"]._validate_params()
            window = models["transformer"].window
        single = dict(window=40, d_model=32, n_heads=4, n_layers=2, max_epochs=8, patience=3,
                      lr=1e-3, train_stride=1, positional="sinusoidal")
        single.update({k: v for k, v in given.items()
                       if k in single or k in ("batch_size", "device", "random_state")})
        net = CausalTransformerForecaster(features=feature_list or ("log_return",), horizon=horizon,
                                          progress=False, **single)
        net._validate_params()
        if not panel:
            models = {"transformer": net}
            window = net.window
            use_seed = True if seed_recipe is None else seed_recipe
            models.update(default_baselines(window=window, horizon=horizon, seed=use_seed and horizon == 1))
        else:
            if per_stock:
                models["transformer_per_stock"] = PerStock(net)
            if seed_recipe and horizon == 1:
                models["seed"] = default_baselines(seed=True)["seed"]
        wf = WalkForwardConfig(scheme=scheme, train_days=train_days, retrain_every=retrain_every,
                               purge=purge, step=step, horizon=horizon, n_jobs=n_jobs,
                               margin_days=max(130, 2 * window + 10),
                               label="tradeable" if panel else "close", execution=execution,
                               resume=resume)
        costs = CostModel(commission_rate=commission, min_commission=min_commission,
                          transfer_fee_rate=transfer_fee, slippage_bps=slippage_bps)
        strategy = StrategyConfig.for_universe(len(frames), rule=rule, top_k=top_k, n_drop=n_drop,
                                               weighting=weighting, mode=mode, threshold=threshold,
                                               rebalance_every=rebalance_every or horizon)
        bt = BacktestConfig(strategy=strategy, capital=capital, execution=execution, costs=costs)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"walk-forward: {len(models)} models, {scheme} window, refit every {retrain_every} days",
               err=True)
    folds_dir = Path(out) / "folds"
    try:
        result = walk_forward(frames, models, wf, checkpoint_dir=folds_dir)
    except KeyboardInterrupt:
        done = len(list(folds_dir.glob("fold_*.pkl")))
        args = [a for a in sys.argv[1:] if a != "--resume"]
        click.echo(f"\ninterrupted: {done} finished fold(s) kept in {folds_dir}; resume with:\n  "
                   + shlex.join(["forecaster", *args, "--resume"]), err=True)
        sys.exit(130)
    except (ResumeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    report = build_report(result, frames, models, "transformer", bt, horizon,
                          index_constituents=index_constituents)
    files = write_report(report, result, out, extra={"data": source, "model_params": {
        name: {k: (list(v) if isinstance(v, tuple) else v) for k, v in m.get_params(deep=False).items()
               if not hasattr(v, "get_params")}
        for name, m in models.items() if name.startswith("transformer")}})
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
