"""The folds' forecasts as one frame beside the realised labels (the walk-forward's last step).

At whole-market size (30 M rows) the frame is built column by column on integer positions:
a concat of the parts, a hashed ``code`` column and a sorted copy each cost gigabytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from forecaster.data.panel import Panel
from forecaster.evaluation.backends import release_freed_heap
from forecaster.features.labels import by_forecast_date, close_to_close, tradeable_label
from forecaster.features.series import log_returns, mask_suspended

if TYPE_CHECKING:
    from forecaster.evaluation.folds import WalkForwardConfig

def assemble(rows: list[pd.DataFrame], grid: Panel, panel: dict, config: WalkForwardConfig
              ) -> pd.DataFrame:
    """The folds' forecast rows as one frame in (model, code, date) order, with the realised
    label(s). ``rows`` is emptied as it is read.

    Model by model into columns allocated once, on integer positions, each model's parts freed
    once copied and its heap handed back: at whole-market size (30 M rows) a concat of the
    parts, a hashed ``code`` column or a sort of the whole frame each cost gigabytes; this
    holds the parts not yet read, the columns filled so far and one model's rows in flight."""
    names = np.array(sorted(set().union(*(map(str, part["model"].unique()) for part in rows))), dtype=object)
    code_index, name_index = pd.Index(grid.codes), pd.Index(names)
    by_model: dict[int, list[pd.DataFrame]] = {k: [] for k in range(len(names))}
    rows.reverse()  # popped from the end: first part first, so a fold's rows keep their order
    while rows:
        part = rows.pop()
        at = positions(name_index, part["model"])
        for k in np.unique(at):  # a fold part holds one model; a resumed or frame part may hold several
            by_model[int(k)].append(part if len(at) and (at == k).all() else part[at == k])
    del part
    total = sum(len(p) for parts in by_model.values() for p in parts)
    tradeable, labels = config.label == "tradeable", {}
    if tradeable:  # [D, N] by forecast date, read at each block's positions
        labels = {"actual": by_forecast_date(tradeable_label(grid, config.horizon, config.execution)[0]),
                  "actual_close": by_forecast_date(close_to_close(grid, config.horizon))}
    day = np.empty(total, dtype=grid.dates.values.dtype)
    code, model = np.empty(total, np.int32), np.empty(total, np.int16)
    fold, forecast = np.empty(total, np.int64), np.empty(total)
    actual = {name: np.empty(total) for name in labels}
    start = 0
    for k in range(len(names)):
        parts = by_model.pop(k)
        d = np.concatenate([grid.dates.get_indexer(p.index) for p in parts]).astype(np.int32)
        c = np.concatenate([positions(code_index, p["code"]) for p in parts]).astype(np.int32)
        if (d < 0).any() or (c < 0).any():  # a model forecast a day or stock not in the data
            raise ValueError(f"model {names[k]!r} returned dates or codes outside the panel")
        order = np.lexsort((d, c))  # stable: a fold's rows keep their order
        block = slice(start, start + len(order))
        f = np.concatenate([p["fold"].to_numpy(np.int64) for p in parts])
        v = np.concatenate([p["forecast"].to_numpy(np.float64) for p in parts])
        del parts
        d, c = d[order], c[order]
        day[block], code[block], model[block] = grid.dates.values[d], c, k
        fold[block], forecast[block] = f[order], v[order]
        for name, values in labels.items():
            actual[name][block] = _at(values, d, c)
        start = block.stop
        del d, c, f, v, order
        release_freed_heap()  # the model's parts: unpickled from the workers, in glibc's heap
    labels.clear()
    index = pd.DatetimeIndex(day, name="date")
    del day
    columns = {"code": _take_strings(grid.codes, code)}
    del code  # each position column goes once its strings are built
    columns.update(model=_take_strings(names, model), fold=fold, forecast=forecast)
    del model
    if tradeable:
        columns.update(actual)
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


def positions(index: pd.Index, column: pd.Series) -> np.ndarray:
    """Positions in ``index`` of a column's values (-1 where absent), each distinct value
    looked up once: a categorical column (how fold parts hold codes and model names) by its
    categories, a string column by factorising it (Arrow's hashing; ``index.get_indexer`` on
    the column itself builds a Python string per row: 2 GB at 30 M rows)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        at, codes = index.get_indexer(column.cat.categories), column.cat.codes.to_numpy()
    else:
        codes, uniques = pd.factorize(column, use_na_sentinel=True)
        at = index.get_indexer(uniques)
    return np.where(codes >= 0, at[codes], -1)


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
