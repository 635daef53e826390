"""``forecaster plot``: the figures of a run folder (training curves, tomorrow's ranked list,
the daily rank IC after the training cut-off; one stock: forecasts, price path, attention).
Registered on the ``forecaster`` group by :mod:`forecaster.app.cli`."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from forecaster.app.daily import load_one, load_panel, open_run, run_on_bad
from forecaster.app.options import SectionedCommand, experiment_options, raw_sections
from forecaster.app.outputs import OutputFolder, check_apart, check_output_file
from forecaster.features.series import log_returns

PANEL_PLOTS = ("training.png", "next_day.png", "rolling_ic.png")
STOCK_PLOTS = ("forecast_vs_actual.png", "price_path.png", "attention.png")


@click.command(cls=SectionedCommand)
@click.argument("data", required=False, type=click.Path(exists=True))
@click.option("--run", "run", required=True, type=click.Path(file_okay=False), help="Run folder from train.")
@click.option("--out", "out", type=click.Path(file_okay=False), help="Folder for PNGs (default RUN).")
@click.option("--device", default="auto", show_default=True)
@click.option("--overwrite", is_flag=True,
              help="Replace PNGs of the same names that this command did not write.")
@click.option("--holdings", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Panel run: CSV of what is held (code, shares), marked [held] in next_day.png.")
@experiment_options(("data",), only={"data": ("on_bad",)})
def plot(data, run, out, device, overwrite, holdings, **options):
    """Figures of a run folder from train, as PNGs.

    Most used: --run, --holdings H.csv.

    Panel run: training curves (the loss named, the chosen epoch marked), tomorrow's ranked
    list (names where the data carry them, stocks at a price limit on the signal day and, with
    --holdings, those held marked; a held stock the figure leaves out is named with why) and,
    for days after the training cut-off in DATA, the daily rank IC; a figure that cannot be
    drawn is named with the reason. One stock: forecast vs actual, implied price path,
    attention over the last input window."""
    from forecaster.evaluation.walkforward import point_forecast
    from forecaster.reporting.plots import plot_attention, plot_forecast_vs_actual, plot_price_path

    run, info, model = open_run(run, data, device)
    on_bad = run_on_bad(raw_sections(options).get("data", {}).get("on_bad"), info)
    out = Path(out) if out else run
    # never inside the data read (a PNG there is not a stock, but the folder is the user's)
    check_apart([out] if out != run else [], [data or info.get("data") or info.get("csv")])
    if holdings and info.get("kind") != "panel":
        raise click.ClickException("--holdings is for panel runs (a folder of stocks); this run holds a "
                                   "one-stock model")
    names = PANEL_PLOTS if info.get("kind") == "panel" else STOCK_PLOTS
    for name in names:  # its own earlier figures are replaced; a user's file of that name is not
        check_output_file(out / name, overwrite=overwrite)
    # a folder of figures keeps a manifest like a run's, so the next plot knows its own PNGs
    OutputFolder(out, (), False).claim()
    if info.get("kind") == "panel":
        files = _plot_panel_run(model, info, data, out, holdings, on_bad)
    else:
        path, frame = load_one(data or info["csv"], on_bad)
        point = point_forecast(model.predict(frame))
        test = point[point.index > model.train_end_]
        shown = test if len(test) > 20 else point
        title = (f"{path.name}: forecasts after the training cut-off {model.train_end_.date()}"
                 if shown is test else f"{path.name}: all forecasts (in-sample included)")
        files = [
            plot_forecast_vs_actual(shown, log_returns(frame), out / "forecast_vs_actual.png", title),
            plot_price_path(frame, log_returns(frame), shown, out / "price_path.png"),
            plot_attention(*model.attention(frame), out / "attention.png"),
        ]
    for f in files:
        click.echo(f"wrote {f}")


def _plot_panel_run(model, info: dict, data: str | None, out: Path,
                    holdings: str | None = None, on_bad: str = "raise") -> list[Path]:
    """The panel run's figures: every one that can be drawn; the one that cannot is named, with
    the reason, on stderr."""
    from forecaster.app.next_day_marks import draw_next_day
    from forecaster.app.signal_day import strategy_of, trade_day_of
    from forecaster.features.labels import by_forecast_date, tradeable_label
    from forecaster.metrics import daily_ic, ic_summary
    from forecaster.portfolio.next_day import ranked_list
    from forecaster.reporting.plots import plot_panel_training, plot_rolling_ic

    source = data or info["data"]
    _, grid, _ = load_panel(source, on_bad, intraday=info.get("intraday", ""))
    # the loss it was trained with (None in the parameters: the size rules' choice)
    budget = getattr(model, "budget_", None) or model.budget(grid.n_stocks, 0)
    files = [plot_panel_training(model.histories_, out / "training.png",
                                 loss=model.loss or budget.get("loss"),
                                 best_epochs=getattr(model, "best_epochs_", None))]
    # the list predict draws: the same strategy defaults (its ST rule), trade day and figure
    table = ranked_list(model, grid, strategy=strategy_of({}, grid.n_stocks), trade_date=trade_day_of(grid))
    files.append(draw_next_day(table, grid, source, holdings, out / "next_day.png", model.train_end_))
    after = grid.dates[grid.dates > model.train_end_]
    if len(after) > 5:
        scores = model.predict(grid).unstack("code").reindex(index=after)
        label, _ = tradeable_label(grid, model.horizon, model.execution)
        actual = pd.DataFrame(by_forecast_date(label), index=grid.dates, columns=list(grid.codes))
        ic = daily_ic(scores, actual.reindex(after))
        files.append(plot_rolling_ic(pd.DataFrame(), ic.to_frame("transformer"), out / "rolling_ic.png",
                                     window=min(63, max(5, len(ic) // 3))))
        s = ic_summary(ic)
        click.echo(f"after the training cut-off {model.train_end_.date()}: {s['n_days']} days, daily rank IC "
                   f"{s['mean_ic']:+.4f} (ICIR {s['icir']:+.3f})")
    else:
        days = f"{len(after)} trading day{'s' if len(after) != 1 else ''}"
        click.echo(f"rolling_ic.png not written: the model was trained on data up to "
                   f"{model.train_end_.date()} and {source} has {days} after that (it needs more than 5 "
                   "to score the model out of sample); give DATA with later days, or train with --end "
                   "before the data's last days", err=True)
    return files
