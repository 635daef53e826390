"""The verdict and notes of a scored run, as sentences: what the main model beat and how
significantly, what its strategy earned, what could not be computed and why, and what the data
cannot tell (synthetic prices, survivorship)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecaster.data.market.exchange import is_synthetic
from forecaster.evaluation.walkforward import WalkForwardResult
from forecaster.metrics import stat_text
from forecaster.metrics.returns import MIN_ANNUAL_DAYS, TOO_FEW_DAYS


def data_caveats(codes: list[str], panel: bool, index_constituents: bool = False,
                 point_in_time: bool = False) -> list[str]:
    """What the data cannot tell, stated only where it is true: synthetic prices always named
    as such; survivorship as a fact when the user says the folder is an index's current
    constituents, else as a condition the reader can check, unless ``point_in_time``: the
    stocks are chosen day by day from a dated membership list and the data keep delisted
    stocks, so no after-the-fact list chose them (the universe's coverage line counts the
    members the data lack)."""
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
    elif panel and n_syn < len(codes) and not point_in_time:
        notes.append("if these stocks were chosen by today's index membership (or any other "
                     "after-the-fact list), stocks that dropped out are missing and the averages carry "
                     "survivorship bias")
    return notes


def failure_line(model: str, result: WalkForwardResult) -> str:
    n_folds = len(result.folds)
    by_model: dict[str, int] = {}
    for _, name in result.failed:
        by_model[name] = by_model.get(name, 0) + 1
    parts = ", ".join(f"{name} on {n} of {n_folds} folds" for name, n in sorted(by_model.items()))
    first = next(iter(sorted(result.failed.items())))
    return (f"FAILED model runs (recorded, the run went on): {parts}; first: fold {first[0][0]} "
            f"{first[0][1]}: {first[1]}" + (f" -- {model} failed on EVERY fold" if by_model.get(model)
                                             and model not in result.predictions["model"].unique() else ""))


def no_forecast_line(model: str, result: WalkForwardResult) -> str | None:
    """The first verdict line when ``model`` produced no forecast at all (skipped or failed on
    every fold): the run cannot say anything about it, and says why. ``None`` otherwise."""
    if model in result.predictions["model"].unique():
        return None
    why = sorted((fold, reason) for (fold, name), reason in {**result.skipped, **result.failed}.items()
                 if name == model)
    first = f"; first: fold {why[0][0]}: {why[0][1]}" if why else ""
    return (f"NO FORECAST from {model}: it was skipped or failed on every one of {len(result.folds)} "
            f"fold(s), so this report cannot judge it{first}")


def ic_meaning(config, horizon: int) -> str:
    if config.label != "tradeable":
        return "IC is measured on each day's close-to-close log return"
    leg = ("the next open to the open" if config.execution == "next_open" else "the close to the close")
    return (f"daily rank IC = the Spearman correlation, across the stocks of a day, between a model's "
            f"score and the return from {leg} {horizon} trading day(s) later (what a strategy trading "
            "on the score earns before costs); 0.03-0.05 is typical of useful equity factors, and a "
            "score is only as good as how consistently it is positive (ICIR = mean / std)")


def pct(value: float, reason: str | None = None, per_year: bool = False, sign: bool = True) -> str:
    """A fraction as a percentage with its unit (``+15.11 %``, ``+15.11 %/yr``), or why it is
    missing (:func:`stat_text`)."""
    if value is not None and math.isfinite(float(value)) and abs(value) < 5e-7:
        value = 0.0  # no "-0.00 %"
    text = stat_text(None if value is None else value * 100, "+.2f" if sign else ".2f", reason)
    return f"{text} %{'/yr' if per_year else ''}" if text[0] != "n" else text


def p_text(p: float, reason: str | None = None) -> str:
    """A p-value as read: ``p = 0.010``, ``p < 0.001`` (never signed), or why it is missing."""
    if p is not None and math.isfinite(float(p)) and p < 0.001:
        return "p < 0.001"
    return f"p = {stat_text(p, '.3f', reason)}"


def _significance(p: float, alpha: float = 0.05) -> str:
    if p is None or not math.isfinite(float(p)):
        return "no test"
    return "significant" if p < alpha else "not significant"


def best_strategy(backtests: dict, model: str, tests: pd.DataFrame | None = None) -> str | None:
    """The baseline whose strategy earned the most a year after costs (None: no other backtest
    with a return): by the paired comparison on the days it shares with ``model`` where
    ``tests`` holds one, else by its own annual return."""
    if tests is not None and len(tests):
        paired = tests[np.isfinite(tests["annual_return_diff"].astype(float))]
        paired = paired[paired["baseline"].isin([n for n in backtests if n != model])]
        if len(paired):
            return str(paired.loc[paired["annual_return_diff"].astype(float).idxmin(), "baseline"])
    others = {n: r.metrics["annual_return"] for n, r in backtests.items()
              if n != model and np.isfinite(r.metrics.get("annual_return", math.nan))}
    return max(others, key=others.get) if others else None


def best_ic_baseline(model: str, ic: dict, ic_tests: pd.DataFrame | None = None,
                     overall: pd.DataFrame | None = None) -> str | None:
    """The baseline the verdict compares forecasts with: the one most ahead of ``model`` in
    daily rank IC on the days both cover (the paired tests, ``ic_tests``), else the best mean
    daily rank IC (panels), else the best pooled rank IC (``overall``, one stock)."""
    if ic:
        others = {m: v["mean_ic"] for m, v in ic.items() if m != model and np.isfinite(v["mean_ic"])}
        if ic_tests is not None and len(ic_tests) and "mean_diff" in ic_tests:
            diffs = ic_tests.set_index("baseline")["mean_diff"].astype(float)
            paired = {m: diffs[m] for m in others if m in diffs.index and np.isfinite(diffs[m])}
            if paired:
                return min(paired, key=paired.get)
        scores = others
    elif overall is not None and len(overall):
        scores = {m: v for m, v in overall.set_index("model")["rank_ic"].items()
                  if m != model and np.isfinite(v)}
    else:
        return None
    return max(scores, key=scores.get) if scores else None


def _days(result) -> int:
    return int(len(result.returns))


def _coverage(model: str, other: str, n_mine: int, n_theirs: int, n_both) -> str:
    """``""`` when both cover the same days, else which days the figures are on."""
    if n_both is None or not np.isfinite(n_both) or (n_mine == n_theirs == int(n_both)):
        return ""
    return (f"on the {int(n_both)} days both cover ({model} covers {n_mine}, {other} {n_theirs}): ")


def holm_family(p_values: pd.Series, gaps: dict | None = None, stat: str = "mean_ic",
                what: str = "comparisons") -> str:
    """How many comparisons a Holm adjustment was over, and which were not tested and why:
    ``"the 12 comparisons with a p-value (2 not tested: zero, hist_mean: constant forecast)"``.
    ``p_values``: the raw p-values by the other model's name (NaN: no test); ``gaps``: model ->
    stat -> why a figure of it could not be computed (``stat`` is the one read)."""
    p = p_values.astype(float)
    tested = int(np.isfinite(p).sum())
    text = f"the {tested} {what} with a p-value"
    untested = [str(n) for n in p.index[~np.isfinite(p.to_numpy())]]
    if not untested:
        return f"the {tested} {what}"
    by_why: dict[str, list[str]] = {}
    for name in untested:
        why = (gaps or {}).get(name, {}).get(stat) or ("no variation in the daily difference (e.g. a "
                                                       "constant forecast) or too few shared days")
        by_why.setdefault(why, []).append(name)
    reasons = "; ".join(f"{', '.join(names)}: {why}" for why, names in by_why.items())
    return f"{text} ({len(untested)} not tested: {reasons})"


def _flat(m: dict) -> str:
    """Why a strategy's annual figures are missing: too few days, no trades, or a flat curve."""
    if m.get("n_days", MIN_ANNUAL_DAYS) < MIN_ANNUAL_DAYS:
        return f"{TOO_FEW_DAYS}: {m['n_days']} day(s)"
    return "no trades" if not m.get("n_trades") else "the equity never moved"


