"""Scale-free daily features and classic factor scores on a :class:`~forecaster.data.panel.Panel`.

Every feature of day ``t`` uses bars up to ``t`` only, and none divides by a stock's own
history of levels: volatility, turnover, traded amount and valuation stay comparable across
stocks, so a model (or a per-day rank) can see which stocks are calm, illiquid or cheap.
All arrays are ``[days, stocks]``; rolling statistics are vectorised over stocks (pandas
rolling on wide frames), and a day without a bar or suspended is NaN, never 0.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from forecaster.data.minute.features import INTRADAY_FEATURES
from forecaster.data.panel import Panel
from forecaster.data.sources import DataError
from forecaster.features.alpha import ALPHA158, ALPHA360, ALPHA_FEATURES, ALPHA_NEEDS, alpha_feature
from forecaster.features.industry import INDUSTRY_FEATURES, INDUSTRY_FIELD, industry_feature

# name -> (days of history it needs, what it is)
FEATURES: dict[str, tuple[int, str]] = {
    "ret_1d": (1, "log(close / preclose)"),
    "gap": (1, "log(open / preclose): the overnight move"),
    "intraday": (1, "log(close / open)"),
    "range": (1, "log(high / low)"),
    "vwap_close": (1, "log(VWAP / close), VWAP = amount / volume"),
    "volume_surprise": (21, "log(volume / mean volume of the previous 20 days)"),
    "log_turnover": (1, "log turnover (percent of float traded)"),
    "log_amount_20d": (20, "log mean traded amount over 20 days (size and liquidity)"),
    "volatility_20d": (20, "std of daily log returns over 20 days"),
    "volatility_60d": (60, "std of daily log returns over 60 days"),
    "return_5d": (5, "log return over 5 days (short-term reversal)"),
    "return_20d": (20, "log return over 20 days (momentum)"),
    "return_60d": (60, "log return over 60 days (momentum)"),
    "max_return_20d": (20, "largest daily log return in 20 days (lottery)"),
    "turnover_20d": (20, "log mean turnover over 20 days"),
    "illiquidity_20d": (20, "log mean |return| / amount over 20 days (Amihud)"),
    "range_position_60d": (60, "close within its 60-day low..high range, 0..1"),
    "skewness_20d": (20, "skewness of daily log returns over 20 days"),
    "idio_volatility_20d": (20, "std of daily log returns over 20 days net of the equal-weight market "
                                "(times sqrt(1 - corr^2) with the universe's mean return)"),
    "price_volume_corr_20d": (20, "correlation of log close and log volume over 20 days"),
    "abnormal_turnover": (60, "log(mean turnover over 5 days / mean turnover over 60 days)"),
    "book_to_price": (1, "1 / pbMRQ"),
    "earnings_to_price": (1, "1 / peTTM"),
    "sales_to_price": (1, "1 / psTTM"),
    # From minute bars (--intraday DIR; forecaster.data.minute.features.daily_features), each from the
    # bars of its own day up to the close.
    **{name: (1, text) for name, text in INTRADAY_FEATURES.items()},
    # Size, where the data give the market value (the xbx layout's 流通市值 / 总市值): used only when
    # named (--features ...), never by default (OPTIONAL_FEATURES).
    "log_float_mv": (1, "log float market value (CNY): size"),
    "log_total_mv": (1, "log total market value (CNY): size"),
    # Against the stock's industry (forecaster.features.industry): only with an industries file, when named.
    **{name: (days, text) for name, (days, text, _) in INDUSTRY_FEATURES.items()},
}
# Four more A-share factors that the models use by default on a whole market only (past 500
# stocks, forecaster.models.panel.sizing): there they lifted the Transformer's rank IC in three
# of four test years, while on 60 CSI 300 stocks they cost it 0.010 (docs/results.md).
MARKET_ONLY_FEATURES = ("skewness_20d", "idio_volatility_20d", "price_volume_corr_20d", "abnormal_turnover")
# Features a model uses only when they are named: adding them to the defaults would change every
# model's inputs (and results) on data that carry the columns.
OPTIONAL_FEATURES = ("log_float_mv", "log_total_mv", *INDUSTRY_FEATURES)
DEFAULT_FEATURES = tuple(n for n in FEATURES if n not in MARKET_ONLY_FEATURES + OPTIONAL_FEATURES)
MARKET_FEATURES = tuple(n for n in FEATURES if n not in OPTIONAL_FEATURES)
# Qlib's feature sets (forecaster.features.alpha), used only when named: a set's name stands for
# those of its columns the data's columns allow (resolve_features), or a column is named alone.
FEATURE_SETS: dict[str, tuple[str, ...]] = {"alpha158": ALPHA158, "alpha360": ALPHA360,
                                            "industry": tuple(INDUSTRY_FEATURES)}
FEATURES.update(ALPHA_FEATURES)
CHOICES = (f"choose from {[n for n in FEATURES if n not in ALPHA_FEATURES]}, a set of Qlib's "
           f"{list(FEATURE_SETS)} or one of its columns (KMID, ..., ROC5, ..., VOLUME59)")


def check_feature_names(names) -> None:
    """At least one name, each a feature or a set's name (an error names the unknown ones)."""
    bad = [n for n in names if n not in FEATURES and n not in FEATURE_SETS]
    if bad or not names:
        raise ValueError(f"unknown features {bad}; {CHOICES}")


