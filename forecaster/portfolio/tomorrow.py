"""A panel extended by the trading day after its last: what benchmark weights are computed on
to give the weights of that day from what is known at the last close (``predict``'s decision,
:func:`~forecaster.portfolio.index_weights.known_weights`'s last row)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecaster.data.panel import Panel

WEIGHT_FIELDS = ("close", "preclose", "float_mv")  # what every source of benchmark weights reads


def with_next_day(panel: Panel, members: np.ndarray | None = None, day=None) -> Panel:
    """``panel`` and one more day after its last (``day``, default the exchange's next trading
    day): no prices yet, the stocks with a bar on the last day taken as trading, the index's
    members ``members`` ``[stocks]`` (default: the last day's; a review known in advance gives
    tomorrow's). Benchmark weights computed on it give the weights of that day from what is
    known at the last close: each source's row ``t`` uses nothing of day ``t``."""
    from dataclasses import replace

    from forecaster.data.market.calendar import next_trading_day
    from forecaster.portfolio.fitted_weights import _KEY, IndexSeries

    day = next_trading_day(panel.dates[-1]).date if day is None else pd.Timestamp(day)
    nan_row = np.full((1, panel.n_stocks), np.nan)

    def more(a, row):
        return np.vstack([a, np.broadcast_to(np.asarray(row, dtype=a.dtype), a.shape[1:])[None]])

    def extended(mask):  # a [days, stocks] membership with tomorrow's row
        if mask is None:
            return None
        return more(mask, mask[-1] if members is None else np.asarray(members, bool))

    if panel.members is None and members is not None:
        base = np.ones_like(panel.listed)
    else:
        base = panel.members
    # the fields benchmark weights read (a whole market's other fields are not copied)
    ext = replace(panel, dates=panel.dates.append(pd.DatetimeIndex([day])),
                  fields={k: np.vstack([v, nan_row]) for k, v in panel.fields.items() if k in WEIGHT_FIELDS},
                  listed=more(panel.listed, panel.listed[-1]), suspended=more(panel.suspended, False),
                  st=more(panel.st, panel.st[-1]), limit_up=np.vstack([panel.limit_up, nan_row]),
                  limit_down=np.vstack([panel.limit_down, nan_row]), members=extended(base),
                  learn=None, features=None, seen=None, _cache={})
    from forecaster.portfolio.total_return import DIVIDEND_FILE_KEY

    if DIVIDEND_FILE_KEY in panel._cache:  # a dividend file's records: the extra day holds none
        div, covered, notes = panel._cache[DIVIDEND_FILE_KEY]
        ext._cache[DIVIDEND_FILE_KEY] = (np.vstack([div, np.zeros((1, panel.n_stocks))]), covered, notes)
    series = panel._cache.get(_KEY)
    if series is not None:
        ext._cache[_KEY] = IndexSeries(series.code, np.append(series.close, np.nan),
                                       extended(series.members))
    return ext
