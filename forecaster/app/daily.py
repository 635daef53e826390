"""Daily use of a fitted model: ``forecaster train`` (fit and save a run folder) and ``predict``
(tomorrow's ranked list, the orders for a book, a stale-model warning); ``plot`` is
:mod:`forecaster.app.plot_run`. Registered
on the ``forecaster`` group by :mod:`forecaster.app.cli`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
import pandas as pd

from forecaster.app.errors import error_line, input_errors
from forecaster.app.experiment import DataConfig
from forecaster.app.options import DATE, SectionedCommand, experiment_options, raw_sections
from forecaster.app.outputs import (
    check_apart,
    check_output,
    check_output_file,
    is_own_file,
    remove_own_file,
)
from forecaster.app.signal_day import (
    check_signal_day,
    members_only,
    members_table,
    next_open_orders,
    orders_line,
    strategy_of,
    trade_day_of,
    warn_if_stale,
)
from forecaster.data import DataError, default_series_path, load_csv
from forecaster.data.market.universe import resolve_universe
from forecaster.data.minute.session import is_bar_frame
from forecaster.data.sources import MAX_FILE_MB
from forecaster.features.series import log_returns
from forecaster.metrics import stat_text
from seq2seq.core import atomic_write

MODEL_FILE = "model.pt"
RUN_FILE = "run.json"


def load_one(csv: str | None, on_bad: str = "raise", max_file_mb: float = MAX_FILE_MB):
    path = Path(csv) if csv else default_series_path()
    try:
        frame, report = load_csv(path, on_bad=on_bad, max_file_mb=max_file_mb)
    except (DataError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(report.summary(), err=True)
    return path, frame


def load_panel(folder: str, on_bad: str = "raise", end: pd.Timestamp | None = None, intraday: str = "",
                cache: bool = False, max_file_mb: float = MAX_FILE_MB):
    """``(frames, Panel, indices)`` of a folder (with the daily features of the minute bars in
    ``intraday``, if given), rows after ``end`` left out (stocks with no row up to ``end`` are
    counted and named); ``indices``: ``{code: frame}`` of the index series the data hold, kept
    out of the stocks."""
    from forecaster.app.pipeline import load_data
    from forecaster.data.panel import Panel

    try:
        loaded = load_data(DataConfig(path=str(folder), on_bad=on_bad, cache=cache, max_file_mb=max_file_mb,
                                      intraday=str(Path(intraday).resolve()) if intraday else ""))
    except (DataError, FileNotFoundError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(loaded.summary, err=True)
    frames = loaded.frames
    if end is not None:
        first = min(f.index[0] for f in frames.values())
        if end < first:
            raise click.ClickException(f"--end {end.date()} is before the data's first day ({first.date()})")
        end = str(end.date())
        cut = {c: f.loc[:end] for c, f in frames.items()}
        later = sorted(c for c, f in cut.items() if f.empty)
        if later:
            click.echo(f"{len(later)} stock(s) have no row up to {end} and are left out: "
                       f"{', '.join(later[:10])}{' ...' if len(later) > 10 else ''}", err=True)
        frames = {c: f for c, f in cut.items() if not f.empty}
        click.echo(f"up to {end}: {len(frames)} stocks, {sum(len(f) for f in frames.values())} rows",
                   err=True)
        grid = Panel.from_frames(frames)
        grid.ends = loaded.ends or None
        return frames, grid, loaded.indices
    return frames, loaded.panel, loaded.indices


def run_on_bad(given: str | None, info: dict, max_file_mb: float = MAX_FILE_MB) -> str:
    """A run's command's ``--on-bad``: as given (checked as ``[data] on_bad`` is, before the
    data is read), else as the run was trained; ``--max-file-mb`` checked alike."""
    try:
        return DataConfig(on_bad=given or info.get("on_bad", "raise"), max_file_mb=max_file_mb).on_bad
    except ValueError as exc:
        from forecaster.app.fields import OPTIONS, config_error

        raise click.ClickException(str(config_error(OPTIONS, "data", str(exc),
                                                    ["on_bad", "max_file_mb"]))) from None


def _run_info(run: Path) -> dict:
    info = run / RUN_FILE
    if not (run / MODEL_FILE).is_file() or not info.is_file():
        raise click.ClickException(f"{run}: not a run folder (expected {MODEL_FILE} and {RUN_FILE}); "
                                   "create one with `forecaster train --out RUN_DIR`")
    return json.loads(info.read_text())


def open_run(run: str, data: str | None, device: str):
    """``(run, info, model)`` of a run folder (a panel or a single-stock model)."""
    from forecaster.models.panel.model import PanelTransformer
    from forecaster.models.stock.estimator import CausalTransformerForecaster
    from seq2seq.core import resolve_device

    try:  # before the checkpoint is read: the device, not the file, is what is wrong
        resolve_device(device)
    except ValueError as exc:
        raise click.ClickException(f"--device {device}: {exc}") from None
    run = Path(run)
    info = _run_info(run)
    cls = PanelTransformer if info.get("kind") == "panel" else CausalTransformerForecaster
    if data and (Path(data).is_dir()) != (cls is PanelTransformer):
        kind = "a folder (panel)" if cls is PanelTransformer else "one CSV"
        raise click.ClickException(f"{run} holds a model of {kind}; {data} is not that")
    model = cls.load(run / MODEL_FILE, device=device)  # a CheckpointError: one line
    return run, info, model


def _signal_date_of(orders_file: Path) -> str:
    """The ``signal_date`` an earlier orders file was made for ("unknown" if it has none)."""
    try:
        days = pd.read_csv(orders_file, usecols=["signal_date"])["signal_date"].dropna().unique()
    except (ValueError, OSError):
        return "unknown"
    return ", ".join(map(str, days)) or "unknown"


def _predictions_table(model, frame: pd.DataFrame) -> pd.DataFrame:
    pred = model.predict(frame)
    table = pred.to_frame() if isinstance(pred, pd.Series) else pred
    table["actual"] = log_returns(frame).reindex(table.index)
    table["suspended"] = frame["suspended"].reindex(table.index)
    table["in_training"] = table.index <= model.train_end_
    return table


@click.command(cls=SectionedCommand)
@click.argument("data", required=False, type=click.Path(exists=True))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False), help="Run folder to write.")
@click.option("--overwrite", is_flag=True, help="--out holds an earlier run: remove its files first.")
@click.option("--end", default=None, type=DATE, help="Train on rows up to this date (default: every row).")
@experiment_options(("features", "model", "walk_forward", "backtest", "data"),
                    only={"walk_forward": ("horizon",), "backtest": ("execution",),
                          "data": ("on_bad", "intraday", "train_universe", "train_outside_weight",
                                   "cache", "max_file_mb")})
def train(data, out, overwrite, end, **options):
    """Fit the Transformer on DATA and save it to --out.

    Most used: DATA, --out, --end DATE, --train-universe csi300.

    DATA is a folder of CSVs (the panel Transformer, ranking the stocks of each day; then
    `forecaster predict --run OUT` lists tomorrow's buys) or one CSV (the single-stock
    Transformer; default: the embedded synthetic series). Options and defaults are those of
    `forecaster backtest` (one definition).
    """
    from forecaster.app.fields import (
        OPTIONS,
        ConfigError,
        check_device,
        check_features,
        check_model_params,
        config_error,
        model_class,
        model_fields,
    )
    from forecaster.models.presets import single_stock_transformer

    raw = raw_sections(options)
    name = raw.get("model", {}).pop("name", "transformer")
    if name != "transformer":  # predict reads back the Transformer's checkpoint
        raise click.ClickException(f"--model {name}: train fits the Transformer, the model predict "
                                   "reads back; other models are compared by backtest and run "
                                   "(--model NAME there)")
    horizon = raw.get("walk_forward", {}).get("horizon", 1)
    on_bad = raw.get("data", {}).get("on_bad", "raise")
    intraday = raw.get("data", {}).get("intraday") or ""
    if intraday and not (data and Path(data).is_dir()):
        raise click.ClickException("--intraday needs DATA to be a folder of daily files (a panel)")
    features = raw.get("features", {}).get("names")
    blend = raw.get("features", {}).get("blend")  # None: the model's preset decides
    from forecaster.features.industry import INDUSTRY_FEATURES

    industry = [n for n in (*(features or ()), *(blend or ())) if n == "industry" or n in INDUSTRY_FEATURES]
    if industry:  # predict's panel is the day's members: its industry means would not be training's
        raise click.ClickException(f"--features {','.join(industry)}: the industry features are measured by "
                                   "backtest and run (with --industries FILE); train and predict do not take "
                                   "them yet")
    panel = bool(data) and Path(data).is_dir()
    if blend and not panel:
        raise click.ClickException("--blend-features needs DATA to be a folder of stocks (a panel): a "
                                   "single-stock Transformer has one set of inputs")
    learn_spec = raw.get("data", {}).get("train_universe") or ""
    if learn_spec and not panel:
        raise click.ClickException("--train-universe needs DATA to be a folder of stocks (a panel)")
    outside = float(raw.get("data", {}).get("train_outside_weight") or 0.0)
    max_mb = raw.get("data", {}).get("max_file_mb", MAX_FILE_MB)
    try:  # the one validation of the option ([data] of an experiment)
        DataConfig(on_bad=on_bad, train_universe=learn_spec, train_outside_weight=outside, max_file_mb=max_mb)
    except ValueError as exc:
        from forecaster.app.fields import OPTIONS, config_error

        fields = [f.name for f in dataclasses.fields(DataConfig)]
        raise click.ClickException(str(config_error(OPTIONS, "data", str(exc), fields))) from None
    check_apart([out], [data, intraday])
    target = check_output(out, overwrite=overwrite)  # before the training, not after it
    try:
        params = check_model_params(raw.get("model", {}), panel, "<options>")
        check_features(features, panel)
        check_features(blend, panel, key="blend")
        check_device(params.get("device", "auto"))
        try:  # every model option before the data is read
            model_class(panel)(**params)._validate_params()
        except ValueError as exc:
            raise config_error(OPTIONS, "model", str(exc), model_fields()) from None
        if panel:
            from forecaster.models.panel.model import PanelTransformer

            learn = resolve_universe(learn_spec, data, "--train-universe") if learn_spec else None
            frames, grid, _ = load_panel(data, on_bad, end, intraday, bool(raw.get("data", {}).get("cache")),
                                         max_mb)
            if learn is not None:  # only the day's members' labels are learnt (features: every stock)
                # which list, from where, under the option typed; its checks logged
                click.echo(learn.describe("--train-universe"), err=True)
                learn.check(grid.dates, grid.codes, data)
                learn.check_overlaps(grid.codes, "--train-universe", learn_spec)
                grid = dataclasses.replace(grid, learn=learn.learn_mask(grid.dates, grid.codes, outside),
                                           _cache={})
            model = PanelTransformer(horizon=horizon, execution=raw.get("backtest", {}).get(
                "execution", "next_open"), features=features, blend_features=blend, progress=True, **params)
            model.fit(grid)
            source = str(Path(data).resolve())
        else:
            path, frame = load_one(data, on_bad, max_mb)
            if end is not None and end < frame.index[0].normalize():
                raise ConfigError(f"--end {end.date()} is before the first row ({frame.index[0].date()})")
            # a date: every row of that day (minute bars included)
            frame = frame.loc[: end + pd.Timedelta(days=1) - pd.Timedelta(1)] if end is not None else frame
            model = single_stock_transformer(horizon=horizon, progress=True,
                                             **({"features": features} if features else {}), **params)
            model.fit(frame)
            source = str(path.resolve())
    except ConfigError as exc:  # names the option itself
        raise click.ClickException(str(exc)) from exc
    except input_errors() as exc:  # anything else (a bare ValueError) is a bug: its traceback
        raise click.ClickException(f"{data or 'embedded series'}: {error_line(exc).message}") from exc
    run = target.claim()
    model.save(run / MODEL_FILE)
    info = {"kind": "panel" if panel else "one_stock", "data": source, "csv": None if panel else source,
            "on_bad": on_bad, "train_end": str(model.train_end_.date()),
            "intraday": str(Path(intraday).resolve()) if intraday else "",
            "train_universe": learn_spec, "train_outside_weight": outside,
            "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in model.get_params().items()}}
    if panel:
        from forecaster.features.factors import inputs_note
        from forecaster.reporting.plots import plot_panel_training

        plot_panel_training(model.histories_, run / "training.png", loss=model.loss or model.budget_["loss"],
                            best_epochs=model.best_epochs_)
        info["best_epochs"] = model.best_epochs_
        best = [h[b - 1].get("val_rank_ic", float("nan"))
                for h, b in zip(model.histories_, model.best_epochs_, strict=True)]
        why = "fewer than 5 scored stocks on every validation day"
        stocks = f"{grid.n_stocks} stock{'s' if grid.n_stocks != 1 else ''}"
        budget = model.budget_
        if budget["val_fraction"] > 0:
            summary = (f"trained the panel Transformer on {stocks} up to {model.train_end_.date()}: "
                       f"best epoch(s) {model.best_epochs_}, validation rank IC "
                       f"{', '.join(stat_text(v, '+.4f', why) for v in best)}")
        else:  # the whole-market schedule: nothing held out
            summary = (f"trained the panel Transformer on {stocks} up to {model.train_end_.date()}: "
                       f"{budget['max_epochs']} epochs on every training day, no validation, the last "
                       f"{budget['average_last']} epochs' weights averaged")
        if model.blend_ is not None:
            second = len(model.blend_.nets_)
            summary += (f"; {model.n_seeds_} network(s) on the first set of inputs and {second} on the "
                        f"second ({', '.join(model.inputs_blend(grid.n_stocks))}), the two sets' scores "
                        "averaged")
        elif model.n_seeds_ > 1:
            summary += f"; {model.n_seeds_} networks from {model.n_seeds_} seeds, their scores averaged"
        if learn_spec:
            inside = int((grid.learn == 1).sum())
            summary += (f"; labels learnt only from the members of {learn_spec} on each day "
                        f"({inside} stock-days)" if outside == 0 else
                        f"; labels of the members of {learn_spec} on each day ({inside} stock-days) "
                        f"learnt at weight 1, every other stock's at weight {outside:g}")
        defaults = model.rules.default_features(grid.n_stocks, model.preset)
        note = inputs_note(grid, features or defaults, model.inputs_blend(grid.n_stocks))
        if note:
            summary = f"{note}\n{summary}"
    else:
        from forecaster.reporting.plots import plot_history

        with atomic_write(run / "history.csv", "w") as f:
            pd.DataFrame(model.history_).to_csv(f, index=False)
        plot_history(model.history_, run / "loss.png")
        info.update(best_epoch=model.best_epoch_, epochs_run=len(model.history_))
        best = model.history_[model.best_epoch_ - 1]
        summary = (f"trained on {Path(source).name}: {len(model.history_)} epochs (best {model.best_epoch_}, "
                   f"val loss {stat_text(best.get('val_loss'), '.4f', 'no validation windows')}), "
                   f"training data up to {model.train_end_.date()}")
    with atomic_write(run / RUN_FILE, "w") as f:
        f.write(json.dumps(info, indent=2))
    click.echo(f"{summary}; saved {run / MODEL_FILE}")


@click.command(cls=SectionedCommand)
@click.argument("data", required=False, type=click.Path(exists=True))
@click.option("--run", "run", required=True, type=click.Path(file_okay=False), help="Run folder from train.")
@click.option("--out", "out", type=click.Path(dir_okay=False),
              help="CSV to write (default RUN/next_day.csv for a panel, RUN/predictions.csv for one stock).")
@click.option("--device", default="auto", show_default=True)
@click.option("--holdings", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Panel run: CSV of what is held (code, shares; a row 'cash,AMOUNT' for the cash): "
                   "write tomorrow's orders to RUN/orders.csv. Without it, --capital alone gives the "
                   "orders for an empty book.")
@click.option("--stale-after", type=click.IntRange(min=1), default=20, show_default=True,
              help="Warn when the signal day is more than this many trading days after the model's "
                   "training end.")
@click.option("--at-limit", type=click.Choice(["block", "limit_order"]), default="block", show_default=True,
              help="A buy of a stock that closed at limit-up on the signal day (a sell of one at "
                   "limit-down) likely opens there and would queue: block it, or place it as a limit "
                   "order at the limit price (status limit_order).")
@click.option("--report", "report", type=click.Path(exists=True, file_okay=False), default=None,
              help="With --alpha-halflife: a walk-forward report of these data whose out-of-sample forecasts "
                   "of the days before the signal day the decayed alpha reads (the run's own model was "
                   "fitted on those days).")
@experiment_options(("strategy", "costs", "market", "backtest", "data"),
                    only={"backtest": ("capital", "rebalance_tolerance", "benchmark_weights",
                                       "dividend_data"),
                          "data": ("on_bad", "intraday", "universe", "cache", "max_file_mb")})
@click.option("--overwrite", is_flag=True,
              help="Replace an output file that this command did not write (by default only its own "
                   "earlier outputs are replaced).")
def predict(data, run, out, device, holdings, stale_after, at_limit, report, overwrite, **options):
    """Tomorrow's ranked list of DATA's stocks from a trained run, and with --holdings or
    --capital the orders for the next open.

    Most used: --run, --holdings H.csv (or --capital), --universe csi300, --strategy enhanced.

    Panel run: the list (default DATA: the training folder) -- code, score, rank, quintile
    and whether it can be bought at the next open -- as CSV and PNG; the orders (orders.csv:
    side, shares in whole lots, reference price, estimated costs, reason) by the backtest's
    rules and strategy. One-stock run: every day's forecast of DATA (default: the training
    CSV) and the next trading day's.
    """
    from forecaster.metrics import point_metrics

    run, info, model = open_run(run, data, device)
    raw = raw_sections(options)
    # the minute bars of a run trained with --intraday: newer ones if given, else the run's
    data_options = raw.pop("data", {})
    given = data_options.get("intraday")
    intraday = given or info.get("intraday", "")
    universe = data_options.get("universe")
    max_mb = data_options.get("max_file_mb", MAX_FILE_MB)
    on_bad = run_on_bad(data_options.get("on_bad"), info, max_mb)
    if info.get("kind") == "panel":
        from forecaster.app.next_day_marks import draw_next_day, enhanced_lines_and_figure
        from forecaster.features.factors import missing_features
        from forecaster.portfolio.next_day import ranked_list

        source = data or info["data"]
        out = Path(out) if out else run / "next_day.csv"
        orders_file = out.with_name("orders.csv")
        want_orders = bool(holdings) or "capital" in raw.get("backtest", {})
        written = [out, out.with_suffix(".png")] + ([orders_file] if want_orders else [])
        active_png = out.with_name("next_day_active.png")  # the enhanced book's target against the benchmark
        if want_orders and raw.get("strategy", {}).get("rule") == "enhanced":
            written.append(active_png)
        check_apart(written, [source, holdings, intraday, run / MODEL_FILE, run / RUN_FILE])
        for path in written:  # the command's own earlier outputs are replaced, nothing else
            check_output_file(path, overwrite=overwrite)
        stale_orders = not want_orders and orders_file.exists()
        if stale_orders and not is_own_file(orders_file):
            raise click.ClickException(
                f"{orders_file}: orders this command did not write (or changed since) lie where the new "
                f"list goes; they would read as orders for its signal day. Move the file, or pass "
                "--holdings/--capital to write new orders")
        _, grid, indices = load_panel(source, on_bad, intraday=intraday,
                                      cache=bool(data_options.get("cache")), max_file_mb=max_mb)
        check_signal_day(model.train_end_, grid)
        warn_if_stale(model.train_end_, grid.dates, stale_after)
        trade_day = trade_day_of(grid)  # the exchange's next trading day: the list's and the orders'
        next_members = None  # the trade day's members: a review the list holds is known in advance
        if universe:
            n_all = grid.n_stocks
            grid, next_members = members_only(grid, universe, source, indices, trade_day)
        if raw.get("backtest", {}).get("dividend_data"):  # read and checked before anything is written
            from forecaster.portfolio.total_return import attach_dividends

            for note in attach_dividends(grid, raw["backtest"]["dividend_data"]):
                click.echo(note, err=True)
        if raw.get("strategy", {}).get("industries"):  # read and checked before anything is written
            from forecaster.portfolio.industry_groups import attach_industries

            for note in attach_industries(grid, raw["strategy"]["industries"]):
                click.echo(note, err=True)
        try:
            table = ranked_list(model, grid, strategy=strategy_of(raw, grid.n_stocks), trade_date=trade_day)
            if universe:  # the day's members only: the list, its ranks and quantiles
                table = members_table(table, grid)
            # a stock scored without some of its features (its file lacks their columns) says so
            lacking = missing_features(grid, model.features_)
            table["missing_features"] = [",".join(lacking.get(c, ())) for c in table["code"]]
            orders = (next_open_orders(table, grid, holdings, raw, at_limit, trade_day, report, next_members)
                      if want_orders
                      else None)
        except input_errors() as exc:
            raise error_line(exc) from exc
        # Every input is validated: the outputs are written together (the signal day in each).
        with atomic_write(out, "w") as f:
            table.to_csv(f, index=False)
        png = draw_next_day(table, grid, source, holdings, out.with_suffix(".png"), model.train_end_)
        if orders is not None:
            with atomic_write(orders_file, "w") as f:
                orders.to_csv(f, index=False)
            click.echo(orders_line(orders, orders_file))
            lines, drawn = enhanced_lines_and_figure(orders, source, active_png)
            for line in lines:
                click.echo(line)
            if drawn is not None:
                click.echo(f"wrote {drawn}")
            if orders.attrs.get("warning"):
                click.echo(orders.attrs["warning"], err=True)
        elif stale_orders:  # never beside a list of another signal day
            old_day = _signal_date_of(orders_file)
            remove_own_file(orders_file)
            click.echo(f"removed {orders_file} (orders for the signal day {old_day}, written by an earlier "
                       "predict): this list comes without orders; pass --holdings or --capital for them",
                       err=True)
        last = grid.dates[-1].date()
        buy = table[table["buyable"]].head(10)
        click.echo(f"signal day {last}; for the open of the next trading day, {trade_day.date()}, best "
                   "buyable scores:")
        for row in buy.itertuples():
            click.echo(f"  {row.rank:>4}. {row.code}  score {row.score:+.3f}  (quintile {row.quantile})")
        blocked = table[~table["buyable"]]
        click.echo(f"{len(table)} stocks ranked; {len(blocked)} cannot be bought at the open (see 'reason'); "
                   f"model trained up to {info['train_end']}; wrote {out} and {png}")
        if universe:
            click.echo(f"universe {universe}: {len(table)} of the {n_all} stocks of the data are members on "
                       f"the signal day {last}; only they are ranked and traded")
        return
    if holdings or raw or given or universe or data_options.get("cache") or report:
        raise click.ClickException("--holdings, --intraday, --report and the strategy options are for panel "
                                   "runs (a folder of stocks); this run holds a one-stock model")
    out = Path(out) if out else run / "predictions.csv"
    check_apart([out], [data or info["csv"], run / MODEL_FILE, run / RUN_FILE])
    check_output_file(out, overwrite=overwrite)
    path, frame = load_one(data or info["csv"], on_bad, max_mb)
    warn_if_stale(model.train_end_, frame.index, stale_after)
    table = _predictions_table(model, frame)
    with atomic_write(out, "w") as f:
        table.to_csv(f, index_label="date")
    nxt = model.predict_next(frame)
    value = nxt.iloc[0] if isinstance(nxt, pd.Series) else nxt.iloc[0].to_dict()
    test = table[~table["in_training"] & table["actual"].notna() & ~table["suspended"]]
    unit = "bar" if is_bar_frame(frame) else "day"
    col = "forecast" if "forecast" in table else table.columns[0]
    if len(test) > 2:
        m = point_metrics(test[col], test["actual"])
        click.echo(f"after the training cut-off ({m['n']} {unit}s): MSE {m['mse']:.3e} vs zero forecast "
                   f"{float((test['actual'] ** 2).mean()):.3e} (R^2 vs zero {m['r2_oos_zero']:+.4f}), "
                   f"corr {m['pearson_ic']:+.3f}")
    click.echo(f"wrote {len(table)} forecasts to {out}")
    if unit == "bar":
        click.echo(f"next bar after {frame.index[-1]} (the first of the next trading day if that was "
                   f"the close): {value}")
    else:
        click.echo(f"next trading day after {frame.index[-1].date()} ({nxt.index[0].date()} if no "
                   f"holiday): {value}")