def expand_features(names) -> tuple[str, ...]:
    """``names`` with each set's name replaced by all its columns (a column once)."""
    return tuple(dict.fromkeys(c for n in names for c in FEATURE_SETS.get(n, (n,))))


def resolve_features(panel: Panel, names) -> tuple[str, ...]:
    """The features a model computes for ``names``: each set's name replaced by those of its
    columns the panel's columns allow (Alpha158's VWAP0 needs amount; :func:`features_note`
    names the ones left out), a feature named alone kept (:func:`check_available` checks it)."""
    return tuple(dict.fromkeys(c for n in names for c in (
        available_features(panel, FEATURE_SETS[n]) if n in FEATURE_SETS else (n,))))


def lookback(names=DEFAULT_FEATURES) -> int:
    """Days of history the longest of ``names`` needs."""
    return max(FEATURES[n][0] for n in expand_features(names))


def _roll(values: np.ndarray, days: int, how: str, min_fraction: float = 0.75) -> np.ndarray:
    """Rolling ``how`` over the last ``days`` rows of each column, ignoring NaN, with at least
    ``min_fraction`` of the rows present."""
    frame = pd.DataFrame(values)
    roll = frame.rolling(days, min_periods=max(2, int(np.ceil(min_fraction * days))))
    return getattr(roll, how)().to_numpy()


def _roll_corr(a: np.ndarray, b: np.ndarray, days: int, min_fraction: float = 0.75) -> np.ndarray:
    """Rolling correlation of each column of ``a`` with the same column of ``b`` over the last
    ``days`` rows where both are present (NaN where either is constant)."""
    roll = pd.DataFrame(a).rolling(days, min_periods=max(3, int(np.ceil(min_fraction * days))))
    out = roll.corr(pd.DataFrame(np.ascontiguousarray(b))).to_numpy()
    return np.where(np.isfinite(out), out, np.nan)


def _log_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.log(a / b)
    return np.where(np.isfinite(out), out, np.nan)


