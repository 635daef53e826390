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
    names = np.array(sorted(set().union(*(map(str, part["model"].unique()) for part in rows))), dtype=object)
    code_index, name_index = pd.Index(grid.codes), pd.Index(names)
    day, code, model, fold, forecast = [], [], [], [], []
    rows.reverse()  # popped from the end: first part first
    while rows:
        part = rows.pop()
        day.append(grid.dates.get_indexer(part.index).astype(np.int32))
        code.append(_positions(code_index, part["code"]).astype(np.int32))
        model.append(_positions(name_index, part["model"]).astype(np.int16))
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


def compact_codes(index: pd.MultiIndex) -> pd.Categorical:
    """The ``code`` level of a ``(date, code)`` index as a categorical (the index's own level
    codes: no string per row, nothing hashed)."""
    level = index.names.index("code")
    return pd.Categorical.from_codes(index.codes[level], categories=index.levels[level])


def fold_part(days, codes, name: str, fold: int, values: np.ndarray) -> pd.DataFrame:
    """One model's forecast rows of one fold: ``code`` and ``model`` categorical, ``fold``
    int32 (a whole market's parts wait in the main process until every fold is done: 27 bytes a
    row instead of 40)."""
    n = len(values)
    return pd.DataFrame({"code": pd.Categorical(codes) if not isinstance(codes, pd.Categorical) else codes,
                         "model": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=[name]),
                         "fold": np.full(n, fold, np.int32), "forecast": values},
                        index=pd.DatetimeIndex(days, name=None))


def _positions(index: pd.Index, column: pd.Series) -> np.ndarray:
    """Positions in ``index`` of a column's values (-1 where absent); a categorical column
    (how fold parts hold codes and model names) is looked up once per category."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        at = index.get_indexer(column.cat.categories)
        return np.where(column.cat.codes.to_numpy() >= 0, at[column.cat.codes.to_numpy()], -1)
    return index.get_indexer(column)


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
