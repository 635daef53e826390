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
from .labels import by_forecast_date, tradeable_label
from .metrics import (
    daily_ic,
    dm_table,
    ic_by_horizon,
    ic_difference_test,
    ic_summary,
    quantile_returns,
    quantile_summary,
    summarise,
)
from .panel import Panel
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
    ic_close: dict[str, dict] = field(default_factory=dict)
    ic_tests: pd.DataFrame = field(default_factory=pd.DataFrame)
    quantiles: dict[str, dict] = field(default_factory=dict)
    ic_horizons: pd.DataFrame = field(default_factory=pd.DataFrame)

    def summary_table(self) -> pd.DataFrame:
        """One row per model: forecast scores, DM p-value vs the main model, backtest."""
        cols = ["r2_oos_zero", "hit_rate", "pearson_ic", "rank_ic"]
        table = self.overall.set_index("model")[cols].copy()
        if self.ic:
            table["daily_rank_ic"] = pd.Series({m: v["mean_ic"] for m, v in self.ic.items()})
            table["icir"] = pd.Series({m: v["icir"] for m, v in self.ic.items()})
        if len(self.ic_tests):
            tests = self.ic_tests.set_index("baseline")
            table[f"ic_diff_p({self.model} vs)"] = tests["p_value"]
        if self.quantiles:
            table["q_spread"] = pd.Series({m: q["spread"] for m, q in self.quantiles.items()})
        if self.ic_close:
            table["rank_ic_close"] = pd.Series({m: v["mean_ic"] for m, v in self.ic_close.items()})
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

    ic, daily, ic_close, quantiles, horizons, tests = {}, {}, {}, {}, {}, []
    if panel:
        actual = pred.pivot_table(index="date", columns="code", values="actual", aggfunc="first")
        close = ("actual_close" in pred.columns and
                 pred.pivot_table(index="date", columns="code", values="actual_close", aggfunc="first"))
        labels = _horizon_labels(frames, result) if result.config.label == "tradeable" else {}
        for name, g in pred.groupby("model"):
            f = g.pivot_table(index="date", columns="code", values="forecast", aggfunc="first")
            daily[name] = daily_ic(f, actual, method="spearman")
            ic[name] = ic_summary(daily[name])
            if close is not False:
                ic_close[name] = ic_summary(daily_ic(f, close, method="spearman"))
            quantiles[name] = quantile_summary(quantile_returns(f, actual), horizon=horizon)
            if labels:
                horizons[name] = ic_by_horizon(f, labels)
        if model in daily:
            for name in daily:
                if name != model:
                    tests.append({"baseline": name, **ic_difference_test(daily[model], daily[name],
                                                                         horizon=horizon)})
    daily_ic_frame = pd.DataFrame(daily)
    ic_tests = pd.DataFrame(tests)

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

    verdict = _verdict(model, overall if model in returns_models else overall.iloc[:0], dm, ic,
                       results, ic_tests, horizon)
    why = ("without a scoreable tradeable outcome (suspended or no bar on the entry or exit day, "
           "limit-up at the entry, or an exit beyond the data)" if result.config.label == "tradeable"
           else "on suspended days")
    notes = [f"{n_suspended} forecast rows {why} were not scored"]
    if panel:
        notes.append(_ic_meaning(result.config, horizon))
        notes.append("the universe is today's index constituents: averages over it carry "
                     "survivorship bias")
    return Report(model, overall, per_fold, per_stock, dm, ic, daily_ic_frame, results, verdict, notes,
                  ic_close, ic_tests, quantiles, pd.DataFrame(horizons).T)


def _horizon_labels(frames: dict[str, pd.DataFrame], result: WalkForwardResult,
                    horizons=(1, 5, 20)) -> dict[int, pd.DataFrame]:
    """Tradeable labels ``[date x code]`` by forecast date for several horizons."""
    grid = Panel.from_frames(frames)
    out = {}
    for h in horizons:
        label, _ = tradeable_label(grid, h, result.config.execution)
        out[h] = pd.DataFrame(by_forecast_date(label), index=grid.dates, columns=list(grid.codes))
    return out


