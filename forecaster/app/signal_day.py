"""The signal day of ``forecaster predict``: whether the data's last day can be trusted as
the day tomorrow's list is for, how stale the model is, the index members of that day, the
trading day the list and the orders are for (:func:`trade_day_of`), and the orders for the next
open with their one-line summary (:mod:`forecaster.portfolio.orders`)."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd

from forecaster.data import DataError


def warn_if_stale(train_end: pd.Timestamp, dates: pd.DatetimeIndex, limit: int) -> None:
    """State the model's training end, the signal day and the trading days between; warn when
    more than ``limit`` (the model has not seen the market since)."""
    signal = dates[-1]
    days = pd.DatetimeIndex(dates).normalize().unique()  # minute bars count by trading day too
    gap = int((days > train_end.normalize()).sum())
    line = (f"model trained up to {train_end.date()}; signal day {signal.date()}; {gap} trading "
            f"day{'s' if gap != 1 else ''} between")
    if gap > limit:
        click.echo(f"Warning: {line}, more than {limit} (--stale-after): the model has not seen the "
                   "recent market; retrain with `forecaster train` on data up to the signal day", err=True)
    else:
        click.echo(line, err=True)


def check_signal_day(train_end: pd.Timestamp, grid) -> None:
    """The data's last day is the day the list is for: refuse one before the model's training
    end (the list would be in-sample), one in the future (a typo'd date), and one on which
    fewer than half of the stocks that traded the day before have a bar (files that end on
    different days)."""
    signal = grid.dates[-1]
    if signal.normalize() < train_end.normalize():
        raise click.ClickException(
            f"the data's last day {signal.date()} is before the model's training end {train_end.date()}: "
            "its scores would be for days the model was trained on; pass data up to the latest day")
    today = pd.Timestamp.now().normalize()
    if signal.normalize() > today:
        late = [c for c, on in zip(grid.codes, grid.listed[-1], strict=True) if on]
        raise click.ClickException(
            f"the data's last day {signal.date()} is in the future (today is {today.date()}); a mistyped "
            f"date? {len(late)} stock(s) have a bar that day: {', '.join(late[:10])}")
    if grid.n_days > 1:
        now, before = int(grid.listed[-1].sum()), int(grid.listed[-2].sum())
        if now * 2 < before:
            raise click.ClickException(
                f"only {now} of the {before} stocks that have a bar on {grid.dates[-2].date()} have one on "
                f"the data's last day {signal.date()}: the files end on different days; update the "
                "others (or remove the later rows) so the list is for one signal day")


def members_only(grid, universe: str, source: str, indices: dict | None = None, trade_day=None):
    """``(grid, next_members)``: ``grid`` with the point-in-time membership of ``--universe``
    and the members of ``trade_day`` (``[stocks]``, None without it: a review the list holds
    for the trade day is known in advance) (a file, or an index's name:
    the Qlib folder ``source``'s own list, else the ``index-constitution`` package's); says which
    list it read, and the list's checks over the data's days are logged as warnings; no member
    on the signal day is an error. Where ``indices`` (``{code: frame}``) hold the universe's own
    index series, it travels with ``grid`` as in a backtest, so the benchmark weights default to
    ``fitted`` in ``predict`` as they do there."""
    from forecaster.data.market.universe import resolve_universe
    from forecaster.portfolio.fitted_weights import attach_index_series
    from forecaster.portfolio.index_series import index_for

    try:
        resolved = resolve_universe(universe, source)
    except DataError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(resolved.describe(), err=True)
    resolved.check(grid.dates, grid.codes, source)
    members = resolved.mask(grid.dates, grid.codes)
    if not members[-1].any():
        raise click.ClickException(f"--universe {universe}: no stock of the data is a member on the signal "
                                   f"day {grid.dates[-1].date()}")
    grid.members = members
    code = index_for(resolved.name, indices or {})
    if code is not None:
        attach_index_series(grid, code, indices[code], members)
    upcoming = None if trade_day is None else resolved.mask(pd.DatetimeIndex([trade_day]), grid.codes)[0]
    return grid, upcoming


def members_table(table: pd.DataFrame, grid) -> pd.DataFrame:
    """The ranked list cut to the signal day's members, ranks and quantiles recomputed
    among them."""
    import numpy as np

    member = dict(zip(map(str, grid.codes), grid.members[-1], strict=True))
    kept = table[table["code"].map(member).astype(bool)].reset_index(drop=True)
    n_scored = int(kept["score"].notna().sum())
    rank = kept["score"].rank(ascending=False, method="first")
    kept["rank"] = rank.astype("Int64")
    kept["quantile"] = (np.floor((n_scored - rank) * 5 / max(n_scored, 1)) + 1).astype("Int64")
    return kept


def strategy_of(raw: dict, n_stocks: int):
    """The strategy the options ``raw`` give for ``n_stocks`` (the universe's default
    otherwise): the ranked list and the orders read the same one (its ST rule included)."""
    import dataclasses

    from forecaster.app.experiment import build_section
    from forecaster.portfolio.strategy import StrategyConfig

    return build_section("strategy", {**dataclasses.asdict(StrategyConfig.for_universe(n_stocks)),
                                      **raw.get("strategy", {})})


def report_forecasts(report: str | Path) -> tuple[pd.DataFrame, str]:
    """``([date x code] forecasts, name)`` of the model under test of a report folder (its
    ``experiment.toml`` names it): out of sample, each made by a model fitted before its day."""
    import json

    from forecaster.checks import ConfigError
    from forecaster.models.registry import DEFAULT_MODEL
    from forecaster.reporting.report import read_predictions

    folder = Path(report)
    metrics = folder / "metrics.json"
    if not metrics.is_file():
        raise ConfigError(f"--report {folder}: no metrics.json (not a report folder of `forecaster "
                          "backtest` or `run`?)")
    name = json.loads(metrics.read_text()).get("model", DEFAULT_MODEL)
    pred = read_predictions(folder)
    mine = pred[pred["model"] == name]
    if mine.empty:
        raise ConfigError(f"--report {folder}: its predictions hold no {name}, its model under test")
    table = mine.reset_index().pivot_table(index="date", columns="code", values="forecast", aggfunc="first")
    return table, name


def recent_scores(grid, strategy, forecasts: pd.DataFrame | None, source: str = "--report"
                  ) -> tuple[object, str]:
    """``([rows, stocks] scores, what entered)``: the out-of-sample forecasts of the days
    before the next one that the enhanced book's alpha at the holding horizon reads
    (``alpha_halflife`` > 0: :func:`~forecaster.portfolio.alpha.window_rows` - 1 days, each
    cut to that day's members as a backtest's forecasts are), in ``grid``'s stocks' order, from
    ``forecasts`` (``[date x code]``, a walk-forward's: :func:`report_forecasts`); ``(None,
    "")`` when the book reads today's scores alone. Never the run's own model's scores of
    those days: it was fitted on them (in sample), while the backtest decays out-of-sample
    forecasts.

    Raises:
        ConfigError: a decay without out-of-sample forecasts, or forecasts that reach none of
            the window's days."""
    import numpy as np

    from forecaster.checks import ConfigError
    from forecaster.portfolio.alpha import window_rows

    if strategy.rule != "enhanced" or strategy.alpha_halflife <= 0:
        return None, ""
    n = window_rows(strategy.alpha_halflife) - 1
    if forecasts is None:
        raise ConfigError(
            f"--alpha-halflife {strategy.alpha_halflife:g} decays the scores of the {n} days before the "
            "signal day, and the run's model was fitted on those days (its scores of them are in sample) "
            "while a backtest decays out-of-sample forecasts: pass --report REPORT_DIR (a walk-forward "
            "report of these data whose forecasts reach the signal day), or --alpha-halflife 0")
    # the window's forecast dates, each one a row: a day without a forecast stays (all NaN)
    dates = grid.dates[max(1, len(grid.dates) - n):]
    scores = forecasts.reindex(index=dates, columns=[str(c) for c in grid.codes]).to_numpy(dtype=float)
    if grid.members is not None:
        scores = np.where(grid.members[grid.dates.get_indexer(dates)], scores, np.nan)
    entered = int(np.isfinite(scores).any(axis=1).sum())
    if entered == 0:
        raise ConfigError(f"{source}: no forecast on any of the {len(dates)} days before the signal day "
                          f"({dates[0].date()}..{dates[-1].date()}) that --alpha-halflife "
                          f"{strategy.alpha_halflife:g} decays: the report ends before them; run the "
                          "walk-forward up to the signal day")
    return scores, f"{entered} of {len(dates)} days' out-of-sample forecasts from {source}"


def next_open_orders(table: pd.DataFrame, grid, holdings: str | None, raw: dict, at_limit: str,
                     trade_date=None, report: str | None = None, next_members=None) -> pd.DataFrame:
    """Tomorrow's orders from the ranked list's scores and the book (:mod:`forecaster.portfolio.orders`),
    for ``trade_date`` (default: the exchange's next trading day after the signal day); the
    enhanced book's alpha at the holding horizon reads the out-of-sample forecasts of the days
    before from the ``report`` folder (:func:`recent_scores`)."""
    import dataclasses

    from forecaster.app.experiment import build_section
    from forecaster.portfolio.orders import Book, book_orders_for_panel, read_holdings
    from forecaster.portfolio.strategy import top_k_warning

    strategy = strategy_of(raw, grid.n_stocks)
    bt = raw.get("backtest", {})
    config = dataclasses.replace(build_section("backtest", bt), strategy=strategy,
                                 costs=build_section("costs", raw.get("costs", {})),
                                 market=build_section("market", raw.get("market", {})))
    capital = bt.get("capital")
    if not holdings:  # a cash book: it must afford one lot of something
        from forecaster.portfolio.rules import check_capital

        check_capital(float(config.capital), grid, grid.dates[-1], config.market.lot_size)
    book = read_holdings(holdings, grid.codes, capital) if holdings else Book({}, float(config.capital))
    scores = table.set_index("code")["score"]
    forecasts = None
    if report and strategy.rule == "enhanced" and strategy.alpha_halflife > 0:
        forecasts, _ = report_forecasts(report)
    recent, entered = recent_scores(grid, strategy, forecasts, f"--report {report}")
    orders = book_orders_for_panel(scores, grid, book, config, at_limit=at_limit, trade_date=trade_date,
                                   recent=recent, next_members=next_members)
    held = f"cash {book.cash:,.0f}, {sum(1 for v in book.shares.values() if v)} position(s)"
    if strategy.rule == "enhanced":
        e = orders.attrs.get("enhanced", {})
        decayed = ("" if recent is None else f"; alpha: the scores of the last {len(recent) + 1} days "
                   f"decayed at a half-life of {strategy.alpha_halflife:g} days ({entered} and the signal "
                   "day's)")
        orders.attrs["summary"] = (f"enhanced, tracking-error budget {strategy.tracking_error:.1%}, book "
                                   f"predicted tracking error {e.get('predicted_te', float('nan')):.2%} "
                                   f"({e.get('status', 'not solved')}){decayed}; {held}")
    else:
        orders.attrs["summary"] = f"{strategy.rule}, top {strategy.top_k}; {held}"
        orders.attrs["warning"] = top_k_warning(strategy, len(table))
    return orders


def trade_day_of(grid) -> pd.Timestamp:
    """The trading day the list and the orders of ``grid``'s last day are for: the exchange's
    next trading day (:func:`~forecaster.data.market.calendar.next_trading_day`); where its
    calendar records no holidays, the next weekday, with a warning on stderr."""
    from forecaster.data.market.calendar import next_trading_day

    day = next_trading_day(grid.dates[-1])
    if day.note:
        click.echo(f"Warning: {day.note}", err=True)
    return day.date


def orders_line(orders: pd.DataFrame, out: Path) -> str:
    live = orders[orders["status"].isin(["order", "partial", "limit_order"])]
    at_limit = int((orders["status"] == "limit_order").sum())
    return (f"orders for the next open ({orders.attrs.get('summary', '')}): "
            f"{int((live['side'] == 'sell').sum())} sell, {int((live['side'] == 'buy').sum())} buy"
            + (f" ({at_limit} limit order(s) at the limit price, may not fill)" if at_limit else "")
            + f", {int((orders['status'] == 'blocked').sum())} blocked"
            + _st_skipped(orders) + "; estimated costs "
            f"{live['est_costs'].sum():,.0f}; wrote {out}")


def _st_skipped(orders: pd.DataFrame) -> str:
    """The ST stocks the rule would have bought but for their ST mark, for the orders' line."""
    skipped = orders.attrs.get("st_skipped") or []
    if not skipped:
        return ""
    return (f" ({len(skipped)} ST stock(s) not bought, ST on the signal day: {', '.join(skipped[:5])}"
            + (" ..." if len(skipped) > 5 else "") + "; --no-exclude-st to allow)")
