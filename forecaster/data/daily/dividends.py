"""A file of corporate actions a user holds: each ex-date's cash dividend and share issue.

Read are baostock's ``query_dividend_data`` export (``code``, ``dividOperateDate`` the ex-date,
``dividCashPsBeforeTax`` cash per share before tax, ``dividStocksPs`` bonus shares and
``dividReserveToStockPs`` conversion shares per share) and tushare's ``dividend`` (``ts_code``,
``ex_date``, ``cash_div_tax``, ``stk_div``), UTF-8 (with or without BOM) or GBK, codes in any
form the loaders read. baostock writes its amounts as text (``"0.2"``, and ``""`` where there is
none); a row without an ex-date (a plan not carried out) is counted and left out.
:func:`read_dividends` checks everything before anything uses it: one :class:`DataError` naming
the file, line and column (a code the data lack, a negative amount, ex-dates of a stock out of
order or twice, a missing column, bytes that are neither UTF-8 nor GBK).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.daily.dates import read_date_column
from forecaster.data.market.exchange import canonical_code
from forecaster.data.sources import MAX_FILE_MB, DataError, decode_text, too_large

OPTION = "--dividend-data"
# (code, ex-date, cash per share, share-issue columns per share) of each exporter
LAYOUTS = {
    "baostock": ("code", "dividOperateDate", "dividCashPsBeforeTax",
                 ("dividStocksPs", "dividReserveToStockPs")),
    "tushare": ("ts_code", "ex_date", "cash_div_tax", ("stk_div",)),
}
COLUMNS = ("code", "ex_date", "cash", "shares", "line")


def read_dividends(path: str | Path, codes) -> tuple[pd.DataFrame, list[str]]:
    """``(table, notes)``: the file's ex-dates as rows :data:`COLUMNS` (``cash`` and ``shares``
    per share, ``line`` the file's line), sorted by code and date, for the stocks ``codes`` of
    the data (a code outside them is an error naming its line).

    Raises:
        DataError: the file cannot be read or holds a row that is not a corporate action of
            the data's stocks (module docstring)."""
    path = Path(path)
    at = f"{OPTION} {path}"
    if not path.is_file():
        raise DataError(f"{at}: no such file")
    reason = too_large(path, MAX_FILE_MB)
    if reason:
        raise DataError(f"{at}: {reason}")
    text = decode_text(path.read_bytes(), at)
    try:
        table = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"{at}: not a readable CSV ({why})") from None
    table.columns = [str(c).strip() for c in table.columns]
    layout = next((name for name, (code, day, cash, _) in LAYOUTS.items()
                   if {code, day, cash} <= set(table.columns)), None)
    if layout is None:
        wanted = "; ".join(f"{name}: {c}, {d}, {cash}" for name, (c, d, cash, _) in LAYOUTS.items())
        raise DataError(f"{at}: expected the columns of a dividend export ({wanted}); found "
                        f"{', '.join(table.columns[:12]) or 'none'}")
    code_col, day_col, cash_col, share_cols = LAYOUTS[layout]
    if table.empty:
        raise DataError(f"{at}: holds no row")
    line = np.arange(len(table)) + 2
    blank = table[day_col].str.strip() == ""
    notes = []
    if blank.any():
        notes.append(f"{int(blank.sum())} row(s) of {path.name} without an ex-date (a plan not carried out) "
                     "left out")
    table, line = table[~blank.to_numpy()], line[~blank.to_numpy()]
    lines = pd.Series(line, index=table.index)
    dates, _ = read_date_column(table[day_col], lambda i: f"{at}: line {lines.iloc[i]}", day_col, option=None)
    known = {str(c) for c in codes}
    code = table[code_col].str.strip().map(lambda c: canonical_code(c) if c else "")
    unknown = ~code.isin(known).to_numpy()
    if unknown.any():
        i = int(np.flatnonzero(unknown)[0])
        raise DataError(f"{at}: line {line[i]}, column {code_col}: {table[code_col].iloc[i]!r} is no stock "
                        f"of the data ({int(unknown.sum())} such row(s)); expected the data's stocks only")

    def amount(column: str) -> np.ndarray:
        text = table[column].str.strip()
        values = pd.to_numeric(text.where(text != "", "0"), errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataError(f"{at}: line {line[i]}, column {column}: {table[column].iloc[i]!r} is not an "
                            "amount per share >= 0")
        return values

    cash = amount(cash_col)
    shares = sum((amount(c) for c in share_cols if c in table.columns), np.zeros(len(table)))
    out = pd.DataFrame({"code": code.to_numpy(), "ex_date": pd.DatetimeIndex(dates).to_numpy(), "cash": cash,
                        "shares": shares, "line": line})
    for c, rows in out.groupby("code", sort=False):
        days = pd.DatetimeIndex(rows["ex_date"])
        if not days.is_monotonic_increasing or days.has_duplicates:
            k = int(np.flatnonzero(np.r_[False, np.diff(days.asi8) <= 0])[0])
            raise DataError(f"{at}: line {rows['line'].iloc[k]}, column {day_col}: {c}'s ex-date "
                            f"{days[k].date()} does not come after line {rows['line'].iloc[k - 1]}'s "
                            f"{days[k - 1].date()}; expected each stock's ex-dates in order, once each")
    return out.sort_values(["code", "ex_date"]).reset_index(drop=True), notes
