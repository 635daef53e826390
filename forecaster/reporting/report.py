"""Scores, backtests and plots of a walk-forward run, written to a report folder.

Files: ``metrics.json`` (everything below, machine-readable), ``predictions.csv``,
``fold_metrics.csv``, ``universe.csv`` (every stock loaded: its days used, or why it was left
out), ``stock_metrics.csv`` (panels), ``trades.csv`` and ``equity.csv`` (of the
main model), and PNGs: ``equity.png`` (equity vs benchmark with drawdown), ``predicted_vs_actual.png``,
``rolling_ic.png``, ``fold_metrics.png``, ``dm_pvalues.png``; and ``report.html``, one
self-contained page of all of it.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.exchange import is_synthetic
from forecaster.data.panel import Panel
from forecaster.evaluation.universe import universe_counts, universe_line, universe_table
from forecaster.evaluation.walkforward import WalkForwardResult
from forecaster.features.labels import by_forecast_date, tradeable_label
from forecaster.metrics import (
    daily_ic,
    dm_table,
    ic_by_horizon,
    ic_difference_test,
    ic_summary,
    quantile_returns,
    quantile_summary,
    summarise,
)
from forecaster.portfolio.backtest import BacktestConfig, run_backtest
from forecaster.reporting.html import write_html

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
    universe: pd.DataFrame = field(default_factory=pd.DataFrame)
    failed: dict = field(default_factory=dict)
    not_computed: dict = field(default_factory=dict)

    @property
    def universe_counts(self) -> dict:
        return universe_counts(self.universe) if len(self.universe) else {}

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


def reference_model(models: dict, role: str) -> str | None:
    """The name of the model whose ``reference`` role is ``role`` (``"zero"``, ``"mean"``):
    the report's analyses are keyed by role, so a run may name its models as it likes."""
    return next((name for name, m in models.items() if getattr(m, "reference", None) == role), None)


def _with_mean_forecast(pred: pd.DataFrame, mean_model: str | None) -> pd.DataFrame:
    """Attach the historical-mean forecast of each row (for R^2 against the mean)."""
    if mean_model is None or mean_model not in set(pred["model"]):
        return pred
    mean = pred.loc[pred["model"] == mean_model, ["date", "code", "forecast"]]
    return pred.merge(mean.rename(columns={"forecast": "mean_forecast"}), on=["date", "code"], how="left")


def build_report(result: WalkForwardResult, frames: dict[str, pd.DataFrame], models: dict,
                 model: str = "transformer", backtest: BacktestConfig | None = None,
                 horizon: int = 1, index_constituents: bool = False) -> Report:
    """Score every model of ``result`` and backtest its forecasts.

    Args:
        result: from :func:`forecaster.evaluation.walkforward.walk_forward`.
        frames: the price frames (code -> canonical frame) the run used.
        models: the run's ``{name: estimator}``; factor scores (``is_return_forecast`` False)
            get rank statistics and backtests but no error metrics or DM test.
        model: the main model's name; DM compares it with every other return forecast.
        backtest: trading configuration (panels: top-k by forecast).
        horizon: forecast horizon (DM's HAC lags).
        index_constituents: the user says the stocks are an index's current constituents, so
            the survivorship caveat is stated as a fact (otherwise as a condition).
    """
    pred = _with_mean_forecast(result.predictions.reset_index(), reference_model(models, "mean"))
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

    ic, daily, ic_close, quantiles, horizons, tests, gaps = {}, {}, {}, {}, {}, [], {}
    if panel:
        actual = pred.pivot_table(index="date", columns="code", values="actual", aggfunc="first")
        close = ("actual_close" in pred.columns and
                 pred.pivot_table(index="date", columns="code", values="actual_close", aggfunc="first"))
        labels = _horizon_labels(frames, result) if result.config.label == "tradeable" else {}
        for name, g in pred.groupby("model"):
            f = g.pivot_table(index="date", columns="code", values="forecast", aggfunc="first")
            daily[name] = daily_ic(f, actual, method="spearman")
            ic[name] = ic_summary(daily[name])
            gaps[name] = _ic_gaps(ic[name], f, actual)
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
                       results, ic_tests, horizon, gaps, reference_model(models, "zero"))
    universe = universe_table(frames, result, model)
    if result.failed:
        verdict.append(_failure_line(model, result))
    why = ("without a scoreable tradeable outcome (suspended or no bar on the entry or exit day, "
           "limit-up at the entry, or an exit beyond the data)" if result.config.label == "tradeable"
           else "on suspended days")
    notes = [f"{n_suspended} forecast rows {why} were not scored"]
    notes.append(universe_line(universe_counts(universe)))
    if any(gaps.values()):
        notes.append("NaN cells in the tables are statistics that could not be computed; "
                     "'not_computed' in metrics.json gives each reason")
    if panel:
        notes.append(_ic_meaning(result.config, horizon))
    notes += data_caveats(list(frames), panel, index_constituents)
    return Report(model, overall, per_fold, per_stock, dm, ic, daily_ic_frame, results, verdict, notes,
                  ic_close, ic_tests, quantiles, pd.DataFrame(horizons).T, universe, dict(result.failed),
                  {m: g for m, g in gaps.items() if g})


