"""The strategy tear sheet of a scored run: each backtest's risk figures, its returns before
and after costs, its growth relative to the benchmark and that growth's drawdown, holdings and
turnover over time, the main model's returns by month and year and worst drawdowns, and the
paired test of the main model's strategy against each baseline's (daily returns after costs).
Computed here (:mod:`forecaster.metrics.returns`), rendered by :mod:`forecaster.reporting`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from forecaster.metrics.hac import holm
from forecaster.metrics.returns import (
    active_stats,
    annual_return,
    drawdown,
    drawdown_periods,
    gross_returns,
    growth,
    monthly_table,
    paired_return_test,
    period_returns,
    relative_growth,
)
from forecaster.portfolio.broker import FEE_COLUMNS

# The risk table's columns (one row per backtested model, and one for the benchmark).
RISK_COLUMNS = ("annual_return", "annual_return_gross", "cost_drag", "excess_annual_return",
                "excess_annual_return_gross", "annual_volatility", "sharpe", "sortino", "calmar",
                "max_drawdown", "information_ratio", "tracking_error", "turnover", "costs_paid", "n_trades",
                "n_blocked", "mean_holdings")
TEST_COLUMNS = ("baseline", "annual_return_diff", "annual_return_model", "annual_return_baseline",
                "mean_diff", "t_stat", "p_value", "n_days", "p_holm")
# Days in the rolling mean of the turnover curve.
TURNOVER_WINDOW = 21


@dataclass
class StrategyStats:
    """The tear sheet's numbers.

    Attributes:
        risk: ``[model x RISK_COLUMNS]``, the benchmark as the last row (``"benchmark"``: it
            trades without costs, so its return before costs is its return; its cost and trade
            columns NaN). ``max_drawdown`` is negative (a fall).
        tests: the main model's strategy against each other backtest on the days both cover
            (:data:`TEST_COLUMNS`; ``p_holm``: Holm-adjusted over the baselines;
            ``annual_return_diff`` > 0: the main model's earned more), after costs.
        curves: per model, ``[date]`` columns ``net``, ``gross`` (growth of 1 after and before
            costs), ``benchmark`` (its growth), ``excess``, ``excess_gross`` (growth relative
            to the benchmark, minus 1), ``excess_drawdown``, ``excess_drawdown_gross``,
            ``drawdown`` (of ``net``), ``holdings`` (stocks held after the day's trades),
            ``turnover`` (value traded over the day's starting value), ``turnover_mean``
            (its :data:`TURNOVER_WINDOW`-day rolling mean).
        monthly: the main model's returns after costs by year and month (``monthly_table``).
        yearly: the main model's yearly returns after costs, the benchmark's and their
            difference (``strategy, benchmark, excess``), indexed by year.
        drawdowns: the main model's worst drawdowns after costs (``drawdown_periods``).
        excess_drawdowns: the same of its growth relative to the benchmark.
    """

    risk: pd.DataFrame = field(default_factory=pd.DataFrame)
    tests: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(TEST_COLUMNS)))
    curves: dict = field(default_factory=dict)
    monthly: pd.DataFrame = field(default_factory=pd.DataFrame)
    yearly: pd.DataFrame = field(default_factory=pd.DataFrame)
    drawdowns: pd.DataFrame = field(default_factory=pd.DataFrame)
    excess_drawdowns: pd.DataFrame = field(default_factory=pd.DataFrame)


def daily_costs(trades: pd.DataFrame) -> pd.Series:
    """Fees and slippage paid per trading day (filled and partial trades)."""
    if trades is None or not len(trades):
        return pd.Series(dtype=float)
    done = trades[trades["status"] != "blocked"]
    return done[list(FEE_COLUMNS)].sum(axis=1).groupby(done["date"]).sum()


def _benchmark_returns(result) -> pd.Series:
    b = result.benchmark_equity.astype(float)
    first = result.returns.index[0] if len(result.returns) else None
    r = b / b.shift(1) - 1.0
    if first is not None and len(b) and b.index[0] == first:
        # the benchmark starts from the same capital on the first day
        start = result.equity.iloc[0] / (1.0 + result.returns.iloc[0])
        r.iloc[0] = b.iloc[0] / start - 1.0
    return r.fillna(0.0)


def curves_of(result) -> pd.DataFrame:
    """The daily curves of one :class:`~forecaster.portfolio.backtest.BacktestResult` (see
    :class:`StrategyStats`), with the day's returns ``r_net``, ``r_gross``, ``r_benchmark``."""
    net = result.returns.astype(float)
    if not len(net):
        return pd.DataFrame()
    gross = gross_returns(net, result.equity, daily_costs(result.trades))
    bench = _benchmark_returns(result).reindex(net.index).fillna(0.0)
    rel, rel_gross = relative_growth(net, bench), relative_growth(gross, bench)
    held = (result.positions.reindex(net.index).fillna(0) != 0).sum(axis=1)
    done = result.trades[result.trades["status"] != "blocked"] if len(result.trades) else result.trades
    traded = (done["value"].abs().groupby(done["date"]).sum() if len(done) else pd.Series(dtype=float))
    start = result.equity.astype(float) / (1.0 + net)
    turnover = traded.reindex(net.index).fillna(0.0) / start
    return pd.DataFrame({"net": growth(net), "gross": growth(gross), "benchmark": growth(bench),
                         "excess": rel - 1.0, "excess_gross": rel_gross - 1.0,
                         "excess_drawdown": drawdown(rel), "excess_drawdown_gross": drawdown(rel_gross),
                         "drawdown": drawdown(growth(net)), "holdings": held.astype(float),
                         "turnover": turnover,
                         "turnover_mean": turnover.rolling(TURNOVER_WINDOW, min_periods=1).mean(),
                         "r_net": net, "r_gross": gross, "r_benchmark": bench})


def _risk_row(result, curves: pd.DataFrame) -> dict:
    m, b = result.metrics, result.benchmark_metrics
    gross = annual_return(curves["r_gross"]) if len(curves) else math.nan
    active = (active_stats(curves["r_net"], curves["r_benchmark"]) if len(curves)
              else {"information_ratio": math.nan, "tracking_error": math.nan})
    return {"annual_return": m["annual_return"], "annual_return_gross": gross,
            "cost_drag": gross - m["annual_return"],
            "excess_annual_return": m["annual_return"] - b["annual_return"],
            "excess_annual_return_gross": gross - b["annual_return"],
            "annual_volatility": m["annual_volatility"], "sharpe": m["sharpe"], "sortino": m["sortino"],
            "calmar": m["calmar"], "max_drawdown": -m["max_drawdown"],
            "information_ratio": active["information_ratio"], "tracking_error": active["tracking_error"],
            "turnover": m["turnover"], "costs_paid": m["costs_paid"], "n_trades": m["n_trades"],
            "n_blocked": m["n_blocked"],
            "mean_holdings": float(curves["holdings"].mean()) if len(curves) else math.nan}


def strategy_stats(backtests: dict, model: str, horizon: int = 1) -> StrategyStats:
    """The tear sheet of ``backtests`` (``{model: BacktestResult}``), ``model`` the main one."""
    if not backtests:
        return StrategyStats()
    curves = {name: curves_of(r) for name, r in backtests.items()}
    rows = {name: _risk_row(r, curves[name]) for name, r in backtests.items()}
    ref = backtests.get(model) or next(iter(backtests.values()))
    b = ref.benchmark_metrics
    rows["benchmark"] = {"annual_return": b["annual_return"], "annual_return_gross": b["annual_return"],
                         "annual_volatility": b["annual_volatility"],
                         "sharpe": b["sharpe"], "sortino": b["sortino"], "calmar": b["calmar"],
                         "max_drawdown": -b["max_drawdown"]}
    risk = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(RISK_COLUMNS))
    risk.index.name = "model"
    stats = StrategyStats(risk=risk, curves=curves)
    main = backtests.get(model)
    if main is None or not len(main.returns):
        return stats
    tests = [{"baseline": name, **paired_return_test(main.returns, r.returns, horizon)}
             for name, r in backtests.items() if name != model]
    stats.tests = pd.DataFrame(tests, columns=list(TEST_COLUMNS[:-1]))
    stats.tests["p_holm"] = holm(stats.tests["p_value"])
    c = curves[model]
    stats.monthly = monthly_table(main.returns)
    years = pd.DataFrame({"strategy": period_returns(c["r_net"], "Y"),
                          "benchmark": period_returns(c["r_benchmark"], "Y")})
    years["excess"] = years["strategy"] - years["benchmark"]
    years.index.name = "year"
    stats.yearly = years
    stats.drawdowns = drawdown_periods(c["net"])
    stats.excess_drawdowns = drawdown_periods(c["excess"] + 1.0)
    return stats


def quantile_curves(qret: pd.DataFrame, horizon: int = 1) -> pd.DataFrame:
    """Each quantile's cumulative tradeable log return over time (the running sum of the
    day's mean label over the quantile's stocks, divided by the horizon: an ``H``-day label
    overlaps ``H`` days) and the long-short curve (top minus bottom quantile), before costs."""
    if qret is None or not len(qret):
        return pd.DataFrame()
    per_day = qret.astype(float) / max(int(horizon), 1)
    out = per_day.fillna(0.0).cumsum()
    out.columns = [str(c) for c in out.columns]
    out["long_short"] = (per_day.iloc[:, -1] - per_day.iloc[:, 0]).fillna(0.0).cumsum()
    return out


__all__ = ["RISK_COLUMNS", "StrategyStats", "TEST_COLUMNS", "curves_of", "daily_costs", "quantile_curves",
           "strategy_stats"]