def strategy_lines(model: str, backtests: dict, tests: pd.DataFrame | None, alpha: float = 0.05) -> list[str]:
    """The verdict on the strategies, after costs: what the main model's earned against its
    benchmark, whether the best baseline's strategy beat it, by how much a year and with what
    test (the paired Newey-West test of the daily returns' difference), and which other
    baselines' strategies earned more. Two strategies are compared on the days both cover
    (``tests``: :data:`~forecaster.evaluation.tearsheet.TEST_COLUMNS`), each figure named by
    its model; significance counts are Holm-adjusted over the baselines."""
    if model not in backtests:
        return []
    main = backtests[model]
    m, b = main.metrics, main.benchmark_metrics
    flat = _flat(m)
    lines = [f"{model} strategy after costs: {pct(m['annual_return'], flat, True)}, Sharpe "
             f"{stat_text(m['sharpe'], '.2f', flat)}, max drawdown {pct(-m['max_drawdown'], flat)} "
             f"over {_days(main)} days; "
             f"{pct(m['annual_return'] - b['annual_return'], 'no days', True)} over the benchmark "
             f"({main.benchmark}: {pct(b['annual_return'], 'no days', True)}, Sharpe "
             f"{stat_text(b['sharpe'], '.2f', 'flat benchmark')})"]
    table = (tests.set_index("baseline") if tests is not None and len(tests) else None)
    best = best_strategy(backtests, model, tests)
    if best is None:
        return lines
    theirs = backtests[best].metrics
    idle = _flat(theirs)
    best_text = f"{best} (no trades: it held cash)" if not theirs.get("n_trades") else best
    t = table.loc[best] if table is not None and best in table.index else None
    p_adj = t.get("p_holm", math.nan) if t is not None else math.nan
    test = ("paired Newey-West test of the daily returns' difference: "
            f"t {stat_text(t['t_stat'], '+.2f', 'no variation')}, {p_text(t['p_value'], 'no variation')} "
            f"(Holm-adjusted over {holm_family(table['p_value'], what='baselines')}: "
            f"{p_text(p_adj, 'no variation')}), "
            f"{_significance(p_adj, alpha)}" if t is not None else "no paired test")
    where = _coverage(model, best, _days(main), _days(backtests[best]),
                      t["n_days"] if t is not None else None)
    if where:  # different days: only the common days' returns compare
        mine, other = float(t["annual_return_model"]), float(t["annual_return_baseline"])
        numbers = (f"{where}{model} {pct(mine, flat, True)}, {best} {pct(other, idle, True)}")
    else:
        mine, other = m["annual_return"], theirs["annual_return"]
        numbers = (f"{model} {pct(mine, flat, True)}, {best} {pct(other, idle, True)}; Sharpe "
                   f"{model} {stat_text(m['sharpe'], '.2f', flat)}, {best} "
                   f"{stat_text(theirs['sharpe'], '.2f', idle)}; max drawdown {model} "
                   f"{pct(-m['max_drawdown'], flat)}, {best} {pct(-theirs['max_drawdown'], idle)}")
    diff = mine - other
    shared = int(t["n_days"]) if t is not None and np.isfinite(t["n_days"]) else None
    if shared is not None and shared < MIN_ANNUAL_DAYS:
        lines.append(f"{model}'s strategy against the best baseline strategy, {best}: not compared (they "
                     f"share {shared} day(s), {TOO_FEW_DAYS})")
    elif not np.isfinite(diff):
        lines.append(f"{model}'s strategy against the best baseline strategy, {best}: not compared "
                     f"({flat}); {best} {pct(theirs['annual_return'], idle, True)}")
    elif diff < 0:
        lines.append(f"the best baseline strategy, {best_text}, BEAT {model}'s after costs by "
                     f"{pct(-diff, sign=False)}/yr ({numbers}); {test}")
    else:
        lines.append(f"{model}'s strategy beat the best baseline strategy, {best_text}, after costs by "
                     f"{pct(diff, sign=False)}/yr ({numbers}); {test}")
    if table is None:
        return lines
    n_others = sum(1 for n in backtests if n != model)
    diffs = table["annual_return_diff"].astype(float)
    ahead = diffs[diffs < 0].sort_values()
    if np.isfinite(m["annual_return"]):
        if len(ahead):
            named = ", ".join(f"{n} ({pct(-d)}/yr)" for n, d in ahead.items())
            sig = [n for n in ahead.index if table.loc[n].get("p_holm", math.nan) < alpha]
            lines.append(f"{len(ahead)} of {n_others} baseline strategies earned more than {model}'s after "
                         f"costs: {named} (each on the days it shares with {model}); significantly "
                         f"(paired test, Holm-adjusted p < {alpha:g} over "
                         f"{holm_family(table['p_value'], what='baselines')}): "
                         f"{', '.join(sig) if sig else 'none'}")
        else:
            lines.append(f"none of {n_others} baseline strategies earned more than {model}'s after costs "
                         "on the days both cover")
    return lines