def data_caveats(codes: list[str], panel: bool, index_constituents: bool = False) -> list[str]:
    """What the data cannot tell, stated only where it is true: synthetic prices always named
    as such; survivorship as a fact when the user says the folder is an index's current
    constituents, else as a condition the reader can check."""
    notes = []
    n_syn = sum(is_synthetic(c) for c in codes)
    if n_syn == len(codes):
        notes.append("SYNTHETIC data: every price here is generated (codes 'syn.*'), not market data; "
                     "returns and equity curves say nothing about any listed stock")
    elif n_syn:
        notes.append(f"{n_syn} of {len(codes)} stocks are SYNTHETIC (codes 'syn.*'), not market data")
    if panel and index_constituents:
        notes.append("the stocks are an index's current constituents: stocks that left the index or "
                     "were delisted are missing, so averages over them carry survivorship bias")
    elif panel and n_syn < len(codes):
        notes.append("if these stocks were chosen by today's index membership (or any other "
                     "after-the-fact list), stocks that dropped out are missing and the averages carry "
                     "survivorship bias")
    return notes


def _failure_line(model: str, result: WalkForwardResult) -> str:
    n_folds = len(result.folds)
    by_model: dict[str, int] = {}
    for _, name in result.failed:
        by_model[name] = by_model.get(name, 0) + 1
    parts = ", ".join(f"{name} on {n} of {n_folds} folds" for name, n in sorted(by_model.items()))
    first = next(iter(sorted(result.failed.items())))
    return (f"FAILED model runs (recorded, the run went on): {parts}; first: fold {first[0][0]} "
            f"{first[0][1]}: {first[1]}" + (f" -- {model} failed on EVERY fold" if by_model.get(model)
                                             and model not in set(result.predictions["model"]) else ""))


def _ic_gaps(summary: dict, forecast: pd.DataFrame, actual: pd.DataFrame, min_stocks: int = 5) -> dict:
    """Why a model's daily rank IC or ICIR could not be computed (``{stat: reason}``; empty
    when both were)."""
    gaps = {}
    if summary["n_days"] == 0:
        f, a = forecast.align(actual, join="inner")
        valid = f.notna() & a.notna()
        most = int(valid.sum(axis=1).max()) if len(valid) else 0
        if most < min_stocks:
            gaps["mean_ic"] = (f"fewer than {min_stocks} stocks with a forecast and a scored outcome on "
                               f"every day (at most {most})")
        elif (f.where(valid).nunique(axis=1) <= 1).all():
            gaps["mean_ic"] = "the forecast is the same for every stock on every day"
        else:
            gaps["mean_ic"] = "no day had a cross-section that varies in both forecast and outcome"
        gaps["icir"] = gaps["mean_ic"]
    elif not math.isfinite(summary["icir"]):
        gaps["icir"] = ("needs at least 2 days of IC" if summary["n_days"] < 2
                        else "the daily IC does not vary")
    return gaps


