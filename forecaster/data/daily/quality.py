"""What a loaded file says that cannot be, and what it lacks that the other files have.

The loader keeps every such row as it is and counts it (:class:`Flag`, in the
:class:`~forecaster.data.daily.report.LoadReport` and the folder's load summary); with ``strict``
the first one is an error instead. Checked:

* **impossible bars**: a high below the low, an open or close outside low..high (beyond a
  rounding tolerance of half a tick plus 0.01%);
* **jumps beyond the daily limit**: a close, high or low beyond the board's limit
  (:func:`~forecaster.data.market.exchange.limit_matrix`, which rounds limit prices as the exchange
  does) by more than :data:`JUMP_MARGIN` of the reference price plus a tick. The reference is
  the row's own ``preclose`` (adjusted for ex-rights, so an ex-rights gap is no jump), else the
  previous close (adjusted by ``adj_close`` where the file has it). Not checked: a file's
  first :data:`LISTING_DAYS` rows (a new listing's first days have no limit) and the first
  day of trading after :data:`RELISTING_GAP` or more days without it (a relisting has no
  limit either: sz.000792 on 2021-08-10); days before 1996-12-16, when limits began;
  suspended rows; minute bars;
* **an adjustflag unlike the other files'** (baostock: 1 backward-, 2 forward-adjusted, 3
  unadjusted): each file votes with the flag of most of its rows; a file with rows of
  another flag than the folder's usual one is flagged at the first such row;
* **columns the other files have** (:func:`lacking_columns`): the features that need them
  are missing for that stock (:func:`forecaster.features.factors.missing_inputs`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from forecaster.data.market.exchange import limit_matrix, price_limit
from forecaster.data.sources import FORMATS_BY_NAME

# A bar is impossible when a price lies outside low..high by more than half a tick and 0.01%.
TOLERANCE = 0.005
TOLERANCE_REL = 1e-4
# A jump: beyond the limit price by more than this share of the reference price plus a tick.
JUMP_MARGIN = 0.02
# Rows of a file not checked for jumps (a new listing's first days trade without a limit).
LISTING_DAYS = 5
# The first trading day after this many days (rows) without trading, or a gap of more than
# RELISTING_CALENDAR_DAYS without rows, is not checked for jumps (a relisting has no limit).
RELISTING_GAP = 20
RELISTING_CALENDAR_DAYS = 30
# Canonical columns whose absence from one file (where others have them) changes its stock's
# features: the panel's optional fields.
FEATURE_COLUMNS = ("preclose", "volume", "amount", "turnover", "pe_ttm", "pb_mrq", "ps_ttm")
ADJUST_NAMES = {"1": "backward-adjusted", "2": "forward-adjusted", "3": "unadjusted"}
# kind -> what it means, as the load summary says it.
KINDS = {
    "bar": "impossible bars (high below low, or open or close outside low..high)",
    "jump": "prices beyond the board's daily limit that no preclose explains",
    "adjustflag": "an adjustflag unlike the other files'",
    "level": "a price level on another adjustment than the other files' (forward- or back-adjusted "
             "among unadjusted: the day's traded value / volume lies outside its low..high)",
}
LEVEL_BREAK = 0.2  # share of traded days whose amount / volume lies outside low..high


@dataclass
class Flag:
    """The first row of one kind of implausible data in a file, and how many rows there are.

    Attributes:
        kind: ``"bar"``, ``"jump"`` or ``"adjustflag"`` (:data:`KINDS`).
        line: the first such row's line in the file (1-based, the header is line 1);
            date: its date (the earliest such row).
        column: the column as the file names it; got, expected: what it holds and what it
            should.
        rows: rows of this kind in the file.
    """

    kind: str
    line: int
    date: str
    column: str
    got: str
    expected: str
    rows: int = 1

    def describe(self) -> str:
        return (f"line {self.line} ({self.date}), column {self.column!r}: expected {self.expected}, "
                f"got {self.got}")

    def short(self) -> str:
        """``line 5 (2020-01-08, 2 rows)``."""
        return f"line {self.line} ({self.date}{f', {self.rows} rows' if self.rows > 1 else ''})"

    def as_dict(self) -> dict:
        return asdict(self)


def as_flags(items) -> list[Flag]:
    """Flags from flags or their dicts (as a cache stores them)."""
    return [f if isinstance(f, Flag) else Flag(**f) for f in items or ()]


def _day(stamp) -> str:
    stamp = pd.Timestamp(stamp)
    return str(stamp.date()) if stamp == stamp.normalize() else str(stamp)


def bar_flags(frame: pd.DataFrame, lines: np.ndarray, code: str, source: Callable[[str], str],
              daily: bool = True) -> list[Flag]:
    """Impossible bars and (``daily``) jumps beyond the limit of one file's canonical
    ``frame`` (sorted by date), ``lines`` its rows' lines in the file; ``source`` names a
    canonical column as the file does."""
    flags = []
    bad = _impossible_bars(frame, lines, source)
    if bad is not None:
        flags.append(bad)
    if daily:
        jump = _jumps(frame, lines, code, source)
        if jump is not None:
            flags.append(jump)
    return flags


def _impossible_bars(frame: pd.DataFrame, lines: np.ndarray, source) -> Flag | None:
    o, h, lo, c = (frame[k].to_numpy(dtype=float) for k in ("open", "high", "low", "close"))
    with np.errstate(invalid="ignore"):
        tol = TOLERANCE + TOLERANCE_REL * np.abs(h)
        checks = [("high", h < lo - tol), ("open", (o > h + tol) | (o < lo - tol)),
                  ("close", (c > h + tol) | (c < lo - tol))]
    bad = checks[0][1] | checks[1][1] | checks[2][1]
    if not bad.any():
        return None
    i = int(bad.argmax())
    column = next(name for name, rows in checks if rows[i])
    value = {"high": h, "open": o, "close": c}[column][i]
    expected = (f"a high at or above the low {lo[i]:g}" if column == "high"
                else f"{'an' if column == 'open' else 'a'} {column} within low..high {lo[i]:g}..{h[i]:g}")
    return Flag("bar", int(lines[i]), _day(frame.index[i]), source(column), f"{value:g}", expected,
                int(bad.sum()))


def _jumps(frame: pd.DataFrame, lines: np.ndarray, code: str, source) -> Flag | None:
    n = len(frame)
    close, high, low = (frame[k].to_numpy(dtype=float) for k in ("close", "high", "low"))
    ref = np.r_[np.nan, close[:-1]]
    basis = np.full(n, "the previous close", dtype=object)
    if "adj_close" in frame.columns:  # the previous close in today's units
        adj = frame["adj_close"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            scaled = ref * (np.r_[np.nan, adj[:-1]] / np.r_[np.nan, close[:-1]]) / (adj / close)
        ref = np.where(np.isfinite(scaled), scaled, ref)
    if "preclose" in frame.columns:
        pre = frame["preclose"].to_numpy(dtype=float)
        basis = np.where(np.isfinite(pre), "preclose", basis)
        ref = np.where(np.isfinite(pre), pre, ref)
    st = (frame["is_st"].to_numpy(dtype=float) == 1) if "is_st" in frame.columns else np.zeros(n, bool)
    up, down = (a[:, 0] for a in limit_matrix([code], pd.DatetimeIndex(frame.index), ref[:, None],
                                              st[:, None].astype(float)))
    margin = JUMP_MARGIN * ref + 0.01
    with np.errstate(invalid="ignore"):
        over = np.fmax(close, high) > up + margin
        under = np.fmin(close, low) < down - margin
    checked = np.isfinite(ref)
    checked[:LISTING_DAYS] = False
    trading = ~frame["suspended"].to_numpy(dtype=bool) if "suspended" in frame.columns else np.ones(n, bool)
    checked &= trading
    at = np.flatnonzero(trading)
    if len(at) > 1:
        days = np.diff(pd.DatetimeIndex(frame.index[at]).normalize().to_numpy()) / np.timedelta64(1, "D")
        back = (np.diff(at) > RELISTING_GAP) | (days > RELISTING_CALENDAR_DAYS)
        checked[at[1:][back]] = False
    bad = (over | under) & checked
    if not bad.any():
        return None
    i = int(bad.argmax())
    prices = {"close": close[i], "high": high[i], "low": low[i]}
    column = "close" if not down[i] - margin[i] <= close[i] <= up[i] + margin[i] else (
        "high" if over[i] else "low")
    limit = price_limit(code, frame.index[i], bool(st[i]))
    expected = (f"a {column} within the daily limit of {limit:.0%} around {basis[i]} {ref[i]:g} "
                f"({down[i]:g}..{up[i]:g})")
    return Flag("jump", int(lines[i]), _day(frame.index[i]), source(column), f"{prices[column]:g}", expected,
                int(bad.sum()))


def adjust_counts(frame: pd.DataFrame, lines: np.ndarray) -> dict[str, list]:
    """``{flag: [rows, line, date]}`` of the frame's ``adjust_flag`` values (each one's first
    row by date); ``{}`` without the column."""
    if "adjust_flag" not in frame.columns:
        return {}
    values = frame["adjust_flag"].to_numpy(dtype=float)
    rows = np.flatnonzero(np.isfinite(values))
    flags, first, counts = np.unique(values[rows], return_index=True, return_counts=True)
    return {f"{v:g}": [int(n), int(lines[rows[i]]), _day(frame.index[rows[i]])]
            for v, i, n in zip(flags, first, counts, strict=True)}


def _adjust_name(flag: str) -> str:
    return f"{flag} ({ADJUST_NAMES[flag]})" if flag in ADJUST_NAMES else flag


def adjust_mismatches(counts: Mapping[str, Mapping[str, list]], column: Mapping[str, str] | None = None
                      ) -> tuple[str, dict[str, Flag]]:
    """``(usual, {key: Flag})``: the adjustflag most files hold (each file votes with the flag
    of most of its rows; a tie goes to the first file's), and for each file holding rows of
    another, a flag at its first such row. ``counts``: ``{key: adjust_counts(...)}`` (one key:
    the rows of one file are compared with each other); ``column``: the column's name in each
    file (default ``adjustflag``)."""
    mains = {key: max(c, key=lambda v: (c[v][0], -c[v][1])) for key, c in counts.items() if c}
    if not mains:
        return "", {}
    votes = Counter(mains.values())
    usual = max(votes, key=lambda v: (votes[v], -list(mains.values()).index(v)))
    agree = votes[usual]
    flags = {}
    for key, c in counts.items():
        other = {v: x for v, x in c.items() if v != usual}
        if not other:
            continue
        first = min(other, key=lambda v: (other[v][2], other[v][1]))
        rows, line, date = other[first]
        where = (f"as in the other {agree - (mains.get(key) == usual)} file(s)" if len(counts) > 1
                 else "as in the file's other rows")
        flags[key] = Flag("adjustflag", int(line), str(date), (column or {}).get(key, "adjustflag"),
                          _adjust_name(first), f"{_adjust_name(usual)} {where}",
                          int(sum(x[0] for x in other.values())))
    return usual, flags


def outside_vwap(frame: pd.DataFrame) -> np.ndarray | None:
    """``[rows]`` bool: traded days whose average traded price (amount / volume, in the file's
    volume unit: shares or lots, told from its median) lies outside the day's low..high by more
    than 2 % -- what adjusted prices beside real amounts show; ``None`` without the columns."""
    if not {"amount", "volume", "low", "high", "close"} <= set(frame.columns):
        return None
    traded = (frame["volume"] > 0) & (frame["amount"] > 0)
    if traded.sum() < 20:
        return None
    with np.errstate(invalid="ignore", divide="ignore"):
        vwap = (frame["amount"] / frame["volume"]).where(traded)
        unit = 10.0 ** np.round(np.log10(float(np.nanmedian(vwap / frame["close"]))))
        vwap = vwap / unit
    return (traded & ((vwap < frame["low"] * 0.98) | (vwap > frame["high"] * 1.02))).to_numpy()


def level_breaks(frames: Mapping[str, pd.DataFrame], line_of=None) -> dict[str, Flag]:
    """``{code: Flag}``: files whose prices stand on another adjustment than most files' (a
    forward-adjusted file among unadjusted ones, told by :func:`outside_vwap` on more than
    :data:`LEVEL_BREAK` of its traded days while most files are below it; or the reverse).
    ``line_of(code, day)``: the line of a day in a file, for the flag."""
    shares = {}
    for code, frame in frames.items():
        outside = outside_vwap(frame)
        if outside is not None:
            shares[code] = (float(outside.mean()), outside)
    if len(shares) < 2:
        return {}
    adjusted = {code: share > LEVEL_BREAK for code, (share, _) in shares.items()}
    usual = sum(adjusted.values()) > len(adjusted) / 2
    flags = {}
    for code, is_adjusted in adjusted.items():
        if is_adjusted == usual:
            continue
        share, outside = shares[code]
        frame = frames[code]
        rows = outside if is_adjusted else ~outside
        first = frame.index[int(np.argmax(rows))]
        flags[code] = Flag("level", int(line_of(code, first)) if line_of else 0, _day(first),
                           "amount / volume", f"outside low..high on {share:.0%} of traded days",
                           f"within it, as in {len(adjusted) - 1} other file(s) "
                           f"({'adjusted' if usual else 'unadjusted'} prices)", int(rows.sum()))
    return flags


def lacking_columns(frames: Mapping[str, pd.DataFrame], columns=FEATURE_COLUMNS
                    ) -> dict[str, tuple[str, ...]]:
    """``{code: canonical columns}`` of the ``columns`` that other frames have and the code's
    frame lacks (the header, not the values: an empty column is present)."""
    have = {code: set(frame.columns) for code, frame in frames.items()}
    out = {}
    for code, own in have.items():
        others = set().union(*(h for c, h in have.items() if c != code)) if len(have) > 1 else set()
        missing = tuple(c for c in columns if c in others and c not in own)
        if missing:
            out[code] = missing
    return out


def _named(items: list[str], limit: int) -> str:
    more = len(items) - limit
    return ", ".join(items[:limit]) + (f" and {more} more" if more > 0 else "")


def quality_clauses(reports: Mapping, lacking: Mapping[str, tuple[str, ...]], adjust: Mapping[str, Flag],
                    usual_adjust: str, max_named: int = 20) -> list[str]:
    """A folder load summary's clauses: stocks lacking columns the others have (grouped by
    the columns, as their files name them), then per kind of implausible row the files, each
    named with its first such line and date (the first ``max_named``).

    Args:
        reports: ``{code: LoadReport}``; lacking: ``{code: canonical columns}``; adjust: ``{code: Flag}``
            of the files whose adjustflag differs from ``usual_adjust``.
    """
    clauses = []
    groups: dict[tuple[str, ...], list[str]] = {}
    preclose = set()
    for code, columns in lacking.items():
        source = FORMATS_BY_NAME[reports[code].format].source
        names = tuple(sorted(source(c) for c in columns))
        groups.setdefault(names, []).append(code)
        if "preclose" in columns:
            preclose.add(names)
    for columns, codes in groups.items():
        one = len(codes) == 1
        text = (f"{len(codes)} stock{'' if one else 's'} lack{'s' if one else ''} column"
                f"{'' if len(columns) == 1 else 's'} {', '.join(columns)} that the others have: "
                f"{_named(codes, max_named)}; features that need them are missing for "
                f"{'it' if one else 'them'}")
        if columns in preclose:
            text += " (without a preclose, returns come from consecutive closes)"
        clauses.append(text)
    by_kind: dict[str, list[str]] = {}
    for code, report in reports.items():
        for f in [*report.flags, *([adjust[code]] if code in adjust else [])]:
            detail = f"{f.column} {f.got}" + ("" if f.kind == "adjustflag" else f", expected {f.expected}")
            name = report.path.replace("\\", "/").rsplit("/", 1)[-1]
            by_kind.setdefault(f.kind, []).append(f"{name} {f.short()}: {detail}")
    for kind in KINDS:
        named = by_kind.get(kind)
        if not named:
            continue
        one = len(named) == 1
        what = (f"an adjustflag other than the others' {_adjust_name(usual_adjust)}" if kind == "adjustflag"
                else KINDS[kind])
        clauses.append(f"{len(named)} file{'' if one else 's'} with {what} (kept as they are; --strict stops "
                       f"instead): {_named(named, max_named)}")
    return clauses
