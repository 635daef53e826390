"""Choosing a default of the book by measurement that carries (issue 88).

A candidate setting is measured in *cells* (an index and a period, e.g. CSI 300 2019-2022), each
against that index's total-return estimate, on the same forecasts as the incumbent. It replaces
the incumbent only if it leads (a higher information ratio) in at least :data:`MIN_LEADS` of the
cells and a paired test of the daily excess difference pooled over the cells favours it at
``p < ``:data:`MAX_P`: the candidate's daily return minus the incumbent's (the benchmark
cancels), averaged over the indices on each day, Newey-West (one-sided, H1: the candidate
earns more). Otherwise the incumbent stays.

:func:`cell_figures` cuts one run's daily returns into its cells; :func:`verdict` compares a
candidate with the incumbent; :func:`choose` walks the candidates of one dimension.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecaster.metrics import TRADING_DAYS
from forecaster.metrics.hac import hac_mean_test
from forecaster.metrics.returns import MIN_ANNUAL_DAYS, active_stats

# the periods of the protocol: (label, first day, last day)
PERIODS = (("2019-2022", "2019-01-01", "2022-12-31"), ("2023-2026", "2023-01-01", "2026-12-31"))
MIN_LEADS = 3  # of the four cells
MAX_P = 0.10


def one_sided_turnover(traded: pd.Series, equity: pd.Series) -> float:
    """The book traded a year, one-sided, in times its mean value: half of ``traded`` (``[date]``
    the filled trades' absolute value a day) over ``equity``'s days, over the mean ``equity``
    and the years (NaN under :data:`MIN_ANNUAL_DAYS` days)."""
    n = len(equity)
    if n < MIN_ANNUAL_DAYS:
        return math.nan
    inside = float(traded.reindex(equity.index).fillna(0.0).sum())
    return inside / 2.0 / float(equity.mean()) / (n / TRADING_DAYS)


def cell_figures(returns: pd.Series, bench: pd.Series, traded: pd.Series, equity: pd.Series,
                 periods=PERIODS) -> dict[str, dict]:
    """``{period label: {excess, te, ir, turnover, n_days}}`` of one book's daily ``returns``
    against ``bench`` (``[date]``, the index's total-return estimate) within each period
    (``(label, first, last)``); ``traded``/``equity``: the book's (:func:`one_sided_turnover`)."""
    out = {}
    for label, first, last in periods:
        r = returns.loc[first:last]
        s = active_stats(r, bench.loc[first:last])
        out[label] = {"excess": s["excess_annual_return"], "te": s["tracking_error"],
                      "ir": s["information_ratio"], "n_days": s["n_days"],
                      "turnover": one_sided_turnover(traded, equity.loc[first:last])}
    return out


def cell_line(index: str, period: str, name: str, f: dict) -> str:
    """The bench's line of one cell (issue 88's contract)."""
    return (f"cell index={index} period={period} name={name} excess_ann={f['excess']:+.4f} "
            f"te={f['te']:.4f} ir={f['ir']:.2f} turnover={f['turnover']:.1f}")


def pooled_difference(candidate: dict[str, pd.Series], incumbent: dict[str, pd.Series]) -> pd.Series:
    """``[date]`` the candidate's daily return minus the incumbent's, averaged over the indices
    (``{index: [date] daily returns}``, both books on the same indices) on each day."""
    if set(candidate) != set(incumbent):
        raise ValueError(f"the candidate was run on {sorted(candidate)}, the incumbent on "
                         f"{sorted(incumbent)}")
    diffs = {}
    for index in candidate:
        a, b = candidate[index].align(incumbent[index], join="inner")
        diffs[index] = a - b
    return pd.DataFrame(diffs).mean(axis=1, skipna=True).dropna().sort_index()


def verdict(cand_cells: dict, inc_cells: dict, cand_returns: dict[str, pd.Series],
            inc_returns: dict[str, pd.Series]) -> dict:
    """Does the candidate replace the incumbent? ``*_cells``: ``{(index, period): figures}``
    (:func:`cell_figures`), the same cells for both; ``*_returns``: ``{index: [date]}`` the
    books' daily returns over the protocol's days.

    Returns ``leads`` (cells where the candidate's IR is higher), ``cells``, ``t``, ``p``
    (one-sided, H1: the candidate earns more), ``mean_diff`` (per day), ``replaces``."""
    if set(cand_cells) != set(inc_cells):
        raise ValueError("the candidate and the incumbent were measured in different cells")
    leads = sum(1 for k in cand_cells
                if np.isfinite(cand_cells[k]["ir"]) and np.isfinite(inc_cells[k]["ir"])
                and cand_cells[k]["ir"] > inc_cells[k]["ir"])
    test = hac_mean_test(pooled_difference(cand_returns, inc_returns).to_numpy(dtype=float), None, 1)
    p = test["p_value_greater"]
    needed = min(MIN_LEADS, len(cand_cells))
    return {"leads": leads, "cells": len(cand_cells), "t": test["t_stat"], "p": p,
            "mean_diff": test["mean"], "replaces": bool(leads >= needed and np.isfinite(p) and p < MAX_P)}


def verdict_line(name: str, against: str, v: dict) -> str:
    return (f"verdict name={name} against={against} leads={v['leads']} of {v['cells']} "
            f"t={v['t']:+.2f} p={v['p']:.3f} replaces={'yes' if v['replaces'] else 'no'}")


def choose(incumbent: str, candidates: list[str], cells: dict, returns: dict) -> tuple[str, dict]:
    """The setting a dimension keeps: ``incumbent`` unless some of ``candidates`` replace it
    (:func:`verdict`); of several, the one with the largest ``t``. ``cells``: ``{name:
    {(index, period): figures}}``; ``returns``: ``{name: {index: [date]}}``. Returns ``(the
    kept name, {candidate: verdict})``."""
    verdicts = {c: verdict(cells[c], cells[incumbent], returns[c], returns[incumbent]) for c in candidates}
    winners = [c for c, v in verdicts.items() if v["replaces"]]
    kept = max(winners, key=lambda c: verdicts[c]["t"]) if winners else incumbent
    return kept, verdicts


__all__ = ["MAX_P", "MIN_LEADS", "PERIODS", "cell_figures", "cell_line", "choose", "one_sided_turnover",
           "pooled_difference", "verdict", "verdict_line"]