def _ic_meaning(config, horizon: int) -> str:
    if config.label != "tradeable":
        return "IC is measured on each day's close-to-close log return"
    leg = ("the next open to the open" if config.execution == "next_open" else "the close to the close")
    return (f"daily rank IC = the Spearman correlation, across the stocks of a day, between a model's "
            f"score and the return from {leg} {horizon} trading day(s) later (what a strategy trading "
            "on the score earns before costs); 0.03-0.05 is typical of useful equity factors, and a "
            "score is only as good as how consistently it is positive (ICIR = mean / std)")


def _verdict(model: str, overall: pd.DataFrame, dm: pd.DataFrame, ic: dict, backtests: dict,
             ic_tests: pd.DataFrame | None = None, horizon: int = 1) -> list[str]:
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
        others = {m: v for m, v in ic.items() if m != model and np.isfinite(v["mean_ic"])}
        best = max(others, key=lambda m: others[m]["mean_ic"]) if others else None
        line = f"{model} daily rank IC {ic[model]['mean_ic']:+.4f} (ICIR {ic[model]['icir']:+.3f})"
        if best is not None:
            line += f"; best baseline: {best} {ic[best]['mean_ic']:+.4f} (ICIR {ic[best]['icir']:+.3f})"
        lines.append(line)
        if best is not None and ic_tests is not None and len(ic_tests):
            t = ic_tests.set_index("baseline").loc[best]
            if t["p_value"] < 0.05:
                word = "significantly beats" if t["mean_diff"] > 0 else "is significantly WORSE than"
            else:
                word = "does NOT significantly beat" if t["mean_diff"] > 0 else "does NOT beat"
            lines.append(f"{model} {word} the best baseline {best}: daily rank IC difference "
                         f"{t['mean_diff']:+.4f}, Newey-West t {t['t_stat']:+.2f}, p = {t['p_value']:.3f}")
            wins = ic_tests[(ic_tests["mean_diff"] > 0) & (ic_tests["p_value"] < 0.05)]
            lines.append(f"{model} beats {len(wins)} of {len(ic_tests)} other models significantly "
                         "(rank IC, p < 0.05)")
    if model in backtests:
        m, b = backtests[model].metrics, backtests[model].benchmark_metrics
        lines.append(f"{model} strategy after costs: annual return {m['annual_return']:+.2%}, "
                     f"Sharpe {m['sharpe']:.2f}, max drawdown {m['max_drawdown']:.1%}; benchmark "
                     f"({backtests[model].benchmark}) {b['annual_return']:+.2%}, Sharpe {b['sharpe']:.2f}")
    return lines


def _shown_models(report: Report, n: int = 5) -> list[str]:
    """The main model and the best others by rank IC (plots with every model are unreadable)."""
    others = sorted((m for m in report.ic if m != report.model),
                    key=lambda m: -np.nan_to_num(report.ic[m]["mean_ic"], nan=-1))
    return [report.model, *others[: n - 1]] if report.model in report.ic else others[:n]


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
    if report.quantiles:
        shown = {m: report.quantiles[m] for m in _shown_models(report) if m in report.quantiles}
        files.append(plots.plot_quantile_returns(shown, out / "quantile_returns.png",
                                                 "mean tradeable return per score quintile"))
    if len(report.ic_horizons):
        files.append(plots.plot_ic_by_horizon(report.ic_horizons.loc[[m for m in _shown_models(report)
                                                                      if m in report.ic_horizons.index]],
                                              out / "ic_by_horizon.png"))
    if len(report.dm):
        files.append(plots.plot_dm(report.dm, report.model, out / "dm_pvalues.png"))
    metrics = {
        "model": report.model,
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
