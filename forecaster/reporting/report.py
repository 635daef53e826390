"""The report folder of a scored run (:class:`~forecaster.evaluation.scoring.Report`):
rendered, never computed here.

Files: ``metrics.json`` (everything below, machine-readable), ``predictions.csv`` or
``predictions.parquet`` (every forecast; :func:`write_predictions`, read back by
:func:`read_predictions`), ``fold_metrics.csv``, ``universe.csv`` (every stock loaded: its days
used, or why it was left out), ``stock_metrics.csv``, ``ic_by_year.csv`` and ``ic_by_board.csv``
(panels), ``trades.csv`` and ``equity.csv`` (of the main model), the tear sheet's tables
(``risk.csv``: every strategy's returns before and after costs, risk and trading figures;
``monthly_returns.csv`` and ``drawdowns.csv``: the main model's returns by month and its worst
drawdowns; ``strategy_curves.csv``: its daily growth before and after costs, growth over the
benchmark, holdings and turnover), and PNGs: ``equity.png`` (the shown strategies and the
benchmark, with drawdowns), ``excess_return.png`` (growth over the benchmark with and without
costs, and its drawdown), ``monthly_returns.png``, ``holdings_turnover.png``,
``quantile_cumulative.png``, ``predicted_vs_actual.png``, ``rolling_ic.png``,
``fold_metrics.png``, ``quantile_returns.png``, ``ic_by_horizon.png``, ``dm_pvalues.png``; a
run on an index universe whose series the data hold: ``index_book.csv`` (the book against the
index day by day, :mod:`forecaster.evaluation.index_daily`) and ``index_excess.png``,
``tracking_error.png``, an enhanced book's ``active_weights.png`` and ``risk_split.png`` (their
data beside them: ``active_weights.csv``, ``active_styles.csv``, ``risk_split.csv``); every
enhanced book: ``holdings.csv`` (``date,code,weight``: the weights held after each close and a
``CASH`` row, summing to 1 a day), and with industries ``active_industries.csv`` (``date,
industry, book, benchmark, active`` at each rebalance) and ``active_industries.png``; where the
index's dividends were read from prices,
``dividends.csv`` (each ex-date read as a dividend above 5 % of the price: ``date, code,
dividend, gap``); and
``report.html``, one self-contained page of all of it. One stock's minute bars:
``bar_position_metrics.csv`` (each model's IC and rank IC by bar of the day across days) and
``bar_position_ic.png`` instead of ``rolling_ic.png``.

Every file is written through :func:`seq2seq.core.atomic_write` (whole or not at all, and
recorded in the folder's manifest). Line figures draw the main model, the best baseline by rank
IC, the best baseline strategy and a few named others (:func:`shown_models`), each in one
colour across every figure; the other models are in the tables.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.sources import DataError
from forecaster.evaluation.scoring import Report
from forecaster.evaluation.verdict import best_ic_baseline, best_strategy
from forecaster.evaluation.walkforward import WalkForwardResult
from forecaster.reporting.figures import model_styles
from forecaster.reporting.html import write_html
from seq2seq.core import atomic_write

# "auto" writes the predictions as Parquet above this many rows: a whole-market run (thousands
# of stocks x years of days x a dozen models) is tens of millions of rows, hundreds of MB as CSV.
PARQUET_ROWS = 1_000_000
PREDICTION_FILES = {"csv": "predictions.csv", "parquet": "predictions.parquet"}


def write_predictions(pred: pd.DataFrame, out: str | Path, fmt: str = "auto") -> Path:
    """Write a walk-forward's predictions (index ``date``) into the folder ``out`` as
    ``predictions.csv`` (``fmt="csv"``) or ``predictions.parquet`` (``"parquet"``; ``"auto"``:
    Parquet above :data:`PARQUET_ROWS` rows). A predictions file of the other format left by
    an earlier run in ``out`` is removed, so the folder holds one."""
    if fmt not in ("auto", *PREDICTION_FILES):
        raise ValueError(f"predictions format must be one of {('auto', *PREDICTION_FILES)}, got {fmt!r}")
    if fmt == "auto":
        fmt = "parquet" if len(pred) > PARQUET_ROWS else "csv"
    out = Path(out)
    path = out / PREDICTION_FILES[fmt]
    if fmt == "parquet":
        with atomic_write(path, "wb") as f:
            pred.to_parquet(f, index=True)
    else:
        write_csv(pred, path, index=True)
    for other in PREDICTION_FILES.values():
        if other != path.name:
            (out / other).unlink(missing_ok=True)
    return path


def read_predictions(folder: str | Path) -> pd.DataFrame:
    """The predictions of a report folder, from ``predictions.parquet`` or ``predictions.csv``
    (the newer where both are there): index ``date``, one row per model, stock and day.

    Raises:
        DataError: the folder has neither file.
    """
    folder = Path(folder)
    found = [folder / name for name in PREDICTION_FILES.values() if (folder / name).is_file()]
    if not found:
        raise DataError(f"{folder}: no predictions.parquet or predictions.csv (not a report folder?)")
    path = max(found, key=lambda p: p.stat().st_mtime_ns)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    pred = pd.read_csv(path, index_col="date", parse_dates=["date"], dtype={"model": str, "code": str})
    return pred


def write_csv(frame: pd.DataFrame, path: Path, index: bool = False) -> Path:
    """``frame`` as CSV at ``path``, atomically (:func:`seq2seq.core.atomic_write`)."""
    with atomic_write(path, "w") as f:
        frame.to_csv(f, index=index)
    return path


def shown_models(report: Report, n: int = 5) -> list[str]:
    """The models a line figure draws: the main model, the best baseline by rank IC, the best
    baseline strategy after costs, then the next best by rank IC, ``n`` at most (fifteen
    lines are unreadable; every model is in the tables). A model without any IC (a constant
    forecast) is left out."""
    if report.ic:
        ic = {m: v["mean_ic"] for m, v in report.ic.items()}
    else:
        ic = report.overall.set_index("model")["rank_ic"].to_dict() if len(report.overall) else {}
    ranked = sorted((m for m, v in ic.items() if m != report.model and np.isfinite(v)), key=lambda m: -ic[m])
    first = [report.model] if report.model in ic or report.model in report.backtests else []
    picks = [*first, best_ic_baseline(report.model, report.ic, report.ic_tests, report.overall),
             best_strategy(report.backtests, report.model, report.strategy.tests), *ranked]
    out = []
    for m in picks:
        if m is not None and m not in out:
            out.append(m)
    return out[:n]


def _shown_bar_models(report: Report, n: int = 5) -> list[str]:
    """The main model and the best others by pooled rank IC (bar runs)."""
    ic = report.overall.set_index("model")["rank_ic"]
    others = sorted((m for m in ic.index if m != report.model), key=lambda m: -np.nan_to_num(ic[m], nan=-1))
    return ([report.model] if report.model in ic.index else []) + others[: n - 1]


def _records(table: pd.DataFrame) -> dict:
    return {str(r["model"]): r.drop("model").to_dict() for _, r in table.iterrows()}


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (pd.Timestamp,)):
        return str(x.date())
    if isinstance(x, pd.DataFrame):
        return _jsonable(x.to_dict(orient="records"))
    return x


def _nested(table: pd.DataFrame, key: str) -> dict:
    """``{model: {key value: {other columns}}}`` of a long table with a ``model`` column."""
    return {str(m): {str(row[key]): row.drop(["model", key]).to_dict() for _, row in g.iterrows()}
            for m, g in table.groupby("model", sort=False)}


def write_report(report: Report, result: WalkForwardResult, out: str | Path, extra: dict | None = None,
                 predictions_format: str | None = None) -> list[Path]:
    """Write the report's CSV/JSON files and PNG plots to ``out``; returns the paths.
    ``predictions_format`` (``"auto"``, ``"csv"``, ``"parquet"``; ``None``: the report's, from
    the backtest configuration) decides the predictions file (:func:`write_predictions`)."""
    from forecaster.reporting import plots
    from forecaster.reporting import tearsheet_figures as sheet
    from forecaster.reporting.bar_figures import plot_bar_position_ic

    started = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    pred = result.predictions
    main_name = report.model
    shown = shown_models(report)
    styles = model_styles(shown, main_name)
    predictions = write_predictions(pred, out, predictions_format or report.predictions_format)
    files += [predictions, write_csv(report.per_fold, out / "fold_metrics.csv")]
    if len(report.universe):
        files.append(write_csv(report.universe, out / "universe.csv"))
    if len(report.per_stock):
        files.append(write_csv(report.per_stock, out / "stock_metrics.csv"))
    for name, table in (("ic_by_year.csv", report.ic_years), ("ic_by_board.csv", report.ic_boards),
                        ("bar_position_metrics.csv", report.bar_positions)):
        if len(table):
            files.append(write_csv(table, out / name))
    main = report.backtests.get(main_name)
    sheet_stats = report.strategy
    if main is not None:
        files.append(write_csv(main.trades, out / "trades.csv"))
        equity = pd.DataFrame({f"{name}": r.equity for name, r in report.backtests.items()})
        equity["benchmark"] = main.benchmark_equity
        if main.index_equity is not None:
            equity["index"] = main.index_equity
        equity.index.name = "date"
        files.append(write_csv(equity, out / "equity.csv", index=True))
    if len(sheet_stats.risk):
        files.append(write_csv(sheet_stats.risk, out / "risk.csv", index=True))
    if len(sheet_stats.monthly):
        files.append(write_csv(sheet_stats.monthly, out / "monthly_returns.csv", index=True))
    if len(sheet_stats.drawdowns):
        files.append(write_csv(sheet_stats.drawdowns, out / "drawdowns.csv"))
    curves = sheet_stats.curves
    if main is not None and main_name in curves and len(curves[main_name]):
        daily = curves[main_name].drop(columns=["r_net", "r_gross", "r_benchmark"])
        daily.index.name = "date"
        files.append(write_csv(daily, out / "strategy_curves.csv", index=True))
        drawn = {m: curves[m] for m in shown if m in curves and len(curves[m])}
        rival = best_strategy(report.backtests, main_name, sheet_stats.tests)
        pair = {m: curves[m] for m in (main_name, rival) if m in curves and len(curves[m])}
        files.append(sheet.plot_equity_curves(drawn, styles, out / "equity.png", main_name, main.benchmark,
                                              index=main.index_equity,
                                              index_label=main.index_name.split(" (")[0] or "index"))
        files.append(sheet.plot_excess(pair, styles, out / "excess_return.png", main_name, main.benchmark))
        if len(sheet_stats.monthly):
            files.append(sheet.plot_monthly_returns(
                sheet_stats.monthly, out / "monthly_returns.png",
                f"{main_name}: returns after costs by month and year (%; gains red, losses green)"))
        files.append(sheet.plot_holdings_turnover(pair, styles, out / "holdings_turnover.png", main_name))
    if report.quantile_curves:
        drawn = {m: report.quantile_curves[m] for m in shown
                 if m in report.quantile_curves and "long_short" in report.quantile_curves[m]}
        if drawn:
            files.append(sheet.plot_quantile_curves(drawn, styles, out / "quantile_cumulative.png",
                                                    main_name))
    point = pred[pred["model"] == main_name]
    if len(point):
        if point["code"].nunique() == 1:
            files.append(plots.plot_forecast_vs_actual(point["forecast"], point["actual"],
                                                       out / "predicted_vs_actual.png",
                                                       f"{main_name}: walk-forward forecasts",
                                                       bars=report.bars))
        else:
            files.append(plots.plot_scatter(point["forecast"], point["actual"],
                                            out / "predicted_vs_actual.png",
                                            f"{main_name}: walk-forward forecasts, all stocks"))
    if report.bars:
        files.append(plot_bar_position_ic(report.bar_positions, out / "bar_position_ic.png",
                                          _shown_bar_models(report)))
    else:
        files.append(plots.plot_rolling_ic(pred, report.daily_ic, out / "rolling_ic.png", styles=styles,
                                           main=main_name, shown=shown))
    folds = pd.DataFrame(result.folds)
    fold_days = (dict(zip(folds["fold"].astype(int), folds["n_test_days"].astype(int), strict=True))
                 if {"fold", "n_test_days"} <= set(folds.columns) else {})
    files.append(plots.plot_fold_metrics(report.per_fold, out / "fold_metrics.png", styles=styles,
                                         main=main_name, shown=shown, fold_days=fold_days,
                                         unit="bars" if report.bars else "days"))
    if report.quantiles:
        q = {m: report.quantiles[m] for m in shown if m in report.quantiles}
        files.append(plots.plot_quantile_returns(q, out / "quantile_returns.png",
                                                 "mean tradeable return per score quintile", styles=styles,
                                                 main=main_name))
    if len(report.ic_horizons):
        files.append(plots.plot_ic_by_horizon(report.ic_horizons.loc[[m for m in shown
                                                                      if m in report.ic_horizons.index]],
                                              out / "ic_by_horizon.png", styles=styles, main=main_name))
    if len(report.dm):
        files.append(plots.plot_dm(report.dm, main_name, out / "dm_pvalues.png"))
    if len(report.dividends):  # dividends read from prices above 5 % of the price: for a look
        large = report.dividends.assign(date=pd.DatetimeIndex(report.dividends["date"]).date)
        files.append(write_csv(large, out / "dividends.csv"))
    main_bt = report.backtests.get(main_name)
    if main_bt is not None and not main_bt.held.empty:  # an enhanced book: what it held each day
        holdings = main_bt.holdings()
        holdings["date"] = pd.DatetimeIndex(holdings["date"]).date
        files.append(write_csv(holdings, out / "holdings.csv"))
        groups = main_bt.enhanced.industry_weights() if main_bt.enhanced is not None else pd.DataFrame()
        if len(groups):  # an enhanced book with industries: each group's weight at each rebalance
            from forecaster.reporting.index_figures import plot_active_industries

            files.append(write_csv(groups.assign(date=pd.DatetimeIndex(groups["date"]).date),
                                   out / "active_industries.csv"))
            files.append(plot_active_industries(groups, main_bt.enhanced.industry_bound,
                                                out / "active_industries.png"))
    view = getattr(report, "index_view", None)
    if view is not None:  # a run on an index universe whose series the data hold
        from forecaster.evaluation.index_daily import TE_WINDOW
        from forecaster.reporting.index_figures import write_index_figures

        daily = view.daily.assign(date=pd.DatetimeIndex(view.daily["date"]).date)
        files.append(write_csv(daily, out / "index_book.csv"))
        if len(view.active_top):  # the data of active_weights.png and risk_split.png, beside them
            top = pd.DataFrame({"code": view.active_top.index, "name": [view.names.get(c, "") for c in
                                                                       view.active_top.index],
                                "mean_active_weight": view.active_top.to_numpy()})
            if view.industry_of:  # the run's industries: each name's group, as the figure colours it
                top.insert(2, "industry", [view.industry_of.get(str(c), "") for c in view.active_top.index])
            files.append(write_csv(top, out / "active_weights.csv"))
        for name, frame in (("active_styles.csv", view.styles), ("risk_split.csv", view.risk_split)):
            if len(frame):
                files.append(write_csv(frame.rename_axis("date"), out / name, index=True))
        files += write_index_figures(view, out, TE_WINDOW)
    metrics = {
        "model": main_name,
        "verdict": report.verdict,
        "notes": report.notes,
        "overall": report.overall,
        "diebold_mariano": report.dm,
        "daily_rank_ic": report.ic,
        "daily_rank_ic_close_to_close": report.ic_close,
        "rank_ic_difference_tests": report.ic_tests,
        "quantile_returns": report.quantiles,
        "ic_by_horizon": ({m: {str(h): v for h, v in row.items()} for m, row in report.ic_horizons.iterrows()}
                          if len(report.ic_horizons) else {}),
        "ic_by_year": _nested(report.ic_years, "year"),
        "ic_by_board": _nested(report.ic_boards, "board"),
        **({"bars_by_position": {"mean": _records(report.bar_summary), "positions": _nested(
            report.bar_positions, "bar_close")}} if report.bars else {}),
        "predictions_file": predictions.name,
        "backtest": {name: {"strategy": r.metrics, "benchmark": r.benchmark_metrics,
                            "benchmark_name": r.benchmark,
                            **({"index": r.index_metrics, "index_name": r.index_name}
                               if r.index_metrics is not None else {})}
                     for name, r in report.backtests.items()},
        "risk": ({str(m): row.to_dict() for m, row in sheet_stats.risk.iterrows()}
                 if len(sheet_stats.risk) else {}),
        "strategy_tests": sheet_stats.tests,
        "shown_models": shown,
        "folds": result.folds,
        "walk_forward": asdict(result.config),
        "universe": report.universe_counts,
        "skipped": {f"{fold}:{name}": why for (fold, name), why in sorted(result.skipped.items())},
        "failed": {f"{fold}:{name}": why for (fold, name), why in sorted(result.failed.items())},
        "not_computed": report.not_computed,
        "resumed_folds": result.n_resumed,
        **(extra or {}),
    }
    if "timings" in metrics:  # the report's files up to here (the page after is a fraction)
        metrics["timings"] = {**metrics["timings"], "report": time.perf_counter() - started}
    with atomic_write(out / "metrics.json", "w") as f:
        f.write(json.dumps(_jsonable(metrics), indent=2))
    files.insert(0, out / "metrics.json")
    files.insert(0, write_html(report, result, out, shown=shown, data=(extra or {}).get("data")))
    return files
