"""Minute bars as users hold them, made into bars whose returns can be trusted: every change
counted and said in the load summary (:func:`bar_clauses`), bad input one error naming the
file, line and column.

* **Stamps.** Bars are stamped at their close. A file with bars at 09:30 and none at 11:30 or
  15:00 stamps them at their start: each is re-stamped by one bar length (09:30 -> 09:35,
  13:00 -> 13:05). An opening-auction bar (stamped 09:15-09:29, or 09:30 in a file of bars
  stamped at their close, as 1-minute exports write it) is merged into the day's first bar.
* **Frequency.** The bar length is the most common step between a day's bars (the lunch break
  is not trading time) and is stated (``5-minute bars``). A bar off that length's grid, or a day
  of another length, is a :class:`DataError` naming its line: one bar length per file. Bars
  missing within a day are counted, never filled.
* **Suspensions.** Bars of all-zero prices (baostock writes a suspended stock's bars so) take
  the previous close as their prices, with no volume; they and bars without volume at the
  previous close are suspended bars, counted and never targets.
* **Volume units.** ``amount / (volume x close)`` is about 1 for shares and 100 for lots of 100
  shares: lots are converted to shares and said so; a ratio that fits neither is a warning
  naming the file (volume kept in the exporter's documented unit); without an amount the
  exporter's documented unit is taken, and said so.
* **Overnight gaps**: :mod:`forecaster.data.minute.returns`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.daily.formats import CsvFormat
from forecaster.data.minute.returns import flag_gaps, gap_days, pair_daily
from forecaster.data.minute.session import SESSION_MINUTES, SESSION_RULE, add_session_columns, session_minutes
from forecaster.data.sources import code_in_name

AUCTION_START = 9 * 60 + 15  # the opening call auction's first minute (09:15)
SESSION_START = 9 * 60 + 30
# amount / (volume x close): within this factor of 1 (shares) or 100 (lots).
UNIT_FACTOR = 1.3
PRICES = ("open", "high", "low", "close")


class BarError(ValueError):
    """A minute file that cannot be bars of one length (the loader raises it as a DataError)."""


@dataclass
class BarFacts:
    """What :func:`normalise` found and changed (copied into the load report)."""

    bar_minutes: int = 0
    stamped: str = "close"
    auction_bars: int = 0
    missing_bars: int = 0
    short_days: int = 0
    zero_price_bars: int = 0
    suspended_bars: int = 0
    volume_unit: str = ""
    volume_ratio: float = 0.0  # amount / (volume x close); 0: not measured
    gap_check: str = ""


def clock_minutes(stamps: pd.DatetimeIndex) -> np.ndarray:
    """Minutes since midnight of each stamp."""
    return np.asarray(stamps.hour * 60 + stamps.minute + stamps.second / 60.0, dtype=float)


def auction_stamps(stamps: pd.DatetimeIndex) -> np.ndarray:
    """Stamps within the opening call auction before 09:30 (09:15-09:29)."""
    clock = clock_minutes(stamps)
    return (clock >= AUCTION_START) & (clock < SESSION_START)


def _to_clock(days: np.ndarray, session: np.ndarray) -> pd.DatetimeIndex:
    """Stamps of session minutes (``0..240``) on ``days``: 09:30 + m in the morning, 13:00 +
    (m - 120) in the afternoon."""
    clock = np.where(session <= 120, SESSION_START + session, 13 * 60 + session - 120)
    seconds = np.round(clock * 60).astype("int64")
    return pd.DatetimeIndex(days + (seconds * 1_000_000_000).astype("timedelta64[ns]"), name="time")


def _length(session: np.ndarray, day: np.ndarray) -> int:
    steps = np.diff(session)[day[1:] == day[:-1]]
    steps = steps[steps > 0]
    if not len(steps):
        raise BarError("no day holds two bars, so the bar length cannot be told; expected minute bars "
                       "(several a day)")
    values, counts = np.unique(np.round(steps, 6), return_counts=True)
    return int(round(values[counts.argmax()]))


def _merge_auctions(frame: pd.DataFrame, lines: np.ndarray, auction: np.ndarray
                    ) -> tuple[pd.DataFrame, np.ndarray, int]:
    """Each auction bar merged into the next bar of its day (open from the auction, high and
    low over both, volume and amount summed)."""
    n = len(frame)
    day = frame.index.normalize().to_numpy()
    target = pd.Series(np.where(auction, np.nan, np.arange(n))).bfill().to_numpy()
    ok = auction & np.isfinite(target)
    ok[ok] = day[ok] == day[target[ok].astype(int)]
    if not ok.any():
        return frame, lines, 0
    out = frame.copy()
    rows = np.flatnonzero(ok)
    into = target[rows].astype(int)  # the bar each auction bar goes into
    heads = np.unique(into)
    members, keys = np.r_[rows, heads], np.r_[into, heads]
    order = np.argsort(members, kind="stable")  # in time order: the first open is the auction's
    grouped = out.iloc[members[order]].assign(_g=keys[order]).groupby("_g")
    at = out.columns.get_loc
    out.iloc[heads, at("open")] = grouped["open"].first().loc[heads].to_numpy()
    out.iloc[heads, at("high")] = grouped["high"].max().loc[heads].to_numpy()
    out.iloc[heads, at("low")] = grouped["low"].min().loc[heads].to_numpy()
    for column in ("volume", "amount"):
        if column in out.columns:
            out.iloc[heads, at(column)] = grouped[column].sum().loc[heads].to_numpy()
    keep = ~ok
    return out.iloc[keep], lines[keep], int(ok.sum())


def _check_grid(session: np.ndarray, day: np.ndarray, length: int, stamps, lines, column: str) -> None:
    """A bar off the grid of ``length``-minute bars (a shorter length), or a day of three or
    more bars none of which is ``length`` after the one before (a longer length): BarError."""
    same = np.r_[False, day[1:] == day[:-1]]
    step = np.round(np.r_[np.nan, np.diff(session)], 6)
    off = np.abs(session / length - np.round(session / length)) > 1e-6
    steps = pd.DataFrame({"day": day, "step": np.where(same, step, np.nan)})
    by_day = steps.dropna().groupby("day")["step"]
    longer = (by_day.count() >= 2) & (by_day.min() > length)
    bad = off | (same & pd.Series(day).map(longer).fillna(False).to_numpy(bool))
    if not bad.any():
        return
    i = int(bad.argmax())
    good = np.flatnonzero(same & ~off & (step == length))
    after = f"{step[i]:g} minutes after the previous bar" if same[i] else "the day's first bar"
    raise BarError(
        f"line {int(lines[i])}, column {column!r}: a bar closing at {pd.Timestamp(stamps[i])} ({after}) "
        f"where the file's bars are {length}-minute bars"
        + (f" (e.g. line {int(lines[good[0]])})" if len(good) else "")
        + f"; expected one bar length per file, each bar closing on the {length}-minute grid of the session "
        "(the bar length changes here)")


def _fill_zero_prices(frame: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    prices = frame[list(PRICES)].to_numpy(float)
    zero = (prices == 0).all(axis=1)
    if not zero.any():
        return frame, zero
    if zero.all():
        raise BarError("every bar has all-zero prices (suspended throughout); expected traded bars")
    close = frame["close"].where(~zero).ffill()
    fill = close.fillna(frame["open"].where(~zero).bfill()).to_numpy(float)
    out = frame.copy()
    for column in PRICES:
        out[column] = np.where(zero, fill, out[column].to_numpy(float))
    return out, zero


def _volume_unit(frame: pd.DataFrame, default_scale: float, facts: BarFacts, source: str,
                 warnings: list[str]) -> pd.DataFrame:
    if "volume" not in frame.columns:
        facts.volume_unit = "no volume column"
        return frame
    unit = "lots of 100 shares" if default_scale == 100 else "shares"
    scale = default_scale
    if "amount" in frame.columns:
        v, a, c = (frame[k].to_numpy(float) for k in ("volume", "amount", "close"))
        traded = (v > 0) & (a > 0) & (c > 0)
        if traded.any():
            ratio = float(np.median(a[traded] / (v[traded] * c[traded])))
            facts.volume_ratio = ratio
            if 1 / UNIT_FACTOR < ratio < UNIT_FACTOR:
                scale, facts.volume_unit = 1.0, "shares"
            elif 100 / UNIT_FACTOR < ratio < 100 * UNIT_FACTOR:
                scale, facts.volume_unit = 100.0, "lots of 100 shares, converted to shares"
            else:
                facts.volume_unit = f"unknown (taken as {unit}, as {source} writes it)"
                warnings.append(f"volume unit unknown: amount / (volume x close) is {ratio:.3g}, expected "
                                f"about 1 (shares) or 100 (lots of 100 shares); volume taken as {unit} as "
                                f"{source} writes it (check the file's columns)")
        else:
            facts.volume_unit = f"{unit} (not checked: no traded bar with an amount)"
    else:
        facts.volume_unit = f"{unit} (not checked: no amount column; as {source} writes it)"
    if scale != 1.0:
        frame = frame.assign(volume=frame["volume"] * scale)
    return frame


def normalise(frame: pd.DataFrame, lines: np.ndarray, code: str, column: str, volume_scale: float,
              source: str, warnings: list[str]) -> tuple[pd.DataFrame, np.ndarray, BarFacts]:
    """The steps of the module docstring on one file's sorted, parsed bars (index: stamps;
    ``lines``: each row's line in the file): ``(bar frame with session columns, lines,
    facts)``. ``column``: the time column as the file names it (for errors); ``volume_scale``:
    the exporter's documented unit (100: lots); ``source``: the format's name; ``warnings``
    gets the volume-unit warning.

    Raises:
        BarError: the bars cannot be of one length (message: line, column, what was expected).
    """
    facts = BarFacts()
    stamps = pd.DatetimeIndex(frame.index)
    early = auction_stamps(stamps)
    session = np.where(early, -1.0, session_minutes(stamps))
    day = stamps.normalize().to_numpy()
    regular = ~early
    length = _length(session[regular], day[regular])
    clock = clock_minutes(stamps)
    # stamped at their start: a bar at 09:30, none at 11:30 or 15:00 (a bar closing at 13:00 has no length)
    if (clock == SESSION_START).any() and not np.isin(clock, (11 * 60 + 30, 15 * 60)).any():
        facts.stamped = "start"  # bars stamped at their start: each closes one bar later
        session = np.where(regular, session + length, session)
        frame = frame.set_axis(_to_clock(day, np.where(regular, session, 0)).where(regular, stamps))
    auction = early | (session == 0)
    frame, lines, facts.auction_bars = _merge_auctions(frame, lines, auction)
    stamps = pd.DatetimeIndex(frame.index)
    session, day = session_minutes(stamps), stamps.normalize().to_numpy()
    _check_grid(session, day, length, stamps, lines, column)
    facts.bar_minutes = length
    per_day = pd.Series(day).value_counts()
    expected = SESSION_MINUTES // length
    facts.missing_bars = int((expected - per_day[per_day < expected]).sum())
    facts.short_days = int((per_day < expected).sum())
    frame, zero = _fill_zero_prices(frame)
    facts.zero_price_bars = int(zero.sum())
    frame = _volume_unit(frame, volume_scale, facts, source, warnings)
    frame = add_session_columns(frame, suspended=zero)
    facts.suspended_bars = int(frame["suspended"].sum())
    frame, facts.gap_check = flag_gaps(frame, code)
    return frame, lines, facts


def bar_frame(frame: pd.DataFrame, lines: np.ndarray, fmt: CsvFormat, report, code: str
              ) -> tuple[pd.DataFrame, np.ndarray]:
    """:func:`normalise` for the loader: ``(bar frame, lines)``, the facts copied into
    ``report`` (a :class:`~forecaster.data.daily.report.LoadReport`; its warnings name the file)."""
    frame, lines, facts = normalise(frame, lines, code, fmt.time_column or fmt.date_column,
                                    fmt.scale.get("volume", 1.0), fmt.name, report.warnings)
    for name, value in vars(facts).items():
        setattr(report, name, value)
    report.warnings[:] = [w if w.startswith(report.path) else f"{report.path}: {w}" for w in report.warnings]
    suspended_day = frame.groupby("day")["suspended"].all()
    report.suspended_days = int(suspended_day.sum())
    report.trading_days = int(len(suspended_day))
    report.gaps = gap_days(frame)
    return frame, lines


def pair_beside(frame: pd.DataFrame, report, path: Path, files: list[Path], load, errors: tuple
                ) -> pd.DataFrame:
    """A minute file's bars with the first bars' returns from the daily ``preclose`` of a daily
    file of the same stock among ``files`` (the folder's; named for the stock:
    ``SZ#000665#1day.csv`` beside ``SZ#000665#5min.csv``), where one fits
    (:func:`~forecaster.data.minute.returns.pair_daily`); ``report`` says which file was used, or
    why one found was not. ``load(path) -> (frame, report)`` reads a file, raising ``errors``."""
    code = str(frame["code"].iloc[0])
    notes = []
    for other in files:
        named = code_in_name(other.name)
        same = named is not None and (named == code or (named.isdigit() and code.endswith(named)))
        if other == path or not same:
            continue
        try:
            daily, daily_report = load(other)
        except errors as exc:
            notes.append(f"{other.name} could not be read ({str(exc).split(': ', 1)[-1][:120]})")
            continue
        if daily_report.bar_minutes:
            continue
        paired, used = pair_daily(frame, daily)
        if used["days"]:
            report.daily_file, report.preclose_days = str(other), used["days"]
            report.exrights_days, report.gaps = used["corrected"], gap_days(paired)
            return paired
        notes.append(f"{other.name} beside it: {used['note']}")
    report.daily_note = "; ".join(notes)
    return frame


def bar_clauses(report) -> list[str]:
    """The load summary's clauses on a minute file (a :class:`~forecaster.data.daily.report.LoadReport`
    with ``bar_minutes``): frequency, stamps and session, suspensions, volume unit, overnight
    gaps and where the first bars' returns come from."""
    m = report.bar_minutes
    stamped = ("stamped at their close" if report.stamped != "start"
               else "stamped at their start in the file, re-stamped to their close")
    parts = [f"{m}-minute bars ({SESSION_MINUTES // m} a day, {stamped}) over {report.trading_days} trading "
             f"days; session: {SESSION_RULE}"]
    if report.auction_bars:
        parts.append(f"{report.auction_bars} opening-auction bar(s) merged into the day's first bar")
    if report.missing_bars:
        parts.append(f"{report.missing_bars} bar(s) missing on {report.short_days} day(s) (not filled)")
    zero = report.zero_price_bars
    zero = f"{zero} of all-zero prices given the previous close; " if zero else ""
    parts.append(f"{report.suspended_bars} suspended bar(s) ({report.suspended_days} whole day(s); {zero}"
                 "never targets)")
    ratio = ("" if not report.volume_ratio > 0
             else f" (amount / (volume x close) = {report.volume_ratio:.2f})")
    parts.append(f"volume in {report.volume_unit}{ratio}")
    if report.daily_file:
        parts.append(f"first bars' returns from the daily preclose of {Path(report.daily_file).name} on "
                     f"{report.preclose_days} day(s) ({report.exrights_days} ex-rights day(s) corrected)")
    else:
        parts.append("first bars' returns from the previous bar's close (no daily preclose"
                     + (f": {report.daily_note}" if report.daily_note else " beside the file") + ")")
    if report.gap_check:
        parts.append(f"overnight gaps {report.gap_check}")
    else:
        shown = ", ".join(report.gaps[:5]) + (" ..." if len(report.gaps) > 5 else "")
        parts.append(f"{len(report.gaps)} overnight gap(s) beyond the board's price limit flagged as "
                     "likely corporate actions, excluded from training targets and scoring (their bar's "
                     f"return taken from its open){': ' + shown if shown else ''}; gaps within the limit "
                     "(most cash dividends) cannot be told from moves; minute files carry no ST flag, so the "
                     "non-ST limit is used")
    return parts


