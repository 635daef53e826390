"""The strategy: forecasts ``[date x code]`` -> target weights ``[date x code]``.

It knows nothing of prices, lots, limits or costs (those are the market's rules and the
execution's settings in :mod:`forecaster.portfolio.backtest`); it only says which stocks the book
should hold, and how much of each, on each forecast row.

Rules:

* ``top_k``: hold the ``k`` highest forecasts (re-picked at every rebalance; a daily top-k
  turns the book over ~100-200 times a year, which costs eat).
* ``dropout``: the top-k-dropout rule quant researchers use (Qlib's ``TopkDropoutStrategy``):
  hold ``k`` names and, at each rebalance, replace at most ``n_drop`` of them. The ``n_drop``
  best stocks not held are candidates; ranked together with the holdings, the holdings that
  fall to the bottom ``n_drop`` of that combined list are sold and as many candidates bought.
  Turnover is bounded by ``n_drop / k`` of the book per rebalance.
* ``threshold``: equal weight over every stock whose forecast is past ``threshold`` (the
  single-stock rule: long when the forecast is above it).

``weighting="rank"`` weights the held names by their score rank (``k, k-1, ..., 1``,
normalised) instead of equally.

ST stocks (``exclude_st``, on by default): the one rule of what an ST mark on the signal day
means, read by the backtest, the ranked list (:mod:`forecaster.portfolio.next_day`), tomorrow's
orders (:mod:`forecaster.portfolio.orders`) and the report (:func:`st_note`). An ST stock is not
bought: a rule never picks one it did not already hold (its place goes to the next name, as a
non-member's does), and no order adds to one. A holding that becomes ST is not forced out: it
stays while the rule still ranks it into the book, and is sold when the rule drops it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.checks import ConfigError, check_choice, check_int
from forecaster.configs import documented, option
from forecaster.portfolio.alpha import ALPHA_SHAPES

RULES = ("top_k", "dropout", "threshold", "enhanced")
WEIGHTINGS = ("equal", "rank")
MODES = ("long_flat", "long_short")
ST_REASON = "ST (special treatment)"  # the ranked list's reason
ST_BLOCK = "st"  # the trade reason of a blocked buy of an ST stock (backtest, orders)
# The enhanced book's settings: (0 allowed, largest value).
_ENHANCED_RANGES = {"tracking_error": (False, 1.0), "active_bound": (False, 1.0),
                    "style_bound": (False, 10.0), "max_turnover": (False, 1.0), "alpha_ic": (False, 1.0),
                    "risk_aversion": (True, 1e9), "alpha_halflife": (True, 250.0),
                    "trade_aversion": (True, 1000.0), "industry_bound": (True, 1.0)}
INDUSTRY_LEVELS = (1, 2)


@documented
@dataclass
class StrategyConfig:
    """How forecasts become target weights."""

    rule: str = option("top_k",
        '"top_k" (hold the top_k best scores), "dropout" (the same, replacing at most n_drop names a '
        "rebalance), \"threshold\" (long every stock scored above threshold) or \"enhanced\" (the index's "
        'weights leaned toward the scores under a tracking_error budget, enhanced); "top_k" without a top_k '
        'value behaves as "threshold".')
    top_k: int | None = option(None,
        'the number of names held (rules "top_k" and "dropout"); a walk-forward report\'s default: a '
        "third of the stocks, at most 10.")
    n_drop: int = option(1, "dropout: most names replaced per rebalance.")
    weighting: str = option("equal", '"equal" or "rank".')
    mode: str = option("long_flat",
        '"long_flat" or "long_short" (short the k lowest at -1/k; threshold: the stocks below -threshold; '
        "not with dropout).")
    threshold: float = option(0.0, "long when the forecast is above it (and short below -threshold).")
    top_k_above_threshold: bool = option(True,
        "top_k only picks stocks past the threshold (fewer than k leaves cash); False ranks whatever the "
        "sign (scores, not returns; the default for panels).")
    rebalance_every: int = option(1,
        "decide new weights every n forecast rows and hold them in between (an experiment's default: the "
        "label horizon).")
    exclude_st: bool = option(True,
        "an ST stock (ST, *ST on the signal day) is not bought: the rule picks no new one, the ranked list "
        "marks it not buyable, the orders and the backtest buy none (the backtest counts them as "
        "st_buys_skipped); a holding that becomes ST is kept while the rule still wants it, never added to. "
        "False: ST stocks are picked like any other (Qlib's default; most A-share mandates exclude them).")
    tracking_error: float = option(0.05,
        "enhanced: the annual tracking-error budget against the benchmark weights (the active variance the "
        "optimiser may spend).")
    active_bound: float = option(0.02,
        "enhanced: the most a stock's weight may differ from its benchmark weight.")
    style_bound: float = option(0.5,
        "enhanced: the largest active exposure to each style factor (in cross-sectional sd).")
    max_turnover: float = option(0.1, "enhanced: the most of the book traded (one-sided) per rebalance.")
    alpha_ic: float = option(0.05,
        "enhanced: the information coefficient that turns a score into expected return (alpha = alpha_ic x "
        "specific volatility x the score's standard score in alpha_shape).")
    risk_aversion: float = option(10.0,
        "enhanced: the penalty on active variance over the holding period (as alpha is) in the objective; "
        "small against a forecast's alpha, "
        "so the tracking-error budget limits risk, but it makes a book without a view hold the benchmark (0: "
        "any book within the limits is as good).")
    alpha_shape: str = option("zscore",
        'enhanced: the score\'s shape in alpha: "tails" (the normal scores of the ranks of the top and '
        'bottom fifth, 0 between), "rank" (those of every rank) or "zscore" (linear, winsorised at 3); each '
        "with sd 1.")
    alpha_halflife: float = option(0.0,
        "enhanced: alpha at the holding horizon: each stock's z-scores decayed over the recent forecast rows "
        "with this half-life in days (0: the day's scores alone).")
    industry_bound: float = option(0.0,
        "enhanced: with industries (the backtest's industries file), the most the book's weight in each "
        "industry group may differ from the benchmark's on a rebalance day (e.g. 0.05); 0: no bound.")
    industries: str = option("",
        "a file of the stocks' industry classes (baostock's query_stock_industry export, a code,industry "
        "file, or a dated date,code,industry file read point in time; UTF-8 or GBK): the groups of "
        "industry_bound and of the report's active_industries.csv; empty: none.")
    industry_level: int = option(1,
        "with industries: the level of a CSRC class (C39...): 1 the letter (section), 2 the division; a name "
        "without a code is one level.")
    industry_min_members: int = option(3,
        "with industries: a group with fewer members on a day is merged into its letter's group, or into "
        "\"other\".")
    trade_aversion: float = option(1.0,
        "enhanced: the weight of the trading cost in the objective (1: the cost itself; more trades less "
        "than the cost alone says: a penalty beside max_turnover).")

    def __post_init__(self):
        check_choice("rule", self.rule, RULES)
        check_choice("weighting", self.weighting, WEIGHTINGS)
        check_choice("mode", self.mode, MODES)
        check_choice("alpha_shape", self.alpha_shape, ALPHA_SHAPES)
        check_int("top_k", self.top_k, allow_none=True)
        check_int("n_drop", self.n_drop)
        check_int("rebalance_every", self.rebalance_every)
        check_choice("industry_level", self.industry_level, INDUSTRY_LEVELS)
        check_int("industry_min_members", self.industry_min_members)
        if not isinstance(self.industries, str):
            raise ConfigError(f"industries must be a file's path, got {self.industries!r}")
        if not isinstance(self.exclude_st, bool):
            raise ConfigError(f"exclude_st must be true or false, got {self.exclude_st!r}")
        if not (isinstance(self.threshold, (int, float)) and not isinstance(self.threshold, bool)
                and math.isfinite(self.threshold) and self.threshold >= 0):
            raise ConfigError(f"threshold must be a finite number >= 0, got {self.threshold!r}")
        for name, (zero_ok, high) in _ENHANCED_RANGES.items():
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                    and (value > 0 or (zero_ok and value == 0)) and value <= high):
                opening = "[" if zero_ok else "("
                raise ConfigError(f"{name} must be a number in {opening}0, {high:g}], got {value!r}")
        if self.industry_bound > 0 and not self.industries:
            raise ConfigError(f"industry_bound {self.industry_bound:g} (--industry-bound) needs industries "
                              "(--industries FILE: the stocks' industry classes); none given")
        if self.rule == "enhanced" and self.mode != "long_flat":
            raise ConfigError("rule 'enhanced' holds a long book only (mode 'long_flat')")
        if self.rule == "dropout":
            if self.top_k is None:
                raise ConfigError("rule 'dropout' needs top_k (the number of names held)")
            if self.n_drop > self.top_k:
                raise ConfigError(f"n_drop ({self.n_drop}) cannot exceed top_k ({self.top_k})")
            if self.mode != "long_flat":
                raise ConfigError("rule 'dropout' holds a long book only (mode 'long_flat')")

    @classmethod
    def for_universe(cls, n_stocks: int, **overrides) -> StrategyConfig:
        """The default for ``n_stocks``: a panel holds the ``top_k`` best scores (a third of
        the stocks, at most 10) ranked whatever their sign, with the dropout rule replacing at
        most a tenth of them (at least one) per rebalance; one stock trades its own forecast
        past the threshold. ``overrides`` (``None`` values ignored) replace any field (the
        measurement behind dropout: docs/results.md, ``scripts/bench_portfolio.py``)."""
        given = {k: v for k, v in overrides.items() if v is not None}
        if n_stocks < 2:
            return cls(**{"rule": "threshold", **given})
        k = given.get("top_k") or min(10, max(1, n_stocks // 3))
        defaults = {"rule": "dropout", "top_k": k, "n_drop": max(1, k // 10), "top_k_above_threshold": False}
        return cls(**{**defaults, **given})


def st_no_buy(st: np.ndarray, strategy: StrategyConfig) -> np.ndarray:
    """The ST rule, in one place: bool mask (the shape of ``st``, the days' ST marks) of the
    stocks not to be bought -- ``st`` itself under ``exclude_st``, no stock otherwise."""
    st = np.asarray(st, dtype=bool)
    return st.copy() if strategy.exclude_st else np.zeros_like(st)


def st_note(skipped: dict, strategy: StrategyConfig) -> str:
    """The report's line on the ST rule, from ``{backtest name: metrics["st_buys_skipped"]}``
    (``""`` where no backtest skipped any)."""
    if not strategy.exclude_st or not any(skipped.values()):
        return ""
    counts = ", ".join(f"{name} {n}" for name, n in skipped.items())
    return ("ST stocks (special treatment on the signal day) are not bought (--no-exclude-st to allow): "
            f"buys skipped for it: {counts}; a holding that becomes ST is kept while the rule still wants "
            "it, never added to")


def top_k_warning(strategy: StrategyConfig, n_stocks: int) -> str:
    """A warning when ``top_k`` reaches the universe's size (the book then holds every stock:
    an equal weight, not a selection by score); ``""`` otherwise."""
    if strategy.rule not in ("top_k", "dropout") or n_stocks < 2 or strategy.top_k < n_stocks:
        return ""
    return (f"warning: --top-k {strategy.top_k} is at or above the {n_stocks} stocks of the universe: the "
            "strategy holds every stock it can (an equal-weight book, not a selection by score)")


def rebalance_rows(n_rows: int, every: int) -> np.ndarray:
    """Index of the row whose weights are in force on each row (the last rebalance row)."""
    return np.arange(n_rows) // every * every


def _ranks(values: np.ndarray, descending: bool) -> np.ndarray:
    """0-based rank of each finite value within its row; ties keep column order; NaN last."""
    key = np.where(np.isfinite(values), -values if descending else values, np.inf)
    order = np.argsort(key, axis=1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.broadcast_to(np.arange(values.shape[1]), values.shape), axis=1)
    return ranks


def _dropout_holdings(f: np.ndarray, k: int, n_drop: int, rows: np.ndarray,
                      members: np.ndarray | None = None) -> np.ndarray:
    """``[rows x stocks]`` bool holdings of the top-k-dropout rule, decided on ``rows`` (the
    rebalance rows) and carried between them. One step per rebalance; vectorised over stocks.
    A holding that leaves ``members`` (bool ``[rows x stocks]``) is dropped on that row,
    whatever ``n_drop``, and its place filled at the next rebalance."""
    held = np.zeros(f.shape[1], dtype=bool)
    out = np.zeros(f.shape, dtype=bool)
    decide = np.zeros(len(f), dtype=bool)
    decide[rows] = True
    for t in range(len(f)):
        if members is not None:
            held &= members[t]
        if decide[t]:
            held = dropout_step(f[t], held, k, n_drop)
        out[t] = held
    return out


def dropout_step(scores: np.ndarray, held: np.ndarray, k: int, n_drop: int) -> np.ndarray:
    """One rebalance of the top-k-dropout rule: the names held after it (bool ``[stocks]``),
    from the scores ``[stocks]`` and the names held before (bool ``[stocks]``)."""
    finite = np.isfinite(scores)
    score = np.where(finite, scores, -np.inf)  # a held name without a forecast ranks last
    order = np.argsort(-score, kind="stable")
    fresh = order[~held[order] & finite[order]]
    room = max(k - int(held.sum()), 0)
    candidates = fresh[: n_drop + room]
    combined = np.concatenate([np.flatnonzero(held), candidates])
    combined = combined[np.lexsort((combined, -score[combined]))]  # best first, ties by column
    # Holdings in the bottom n_drop of holdings + candidates are sold (only when a candidate
    # can take their place) and the best candidates fill the book to k.
    bottom = combined[-n_drop:] if len(combined) > k else combined[:0]
    sell = bottom[held[bottom]]
    held = held.copy()
    held[sell] = False
    held[candidates[: len(sell) + room]] = True
    return held


def _weights(pick: np.ndarray, f: np.ndarray, weighting: str, descending: bool = True) -> np.ndarray:
    """Weights summing to 1 per row over ``pick`` (equal, or by rank within the picked set)."""
    n = pick.sum(axis=1, keepdims=True)
    if weighting == "equal":
        return pick / np.maximum(n, 1)
    inner = _ranks(np.where(pick, f, np.nan), descending)  # 0 = best among the picked
    raw = np.where(pick, n - inner, 0.0)
    return raw / np.maximum(raw.sum(axis=1, keepdims=True), 1e-12)


def target_weights(forecast: pd.DataFrame, strategy: StrategyConfig | None = None,
                   members: np.ndarray | None = None, no_buy: np.ndarray | None = None) -> pd.DataFrame:
    """Target weights ``[date x code]`` from forecasts ``[date x code]``, row for row.

    Row ``t`` of the result is the portfolio wanted for forecast row ``t``. ``NaN`` forecasts
    get weight 0 (a held ``dropout`` name without a forecast is the first to be replaced). Long
    weights sum to 1 (or less when fewer names qualify), shorts to -1; ties go to the earlier
    column. Weights are decided on every ``rebalance_every``-th row (the first included) and
    held in between. ``members`` (bool ``[date x code]``, a point-in-time universe): only
    members are picked, and a name that leaves gets weight 0 on that row, between rebalances
    too (sold at the next execution; its place is filled at the next rebalance). ``no_buy``
    (bool ``[date x code]``, :func:`st_no_buy`): a name not picked on the previous rebalance is
    not picked on that row (a held one may stay); ``attrs["st_skipped"]`` counts the names it
    kept out that the rule would have picked.
    """
    s = strategy or StrategyConfig()
    if not isinstance(forecast, pd.DataFrame):
        raise TypeError(f"forecast must be a DataFrame [date x code], got {type(forecast).__name__}")
    if s.rule == "enhanced":
        raise ValueError("rule 'enhanced' needs the panel's risk model and benchmark weights: "
                         "run_backtest builds that book (forecaster.portfolio.enhanced)")
    if no_buy is not None and np.asarray(no_buy, dtype=bool).any():
        return _weights_without(forecast, s, members, np.asarray(no_buy, dtype=bool))
    f = forecast.to_numpy(dtype=float)
    if members is not None:
        members = np.asarray(members, dtype=bool)
        f = np.where(members, f, np.nan)
    valid = np.isfinite(f)
    short_side = s.mode == "long_short"
    with np.errstate(invalid="ignore"):
        above, below = valid & (f > s.threshold), valid & (f < -s.threshold)
    rows = np.unique(rebalance_rows(len(f), s.rebalance_every))
    if s.rule == "dropout":
        w = _weights(_dropout_holdings(f, int(s.top_k), int(s.n_drop), rows, members), f, s.weighting)
    elif s.top_k is None or s.rule == "threshold":
        w = _weights(above, f, s.weighting)
        if short_side:
            w = w - _weights(below, f, s.weighting, descending=False)
    else:
        k = int(s.top_k)
        longs = valid & (_ranks(f, descending=True) < k)
        if s.top_k_above_threshold:
            longs &= above
        # Fewer than k names past the threshold leave the rest of the book in cash.
        w = _weights(longs, f, s.weighting) * longs.sum(axis=1, keepdims=True) / k
        if short_side:
            shorts = valid & (_ranks(f, descending=False) < k) & ~longs
            if s.top_k_above_threshold:
                shorts &= below
            w = w - _weights(shorts, f, s.weighting, descending=False) * shorts.sum(axis=1, keepdims=True) / k
    w = w[rebalance_rows(len(w), s.rebalance_every)]
    if members is not None:
        w = np.where(members, w, 0.0)
    return pd.DataFrame(w + 0.0, index=forecast.index, columns=forecast.columns)


def _weights_without(forecast: pd.DataFrame, s: StrategyConfig, members, no_buy: np.ndarray) -> pd.DataFrame:
    """:func:`target_weights` with names kept out by ``no_buy``, row by row: what the rule holds
    after a rebalance is what it may keep at the next."""
    f = forecast.to_numpy(dtype=float)
    out = np.zeros_like(f)
    held = np.zeros(f.shape[1], dtype=bool)
    w = np.zeros(f.shape[1])
    decide = np.zeros(len(f), dtype=bool)
    decide[np.unique(rebalance_rows(len(f), s.rebalance_every))] = True
    skipped = 0
    for t in range(len(f)):
        day = None if members is None else np.asarray(members[t], dtype=bool)
        if day is not None:
            held &= day
        if decide[t]:
            w = weights_for_book(f[t], held, s, day, no_buy[t])
            if (no_buy[t] & ~held).any():  # what the rule would have picked but for the mark
                free = weights_for_book(f[t], held, s, day)
                skipped += int(((free != 0) & (w == 0) & no_buy[t] & ~held).sum())
            held = w != 0
        out[t] = w if day is None else np.where(day, w, 0.0)
    frame = pd.DataFrame(out + 0.0, index=forecast.index, columns=forecast.columns)
    frame.attrs["st_skipped"] = skipped
    return frame


def weights_for_book(scores: np.ndarray, held: np.ndarray, strategy: StrategyConfig,
                     members: np.ndarray | None = None, no_buy: np.ndarray | None = None) -> np.ndarray:
    """Target weights ``[stocks]`` of one rebalance from scores ``[stocks]`` when the names held
    now are ``held`` (bool ``[stocks]``; only the dropout rule depends on them): what
    :func:`target_weights` decides row by row, for a book given from outside. ``members``
    (bool ``[stocks]``): the universe of the day; a non-member is neither bought nor kept.
    ``no_buy`` (bool ``[stocks]``, :func:`st_no_buy`): not picked unless held."""
    if no_buy is not None:
        scores = np.where(np.asarray(no_buy, dtype=bool) & ~held, np.nan, scores)
    if members is not None:
        members = np.asarray(members, dtype=bool)
        scores, held = np.where(members, scores, np.nan), held & members
    if strategy.rule == "dropout":
        pick = dropout_step(scores, held, int(strategy.top_k), int(strategy.n_drop))
        return _weights(pick[None], scores[None], strategy.weighting)[0]
    return target_weights(pd.DataFrame([scores]), strategy).to_numpy()[0]


def annual_turnover(weights: pd.DataFrame, periods_per_year: float = 252.0) -> float:
    """One-sided turnover of target weights per year: ``sum |w_t - w_{t-1}| / 2`` per row,
    averaged and annualised (1.0 = the whole book replaced once a year; price drift ignored)."""
    w = weights.fillna(0.0).to_numpy()
    if len(w) < 2:
        return math.nan
    return float(np.abs(np.diff(w, axis=0)).sum(axis=1).mean() / 2 * periods_per_year)
