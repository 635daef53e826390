"""Scores, backtests and plots of a walk-forward run, written to a report folder.

Files: ``metrics.json`` (everything below, machine-readable), ``predictions.csv``,
``fold_metrics.csv``, ``stock_metrics.csv`` (panels), ``trades.csv`` and ``equity.csv`` (of the
main model), and PNGs: ``equity.png`` (equity vs benchmark with drawdown), ``predicted_vs_actual.png``,
``rolling_ic.png``, ``fold_metrics.png``, ``dm_pvalues.png``.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .backtest import BacktestConfig, run_backtest
from .metrics import daily_ic, dm_table, ic_summary, summarise
from .walkforward import WalkForwardResult

log = logging.getLogger(__name__)

POINT_COLUMNS = ("mse", "mae", "r2_oos_zero", "r2_oos_mean")


@dataclass
class Report:
    """Everything a walk-forward report holds (also written to ``metrics.json``)."""

    model: str
    overall: pd.DataFrame
    per_fold: pd.DataFrame
    per_stock: pd.DataFrame
    dm: pd.DataFrame
    ic: dict[str, dict]
    daily_ic: pd.DataFrame
    backtests: dict
    verdict: list[str]
    notes: list[str] = field(default_factory=list)

    def summary_table(self) -> pd.DataFrame:
        """One row per model: forecast scores, DM p-value vs the main model, backtest."""
        cols = ["r2_oos_zero", "hit_rate", "pearson_ic", "rank_ic"]
        table = self.overall.set_index("model")[cols].copy()
        if self.ic:
            table["daily_rank_ic"] = pd.Series({m: v["mean_ic"] for m, v in self.ic.items()})
            table["icir"] = pd.Series({m: v["icir"] for m, v in self.ic.items()})
        dm = self.dm.set_index("baseline")["p_value"] if len(self.dm) else pd.Series(dtype=float)
        table[f"dm_p({self.model} vs)"] = dm
        bt = pd.DataFrame({m: r.metrics for m, r in self.backtests.items()}).T
        if len(bt):
            table["ann_return"] = bt["annual_return"]
            # Each model against its own benchmark: same stocks and days as its backtest.
            table["excess_vs_bench"] = pd.Series({
                m: r.metrics["annual_return"] - r.benchmark_metrics["annual_return"]
                for m, r in self.backtests.items()})
            table["sharpe"] = bt["sharpe"]
            table["max_dd"] = bt["max_drawdown"]
        return table

    @property
    def benchmark_metrics(self) -> dict:
        return next(iter(self.backtests.values())).benchmark_metrics if self.backtests else {}


def _with_mean_forecast(pred: pd.DataFrame) -> pd.DataFrame:
    """Attach the historical-mean forecast of each row (for R^2 against the mean)."""
    if "hist_mean" not in set(pred["model"]):
        return pred
    mean = pred.loc[pred["model"] == "hist_mean", ["date", "code", "forecast"]]
    return pred.merge(mean.rename(columns={"forecast": "mean_forecast"}), on=["date", "code"], how="left")


def build_report(result: WalkForwardResult, frames: dict[str, pd.DataFrame], models: dict,
                 model: str = "transformer", backtest: BacktestConfig | None = None,
                 horizon: int = 1) -> Report:
    """Score every model of ``result`` and backtest its forecasts.

    Args:
        result: from :func:`forecaster.walkforward.walk_forward`.
        frames: the price frames (code -> canonical frame) the run used.
        models: the run's ``{name: estimator}``; factor scores (``is_return_forecast`` False)
            get rank statistics and backtests but no error metrics or DM test.
        model: the main model's name; DM compares it with every other return forecast.
        backtest: trading configuration (panels: top-k by forecast).
        horizon: forecast horizon (DM's HAC lags).
    """
    pred = _with_mean_forecast(result.predictions.reset_index())
    pred = pred[pred["actual"].notna()]  # suspended days are not scored (counted below)
    n_suspended = int(result.predictions["actual"].isna().sum())
    factors = [n for n, m in models.items() if not getattr(m, "is_return_forecast", True)]
    returns_models = [n for n in models if n not in factors and n in set(pred["model"])]
    panel = pred["code"].nunique() > 1
    overall = summarise(pred, by=("model",), horizon=horizon)
    per_fold = summarise(pred, by=("model", "fold"), horizon=horizon)
    # Per stock: each stock's own time series (a panel model is evaluated stock by stock too).
    per_stock = (summarise(pred, by=("model", "code"), horizon=horizon) if panel
                 else pd.DataFrame(columns=["model", "code"]))
    for table in (overall, per_fold, per_stock):
        table.loc[table["model"].isin(factors), list(POINT_COLUMNS)] = np.nan
    baselines = [n for n in returns_models if n != model]
    dm = (dm_table(pred[pred["model"].isin(returns_models)], model, baselines, horizon=horizon)
          if model in returns_models and baselines else pd.DataFrame())

    ic, daily = {}, {}
    if panel:
        actual = pred.pivot_table(index="date", columns="code", values="actual", aggfunc="first")
        for name, g in pred.groupby("model"):
            f = g.pivot_table(index="date", columns="code", values="forecast", aggfunc="first")
            daily[name] = daily_ic(f, actual, method="spearman")
            ic[name] = ic_summary(daily[name])
    daily_ic_frame = pd.DataFrame(daily)

    backtest = backtest or BacktestConfig.for_universe(len(frames))
    results = {}
    for name, g in result.predictions.reset_index().groupby("model"):
        forecast = g.pivot_table(index="date", columns="code", values="forecast", aggfunc="first")
        if not panel and name in factors:
            continue
        if panel and (forecast.nunique(axis=1) <= 1).all():
            # The same forecast for every stock (zero) ranks nothing: top-k would just pick
            # the first columns.
            continue
        results[name] = run_backtest({c: frames[c] for c in forecast.columns}, forecast, backtest)

    verdict = _verdict(model, overall, dm, ic, results)
    notes = [f"{n_suspended} forecast rows on suspended days were not scored"]
    if panel:
        notes.append("the universe is today's index constituents: averages over it carry "
                     "survivorship bias")
    return Report(model, overall, per_fold, per_stock, dm, ic, daily_ic_frame, results, verdict, notes)


def _verdict(model: str, overall: pd.DataFrame, dm: pd.DataFrame, ic: dict, backtests: dict) -> list[str]:
    """Plain sentences on whether the model beat the simple alternatives."""
    lines = []
    row = overall.set_index("model").loc[model] if model in set(overall["model"]) else None
    if row is not None:
        r2 = row["r2_oos_zero"]
        vs_zero = dm.set_index("baseline").loc["zero"] if len(dm) and "zero" in set(dm["baseline"]) else None
        p, stat = (vs_zero["p_value"], vs_zero["dm_stat"]) if vs_zero is not None else (math.nan, math.nan)
        if r2 > 0 and p < 0.05:
            word = "beats"
        elif stat > 0 and p < 0.05:
            word = "is significantly WORSE than"
        else:
            word = "does NOT beat"
        lines.append(f"{model} {word} the zero forecast: out-of-sample R^2 vs zero {r2:+.4f}, "
                     f"Diebold-Mariano stat {stat:+.2f}, p = {p:.3f}")
        lines.append(f"{model} sign hit rate {row['hit_rate']:.1%} (binomial p = {row['binomial_p']:.3f})")
    if ic and model in ic:
        best = max(ic, key=lambda m: ic[m]["mean_ic"])
        lines.append(f"{model} daily rank IC {ic[model]['mean_ic']:+.4f} (ICIR {ic[model]['icir']:+.3f}); "
                     f"best rank IC: {best} {ic[best]['mean_ic']:+.4f}")
    if model in backtests:
        m, b = backtests[model].metrics, backtests[model].benchmark_metrics
        lines.append(f"{model} strategy after costs: annual return {m['annual_return']:+.2%}, "
                     f"Sharpe {m['sharpe']:.2f}, max drawdown {m['max_drawdown']:.1%}; benchmark "
                     f"({backtests[model].benchmark}) {b['annual_return']:+.2%}, Sharpe {b['sharpe']:.2f}")
    return lines


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


def write_report(report: Report, result: WalkForwardResult, out: str | Path, extra: dict | None = None
                 ) -> list[Path]:
    """Write the report's CSV/JSON files and PNG plots to ``out``; returns the paths."""
    from . import plots

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    pred = result.predictions
    pred.to_csv(out / "predictions.csv")
    report.per_fold.to_csv(out / "fold_metrics.csv", index=False)
    files += [out / "predictions.csv", out / "fold_metrics.csv"]
    if len(report.per_stock):
        report.per_stock.to_csv(out / "stock_metrics.csv", index=False)
        files.append(out / "stock_metrics.csv")
    main = report.backtests.get(report.model)
    if main is not None:
        main.trades.to_csv(out / "trades.csv", index=False)
        equity = pd.DataFrame({f"{name}": r.equity for name, r in report.backtests.items()})
        equity["benchmark"] = main.benchmark_equity
        equity.index.name = "date"
        equity.to_csv(out / "equity.csv")
        files += [out / "trades.csv", out / "equity.csv"]
        files.append(plots.plot_equity(main.equity, main.benchmark_equity, out / "equity.png",
                                       f"{report.model} after costs vs {main.benchmark}"))
    point = pred[pred["model"] == report.model]
    if len(point):
        if point["code"].nunique() == 1:
            files.append(plots.plot_forecast_vs_actual(point["forecast"], point["actual"],
                                                       out / "predicted_vs_actual.png",
                                                       f"{report.model}: walk-forward forecasts"))
        else:
            files.append(plots.plot_scatter(point["forecast"], point["actual"],
                                            out / "predicted_vs_actual.png",
                                            f"{report.model}: walk-forward forecasts, all stocks"))
    files.append(plots.plot_rolling_ic(pred, report.daily_ic, out / "rolling_ic.png"))
    files.append(plots.plot_fold_metrics(report.per_fold, out / "fold_metrics.png"))
    if len(report.dm):
        files.append(plots.plot_dm(report.dm, report.model, out / "dm_pvalues.png"))
    metrics = {
        "model": report.model,
        "verdict": report.verdict,
        "notes": report.notes,
        "overall": report.overall,
        "diebold_mariano": report.dm,
        "daily_rank_ic": report.ic,
        "backtest": {name: {"strategy": r.metrics, "benchmark": r.benchmark_metrics,
                            "benchmark_name": r.benchmark} for name, r in report.backtests.items()},
        "folds": result.folds,
        "walk_forward": asdict(result.config),
        "skipped": {f"{fold}:{name}": why for (fold, name), why in result.skipped.items()},
        **(extra or {}),
    }
    (out / "metrics.json").write_text(json.dumps(_jsonable(metrics), indent=2))
    files.insert(0, out / "metrics.json")
    return files
