"""Canonical frames written as a Qlib data folder (:func:`write_qlib`), and a report's
predictions as the frame Qlib's records read (:func:`qlib_predictions`). The folder's layout
is described in :mod:`forecaster.data.qlib.reader`, which reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.checks import ConfigError
from forecaster.data.qlib.conventions import PRICE_FIELDS, qlib_code


def write_qlib(frames: Mapping[str, pd.DataFrame], provider_dir: str | Path, market: str = "all") -> Path:
    """Write canonical frames as a Qlib folder (calendar: the union of their days). The factor
    is accumulated from ``preclose`` (``close_{t-1} / preclose_t`` on each ex-date, 1 at the first
    day), prices are written adjusted and volume divided by the factor, as Qlib holds them;
    ``$change`` is ``close / preclose - 1``."""
    folder = Path(provider_dir)
    calendar = pd.DatetimeIndex(sorted(set().union(*(f.index for f in frames.values()))))
    (folder / "calendars").mkdir(parents=True, exist_ok=True)
    (folder / "instruments").mkdir(parents=True, exist_ok=True)
    (folder / "calendars" / "day.txt").write_text("\n".join(d.strftime("%Y-%m-%d") for d in calendar) + "\n")
    lines = []
    for code, frame in sorted(frames.items()):
        name = qlib_code(code)
        close = frame["close"].astype(float)
        pre = frame["preclose"].astype(float) if "preclose" in frame else close.shift(1)
        step = (close.shift(1) / pre).where(lambda r: np.isfinite(r) & (r > 0), 1.0)
        factor = step.cumprod()
        span = calendar[calendar.get_loc(frame.index[0]):calendar.get_loc(frame.index[-1]) + 1]
        table = {f: frame[f].astype(float) * factor for f in PRICE_FIELDS if f in frame}
        if "volume" in frame:
            table["volume"] = frame["volume"].astype(float) / factor
        if "amount" in frame:
            table["amount"] = frame["amount"].astype(float)
        table["factor"] = factor
        table["change"] = close / pre - 1
        fdir = folder / "features" / name.lower()
        fdir.mkdir(parents=True, exist_ok=True)
        first = float(calendar.get_loc(frame.index[0]))
        for field, values in table.items():
            aligned = values.reindex(span).to_numpy(dtype=float)
            np.hstack([[first], aligned]).astype("<f4").tofile(fdir / f"{field}.day.bin")
        lines.append(f"{name}\t{frame.index[0].date()}\t{frame.index[-1].date()}")
    (folder / "instruments" / f"{market}.txt").write_text("\n".join(lines) + "\n")
    return folder


def qlib_predictions(predictions: pd.DataFrame, model: str = "transformer",
                     signal_starts=None) -> pd.DataFrame:
    """A report's predictions (``date``, ``code``, ``model``, ``forecast``) as the frame Qlib's
    ``SignalRecord`` / ``PortAnaRecord`` read: index ``(datetime, instrument)`` (Qlib names such
    as ``SH600000``), one column ``score``, sorted.

    A report dates a forecast by the day it forecasts (known after the previous close); Qlib
    dates a score by the day whose close it is made after and trades it the next day. Given
    ``signal_starts`` (each fold's trading day before its first forecast day), every row is
    dated so: the trading day before its own, from the forecast days and those starts (complete
    when every trading day of a fold is forecast, ``step`` 1). Without them the rows keep the
    report's dates (read back with ``forecaster score --dates target``).
    """
    pred = predictions.reset_index() if "date" not in predictions.columns else predictions
    chosen = pred[pred["model"] == model]
    if chosen.empty:
        raise ConfigError(f"no predictions of model {model!r}; models: {sorted(pred['model'].unique())}")
    dates = pd.DatetimeIndex(chosen["date"])
    if signal_starts is not None:
        calendar = dates.unique().union(pd.DatetimeIndex(signal_starts)).sort_values()
        dates = calendar[calendar.get_indexer(dates) - 1]
    index = pd.MultiIndex.from_arrays([dates, [qlib_code(c) for c in chosen["code"]]],
                                      names=["datetime", "instrument"])
    return pd.DataFrame({"score": chosen["forecast"].to_numpy(dtype=float)}, index=index).sort_index()
