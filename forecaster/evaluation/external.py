"""Predictions made elsewhere (Qlib's ``pred.pkl``, a CSV ``date,code,score``) read and laid
onto a run's stock-days, so :func:`~forecaster.evaluation.scoring.score_run` scores them as
one of its own models (``forecaster score``).

Dates. A forecast row of this toolkit dated ``t`` is the forecast of day ``t``'s return, known
after day ``t-1``'s close (:mod:`forecaster.portfolio.backtest`). Qlib dates a score by the day
it was computed: the row dated ``T`` uses data up to ``T``'s close and is traded at ``T+1``
(its label ``Ref($close, -2) / Ref($close, -1) - 1`` at ``T``). So a ``"signal"`` date
(Qlib's) is moved to the next trading day of the data; a ``"target"`` date (this toolkit's
own) is taken as it is.

Codes are read through :func:`~forecaster.data.qlib.conventions.from_qlib_code` (``SH600000``,
``600000.SH`` and ``sh.600000`` are one stock). Nothing is dropped unsaid: every row of the
file is matched to a stock-day of the run or counted under one reason (:class:`Alignment`),
and every stock-day of the run without a score is counted too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.checks import ConfigError
from forecaster.data.daily.dates import read_date_column
from forecaster.data.qlib.conventions import from_qlib_code
from forecaster.data.sources import DataError
from forecaster.evaluation.pickle_sandbox import load_plain_pickle
from forecaster.evaluation.safe_pickle import RefusedPickle, UnsafePickle

DATE_CONVENTIONS = ("signal", "target")
SHOWN = 10  # examples named per kind of misalignment
_DATE_NAMES, _CODE_NAMES = ("date", "datetime"), ("code", "instrument")
DATES_MEANING = {
    "signal": "dates read as signal days (Qlib's convention: the row dated T is the score known after "
    "T's close, traded at T+1), so each is scored as the forecast of the data's next trading day",
    "target": "dates read as the day forecast (this toolkit's convention: the row dated t is known after "
    "t-1's close), so each is scored on its own date",
}


class ExternalScores:
    """A model of the run that was fitted elsewhere: its scores are read, not made. A score's
    scale is unknown, so it gets rank statistics and a backtest but no error metrics (as a
    factor score)."""

    is_return_forecast = False
    reference = None
    from_file = True  # a stock it has no row for has no score in the file


def read_external(path: str | Path, date_format: str | None = None) -> pd.DataFrame:
    """A prediction file as ``date, code, score`` (one row per stock-day; codes canonical).

    Qlib's ``pred.pkl`` (a DataFrame or Series indexed by ``(datetime, instrument)``, column
    ``score`` or a single column; read by
    :func:`~forecaster.evaluation.pickle_sandbox.load_plain_pickle`, in a memory- and
    CPU-limited child process that rebuilds frames of plain columns only and never runs the
    file's code), a Parquet file or a CSV
    (``.csv``, ``.csv.gz``) with columns ``date`` (or ``datetime``), ``code`` (or
    ``instrument``) and ``score``.

    Raises:
        DataError: the file cannot be read, is a pickle that asks for anything but a frame
            (or declares sizes, dtypes or cells a table of predictions never has, or crashes
            or exhausts its reader),
            lacks a column, holds a date or score that is not one, holds no row, or scores a
            stock-day twice (one line naming it).
    """
    path = Path(path)
    suffixes = "".join(path.suffixes[-2:]).lower()
    try:
        if path.suffix.lower() in (".pkl", ".pickle"):
            table, line0 = _flat(load_plain_pickle(path), path), None
        elif path.suffix.lower() == ".parquet":
            table, line0 = _flat(pd.read_parquet(path), path), None
        else:
            table, line0 = pd.read_csv(path, dtype=str, keep_default_na=False), 2
    except DataError:
        raise
    except UnsafePickle as exc:
        raise DataError(
            f"{path}: refused: a pickle can run code, and this one asks for {exc.name}, which a "
            "table of predictions never needs; convert it to Parquet or CSV (date,code,score) "
            "where it was made, e.g. frame.reset_index().to_parquet('pred.parquet')"
        ) from None
    except RefusedPickle as exc:
        raise DataError(f"{path}: refused: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any reader's failure is the file's fault, said in one line
        what = "pickle" if path.suffix.lower() in (".pkl", ".pickle") else suffixes or "CSV"
        raise DataError(
            f"{path}: cannot be read as a {what.lstrip('.')} prediction file "
            f"({(str(exc).splitlines() or [type(exc).__name__])[0]})"
        ) from None
    table.columns = [str(c).strip().lower() for c in table.columns]
    date_col = next((c for c in _DATE_NAMES if c in table.columns), None)
    code_col = next((c for c in _CODE_NAMES if c in table.columns), None)
    if date_col is None or code_col is None or "score" not in table.columns:
        raise DataError(
            f"{path}: expected columns date (or datetime), code (or instrument) and score; "
            f"found {', '.join(table.columns) or 'none'}"
        )
    if not len(table):
        raise DataError(f"{path}: holds no prediction")
    where = (lambda i: f"line {i + line0}") if line0 else (lambda i: f"row {i + 1}")
    dates, notes = read_date_column(table[date_col], lambda i: f"{path}: {where(i)}", date_col, date_format)
    dates = pd.Series(pd.DatetimeIndex(dates), index=table.index)
    if (dates != dates.dt.normalize()).any():
        i = int(np.flatnonzero((dates != dates.dt.normalize()).to_numpy())[0])
        raise DataError(
            f"{path}: {where(i)}, column {date_col}: {table[date_col].iloc[i]!r} has a time of "
            "day; expected daily predictions (one date a row)"
        )
    raw = table["score"]
    blank = raw.isna().to_numpy() | raw.astype(str).str.strip().str.lower().isin(["", "nan", "na", "none"])
    scores = pd.to_numeric(raw.where(~blank), errors="coerce")
    bad = np.flatnonzero((scores.isna() & ~blank).to_numpy())
    if len(bad):
        raise DataError(
            f"{path}: {where(bad[0])}, column score: {raw.iloc[bad[0]]!r} is not a number "
            f"({len(bad)} such row(s))"
        )
    names = table[code_col].astype(str)
    canon = {name: from_qlib_code(name) for name in names.unique()}
    out = pd.DataFrame(
        {"date": dates.to_numpy(), "code": names.map(canon).to_numpy(), "score": scores.to_numpy(dtype=float)}
    )
    twice = out.duplicated(["date", "code"], keep=False).to_numpy()
    if twice.any():
        first = int(np.flatnonzero(twice)[0])
        raise DataError(
            f"{path}: {int(twice.sum())} rows score a stock-day more than once, e.g. "
            f"{out['code'].iloc[first]} on {out['date'].iloc[first].date()} ({where(first)}); "
            "expected one score per code and date"
        )
    out.attrs["notes"] = [f"{path}: {note}" for note in notes]
    return out


def _flat(obj, path: Path) -> pd.DataFrame:
    """A pickled or Parquet frame (Qlib's: indexed by ``(datetime, instrument)``) as columns."""
    if isinstance(obj, pd.Series):
        obj = obj.to_frame("score")
    if not isinstance(obj, pd.DataFrame):
        raise DataError(
            f"{path}: holds a {type(obj).__name__}; expected a DataFrame indexed by "
            "(datetime, instrument) with a score column (Qlib's pred.pkl)"
        )
    frame = obj.copy()
    if "score" not in frame.columns and len(frame.columns) == 1 and isinstance(frame.index, pd.MultiIndex):
        frame.columns = ["score"]  # Qlib's models name their one column variously
    if isinstance(frame.index, pd.MultiIndex) or frame.index.name is not None:
        frame = frame.reset_index()
    return frame


@dataclass
class Alignment:
    """A prediction file laid onto a run's stock-days.

    ``rows``: the matched predictions (index ``date``, the day forecast; columns ``code``,
    ``forecast``). ``counts``: rows of the file not scored, by reason, and ``missing``, the
    run's stock-days with no score; ``examples``: up to :data:`SHOWN` of each, named."""

    rows: pd.DataFrame
    n_file: int
    n_run: int
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    distinct: dict[str, int] = field(default_factory=dict)  # distinct codes or dates named, by reason

    REASONS = {
        "unknown_code": "prediction row(s) of codes not in the data",
        "off_calendar": "prediction row(s) dated on a day that is no trading day of the data",
        "no_next_day": "prediction row(s) dated on the data's last day (a signal with no next day to trade)",
        "outside_days": "prediction row(s) on days outside the run's forecast days",
        "outside_universe": "prediction row(s) of stock-days the run does not score (not in its universe "
        "that day, or no bar)",
        "no_score": "prediction row(s) with no score (empty or NaN)",
        "missing": "stock-day(s) with no score in the file",
    }

    def lines(self) -> list[str]:
        """One line per kind of misalignment that occurred, with its count and examples."""
        out = []
        for key, text in self.REASONS.items():
            n = self.counts.get(key, 0)
            if n:
                shown, total = self.examples[key], self.distinct.get(key, n)
                more = f" and {total - len(shown)} more" if total > len(shown) else ""
                shown = ", ".join(shown)
                out.append(
                    f"{n} {text}, not scored: {shown}{more}"
                    if key != "missing"
                    else f"{n} of the run's {self.n_run} {text}: {shown}{more}"
                )
        return out

    def summary(self) -> str:
        return (
            f"{len(self.rows)} of the file's {self.n_file} predictions matched to the run's "
            f"{self.n_run} stock-days"
        )


def forecast_dates(
    dates: pd.Series, calendar: pd.DatetimeIndex, convention: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each file date as the day it forecasts (positions in ``calendar``; -1 where there is
    none) under ``convention`` (:data:`DATE_CONVENTIONS`), and which rows fell on the data's
    last day as a signal (no next day to trade)."""
    if convention not in DATE_CONVENTIONS:
        raise ConfigError(f"dates convention must be one of {DATE_CONVENTIONS}, got {convention!r}")
    pos = calendar.get_indexer(pd.DatetimeIndex(dates))
    if convention == "target":
        return pos, np.zeros(len(pos), dtype=bool)
    last = pos == len(calendar) - 1
    return np.where((pos >= 0) & ~last, pos + 1, -1), last


def align(
    scores: pd.DataFrame, calendar: pd.DatetimeIndex, codes, run_rows: pd.MultiIndex, convention: str
) -> Alignment:
    """``scores`` (:func:`read_external`) laid onto ``run_rows``, the run's stock-days (a
    ``(date, code)`` index: the days it forecast, the stocks it scored each day), on the data's
    ``calendar`` and ``codes``. Each row of the file is matched or counted under one reason."""
    day, last = forecast_dates(scores["date"], calendar, convention)
    known = pd.Index(codes).get_indexer(scores["code"]) >= 0
    when = np.full(len(scores), np.datetime64("NaT"), dtype="datetime64[ns]")
    when[day >= 0] = calendar.to_numpy()[day[day >= 0]]
    target = pd.MultiIndex.from_arrays([pd.DatetimeIndex(when), scores["code"].to_numpy()])
    run_days = run_rows.get_level_values(0).unique()
    on_day = pd.DatetimeIndex(when).isin(run_days)
    in_run = target.isin(run_rows)
    finite = np.isfinite(scores["score"].to_numpy(dtype=float))
    reason = np.select(
        [~known, last, day < 0, ~on_day, ~in_run, ~finite],
        ["unknown_code", "no_next_day", "off_calendar", "outside_days", "outside_universe", "no_score"],
        default="",
    )
    matched = reason == ""
    rows = pd.DataFrame(
        {
            "code": scores["code"].to_numpy()[matched],
            "forecast": scores["score"].to_numpy(dtype=float)[matched],
        },
        index=pd.DatetimeIndex(when[matched], name="date"),
    )
    counts, examples, distinct = {}, {}, {}
    for key in Alignment.REASONS:
        if key == "missing":
            continue
        hit = np.flatnonzero(reason == key)
        if len(hit):
            counts[key] = len(hit)
            part = scores.iloc[hit]
            if key == "unknown_code":
                names = list(dict.fromkeys(part["code"]))
                examples[key], distinct[key] = names[:SHOWN], len(names)
            elif key in ("off_calendar", "no_next_day", "outside_days"):
                names = [str(d.date()) for d in dict.fromkeys(part["date"])]
                examples[key], distinct[key] = names[:SHOWN], len(names)
            else:
                examples[key] = [
                    f"{c} {d.date()}" for d, c in zip(part["date"][:SHOWN], part["code"][:SHOWN], strict=True)
                ]
    covered = pd.MultiIndex.from_arrays([rows.index, rows["code"].to_numpy()])
    missing = run_rows[~run_rows.isin(covered)]
    if len(missing):
        counts["missing"] = len(missing)
        examples["missing"] = [f"{c} {pd.Timestamp(d).date()}" for d, c in missing[:SHOWN]]
    return Alignment(rows, len(scores), len(run_rows), counts, examples, distinct)