def _inverse(values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        out = 1.0 / values
    return np.where(np.isfinite(out), out, np.nan)


def feature(panel: Panel, name: str, cache: bool = True) -> np.ndarray:
    """One feature ``[D, N]`` (NaN where it cannot be computed), kept on the panel for the
    next caller unless ``cache=False`` (a cached one is always reused)."""
    if name not in FEATURES:
        raise ValueError(f"unknown feature {name!r}; {CHOICES}")
    key = ("feature", name)
    if key in panel._cache:
        return panel._cache[key]
    if name in ALPHA_FEATURES:
        out = alpha_feature(panel, name)
        if cache:
            panel._cache[key] = out
        return out
    if name in INDUSTRY_FEATURES:
        base = feature(panel, INDUSTRY_FEATURES[name][2], cache=cache)
        out = (industry_feature(name, base, panel.fields[INDUSTRY_FIELD]) if INDUSTRY_FIELD in panel.fields
               else np.full(base.shape, np.nan))
        if cache:
            panel._cache[key] = out
        return out
    trades = panel.tradeable()
    ret = panel.returns()
    f = panel.fields
    nan = np.full(ret.shape, np.nan)

    def traded(values: np.ndarray) -> np.ndarray:
        return np.where(trades, values, np.nan)

    if name == "ret_1d":
        out = ret
    elif name == "gap":
        out = traded(_log_ratio(f["open"], f["preclose"]))
    elif name == "intraday":
        out = traded(_log_ratio(f["close"], f["open"]))
    elif name == "range":
        out = traded(_log_ratio(f["high"], f["low"]))
    elif name == "vwap_close":
        if "amount" in f and "volume" in f:
            # Clipped: exports that scale amount or volume differently give nonsense here.
            with np.errstate(invalid="ignore", divide="ignore"):
                vwap = f["amount"] / f["volume"]
            out = np.clip(traded(_log_ratio(vwap, f["close"])), -0.2, 0.2)
        else:
            out = nan
    elif name == "volume_surprise":
        if "volume" in f:
            vol = traded(f["volume"])
            with np.errstate(invalid="ignore"):
                vol = np.where(vol > 0, vol, np.nan)
            prev = np.vstack([nan[:1], _roll(vol, 20, "mean")[:-1]])
            out = _log_ratio(vol, prev)
        else:
            out = nan
    elif name == "log_turnover":
        out = _log_ratio(traded(f["turnover"]), 1.0) if "turnover" in f else nan
    elif name == "log_amount_20d":
        out = _log_ratio(_roll(traded(f["amount"]), 20, "mean"), 1.0) if "amount" in f else nan
    elif name in ("volatility_20d", "volatility_60d"):
        out = _roll(ret, int(name.split("_")[1][:-1]), "std")
    elif name in ("return_5d", "return_20d", "return_60d"):
        days = int(name.split("_")[1][:-1])
        logp = panel.log_adjusted("close")
        prev = np.full_like(logp, np.nan)  # a slice shorter than `days` has no such return at all
        prev[days:] = logp[:-days]
        out = np.where(trades, logp - prev, np.nan)
    elif name == "max_return_20d":
        out = _roll(ret, 20, "max")
    elif name == "turnover_20d":
        out = _log_ratio(_roll(traded(f["turnover"]), 20, "mean"), 1.0) if "turnover" in f else nan
    elif name == "illiquidity_20d":
        if "amount" in f:
            with np.errstate(invalid="ignore", divide="ignore"):
                impact = np.abs(ret) / np.where(f["amount"] > 0, f["amount"], np.nan) * 1e9
            out = _log_ratio(_roll(impact, 20, "mean") + 1e-6, 1.0)
        else:
            out = nan
    elif name == "skewness_20d":
        out = _roll(ret, 20, "skew")
    elif name == "idio_volatility_20d":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # days without any return
            market = np.nanmean(ret, axis=1)
        corr = _roll_corr(ret, np.broadcast_to(market[:, None], ret.shape), 20)
        out = _roll(ret, 20, "std") * np.sqrt(np.clip(1.0 - np.square(corr), 0.0, 1.0))
    elif name == "price_volume_corr_20d":
        if "volume" in f:
            logv = _log_ratio(np.where(f["volume"] > 0, traded(f["volume"]), np.nan), 1.0)
            logp = np.where(trades, panel.log_adjusted("close"), np.nan)
            out = _roll_corr(logp, logv, 20)
        else:
            out = nan
    elif name == "abnormal_turnover":
        if "turnover" in f:
            turnover = traded(f["turnover"])
            out = _log_ratio(_roll(turnover, 5, "mean"), _roll(turnover, 60, "mean"))
        else:
            out = nan
    elif name == "range_position_60d":
        logp = np.where(trades, panel.log_adjusted("close"), np.nan)
        lo, hi = _roll(logp, 60, "min"), _roll(logp, 60, "max")
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.where(hi > lo, (logp - lo) / (hi - lo), 0.5)
        out = np.where(np.isfinite(logp) & np.isfinite(lo), out, np.nan)
    elif name in ("log_float_mv", "log_total_mv"):
        column = name[4:]
        out = _log_ratio(traded(f[column]), 1.0) if column in f else nan
    elif name in INTRADAY_FEATURES:
        out = traded(f[name]) if name in f else nan
    else:  # valuation: a yield is monotone in value and finite where the multiple is negative
        column = {"book_to_price": "pb_mrq", "earnings_to_price": "pe_ttm",
                  "sales_to_price": "ps_ttm"}[name]
        out = np.where(panel.listed, _inverse(f[column]), np.nan) if column in f else nan
    out = np.asarray(out, dtype=float)
    if cache:
        panel._cache[key] = out
    return out


def feature_tensor(panel: Panel, names=DEFAULT_FEATURES, front: int = 0) -> np.ndarray:
    """Features ``[front + D, N, F]`` (float32) in the order of ``names`` (a set's name: all
    its columns), after ``front`` rows of zeros (the padding a sequence model reads before the
    first day). Filled one feature at a time and not cached on the panel: the peak is the
    float32 tensor plus one float64 feature (caching all of them would hold 2x the tensor
    again, ~2 GB for a 5,000-stock, 10-year training slice). A panel that carries the run's
    feature store (:attr:`Panel.features` covering ``names``) has them read from it."""
    check_feature_names(names)
    names = expand_features(names)
    out = np.zeros((front + panel.n_days, panel.n_stocks, len(names)), dtype=np.float32)
    if panel.features is not None and panel.features.covers(names):  # the run's store: read, not computed
        panel.features.select(names).days(out=out[front:])
        return out
    for i, name in enumerate(names):
        out[front:, :, i] = feature(panel, name, cache=False)
    return out


# The panel fields a feature needs beyond the prices (the others read open, high, low, close
# and preclose only). Where the data hold no amount at all (Qlib's community folders), close x
# volume would stand in for it closely (on 52 Shenzhen stocks the 20-day log amount within 0.014
# at the 99th percentile, daily rank correlation 0.9998), but on cn_qlib's CSI 300 members in
# 2025-2026 the two features it brought back cost the Transformer 0.0094 of rank IC (p = 0.057,
# docs/results.md), so such data go without them, and the run says so (features_note).
NEEDS: dict[str, tuple[str, ...]] = {
    "vwap_close": ("amount", "volume"), "volume_surprise": ("volume",), "log_turnover": ("turnover",),
    "log_amount_20d": ("amount",), "turnover_20d": ("turnover",), "illiquidity_20d": ("amount",),
    "price_volume_corr_20d": ("volume",), "abnormal_turnover": ("turnover",),
    "book_to_price": ("pb_mrq",), "earnings_to_price": ("pe_ttm",), "sales_to_price": ("ps_ttm",),
    "log_float_mv": ("float_mv",), "log_total_mv": ("total_mv",),
    **{n: (n,) for n in INTRADAY_FEATURES}, **ALPHA_NEEDS,
    **{n: (INDUSTRY_FIELD, *(("volume",) if "volume" in n else ())) for n in INDUSTRY_FEATURES}}


def available_features(panel: Panel, names=DEFAULT_FEATURES) -> tuple[str, ...]:
    """The features of ``names`` the panel's columns allow (a valuation-free export has no
    book-to-price)."""
    return tuple(n for n in names if all(panel.has(c) for c in NEEDS.get(n, ())))


def lacking(panel: Panel, names) -> dict[str, tuple[str, ...]]:
    """``{feature: columns}``: the features of ``names`` the panel cannot give, each with the
    columns it lacks (a set's name: where none of its columns can be given)."""
    absent = {}
    for n in names:
        cols = FEATURE_SETS.get(n, (n,))
        if n in FEATURE_SETS and available_features(panel, cols):
            continue  # a set stands for the columns the data allow
        absent[n] = tuple(dict.fromkeys(c for col in cols for c in NEEDS.get(col, ()) if not panel.has(c)))
    return {n: cols for n, cols in absent.items() if cols}


def check_available(panel: Panel, names) -> None:
    """Features asked for by name must be computable: each one the data's columns cannot give
    is named with the columns it lacks (left in, it would reach the network as zeros)."""
    absent = lacking(panel, names)
    if absent:
        raise DataError("the data's columns do not give the features " + "; ".join(
            f"{n} (needs {', '.join(cols)})" for n, cols in absent.items())
            + " (intraday features need the minute bars: --intraday DIR)" * any(
                n in INTRADAY_FEATURES for n in absent)
            + " (industry features need the stocks' industry classes: --industries FILE)" * any(
                n in INDUSTRY_FEATURES or n == "industry" for n in absent))


def features_note(panel: Panel, names=DEFAULT_FEATURES, label: str = "features") -> str:
    """In words, which of the features ``names`` the data's columns leave out, with the
    columns they lack, after ``label`` (``"blend features"`` for a second set); ``""`` when
    none. The minute-bar features count only where the panel has minute bars (``--intraday``)."""
    names = expand_features(names)
    if not any(panel.has(n) for n in INTRADAY_FEATURES):
        names = tuple(n for n in names if n not in INTRADAY_FEATURES)
    lost: dict[tuple[str, ...], list[str]] = {}
    for name, absent in lacking(panel, names).items():
        lost.setdefault(absent, []).append(name)
    if not lost:
        return ""
    n_lost = sum(len(lost_names) for lost_names in lost.values())
    return (f"{label}: {len(names) - n_lost} of {len(names)} computed; left out, the "
            "data lacking their columns: " + "; ".join(f"{', '.join(lost_names)} ({', '.join(absent)})"
                                                       for absent, lost_names in lost.items()))


def inputs_note(panel: Panel, names, blend=()) -> str:
    """:func:`features_note` of a model's inputs ``names`` and, on its own line, of its
    second set ``blend`` (``--blend-features``); ``""`` when neither leaves anything out."""
    notes = (features_note(panel, names), features_note(panel, blend, "blend features") if blend else "")
    return "\n".join(n for n in notes if n)


def missing_inputs(panel: Panel, names=DEFAULT_FEATURES) -> dict[str, tuple[str, ...]]:
    """``{code: columns}``: the columns the features ``names`` need of which a stock has no
    value on any day it trades while other stocks have them (its file lacks the column, or
    holds it empty). Those features are NaN for the stock on every day, as missing values
    are; :func:`missing_inputs_text` says so."""
    active = panel.tradeable().any(axis=0)
    out: dict[str, list[str]] = {}
    for column in sorted({c for n in names for c in NEEDS.get(n, ())}):
        has = panel.stocks_with(column)
        if has is not None and has.any():
            for j in np.flatnonzero(active & ~has):
                out.setdefault(str(panel.codes[j]), []).append(column)
    return {code: tuple(columns) for code, columns in out.items()}


def missing_features(panel: Panel, names=DEFAULT_FEATURES) -> dict[str, tuple[str, ...]]:
    """``{code: features}``: the features of ``names`` that :func:`missing_inputs` leaves NaN
    for each stock it names."""
    return {code: tuple(n for n in names if set(NEEDS.get(n, ())) & set(columns))
            for code, columns in missing_inputs(panel, names).items()}


def missing_inputs_text(panel: Panel, names=DEFAULT_FEATURES, max_named: int = 20) -> str:
    """What :func:`missing_inputs` finds, in words (grouped by the columns; ``""`` for
    nothing): the stocks, the columns and the features of ``names`` missing for them."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for code, columns in missing_inputs(panel, names).items():
        groups.setdefault(columns, []).append(code)
    parts = []
    for columns, codes in groups.items():
        lost = [n for n in names if set(NEEDS.get(n, ())) & set(columns)]
        one = len(codes) == 1
        more = len(codes) - max_named
        shown = ", ".join(codes[:max_named]) + (f" and {more} more" if more > 0 else "")
        parts.append(f"{len(codes)} stock{'' if one else 's'} without any value of {', '.join(columns)} "
                     f"that other stocks have: {shown}; features {', '.join(lost)} are missing (NaN) for "
                     f"{'it' if one else 'them'}")
    return "; ".join(parts)


def cs_rank(values: np.ndarray) -> np.ndarray:
    """Per-day percentile ranks across stocks in (0, 1] ``[D, N]`` (NaN kept)."""
    return pd.DataFrame(values).rank(axis=1, pct=True).to_numpy()


# Factor scores (higher = expected to do better), the ones a sceptic tries first.
FACTORS: dict[str, tuple[tuple[str, float], ...]] = {
    "reversal_1d": (("ret_1d", -1.0),),
    "reversal_5d": (("return_5d", -1.0),),
    "momentum_20d": (("return_20d", 1.0),),
    "low_vol_20d": (("volatility_20d", -1.0),),
    "low_turnover_20d": (("turnover_20d", -1.0),),
    "book_to_price": (("book_to_price", 1.0),),
    # Equal-weight composite of rank-normalised low volatility, low turnover and value.
    "composite": (("volatility_20d", -1.0), ("turnover_20d", -1.0), ("book_to_price", 1.0)),
}


def factor_score(panel: Panel, name: str) -> np.ndarray:
    """The factor's score ``[D, N]`` by signal day; a composite averages the per-day ranks of
    its parts over those available for the stock that day."""
    if name not in FACTORS:
        raise ValueError(f"unknown factor {name!r}; choose from {list(FACTORS)}")
    parts = FACTORS[name]
    if len(parts) == 1:
        base, sign = parts[0]
        return sign * feature(panel, base)
    ranks = np.stack([cs_rank(sign * feature(panel, base)) for base, sign in parts])
    with np.errstate(invalid="ignore"):
        count = np.isfinite(ranks).sum(axis=0)
        return np.where(count > 0, np.nansum(ranks, axis=0) / np.maximum(count, 1), np.nan)