def stat_text(value: float, spec: str, reason: str | None = None) -> str:
    """``format(value, spec)``, or "not computed (reason)" where the value is not a number."""
    if value is not None and math.isfinite(float(value)):
        return format(float(value), spec)
    return f"not computed ({reason or 'not enough data'})"


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
             ic_tests: pd.DataFrame | None = None, horizon: int = 1, gaps: dict | None = None,
             zero: str | None = "zero") -> list[str]:
    """Plain sentences on whether the model beat the simple alternatives; a statistic that
    could not be computed is said to be so, with the reason (``gaps``: model -> stat -> why)."""
    lines, gaps = [], gaps or {}
    row = overall.set_index("model").loc[model] if model in set(overall["model"]) else None
    if row is not None:
        r2 = row["r2_oos_zero"]
        vs_zero = dm.set_index("baseline").loc[zero] if len(dm) and zero in set(dm["baseline"]) else None
        p, stat = (vs_zero["p_value"], vs_zero["dm_stat"]) if vs_zero is not None else (math.nan, math.nan)
        if r2 > 0 and p < 0.05:
            word = "beats"
        elif stat > 0 and p < 0.05:
            word = "is significantly WORSE than"
        else:
            word = "does NOT beat"
        dm_why = "no zero-forecast baseline in the run" if vs_zero is None else "too few paired days"
        lines.append(f"{model} {word} the zero forecast: out-of-sample R^2 vs zero "
                     f"{stat_text(r2, '+.4f', 'no scored forecast')}, Diebold-Mariano stat "
                     f"{stat_text(stat, '+.2f', dm_why)}, p = {stat_text(p, '.3f', dm_why)}")
        lines.append(f"{model} sign hit rate {stat_text(row['hit_rate'], '.1%', 'no scored forecast')} "
                     f"(binomial p = {stat_text(row['binomial_p'], '.3f', 'no scored forecast')})")
    if ic and model in ic:
        others = {m: v for m, v in ic.items() if m != model and np.isfinite(v["mean_ic"])}
        best = max(others, key=lambda m: others[m]["mean_ic"]) if others else None
        mine = gaps.get(model, {})
        if not np.isfinite(ic[model]["mean_ic"]):
            line = f"{model} daily rank IC {stat_text(math.nan, '', mine.get('mean_ic'))}"
        else:
            line = (f"{model} daily rank IC {ic[model]['mean_ic']:+.4f} "
                    f"(ICIR {stat_text(ic[model]['icir'], '+.3f', mine.get('icir'))})")
        if best is not None:
            theirs = gaps.get(best, {})
            line += (f"; best baseline: {best} {ic[best]['mean_ic']:+.4f} "
                     f"(ICIR {stat_text(ic[best]['icir'], '+.3f', theirs.get('icir'))})")
        elif len(ic) > 1:
            line += "; no baseline's rank IC could be computed either"
        lines.append(line)
        if best is not None and ic_tests is not None and len(ic_tests):
            t = ic_tests.set_index("baseline").loc[best]
            if not np.isfinite(t["p_value"]):
                lines.append(f"{model} vs the best baseline {best}: rank-IC difference test not computed "
                             f"({mine.get('mean_ic') or 'too few days with both ICs'})")
            else:
                if t["p_value"] < 0.05:
                    word = "significantly beats" if t["mean_diff"] > 0 else "is significantly WORSE than"
                else:
                    word = "does NOT significantly beat" if t["mean_diff"] > 0 else "does NOT beat"
                lines.append(f"{model} {word} the best baseline {best}: daily rank IC difference "
                             f"{t['mean_diff']:+.4f}, Newey-West t {t['t_stat']:+.2f}, "
                             f"p = {t['p_value']:.3f}")
                wins = ic_tests[(ic_tests["mean_diff"] > 0) & (ic_tests["p_value"] < 0.05)]
                lines.append(f"{model} beats {len(wins)} of {len(ic_tests)} other models significantly "
                             "(rank IC, p < 0.05)")
    if model in backtests:
        m, b = backtests[model].metrics, backtests[model].benchmark_metrics
        flat = "no trades" if not m.get("n_trades") else "the equity never moved"
        lines.append(f"{model} strategy after costs: annual return "
                     f"{stat_text(m['annual_return'], '+.2%', flat)}, "
                     f"Sharpe {stat_text(m['sharpe'], '.2f', flat)}, max drawdown "
                     f"{stat_text(m['max_drawdown'], '.1%', flat)}; benchmark ({backtests[model].benchmark}) "
                     f"{stat_text(b['annual_return'], '+.2%', 'no days')}, Sharpe "
                     f"{stat_text(b['sharpe'], '.2f', 'flat benchmark')}")
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
    from forecaster.reporting import plots

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = []
    pred = result.predictions
    pred.to_csv(out / "predictions.csv")
    report.per_fold.to_csv(out / "fold_metrics.csv", index=False)
    files += [out / "predictions.csv", out / "fold_metrics.csv"]
    if len(report.universe):
        report.universe.to_csv(out / "universe.csv", index=False)
        files.append(out / "universe.csv")
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
        "universe": report.universe_counts,
        "skipped": {f"{fold}:{name}": why for (fold, name), why in sorted(result.skipped.items())},
        "failed": {f"{fold}:{name}": why for (fold, name), why in sorted(result.failed.items())},
        "not_computed": report.not_computed,
        "resumed_folds": result.n_resumed,
        **(extra or {}),
    }
    (out / "metrics.json").write_text(json.dumps(_jsonable(metrics), indent=2))
    files.insert(0, out / "metrics.json")
    files.insert(0, write_html(report, result, out))
    return files
