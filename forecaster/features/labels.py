"""Labels: the return a strategy can earn, and its per-day normalisation for training.

Row convention: a label array is indexed by the **signal day** ``t`` (the close whose data
made the forecast). With ``execution="next_open"`` the position is bought at the open of
``t + 1`` and sold at the open of ``t + 1 + H``; with ``"close"`` (idealised) it is bought at
the close of ``t`` and sold at the close of ``t + H``. Forecast tables and backtests index
the same number by the **forecast date** ``t + 1``, the first day of the holding period
(:func:`by_forecast_date`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import ndtri

from forecaster.checks import check_choice
from forecaster.data.market.delisting import DELISTED_BEFORE_EXIT, KNOWN_ON_SIGNAL_DAY
from forecaster.data.panel import Panel

EXECUTIONS = ("next_open", "close")
LABEL_NORMS = ("rank", "zscore", "none")


@dataclass
class LabelReport:
    """What :func:`tradeable_label` masked, by reason (counts of stock-days)."""

    masked: dict[str, int] = field(default_factory=dict)
    valid: int = 0


def tradeable_label(panel: Panel, horizon: int = 1, execution: str = "next_open"
                    ) -> tuple[np.ndarray, LabelReport]:
    """The log return from the execution price after each signal day to the execution price
    ``horizon`` trading days later, ``[D, N]`` by signal day.

    NaN where there is no signal (no bar on the signal day) or the trade cannot be made or
    closed: the stock has no bar or is suspended on the entry or exit day, or the entry
    price is at limit-up (the buy would not fill); and for the last rows, whose exit lies
    beyond the panel. A stock known on the signal day to delist (in its delisting period, a
    ``退`` name, or on its last day: :meth:`~forecaster.data.panel.Panel.delistings`) is not
    bought, so it has no label (``"delisting known on the signal day"``), nor has a signal day
    of a delisted stock whose exit lies after its last trading day (``"delisted before the
    exit"``); both are counted apart from the other reasons.

    Computed once per panel and kept by it (read-only): the walk-forward, the scoring and
    the report of a run read the same array.
    """
    if horizon < 1 or int(horizon) != horizon:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    check_choice("execution", execution, EXECUTIONS)
    return panel.derived(("tradeable_label", int(horizon), execution),
                         lambda: _tradeable_label(panel, int(horizon), execution))


def _tradeable_label(panel: Panel, horizon: int, execution: str) -> tuple[np.ndarray, LabelReport]:
    D = panel.n_days
    price = "open" if execution == "next_open" else "close"
    entry_offset = 1 if execution == "next_open" else 0
    logp = panel.log_adjusted(price)
    trades = panel.tradeable()
    blocked = panel.at_limit_up(price)
    label = np.full(logp.shape, np.nan)
    report = LabelReport()
    n = D - entry_offset - horizon  # signal rows whose exit day exists
    if n <= 0:
        label.flags.writeable = False
        return label, report
    entry = slice(entry_offset, entry_offset + n)
    exit_ = slice(entry_offset + horizon, entry_offset + horizon + n)
    raw = logp[exit_] - logp[entry]
    reasons = {
        "no entry bar or suspended": ~trades[entry],
        "limit-up at entry": trades[entry] & blocked[entry],
        "no exit bar or suspended": trades[entry] & ~blocked[entry] & ~trades[exit_],
    }
    # Only stock-days that exist (the stock has a bar on the signal day) carry a label.
    exists = panel.listed[:n]
    ok = exists & trades[entry] & ~blocked[entry] & trades[exit_]
    gone = panel.delistings()
    if gone.any():  # no buy once the delisting is known; no exit after the last day
        known = gone.known[:n]
        after = (gone.last >= 0) & (np.arange(n)[:, None] + entry_offset + horizon > gone.last)
        reasons = {why: m & ~known & ~after for why, m in reasons.items()}
        reasons[KNOWN_ON_SIGNAL_DAY] = known
        reasons[DELISTED_BEFORE_EXIT] = after & ~known
        ok &= ~known & ~after
    if panel.learn is not None:  # a training universe: stock-days of weight 0 are not learnt
        outside = exists & ok & ~(panel.learn[:n] > 0)
        reasons["not in the training universe"] = outside
        ok = ok & ~outside
    report.masked = {why: int((m & exists).sum()) for why, m in reasons.items()}
    report.valid = int((ok & exists).sum())
    label[:n] = np.where(ok, raw, np.nan)
    label.flags.writeable = False
    return label, report


def close_to_close(panel: Panel, horizon: int = 1) -> np.ndarray:
    """Secondary label ``[D, N]`` by signal day: the sum of the close-to-close log returns of
    days ``t+1 .. t+H`` (what the single-stock models forecast); NaN if any is suspended."""
    r = panel.returns()
    csum = np.vstack([np.zeros((1, panel.n_stocks)), np.cumsum(np.nan_to_num(r), axis=0)])
    bad = np.vstack([np.zeros((1, panel.n_stocks)), np.cumsum(np.isnan(r), axis=0)])
    out = np.full(r.shape, np.nan)
    n = panel.n_days - horizon
    if n > 0:
        total = csum[1 + horizon : 1 + horizon + n] - csum[1 : 1 + n]
        missing = bad[1 + horizon : 1 + horizon + n] - bad[1 : 1 + n]
        out[:n] = np.where(missing == 0, total, np.nan)
    return out


def by_forecast_date(values: np.ndarray) -> np.ndarray:
    """Move a ``[D, N]`` array from signal-day rows to forecast-date rows (one row later)."""
    out = np.full(values.shape, np.nan)
    out[1:] = values[:-1]
    return out


def normalise_per_day(label: np.ndarray, method: str = "rank", drop_tails: float = 0.0) -> np.ndarray:
    """Normalise each day's labels across stocks ``[D, N]`` (NaN kept NaN).

    ``"rank"``: ranks mapped to standard-normal quantiles ``ndtri((rank - 0.5) / n)``;
    ``"zscore"``: minus the day's mean over its standard deviation; ``"none"``: unchanged.
    ``drop_tails``: the share of each day's labels cut from each tail before the z-score
    (MASTER drops 2.5 %); they become NaN, i.e. are not trained on.
    """
    check_choice("label normalisation", method, LABEL_NORMS)
    if not 0 <= drop_tails < 0.5:
        raise ValueError(f"drop_tails must be in [0, 0.5), got {drop_tails}")
    y = np.array(label, dtype=float)
    valid = np.isfinite(y)
    n = valid.sum(axis=1, keepdims=True)
    if method == "none" and drop_tails == 0:
        return y
    # Ranks 1..n among the valid entries of each day (NaN sorts last), ties by position.
    order = np.argsort(np.where(valid, y, np.inf), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(1, y.shape[1] + 1)[None, :].repeat(len(y), 0), axis=1)
    rank = rank.astype(float)
    if drop_tails > 0:
        cut = np.floor(drop_tails * n)
        valid &= (rank > cut) & (rank <= n - cut)
        y = np.where(valid, y, np.nan)
        rank, n = rank - cut, n - 2 * cut
    if method == "rank":
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(valid, ndtri((rank - 0.5) / np.maximum(n, 1)), np.nan)
    if method == "zscore":
        count = np.maximum(valid.sum(axis=1, keepdims=True), 1)
        z = np.where(valid, y, 0.0)
        mean = z.sum(axis=1, keepdims=True) / count
        sd = np.sqrt((np.where(valid, y - mean, 0.0) ** 2).sum(axis=1, keepdims=True) / count)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(valid, (y - mean) / np.where(sd > 0, sd, 1.0), np.nan)
    return y
