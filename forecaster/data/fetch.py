"""Download daily or minute bars with baostock or akshare (optional extras that need the
internet) into files :func:`forecaster.data.load_csv` reads, one stock or a folder of them.

Both libraries are imported only when asked for. Each response is written as the library
returned it (baostock's fields, akshare's Chinese headers), atomically, so a file in the
folder is always a whole download: a folder fetch that stops (network, Ctrl-C) resumes from
the codes without a file.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Iterable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from forecaster.checks import ConfigError, check_choice
from forecaster.data.market.exchange import canonical_code
from seq2seq.core import atomic_write

log = logging.getLogger(__name__)

SOURCES = ("baostock", "akshare")
FREQUENCIES = ("d", "1", "5", "15", "30", "60")  # daily, or minutes a bar
ADJUSTFLAGS = ("1", "2", "3")  # baostock's: 1 backward-, 2 forward-adjusted, 3 unadjusted
BAOSTOCK_FIELDS = (
    "date,code,open,high,low,close,preclose,volume,amount,adjustflag,turn,tradestatus,pctChg,"
    "peTTM,pbMRQ,psTTM,pcfNcfTTM,isST"
)
BAOSTOCK_MINUTE_FIELDS = "date,time,code,open,high,low,close,volume,amount,adjustflag"
AKSHARE_ADJUST = {"3": "", "2": "qfq", "1": "hfq"}


def adjustment_note(frequency: str, adjustflag: str) -> str:
    """What the prices of a fetch are and what that means for returns (``forecaster fetch``
    prints it)."""
    bars = "daily bars" if frequency == "d" else f"{frequency}-minute bars"
    if adjustflag == "3" and frequency == "d":
        return (f"{bars}, unadjusted (adjustflag 3): the prices traded; returns come from preclose, "
                "the previous close adjusted for ex-rights (baostock writes it; akshare does not, so "
                "an ex-rights day's gap would be read as a return)")
    if adjustflag == "3":
        return (f"{bars}, unadjusted (adjustflag 3): the prices traded. A minute file has no "
                "preclose, so a day when the stock goes ex-rights (a dividend, bonus shares, a split) "
                "opens with a price gap that is not a return: loading flags gaps beyond the price "
                "limit as likely corporate actions and leaves them out of training and scoring, but "
                "smaller ones (most cash dividends) stay. Put the stock's daily file (with preclose: "
                "--frequency d) beside the bars for right first-bar returns, or fetch --adjustflag 2 "
                "for gap-free returns on prices that are not the traded ones")
    kind, anchor = ("forward", "today's") if adjustflag == "2" else ("backward", "the listing's")
    later = " and change when a new corporate action comes" if adjustflag == "2" else ""
    return (f"{bars}, {kind}-adjusted (adjustflag {adjustflag}): prices scaled to {anchor} prices, "
            "so returns across ex-rights days are right, but earlier prices are not the ones traded "
            f"(price limits and lot sizes do not apply to them){later}")


class FetchError(RuntimeError):
    """The library is missing, offline, or refused the query."""


def _library(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise FetchError(f"{name} is not installed: pip install 'ashare-seq2seq-toolkit[{name}]' "
                         f"(or pip install {name}), and be online") from exc


@contextmanager
def baostock_session():
    """Log in to baostock once (for a folder of codes), log out at the end."""
    bs = _library("baostock")
    login = bs.login()
    if getattr(login, "error_code", "1") != "0":
        raise FetchError(f"baostock login failed ({getattr(login, 'error_msg', 'no answer')}); "
                         "are you online?")
    try:
        yield bs
    finally:
        bs.logout()


def _baostock_frame(bs, code: str, start: str, end: str, frequency: str, adjustflag: str) -> pd.DataFrame:
    if frequency == "1":
        raise FetchError("baostock has no 1-minute bars; use --frequency 5/15/30/60 or --source akshare")
    fields = BAOSTOCK_FIELDS if frequency == "d" else BAOSTOCK_MINUTE_FIELDS
    rs = bs.query_history_k_data_plus(code, fields, start_date=start, end_date=end,
                                      frequency=frequency, adjustflag=adjustflag)
    if rs.error_code != "0":
        raise FetchError(f"baostock query for {code} failed: {rs.error_msg}")
    rows = []
    while rs.next():
        rows.append(rs.get_row_data())
    return pd.DataFrame(rows, columns=rs.fields)


def _akshare_frame(ak, code: str, start: str, end: str, frequency: str, adjustflag: str) -> pd.DataFrame:
    symbol = canonical_code(code).rpartition(".")[2]  # akshare takes the bare number
    adjust = AKSHARE_ADJUST[adjustflag]
    if frequency == "d":
        return ak.stock_zh_a_hist(symbol=symbol, period="daily", start_date=start.replace("-", ""),
                                  end_date=end.replace("-", ""), adjust=adjust)
    return ak.stock_zh_a_hist_min_em(symbol=symbol, start_date=f"{start} 09:30:00",
                                     end_date=f"{end} 15:00:00", period=frequency, adjust=adjust)


@contextmanager
def _client(source: str):
    """``(query, library)`` of ``source``: a function ``query(library, code, start, end,
    frequency, adjustflag) -> frame``, logged in for the duration (baostock)."""
    if source == "baostock":
        with baostock_session() as bs:
            yield _baostock_frame, bs
    else:
        yield _akshare_frame, _library("akshare")


def _write(frame: pd.DataFrame, code: str, start: str, end: str, out: Path, source: str) -> Path:
    if frame is None or not len(frame):
        raise FetchError(f"{source} returned no rows for {code} between {start} and {end}")
    with atomic_write(out, "w") as f:  # a failed write keeps any earlier file whole
        frame.to_csv(f, index=False)
    log.info("wrote %d rows of %s to %s", len(frame), code, out)
    return out


def _check(source: str, frequency: str, adjustflag: str, start: str, end: str) -> None:
    check_choice("source", source, SOURCES)
    check_choice("frequency", frequency, FREQUENCIES)
    check_choice("adjustflag", adjustflag, ADJUSTFLAGS)
    if start > end:
        raise ConfigError(f"--start {start} is after --end {end}")


def fetch_bars(code: str, start: str, end: str, out: str | Path, source: str = "baostock",
               frequency: str = "d", adjustflag: str = "3") -> Path:
    """Download one stock's bars and write them as the library's CSV.

    Args:
        code: e.g. ``sh.600000`` (any spelling :func:`canonical_code` reads).
        start, end: ``YYYY-MM-DD``.
        source: ``"baostock"`` or ``"akshare"`` (Eastmoney via ``stock_zh_a_hist`` /
            ``stock_zh_a_hist_min_em``).
        frequency: ``"d"`` daily, or minutes a bar: ``"5"``, ``"15"``, ``"30"``, ``"60"`` (and
            ``"1"`` with akshare, which serves only recent days of those).
        adjustflag: ``"3"`` unadjusted (default), ``"2"`` forward-adjusted, ``"1"``
            backward-adjusted; what each means for returns: :func:`adjustment_note` (daily
            unadjusted bars return from their ``preclose``; minute bars have none).
    """
    _check(source, frequency, adjustflag, start, end)
    code = canonical_code(code)
    with _client(source) as (query, lib):
        frame = query(lib, code, start, end, frequency, adjustflag)
    return _write(frame, code, start, end, Path(out), source)


@dataclass
class FolderFetch:
    """What a folder fetch did: files written, codes skipped because their file was there
    (resume), and codes that failed with the reason."""

    folder: Path
    written: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    repeated: int = 0

    def summary(self) -> str:
        text = (f"{self.folder}: {len(self.written)} file(s) written, {len(self.kept)} already there "
                f"(kept), {len(self.failed)} failed")
        if self.repeated:
            text += f"; {self.repeated} repeated code(s) in the list fetched once"
        if self.failed:
            text += "; " + "; ".join(f"{c}: {why}" for c, why in list(self.failed.items())[:10])
        return text


def fetch_folder(codes: Iterable[str], start: str, end: str, folder: str | Path, source: str = "baostock",
                 frequency: str = "d", adjustflag: str = "3", pause: float = 0.5, resume: bool = True,
                 progress: bool = True) -> FolderFetch:
    """Fetch every code into ``folder/<code>.csv`` (``sz.000001.csv``), ``pause`` seconds
    between requests (the servers are shared; akshare's in particular block fast clients).

    With ``resume`` a code whose file is already there is kept, not fetched again (files are
    written whole or not at all, so a file there is a finished download). A code that fails
    (no rows, a refused query) is recorded and the others go on; a code listed twice (in any
    spelling) is fetched once and counted."""
    _check(source, frequency, adjustflag, start, end)
    if pause < 0:
        raise ConfigError(f"--pause must be >= 0 seconds, got {pause}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    given = [canonical_code(c) for c in codes]
    codes = list(dict.fromkeys(given))
    if not codes:
        raise ConfigError("no codes to fetch")
    result = FolderFetch(folder, repeated=len(given) - len(codes))
    todo = []
    for code in codes:
        (result.kept if resume and (folder / f"{code}.csv").is_file() else todo).append(code)
    with _client(source) if todo else nullcontext((None, None)) as (query, lib):
        for i, code in enumerate(tqdm(todo, desc=f"fetch ({source})", unit="stock", disable=not progress)):
            if i:
                time.sleep(pause)
            try:
                _write(query(lib, code, start, end, frequency, adjustflag), code, start, end,
                       folder / f"{code}.csv", source)
                result.written.append(code)
            except Exception as exc:  # one stock's failure (a network error too) must not stop the rest
                result.failed[code] = f"{type(exc).__name__}: {exc}"
    return result


def read_codes(path: str | Path) -> list[str]:
    """Codes from a text file, one per line (blank lines and ``#`` comments skipped); a CSV
    with a ``code`` column works too."""
    path = Path(path)
    text = path.read_text(encoding="utf-8-sig")
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    lines = [line for line in lines if line]
    if lines and "," in lines[0]:
        header = [h.strip() for h in lines[0].split(",")]
        if "code" not in header:
            raise ConfigError(f"{path}: a CSV of codes needs a 'code' column; got {header}")
        at = header.index("code")
        lines = [line.split(",")[at].strip() for line in lines[1:]]
    if not lines:
        raise ConfigError(f"{path}: no codes in the file")
    return lines
