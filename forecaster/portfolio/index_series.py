"""An index's own series as a second benchmark of an index universe.

A folder may hold index series beside its stocks (Qlib's ``SH000300``, baostock's
``sh.000300.csv``): they are not stocks, so they are kept out of the panel (never trained on,
scored or bought) and, when one is the index of the run's universe (``csi300`` ->
``sh.000300``), the backtest reports its growth over the strategy's days beside the members'
equal weight.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from forecaster.data.minute.returns import is_index
from forecaster.portfolio.broker import performance_metrics

# The index each universe name follows (Qlib's market names; CSI / SSE index codes).
INDEX_OF = {"csi300": "sh.000300", "csi500": "sh.000905", "csi800": "sh.000906", "csi1000": "sh.000852",
            "csi100": "sh.000903", "sse50": "sh.000016", "sse180": "sh.000010"}


def split_indices(frames: dict[str, pd.DataFrame]) -> tuple[dict, dict]:
    """``(stocks, indices)``: the frames of index codes (``sh.000xxx``, ``sz.399xxx``) apart.
    Nothing is split off when only index series would remain."""
    indices = {c: f for c, f in frames.items() if is_index(c)}
    if not indices or len(indices) == len(frames):
        return frames, {}
    return {c: f for c, f in frames.items() if c not in indices}, indices


def index_for(universe_name: str, indices: dict[str, pd.DataFrame]) -> str | None:
    """The code among ``indices`` that a universe named ``universe_name`` follows, or None."""
    name = str(universe_name).lower().removesuffix(".txt")
    code = INDEX_OF.get(name)
    return code if code in indices else None


def index_equity(frame: pd.DataFrame, days: pd.DatetimeIndex, execution: str, capital: float
                 ) -> tuple[pd.Series, int]:
    """``(equity [days], days without a close)``: ``capital`` held in the index from the
    strategy's first execution (the first day's open for ``next_open``, its close for
    ``close``) to each close; a day the series lacks keeps the last close (counted)."""
    close = frame["close"].reindex(days)
    missing = int(close.isna().sum())
    close = close.ffill()
    base = frame["open"].get(days[0], np.nan) if execution == "next_open" else close.iloc[0]
    if not np.isfinite(base) or base <= 0:  # no open that day: from its close
        base = close.iloc[0]
    return (capital * close / base).rename("index"), missing


def attach_index(backtests: dict, code: str, frame: pd.DataFrame, execution: str, capital: float) -> dict:
    """Each :class:`~forecaster.portfolio.backtest.BacktestResult` with the index ``code``'s
    equity and metrics over its own days (``index_*`` fields)."""
    out = {}
    for name, result in backtests.items():
        equity, missing = index_equity(frame, pd.DatetimeIndex(result.equity.index), execution, capital)
        label = f"index {code} (its own series, no costs)"
        if missing:
            label += f"; {missing} day(s) without its close kept the previous one"
        out[name] = dataclasses.replace(result, index_equity=equity, index_name=label,
                                        index_metrics=performance_metrics(equity, None, capital))
    return out
