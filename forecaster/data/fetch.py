"""Download daily bars with baostock (optional dependency, needs the internet)."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from seq2seq.core import atomic_write

log = logging.getLogger(__name__)

BAOSTOCK_FIELDS = (
    "date,code,open,high,low,close,preclose,volume,amount,adjustflag,turn,tradestatus,pctChg,"
    "peTTM,pbMRQ,psTTM,pcfNcfTTM,isST"
)


class FetchError(RuntimeError):
    """baostock is missing, offline, or refused the query."""


def fetch_baostock(code: str, start: str, end: str, out: str | Path, adjustflag: str = "3") -> Path:
    """Query ``query_history_k_data_plus`` for daily bars and write them as a baostock CSV.

    Args:
        code: e.g. ``sh.600000``.
        start, end: ``YYYY-MM-DD``.
        adjustflag: ``"3"`` unadjusted (default; returns come from ``preclose``), ``"2"``
            forward-adjusted, ``"1"`` backward-adjusted.
    """
    try:
        import baostock as bs
    except ImportError as exc:
        raise FetchError("baostock is not installed: pip install baostock (and be online)") from exc
    login = bs.login()
    if getattr(login, "error_code", "1") != "0":
        raise FetchError(f"baostock login failed ({getattr(login, 'error_msg', 'no answer')}); "
                         "are you online?")
    try:
        rs = bs.query_history_k_data_plus(code, BAOSTOCK_FIELDS, start_date=start, end_date=end,
                                          frequency="d", adjustflag=adjustflag)
        if rs.error_code != "0":
            raise FetchError(f"baostock query for {code} failed: {rs.error_msg}")
        rows = []
        while rs.next():
            rows.append(rs.get_row_data())
    finally:
        bs.logout()
    if not rows:
        raise FetchError(f"baostock returned no rows for {code} between {start} and {end}")
    out = Path(out)
    with atomic_write(out, "w") as f:  # a failed write keeps any earlier file whole
        pd.DataFrame(rows, columns=rs.fields).to_csv(f, index=False)
    log.info("wrote %d rows of %s to %s", len(rows), code, out)
    return out