def folder_bar_clauses(reports: list, max_named: int = 20) -> list[str]:
    """A folder load summary's clauses on its minute files (``reports``: every file's load
    report): bar lengths, suspended bars, volume units other than shares, flagged gaps."""
    bars = [r for r in reports if r.bar_minutes]
    if not bars:
        return []
    name = {id(r): Path(r.path).name for r in bars}

    def named(items: list[str]) -> str:
        return ", ".join(items[:max_named]) + (f" and {len(items) - max_named} more" if len(items) > max_named
                                               else "")

    lengths = sorted({r.bar_minutes for r in bars})
    suspended = sum(r.suspended_bars for r in bars)
    parts = [f"minute bars of {' and '.join(map(str, lengths))} minutes, {suspended} suspended bar(s)"]
    lots = [name[id(r)] for r in bars if r.volume_unit.startswith("lots")]
    if lots:
        parts.append(f"volume in lots converted to shares in {len(lots)} file(s): {named(lots)}")
    unknown = [name[id(r)] for r in bars if r.volume_unit.startswith("unknown")]
    if unknown:
        parts.append(f"volume unit unknown in {len(unknown)} file(s): {named(unknown)}")
    gaps = [f"{name[id(r)]} ({', '.join(r.gaps[:3])})" for r in bars if r.gaps]
    if gaps:
        parts.append(f"{sum(len(r.gaps) for r in bars)} overnight gap(s) beyond the price limit flagged as "
                     f"likely corporate actions in {len(gaps)} file(s): {named(gaps)}")
    return parts
