"""Every stock of a run accounted for: when it joined, the days it was used, and for each stock
left out (wholly or on some folds) the reason.

A stock can drop out at three places: the walk-forward gives a fold only the stocks with
``min_stock_days`` bars up to its cut-off; a model may leave a stock out (a per-stock model
with too little data) or produce no forecast for it; and a forecast is scored only where the
label exists (the stock was tradeable on the entry and exit days).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from forecaster.data.panel import Panel
from forecaster.evaluation.assembly import positions
from forecaster.evaluation.walkforward import WalkForwardResult

GONE = ("delisted before", "stopped trading before")  # reasons that read "N stocks delisted before ..."
COLUMNS = ("code", "first_date", "last_date", "days", "folds", "first_forecast", "forecast_days",
           "scored_days", "status", "reason")


def universe_table(panel: Panel, result: WalkForwardResult, model: str, from_file: bool = False
                   ) -> pd.DataFrame:
    """One row per stock of ``panel``, every stock loaded (``COLUMNS``): its data span and days
    with a bar, the folds it was in, the forecasts of ``model`` (the model under test) and how
    many were scored, ``status``
    (``used`` or ``left out``) and ``reason`` (why it was left out, or why it was used only on
    part of the run; empty otherwise): the one that decided. ``from_file``: ``model``'s scores
    were read from a file (``forecaster score``), so a stock it lacks has no score in the file."""
    config = result.config
    folds = result.folds.set_index("fold")
    in_folds: dict[str, list[int]] = {}
    for fold, codes in result.members.items():
        for code in codes:
            in_folds.setdefault(code, []).append(fold)
    pred = result.predictions
    mine = pred[pred["model"] == model]
    forecast_days = mine.groupby("code").size()
    scored_days = mine[mine["actual"].notna()].groupby("code").size()
    first_forecast = mine.reset_index().groupby("code")["date"].min()
    model_folds = {fold for fold, name in result.failed if name == model} | {
        fold for fold, name in result.skipped if name == model}
    excluded: dict[str, list[str]] = {}
    for (fold, name), codes in result.excluded.items():
        for code in codes:
            excluded.setdefault(code, []).append(f"{name} (fold {fold})")

    # Each stock's days with a bar, from the panel (as the folds count them).
    days = panel.listed.sum(axis=0)
    first = np.where(days > 0, panel.listed.argmax(axis=0), -1)
    last = np.where(days > 0, panel.n_days - 1 - panel.listed[::-1].argmax(axis=0), -1)
    delisted = panel.delistings().delisted
    # the most bars a stock had in any fold's training window: what fold membership counted
    counts = np.vstack([np.zeros((1, panel.n_stocks), int), np.cumsum(panel.listed, axis=0)])
    most, most_fold = np.zeros(panel.n_stocks, int), np.full(panel.n_stocks, -1)
    for fold, f in folds.iterrows():
        lo = panel.dates.searchsorted(f["train_start"])
        hi = panel.dates.searchsorted(f["train_end"], side="right")
        n = counts[hi] - counts[lo]
        better = n > most
        most, most_fold = np.where(better, n, most), np.where(better, fold, most_fold)
    rolling = config.scheme == "rolling"
    rows = []
    for j in np.argsort(panel.codes.astype(str)):
        code = str(panel.codes[j])
        mine_folds = sorted(in_folds.get(code, []))
        n_fc, n_sc = int(forecast_days.get(code, 0)), int(scored_days.get(code, 0))
        row = {"code": code, "first_date": panel.dates[first[j]] if first[j] >= 0 else pd.NaT,
               "last_date": panel.dates[last[j]] if last[j] >= 0 else pd.NaT,
               "days": int(days[j]), "folds": len(mine_folds),
               "first_forecast": first_forecast.get(code, pd.NaT), "forecast_days": n_fc,
               "scored_days": n_sc}
        if code in result.outside:
            reason = result.outside[code]
        elif from_file and n_fc == 0:
            reason = "no score in the file"
        elif not mine_folds:
            k = int(most_fold[j])
            where = ("" if k < 0 else f" (fold {k}: {folds.loc[k, 'train_start'].date()}.."
                     f"{folds.loc[k, 'train_end'].date()})")
            window = "in any fold's training window (--scheme rolling)" if rolling else "up to any cut-off"
            reason = (f"too few days {window}: at most {int(most[j])} day(s){where}, fewer than "
                      f"--min-stock-days {config.min_stock_days}")
        elif n_fc == 0:
            start = folds.loc[mine_folds[0], "test_start"]
            if last[j] >= 0 and panel.dates[last[j]] < start:
                # gone before its first forecast day: no input was missing, there was no stock
                gone = "delisted" if delisted[j] else "stopped trading"
                reason = f"{gone} before the forecast period (last bar before {start.date()})"
            elif code in excluded:
                reason = "excluded by " + ", ".join(excluded[code])
            elif model_folds and set(mine_folds) <= model_folds:
                reason = f"{model} was skipped or failed on every fold the stock was in"
            else:
                reason = f"{model} produced no forecast for it (missing inputs on every forecast day)"
        elif n_sc == 0:
            reason = ("no valid label on any forecast day (suspended, no bar, or not tradeable at the "
                      "entry or exit)")
        else:
            reason = ""
        status = "left out" if reason else "used"
        if not reason and mine_folds[0] != 0 and len(folds) > 1:
            reason = (f"joined at fold {mine_folds[0]} (test from "
                      f"{folds.loc[mine_folds[0], 'test_start'].date()}): fewer than "
                      f"--min-stock-days {config.min_stock_days} days in earlier folds' training windows")
        if not reason and code in excluded:
            reason = "excluded by " + ", ".join(excluded[code])
        rows.append({**row, "status": status, "reason": reason})
    return pd.DataFrame(rows, columns=list(COLUMNS))


def universe_counts(table: pd.DataFrame) -> dict:
    """``{"loaded", "used", "left_out": {code: reason}}`` for the console and metrics.json."""
    left = table[table["status"] != "used"]
    return {"loaded": len(table), "used": int((table["status"] == "used").sum()),
            "left_out": dict(zip(left["code"], left["reason"], strict=True))}


def universe_line(counts: dict) -> str:
    """One sentence: how many stocks were loaded and used, and which were left out and why."""
    noun = "stock" if counts["loaded"] == 1 else "stocks"
    line = f"universe: {counts['loaded']} {noun} loaded, {counts['used']} used"
    if counts["left_out"]:
        # stocks gone before the forecast period, for the same reason, as one entry
        by_reason: dict[str, list[str]] = {}
        for code, reason in counts["left_out"].items():
            by_reason.setdefault(reason, []).append(code)
        entries = []  # (text, stocks it names)
        for reason, codes in by_reason.items():
            if len(codes) > 1 and reason.startswith(GONE):
                more = f" and {len(codes) - 10} more" if len(codes) > 10 else ""
                entries.append((f"{len(codes)} stocks {reason}: {', '.join(codes[:10])}{more}", len(codes)))
            else:
                entries += [(f"{c} ({reason})", 1) for c in codes]
        line += f", {len(counts['left_out'])} left out: " + "; ".join(t for t, _ in entries[:5])
        if len(entries) > 5:
            line += f"; and {sum(n for _, n in entries[5:])} more (see universe.csv)"
    return line



def restrict_to_members(result: WalkForwardResult, panel: Panel) -> tuple[WalkForwardResult, int]:
    """``result`` with only the forecasts of stocks that are members of the run's universe
    (``panel.members``) on the day forecast, and the number of forecast rows left out.
    Models are trained on whatever the walk-forward gave them; everything scored after this
    (IC, quantiles, verdict, backtests, predictions file) covers the day's members only. A
    stock none of whose forecasts fell on a member day is named in ``result.outside``."""
    if panel.members is None:
        return result, 0
    pred = result.predictions
    day = panel.dates.get_indexer(pred.index)
    col = positions(pd.Index(panel.codes), pred["code"])
    keep = np.zeros(len(pred), dtype=bool)
    ok = (day >= 0) & (col >= 0)
    keep[ok] = panel.members[day[ok], col[ok]]
    forecast_codes = set(pred["code"].unique())
    kept = pred[keep]
    outside = {str(c): "not a member of the universe on any day it was forecast"
               for c in sorted(forecast_codes - set(kept["code"].unique()))}
    return dataclasses.replace(result, predictions=kept, outside=outside), int((~keep).sum())