def verdict_lines(model: str, overall: pd.DataFrame, dm: pd.DataFrame, ic: dict, backtests: dict,
                  ic_tests: pd.DataFrame | None = None, horizon: int = 1, gaps: dict | None = None,
                  zero: str | None = "zero", strategy_tests: pd.DataFrame | None = None) -> list[str]:
    """Plain sentences on whether the model beat the simple alternatives, as a forecast and as
    a strategy after costs (``strategy_tests``: the paired tests of its strategy against each
    baseline's, :class:`~forecaster.evaluation.tearsheet.StrategyStats`); a statistic that
    could not be computed is said to be so, with the reason (``gaps``: model -> stat -> why).
    A panel's verdict starts with the strategies (what a portfolio manager trades), one
    stock's with the forecast against zero."""
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
                     f"{stat_text(stat, '+.2f', dm_why)}, {p_text(p, dm_why)}")
        lines.append(f"{model} sign hit rate {pct(row['hit_rate'], 'no scored forecast', sign=False)} "
                     f"(binomial {p_text(row['binomial_p'], 'no scored forecast')})")
    if ic and model in ic:
        lines += _ic_lines(model, ic, ic_tests, gaps)
    strategy = strategy_lines(model, backtests, strategy_tests)
    return [*strategy, *lines] if ic else [*lines, *strategy]


