"""The folds' forecasts as one frame beside the realised labels (the walk-forward's last step).

At whole-market size (30 M rows) the frame is built column by column on integer positions:
a concat of the parts, a hashed ``code`` column and a sorted copy each cost gigabytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from forecaster.data.panel import Panel
from forecaster.features.labels import by_forecast_date, close_to_close, tradeable_label
from forecaster.features.series import log_returns, mask_suspended

if TYPE_CHECKING:
    from forecaster.evaluation.folds import WalkForwardConfig

def assemble(rows: list[pd.DataFrame], grid: Panel, panel: dict, config: WalkForwardConfig
              ) -> pd.DataFrame:
    """The folds' forecast rows as one frame in (model, code, date) order, with the realised
    label(s). ``rows`` is emptied as it is read.

    Column by column, on integer positions: at whole-market size (30 M rows) a concat of
    the parts, a hashed ``code`` column and a sorted copy of the whole frame each cost
    gigabytes, and the parts are freed as they are read."""
    names = np.array(sorted(set().union(*(part["model"].unique() for part in rows))), dtype=object)
    code_index, name_index = pd.Index(grid.codes), pd.Index(names)
    day, code, model, fold, forecast = [], [], [], [], []
    rows.reverse()  # popped from the end: first part first
    while rows:
        part = rows.pop()
        day.append(grid.dates.get_indexer(part.index).astype(np.int32))
        code.append(code_index.get_indexer(part["code"]).astype(np.int32))
        model.append(name_index.get_indexer(part["model"]).astype(np.int16))
        fold.append(part["fold"].to_numpy(np.int64))
        forecast.append(part["forecast"].to_numpy(np.float64))
        if (day[-1] < 0).any() or (code[-1] < 0).any():  # a model forecast a day or stock not in the data
            raise ValueError(f"model {part['model'].iloc[0]!r} returned dates or codes outside the panel")
    del part
    day, code, model = np.concatenate(day), np.concatenate(code), np.concatenate(model)
    order = np.lexsort((day, code, model))  # stable: a fold's rows keep their order
    day, code, model = day[order], code[order], model[order]
    columns = {"code": _take_strings(grid.codes, code), "model": _take_strings(names, model),
               "fold": np.concatenate(fold)[order], "forecast": np.concatenate(forecast)[order]}
    del fold, forecast, order
    index = pd.DatetimeIndex(grid.dates[day], name="date")
    if config.label == "tradeable":
        label, _ = tradeable_label(grid, config.horizon, config.execution)
        columns["actual"] = _at(by_forecast_date(label), day, code)
        columns["actual_close"] = _at(by_forecast_date(close_to_close(grid, config.horizon)), day, code)
    else:
        keys = pd.MultiIndex.from_arrays([index, columns["code"]])
        columns["actual"] = actuals(panel).reindex(keys).to_numpy()
    return pd.DataFrame(columns, index=index, copy=False)


def _take_strings(values: np.ndarray, positions: np.ndarray):
    """``values[positions]`` as a string column. Where pandas keeps strings in Arrow (pandas
    3 with pyarrow) the gather happens there: no Python object per row."""
    default = pd.Series(["x"]).dtype  # the string dtype this pandas infers
    if isinstance(default, pd.StringDtype) and default.storage == "pyarrow":
        import pyarrow as pa

        return pd.array(pa.array(values.astype(str)).take(pa.array(positions)), dtype=default)
    return values[positions]


def _at(values: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``values [D, N]`` at positions ``(rows[i], cols[i])``; NaN where a position is -1 (a
    date or code the panel lacks). Position lookups, not a (date, code) index of every cell:
    at whole-market size that index alone is millions of entries."""
    out = np.full(len(rows), np.nan)
    ok = (rows >= 0) & (cols >= 0)
    out[ok] = values[rows[ok], cols[ok]]
    return out


def actuals(panel: dict[str, pd.DataFrame]) -> pd.Series:
    """Realised log returns indexed by ``(date, code)``; NaN on suspended days, which no
    forecast is scored on."""
    parts = []
    for code, frame in panel.items():
        r = mask_suspended(log_returns(frame, code), frame)
        parts.append(pd.Series(r.to_numpy(), index=pd.MultiIndex.from_arrays(
            [frame.index, [code] * len(frame)], names=["date", "code"])))
    return pd.concat(parts)
