"""The weights of an index's members: the benchmark an enhanced-index book is held against.

:func:`benchmark_weights` gives ``[days, stocks]`` weights, row ``t`` the book the index holds
over day ``t`` (decided at ``t-1``'s close, so known when a strategy decides at that close),
over the day's members (all stocks when the run has no universe), summing to 1. Four sources,
one option (``--benchmark-weights``, :attr:`~forecaster.portfolio.backtest.BacktestConfig.benchmark_weights`):

* ``fitted``: fitted to the index's own series where the panel holds it (the default then):
  monthly constrained least squares of its returns on the members' over a trailing window,
  shrunk toward the float market value, drifting with prices between refits
  (:mod:`forecaster.portfolio.fitted_weights`).
* ``float_mv``: each member's float market value at the previous close, the usual stand-in for
  a cap-weighted index's free-float weights. Past a stock's last value (a source that ends
  early) its float shares are held: the value is carried forward by the stock's price return
  (``close / preclose``, so splits and bonus issues do not move it), and the notes say from
  which day. A member that never had a value gets the day's median member value (counted).
* ``equal``: the members with a bar, equally.
* a file ``date,code,weight`` (a vendor's export of an index's weights): on each of its dates
  the given weights (fractions summing to 1 a date), held from the next day; between dates each
  weight drifts with its stock's price return and the row is renormalised. Codes in any form the
  loaders read. A date must be a trading day of the data (weights are dated by the close they
  apply at): a weekend or holiday is refused, never moved to the next trading day.

How old the weights are: :attr:`BenchmarkWeights.last_given` (a file's last date, the last day
with a float market value), :func:`weights_age`, :func:`stale_line`; :func:`next_weights` (the
predict side) logs a warning past :data:`STALE_AFTER` trading days, and a backtest's notes say
so. :func:`check_covers` refuses a run whose first test day has no benchmark weights.

:func:`weights_tracking` says how closely the members so weighted follow the index's own
series (a check that the weights are right).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.data.daily.dates import read_date_column
from forecaster.data.minute.returns import is_index
from forecaster.data.panel import Panel
from forecaster.data.qlib.conventions import from_qlib_code
from forecaster.data.sources import DataError
from forecaster.portfolio.fitted_weights import fit_to_index, index_members, index_series_of, price_ratio

SOURCES = ("fitted", "float_mv", "equal")
SUM_TOLERANCE = 0.02  # a file's date whose weights sum further from 1 is refused
STALE_AFTER = 20  # trading days (about a month) past the last given weights before a warning

log = logging.getLogger(__name__)


@dataclass
class BenchmarkWeights:
    """``weights``: ``[days, stocks]`` (row ``t`` held over day ``t``; rows sum to 1 where the
    day has members, else 0); ``source``: what they are (``"float_mv"``, ``"equal"`` or the
    file); ``carried_from``: the first day a float market value was carried forward (None: not
    needed); ``notes``: what the report says of them; ``last_given``: the last day the source
    gave weights (a file's last date, the last day with a float market value; None: every day,
    as equal weights), past which they are drifted by prices."""

    weights: np.ndarray
    source: str
    carried_from: pd.Timestamp | None = None
    notes: list[str] = field(default_factory=list)
    last_given: pd.Timestamp | None = None


def default_source(panel: Panel) -> str:
    """``fitted`` where the panel holds its universe's index series
    (:func:`~forecaster.portfolio.fitted_weights.attach_index_series`), else ``float_mv`` where
    the data carry a float market value, else ``equal``."""
    if index_series_of(panel) is not None:
        return "fitted"
    mv = panel.fields.get("float_mv")
    return "float_mv" if mv is not None and np.isfinite(mv).any() else "equal"


def growth(panel: Panel) -> np.ndarray:
    """``[days, stocks]`` each day's total return factor ``close / preclose`` (a dividend
    included; 1 without a bar)."""
    g = price_ratio(panel)
    return np.where(np.isfinite(g) & (g > 0), g, 1.0)


def price_growth(panel: Panel) -> np.ndarray:
    """``[days, stocks]`` each day's factor of a member's value in a price index: its total
    return factor less its dividend return (:mod:`~forecaster.portfolio.total_return`: a cash
    dividend lowers a price index's weight of the stock, a share issue does not); as
    :func:`growth` where the data cannot tell dividends. What benchmark weights drift by."""
    def compute():
        from forecaster.portfolio.total_return import dividend_returns

        g = growth(panel)
        div = dividend_returns(panel).returns
        if div is None:
            return g
        out = g - np.nan_to_num(div)
        return np.where(out > 0, out, g)

    return panel.derived(("price_growth",), compute)


def _members(panel: Panel) -> np.ndarray:
    return index_members(panel)


def _normalise(raw: np.ndarray, members: np.ndarray) -> np.ndarray:
    raw = np.where(members & np.isfinite(raw) & (raw > 0), raw, 0.0)
    total = raw.sum(axis=1, keepdims=True)
    return np.divide(raw, total, out=np.zeros_like(raw), where=total > 0)


def _held_over(values_at_close: np.ndarray) -> np.ndarray:
    """Row ``t`` from row ``t-1`` (what is known at the previous close); row 0 from itself."""
    out = np.empty_like(values_at_close)
    out[1:] = values_at_close[:-1]
    out[0] = values_at_close[0]
    return out


def carried_float_mv(panel: Panel) -> np.ndarray | None:
    """``[days, stocks]`` each stock's float market value at each close where it has a bar,
    carried past a missing value by its price return (float shares held); None when the data
    carry none."""
    mv = panel.fields.get("float_mv")
    if mv is None or not np.isfinite(mv).any():
        return None
    return panel.derived(("carried_float_mv",), lambda: _carry(mv, growth(panel), panel.listed))


def _carry(mv: np.ndarray, g: np.ndarray, listed: np.ndarray | None) -> np.ndarray:
    """Each value carried past a missing one by ``g``; ``listed`` ``[days, stocks]``: only onto
    days with a bar (None: onto every day, through a suspension without rows too)."""
    carried = mv.copy()
    last = np.full(mv.shape[1], np.nan)
    for t in range(len(mv)):  # one pass over days, vectorised over stocks
        known = np.isfinite(mv[t]) & (mv[t] > 0)
        last = np.where(known, mv[t], last * g[t])
        carried[t] = np.where(known, mv[t], last if listed is None else np.where(listed[t], last, np.nan))
    return carried


def member_values(panel: Panel) -> np.ndarray | None:
    """``[days, stocks]`` each stock's float market value at each close as a price index holds
    it: its last value carried by its price (:func:`price_growth`) through days without one, a
    suspension without rows included, so a member resumes at its own weight; None when the data
    carry no float market value."""
    mv = panel.fields.get("float_mv")
    if mv is None or not np.isfinite(mv).any():
        return None
    return panel.derived(("member_values",), lambda: _carry(mv, price_growth(panel), None))


def float_mv_weights(panel: Panel) -> BenchmarkWeights:
    """Weights by the previous close's float market value, carried past its last day by price."""
    carried = carried_float_mv(panel)
    if carried is None:
        raise DataError("--benchmark-weights float_mv: the data carry no float market value (float_mv, "
                        "流通市值); use equal or a weights file")
    mv = panel.fields["float_mv"]
    members = _members(panel)
    before = _held_over(member_values(panel))  # row t: the value at t-1's close
    has = members & np.isfinite(before) & (before > 0)
    never = members & ~has
    with np.errstate(all="ignore"):
        median = np.nanmedian(np.where(has, before, np.nan), axis=1, keepdims=True)
    weights = _normalise(np.where(has, before, np.where(never, median, np.nan)), members)
    notes = []
    carried_from = None
    end = int(np.flatnonzero(np.isfinite(mv).any(axis=1))[-1])  # the field's last day
    filled = members & ~np.isfinite(mv) & np.isfinite(carried)
    if end + 1 < len(mv):
        carried_from = panel.dates[end + 1]
        notes.append(f"float market values end on {panel.dates[end].date()}: from {carried_from.date()} each "
                     "member's float shares are held at their last value and its value moves with its price "
                     f"({int(filled[end + 1:].sum()):,} member-days)")
    if filled[: end + 1].any():
        notes.append(f"{int(filled[: end + 1].sum()):,} member-day(s) before then without a value (a stock's "
                     "gap) carried the same way")
    n_never = int((never & ~np.isfinite(carried)).sum())
    if n_never:
        codes = sorted({str(panel.codes[j]) for j in np.flatnonzero(never.any(axis=0))})
        notes.append(f"{n_never:,} member-days of {len(codes)} stock(s) without any float market value "
                     f"weighted at the day's median member value: {', '.join(codes[:8])}"
                     + (" ..." if len(codes) > 8 else ""))
    return BenchmarkWeights(weights, "float_mv", carried_from, notes, last_given=panel.dates[end])


def equal_weights(panel: Panel) -> BenchmarkWeights:
    """The day's members with a bar, equally."""
    members = _members(panel)
    return BenchmarkWeights(_normalise(members.astype(float), members), "equal")


def file_weights(panel: Panel, path: str | Path) -> BenchmarkWeights:
    """Weights from a CSV ``date,code,weight`` (module docstring); a bad file raises
    :class:`DataError` in one line naming what is wrong."""
    path = Path(path)
    at = f"--benchmark-weights {path}"
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except Exception as exc:  # noqa: BLE001 - the file's fault, in one line
        raise DataError(f"{at}: cannot be read as CSV ({exc})") from None
    table.columns = [str(c).strip().lower() for c in table.columns]
    if not {"date", "code", "weight"} <= set(table.columns):
        raise DataError(f"{at}: expected columns date, code, weight; found "
                        f"{', '.join(table.columns) or 'none'}")
    dates, _ = read_date_column(table["date"], lambda i: f"{at}: line {i + 2}", "date", option=None)
    dates = pd.Series(pd.DatetimeIndex(dates), index=table.index)
    weights = pd.to_numeric(table["weight"], errors="coerce")
    for name, bad in (("date", dates.isna()), ("weight", weights.isna() | (weights < 0))):
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            wanted = "date" if name == "date" else "weight >= 0"
            raise DataError(f"{at}: line {i + 2}, column {name}: {table[name].iloc[i]!r} is not a {wanted} "
                            f"({int(bad.sum())} such row(s))")
    codes = table["code"].map(from_qlib_code)
    twice = pd.DataFrame({"d": dates, "c": codes}).duplicated(keep=False).to_numpy()
    if twice.any():
        i = int(np.flatnonzero(twice)[0])
        raise DataError(f"{at}: {int(twice.sum())} rows weight a stock twice on one date, e.g. "
                        f"{codes.iloc[i]} on {dates.iloc[i].date()} (line {i + 2}); expected one weight "
                        "per code and date")
    itself = codes.map(is_index).to_numpy(bool)  # an export may list the index beside its members
    own_rows = []
    if itself.any():
        heavy = itself & (weights.to_numpy() != 0)
        if heavy.any():
            i = int(np.flatnonzero(heavy)[0])
            raise DataError(f"{at}: line {i + 2}, column code: {codes.iloc[i]} is an index, not a member, "
                            f"yet holds weight {weights.iloc[i]:g}; a weights file lists the index's members "
                            "(the index's own series is read from the data): remove its rows")
        own_rows = sorted(set(codes[itself]))
        keep = ~itself
        table, dates, weights, codes = table[keep], dates[keep], weights[keep], codes[keep]
    index = {str(c): j for j, c in enumerate(panel.codes)}
    unknown = sorted(set(codes) - set(index))
    if unknown:
        raise DataError(f"{at}: {len(unknown)} code(s) the data do not hold: "
                        f"{', '.join(unknown[:10])}" + (" ..." if len(unknown) > 10 else ""))
    outside = (dates < panel.dates[0]) | (dates > panel.dates[-1])
    if outside.any():
        i = int(np.flatnonzero(outside.to_numpy())[0])
        span = f"{panel.dates[0].date()}..{panel.dates[-1].date()}"
        raise DataError(f"{at}: line {dates.index[i] + 2}: {dates.iloc[i].date()} is outside the data's days "
                        f"{span} ({int(outside.sum())} such row(s))")
    closed = ~dates.isin(panel.dates)
    if closed.any():
        i = int(np.flatnonzero(closed.to_numpy())[0])
        raise DataError(f"{at}: line {dates.index[i] + 2}, column date: {dates.iloc[i].date()} is not a "
                        "trading day of the data (no stock has a bar: the exchange was closed); weights are "
                        f"dated by the close they apply at ({int(closed.sum())} such row(s))")
    sums = weights.groupby(dates).sum()
    far = sums[(sums - 1).abs() > SUM_TOLERANCE]
    if len(far):
        hint = " (percentages? give fractions)" if abs(far.iloc[0] - 100) < 100 * SUM_TOLERANCE else ""
        raise DataError(f"{at}: the weights of {far.index[0].date()} sum to {far.iloc[0]:.4f}, expected 1 "
                        f"(within {SUM_TOLERANCE}){hint}; {len(far)} such date(s)")
    rows = panel.dates.get_indexer(dates)  # every date is a trading day (checked above)
    given = np.full((len(panel.dates), len(panel.codes)), np.nan)
    given_rows = np.unique(rows)
    given[given_rows] = 0.0
    np.add.at(given, (rows, codes.map(index).to_numpy()), weights.to_numpy(dtype=float))
    g = price_growth(panel)
    at_close = np.zeros_like(given)
    current = np.zeros(len(panel.codes))
    dated = set(given_rows.tolist())
    for t in range(int(given_rows[0]), len(given)):
        current = np.nan_to_num(given[t]) if t in dated else current * g[t]
        at_close[t] = current
    members = _members(panel)
    before = panel.dates[: given_rows[0]]
    weights = _normalise(_held_over(at_close), members)
    notes = [f"index weights from {path} ({len(given_rows)} date(s), drifting with prices between them)"]
    if own_rows:
        notes.append(f"{int(itself.sum())} row(s) of the index itself ({', '.join(own_rows)}) at weight 0 in "
                     f"{path} left out: it is the benchmark, not a member")
    if len(before):
        notes.append(f"no weights before {panel.dates[given_rows[0]].date()}: no benchmark weight on the "
                     f"{len(before)} earlier day(s)")
    if panel.members is not None:  # the file against the universe's list, from its first date on
        held = _held_over(at_close)[given_rows[0] + 1:] > 0
        listed = members[given_rows[0] + 1:]
        misses, adds = int((listed & ~held).sum()), int((held & ~listed).sum())
        if misses or adds:
            notes.append(f"{path} against the universe's members: {misses:,} member-day(s) without a weight "
                         f"in the file (weight 0 in the benchmark), {adds:,} day(s) of weight on stocks that "
                         "were no members (left out)")
    bw = BenchmarkWeights(weights, f"file {path}", None, notes, last_given=panel.dates[given_rows[-1]])
    stale = stale_line(panel, bw, "the data's last day")
    if stale:
        notes.append(stale)
    return bw


def benchmark_weights(panel: Panel, spec: str | None = None) -> BenchmarkWeights:
    """The benchmark weights ``spec`` names (``None``: :func:`default_source`)."""
    spec = spec or default_source(panel)
    if spec == "float_mv":
        return float_mv_weights(panel)
    if spec == "equal":
        return equal_weights(panel)
    if spec == "fitted":  # shrunk toward the float market value where the data carry it, else equal
        prior = float_mv_weights(panel) if carried_float_mv(panel) is not None else equal_weights(panel)
        fitted = BenchmarkWeights(*fit_to_index(panel, prior.weights, prior.source, price_growth(panel)))
        fitted.notes += prior.notes
        return fitted
    if not Path(spec).is_file():
        raise DataError(f"--benchmark-weights: {spec!r} is neither fitted, float_mv, equal nor a file")
    return file_weights(panel, spec)


def weights_age(panel: Panel, bench: BenchmarkWeights) -> tuple[pd.Timestamp | None, int]:
    """The last day ``bench``'s source gave weights and how many trading days of the panel
    follow it (``(None, 0)``: weights given every day)."""
    if bench.last_given is None:
        return None, 0
    return bench.last_given, int(len(panel.dates) - panel.dates.searchsorted(bench.last_given, "right"))


def stale_line(panel: Panel, bench: BenchmarkWeights, upto: str = "the signal day") -> str | None:
    """One line saying how old ``bench``'s weights are at the panel's last day (``upto``
    names it) when they are more than :data:`STALE_AFTER` trading days old; else None."""
    last, age = weights_age(panel, bench)
    if last is None or age <= STALE_AFTER:
        return None
    what = "weights" if bench.source.startswith("file") else "float market values"
    return (f"--benchmark-weights {bench.source.removeprefix('file ')}: the last {what} are of "
            f"{last.date()}, {age:,} trading days before {upto} {panel.dates[-1].date()}; they are drifted "
            "with prices since (a member that joined since has no weight): give newer ones")


def check_covers(bench: BenchmarkWeights, panel: Panel, first_test_day: pd.Timestamp) -> None:
    """Refuse (:class:`DataError`, one line) benchmark weights that leave the run's first test
    day without a benchmark: a book held against them would sit in cash, its excess and
    information ratio measured against nothing."""
    t = int(panel.dates.searchsorted(pd.Timestamp(first_test_day)))
    if t >= len(panel.dates) or bench.weights[t].sum() > 0:
        return
    weighted = np.flatnonzero(bench.weights.sum(axis=1) > 0)
    at = f"--benchmark-weights {bench.source.removeprefix('file ')}"
    if not len(weighted):
        raise DataError(f"{at}: no day of the data has benchmark weights over the day's members")
    first = int(weighted[0])
    raise DataError(f"{at}: the first benchmark weights hold from {panel.dates[first].date()} (dated "
                    f"{panel.dates[max(first - 1, 0)].date()}), after the run's first test day "
                    f"{panel.dates[t].date()}: the book would have no benchmark until then; give weights "
                    f"dated {panel.dates[max(t - 1, 0)].date()} or earlier, or start the test days on "
                    f"{panel.dates[first].date()} or later (--start)")


def weighted_returns(panel: Panel, weights: np.ndarray) -> np.ndarray:
    """``[days]`` the close-to-close return of the members held at ``weights`` (row ``t`` held
    over day ``t``); NaN on a day without weights."""
    r = growth(panel) - 1.0
    out = (weights * r).sum(axis=1)
    return np.where(weights.sum(axis=1) > 0, out, np.nan)


def weights_tracking(members_returns: pd.Series, index_returns: pd.Series) -> dict:
    """How closely weighted members follow an index: ``te`` (annualised sd of the daily
    difference), ``corr`` (daily correlation), ``drift`` (annualised mean difference),
    ``n_days``, on the days both have."""
    a, b = members_returns.align(index_returns, join="inner")
    ok = np.isfinite(a.to_numpy()) & np.isfinite(b.to_numpy())
    a, b = a[ok].to_numpy(dtype=float), b[ok].to_numpy(dtype=float)
    if len(a) < 3:
        return {"te": math.nan, "corr": math.nan, "drift": math.nan, "n_days": int(len(a))}
    d = a - b
    return {"te": float(d.std(ddof=1) * math.sqrt(252)), "corr": float(np.corrcoef(a, b)[0, 1]),
            "drift": float(d.mean() * 252), "n_days": int(len(a))}


def weighted_equity(panel: Panel, weights: np.ndarray, start: int, end: int, capital: float,
                    next_open: bool) -> np.ndarray:
    """``[end - start + 1]`` the cost-free value of ``capital`` held at ``weights`` (row ``t``
    held over day ``t``) from day ``start`` to each close through ``end``, entered at the first
    day's open (``next_open``) or its close. A day without weights earns nothing."""
    r = weighted_returns(panel, weights)[start:end + 1]
    if next_open and end >= start:
        with np.errstate(invalid="ignore", divide="ignore"):
            first = panel.fields["close"][start] / panel.fields["open"][start] - 1
        w = weights[start]
        ok = np.isfinite(first) & (w > 0)
        r[0] = float((w[ok] * first[ok]).sum() / w[ok].sum()) if ok.any() else 0.0
    return capital * np.cumprod(1 + np.nan_to_num(r))


def members_equity(data: Panel, bench: BenchmarkWeights | str | None, days: pd.DatetimeIndex, capital: float,
                   next_open: bool) -> tuple[pd.Series, str]:
    """The members held at the benchmark weights (``bench``, or the source it names) over
    ``days`` (a backtest's), cost-free, and what it is."""
    if not isinstance(bench, BenchmarkWeights):
        bench = benchmark_weights(data, bench)
    start, end = data.dates.get_loc(days[0]), data.dates.get_loc(days[-1])
    eq = weighted_equity(data, bench.weights, start, end, capital, next_open)
    eq = pd.Series(eq, index=data.dates[start:end + 1], name="weighted").reindex(days).ffill()
    source = bench.source  # a file's: "the weights of PATH", not "file PATH weights"
    named = f"the weights of {source[5:]}" if source.startswith("file ") else f"{source} weights"
    return eq, f"the members at {named} (no costs)"


def spec_of(bench: BenchmarkWeights) -> str:
    """The ``--benchmark-weights`` value that gives ``bench`` (a file's path for a file's)."""
    return bench.source.removeprefix("file ") if bench.source.startswith("file ") else bench.source


def decision_members(panel: Panel, next_members: np.ndarray | None = None) -> np.ndarray:
    """``[days, stocks]`` the stocks a book decided at day ``s``'s close may hold over day
    ``s + 1``: the index's members of that day (a review is announced in advance, so a leaver
    is sold and a joiner bought by the decision before its day) that have had a bar by ``s``;
    the last row's from ``next_members`` (default the last day's). Without a universe: the
    stocks with a bar on ``s``."""
    if panel.members is None:
        return panel.listed.copy()
    seen = np.maximum.accumulate(panel.listed, axis=0)
    out = np.empty_like(panel.members)
    out[:-1] = panel.members[1:]
    out[-1] = panel.members[-1] if next_members is None else np.asarray(next_members, bool)
    return out & seen


def known_weights(panel: Panel, bench=None, next_members: np.ndarray | None = None,
                  next_day: bool = True) -> np.ndarray:
    """``[days, stocks]`` the benchmark weights known at each day's close for the next trading
    day: row ``s`` is the source's weights held over day ``s + 1`` (decided at ``s``'s close
    from rows up to ``s``), over the index's members of that day, so a stock that joins holds a
    weight from its first day of membership and one that leaves holds none after its last; the
    last row is computed on :func:`~forecaster.portfolio.tomorrow.with_next_day`
    (``next_members``: the members of the day after the panel's last, where a review says them;
    default the last day's; ``next_day``
    False: the last row left 0, for a caller that never decides at the last close, as a
    backtest). Rows sum to 1 (0 where no member has a weight). ``bench``: a
    :class:`BenchmarkWeights` of ``panel`` or the source it names."""
    if bench is None or isinstance(bench, str):
        bench = benchmark_weights(panel, bench)
    out = np.zeros_like(bench.weights)
    out[:-1] = bench.weights[1:]
    if next_day:
        from forecaster.portfolio.tomorrow import with_next_day

        out[-1] = benchmark_weights(with_next_day(panel, next_members), spec_of(bench)).weights[-1]
    return out


def next_weights(panel: Panel, spec: str | None = None) -> np.ndarray:
    """``[stocks]`` the benchmark weights for the trading day after the panel's last: the last
    row of :func:`known_weights`. Weights more than :data:`STALE_AFTER` trading days old (a
    file's last date, float market values that ended) are logged as a warning
    (:func:`stale_line`)."""
    bw = benchmark_weights(panel, spec)
    stale = stale_line(panel, bw)
    if stale:
        log.warning(stale)
    return known_weights(panel, bw)[len(panel.dates) - 1]
