"""Scoring one stock's minute bars (:func:`~forecaster.evaluation.scoring.score_run` calls
this for a bar-level walk-forward): the statistics of :mod:`forecaster.metrics.bars` and the
report's lines on the data (frequency, session rule, suspensions and the overnight gaps
excluded)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.minute.session import SESSION_MINUTES, SESSION_RULE, session_minutes
from forecaster.data.panel import Panel
from forecaster.metrics.bars import bar_positions, position_summary


def bar_length(stamps: pd.DatetimeIndex) -> int:
    """The most common step (minutes, lunch excluded) between a day's bars; 0 without one."""
    stamps = pd.DatetimeIndex(stamps)
    minutes = session_minutes(stamps)
    day = stamps.normalize()
    steps = np.diff(minutes)[np.asarray(day[1:] == day[:-1])]
    steps = steps[steps > 0]
    return int(pd.Series(steps).round().mode().iloc[0]) if len(steps) else 0


def _days(stamps) -> str:
    days = [str(pd.Timestamp(s).date()) for s in stamps]
    return ", ".join(days[:5]) + (f" and {len(days) - 5} more" if len(days) > 5 else "")


def bar_scores(pred: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(positions, summary)``: :func:`~forecaster.metrics.bars.bar_positions` and
    :func:`~forecaster.metrics.bars.position_summary` of the scored predictions."""
    positions = bar_positions(pred)
    return positions, position_summary(positions)


def bar_notes(grid: Panel, predictions: pd.DataFrame) -> list[str]:
    """The report's lines on a bar run's data: frequency and session rule, and the suspended
    bars and overnight gaps that are no targets (in the data, and among the forecast bars)."""
    stamps = grid.dates
    length = bar_length(stamps)
    suspended = grid.suspended[:, 0]
    gaps = (np.nan_to_num(grid.fields["gap_excluded"][:, 0]) > 0 if "gap_excluded" in grid.fields
            else np.zeros(len(stamps), bool))
    forecast = np.isin(stamps, pd.DatetimeIndex(predictions.index.unique()))
    per_day = SESSION_MINUTES // length if length else "?"
    days = stamps.normalize().nunique()
    lines = [f"minute bars: {length}-minute bars ({per_day} a day) over {days} trading days; session rule: "
             f"{SESSION_RULE}; each forecast is of the next bar's log return (a day's first bar: the "
             "overnight move and the opening auction)"]
    text = (f"{int(suspended.sum())} suspended bar(s) in the data ({int((suspended & forecast).sum())} among "
            "the forecast bars) are no targets and were not scored")
    if gaps.any():
        text += (f"; {int(gaps.sum())} overnight gap(s) beyond the board's price limit, likely corporate "
                 f"actions ({_days(stamps[gaps])}; {int((gaps & forecast).sum())} among the forecast bars), "
                 "were excluded from training targets and scoring")
    else:
        text += "; no overnight gap beyond the board's price limit was flagged"
    lines.append(text)
    lines.append("scored over every bar pooled (pearson_ic, rank_ic) and by bar of the day across days "
                 "(bar_position_metrics.csv; position_ic, position_rank_ic: their mean over the day's bars); "
                 "no within-day IC: ranking a day's bars against each other rewards any forecast that leans "
                 "against the recent move, skill or not. No trading backtest: A-share T+1 rules out same-day "
                 "round trips, so a strategy on these forecasts trades daily")
    return lines