def _ic_lines(model: str, ic: dict, ic_tests: pd.DataFrame | None, gaps: dict) -> list[str]:
    """The verdict on rank IC: the main model's, the best baseline's and the paired test
    against it, on the days both cover; how many of the other models it beats, counted with
    Holm-adjusted p-values over all of them."""
    tests = ic_tests.set_index("baseline") if ic_tests is not None and len(ic_tests) else None
    best = best_ic_baseline(model, ic, ic_tests)
    mine = gaps.get(model, {})
    if not np.isfinite(ic[model]["mean_ic"]):
        line = f"{model} daily rank IC {stat_text(math.nan, '', mine.get('mean_ic'))}"
    else:
        line = (f"{model} daily rank IC {ic[model]['mean_ic']:+.4f} "
                f"(ICIR {stat_text(ic[model]['icir'], '+.3f', mine.get('icir'))}, "
                f"{ic[model]['n_days']} days)")
    if best is not None:
        theirs = gaps.get(best, {})
        line += (f"; best baseline: {best} {ic[best]['mean_ic']:+.4f} "
                 f"(ICIR {stat_text(ic[best]['icir'], '+.3f', theirs.get('icir'))}, "
                 f"{ic[best]['n_days']} days)")
    elif len(ic) > 1:
        line += "; no baseline's rank IC could be computed either"
    lines = [line]
    if best is None or tests is None:
        return lines
    t = tests.loc[best]
    if not np.isfinite(t["p_value"]):
        lines.append(f"{model} vs the best baseline {best}: rank-IC difference test not computed "
                     f"({mine.get('mean_ic') or 'too few days with both ICs'})")
        return lines
    if t["p_value"] < 0.05:
        word = "significantly beats" if t["mean_diff"] > 0 else "is significantly WORSE than"
    else:
        word = "does NOT significantly beat" if t["mean_diff"] > 0 else "does NOT beat"
    where = _coverage(model, best, ic[model]["n_days"], ic[best]["n_days"], t["n_days"])
    means = (f" ({model} {t['mean_model']:+.4f}, {best} {t['mean_baseline']:+.4f})"
             if where and "mean_model" in t else "")
    lines.append(f"{model} {word} the best baseline {best}: {where}daily rank IC difference "
                 f"{t['mean_diff']:+.4f}{means}, Newey-West t {t['t_stat']:+.2f}, {p_text(t['p_value'])}")
    adjusted = ic_tests["p_holm"] if "p_holm" in ic_tests else ic_tests["p_value"]
    wins = ic_tests[(ic_tests["mean_diff"] > 0) & (adjusted < 0.05)]
    losses = ic_tests[(ic_tests["mean_diff"] < 0) & (adjusted < 0.05)]
    family = holm_family(ic_tests.set_index("baseline")["p_value"], gaps)
    line = (f"{model} beats {len(wins)} of {len(ic_tests)} other models significantly "
            f"(rank IC on the days each pair shares; Holm-adjusted p < 0.05 over {family})")
    if len(losses):
        losses = losses.sort_values("mean_diff")
        line += "; significantly better than it: " + ", ".join(
            f"{b} ({-d:+.4f}, adjusted {p_text(p)})" for b, d, p in
            zip(losses["baseline"], losses["mean_diff"], adjusted[losses.index], strict=True))
    lines.append(line)
    return lines
