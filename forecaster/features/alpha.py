"""Qlib's Alpha158 and Alpha360 feature sets, computed from a :class:`~forecaster.data.panel.Panel`
with Qlib's definitions (``qlib/contrib/data/loader.py``, ``Alpha158DL`` and ``Alpha360DL``, 0.9.7)
and its operators' exact semantics (``qlib/data/ops.py``), vectorised over ``[days, stocks]``.

Prices are adjusted as Qlib's ``$close`` is: raw price x a factor that changes only where
``preclose`` differs from the previous close (an ex-date), so equal raw prices stay equal;
the factor is 1 on each stock's first bar of the panel. Every feature is a ratio, so Qlib's
own level of adjustment does not matter, except through two absolute thresholds of Qlib's
(``Log($volume + 1)`` and a rolling std ``isclose(0, atol=2e-5)`` that blanks a flat window's
correlation and R-squared), which act alike on any window that is not exactly flat.

Qlib's operators, as here: every rolling window takes what it has (``min_periods=1``) and skips
NaN; ``Std`` has ddof 1; ``Rank`` is the percentile of the last value in its window
(ties averaged); ``Quantile`` interpolates linearly; ``Slope``, ``Rsquare`` and ``Resi`` are the
least squares line of the window's values on their positions; ``IdxMax``/``IdxMin`` give the
1-based position in the window (a NaN in the window counts as the extreme, numpy's argmax);
a comparison with NaN is false (0), and the eps ``1e-12`` of each denominator is kept. A
stock's series starts at its first bar (the days before are not in its windows), and every
feature is NaN on a day without a bar (Qlib gives those not divided by ``$close``, such as
RSQR or CNTP, a value there). VWAP is ``amount / volume``; data without amount have no VWAP
(Qlib reads an absent ``$vwap`` as NaN), and the sets then leave the VWAP columns out
(:func:`forecaster.features.factors.resolve_features`, the run's features note says so).

Models process these columns as any feature: the robust z-score fitted on the training rows
only (:class:`forecaster.features.processors.RobustZScore`, Qlib's ``RobustZScoreNorm`` with
``clip_outlier`` then ``Fillna``), and the ranked label (Qlib's ``CSRankNorm`` of the label).
Against pyqlib 0.9.7 on cn_qlib: ``tests/test_forecaster_alpha.py``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.lib.stride_tricks import sliding_window_view

from forecaster.data.panel import Panel

EPS = 1e-12
FLAT = 2e-5  # Qlib's atol: a window whose std is this close to 0 has no correlation or R-squared
WINDOWS = (5, 10, 20, 30, 60)

# Alpha158: the candlestick (kbar) features, the price features of window 0, then 29 rolling
# operators x 5 windows, each with Qlib's expression (``%d`` the window).
KBAR = {
    "KMID": "($close-$open)/$open", "KLEN": "($high-$low)/$open",
    "KMID2": "($close-$open)/($high-$low+1e-12)", "KUP": "($high-Greater($open, $close))/$open",
    "KUP2": "($high-Greater($open, $close))/($high-$low+1e-12)", "KLOW": "(Less($open, $close)-$low)/$open",
    "KLOW2": "(Less($open, $close)-$low)/($high-$low+1e-12)", "KSFT": "(2*$close-$high-$low)/$open",
    "KSFT2": "(2*$close-$high-$low)/($high-$low+1e-12)",
}
_UP = "Greater({0}-Ref({0}, 1), 0)"
_DOWN = "Greater(Ref({0}, 1)-{0}, 0)"
_MOVE = "(Sum(Abs({0}-Ref({0}, 1)), %d)+1e-12)"
ROLLING = {
    "ROC": "Ref($close, %d)/$close", "MA": "Mean($close, %d)/$close", "STD": "Std($close, %d)/$close",
    "BETA": "Slope($close, %d)/$close", "RSQR": "Rsquare($close, %d)", "RESI": "Resi($close, %d)/$close",
    "MAX": "Max($high, %d)/$close", "MIN": "Min($low, %d)/$close",
    "QTLU": "Quantile($close, %d, 0.8)/$close", "QTLD": "Quantile($close, %d, 0.2)/$close",
    "RANK": "Rank($close, %d)", "RSV": "($close-Min($low, %d))/(Max($high, %d)-Min($low, %d)+1e-12)",
    "IMAX": "IdxMax($high, %d)/%d", "IMIN": "IdxMin($low, %d)/%d",
    "IMXD": "(IdxMax($high, %d)-IdxMin($low, %d))/%d", "CORR": "Corr($close, Log($volume+1), %d)",
    "CORD": "Corr($close/Ref($close,1), Log($volume/Ref($volume, 1)+1), %d)",
    "CNTP": "Mean($close>Ref($close, 1), %d)", "CNTN": "Mean($close<Ref($close, 1), %d)",
    "CNTD": "Mean($close>Ref($close, 1), %d)-Mean($close<Ref($close, 1), %d)",
    **{f"{v}SUM{k}": text.format(field) for v, field in (("", "$close"), ("V", "$volume")) for k, text in (
        ("P", f"Sum({_UP}, %d)/{_MOVE}"), ("N", f"Sum({_DOWN}, %d)/{_MOVE}"),
        ("D", f"(Sum({_UP}, %d)-Sum({_DOWN}, %d))/{_MOVE}"))},
    "VMA": "Mean($volume, %d)/($volume+1e-12)", "VSTD": "Std($volume, %d)/($volume+1e-12)",
    "WVMA": "Std(Abs($close/Ref($close, 1)-1)*$volume, %d)/"
            "(Mean(Abs($close/Ref($close, 1)-1)*$volume, %d)+1e-12)",
}
ROLLING = {op: ROLLING[op] for op in (  # Qlib's order
    "ROC", "MA", "STD", "BETA", "RSQR", "RESI", "MAX", "MIN", "QTLU", "QTLD", "RANK", "RSV", "IMAX", "IMIN",
    "IMXD", "CORR", "CORD", "CNTP", "CNTN", "CNTD", "SUMP", "SUMN", "SUMD", "VMA", "VSTD", "WVMA", "VSUMP",
    "VSUMN", "VSUMD")}
# Alpha360: 60 days of each field over today's close (volume over today's volume), oldest first.
FIELDS360 = ("CLOSE", "OPEN", "HIGH", "LOW", "VWAP", "VOLUME")
DAYS360 = 60

ALPHA158 = (*KBAR, "OPEN0", "HIGH0", "LOW0", "VWAP0", *(f"{op}{d}" for op in ROLLING for d in WINDOWS))
ALPHA360 = tuple(f"{name}{i}" for name in FIELDS360 for i in range(DAYS360 - 1, -1, -1))
# Alpha158's price features are Alpha360's columns of day 0 (the same expressions).
_REF = re.compile(r"^(CLOSE|OPEN|HIGH|LOW|VWAP|VOLUME)(\d+)$")
_ROLL = re.compile(r"^([A-Z]+?)(\d+)$")


def expression(name: str) -> str:
    """Qlib's expression of the column ``name``."""
    if name in KBAR:
        return KBAR[name]
    ref = _REF.match(name)
    if ref:
        field, days = ref.group(1).lower(), int(ref.group(2))
        now = f"${field}" if days == 0 else f"Ref(${field}, {days})"
        return f"{now}/($volume+1e-12)" if field == "volume" else f"{now}/$close"
    op, days = _ROLL.match(name).groups()
    template = ROLLING[op]
    return template % ((int(days),) * template.count("%d"))


def _lookback(name: str) -> int:
    ref = _REF.match(name)
    if name in KBAR:
        return 1
    if ref:
        return max(1, int(ref.group(2)))
    op, days = _ROLL.match(name).groups()
    return int(days) + bool(re.search(r"Ref\(\$\w+, ?1\)", ROLLING[op]))  # a change needs a day more


def _needs(name: str) -> tuple[str, ...]:
    text = expression(name)
    return ("amount", "volume") if "$vwap" in text else ("volume",) if "$volume" in text else ()


# name -> (days of history it needs, what it is): the registry forecaster.features.factors joins.
ALPHA_FEATURES: dict[str, tuple[int, str]] = {
    name: (_lookback(name), f"Qlib {'Alpha158' if name in ALPHA158 else 'Alpha360'}: {expression(name)}")
    for name in dict.fromkeys((*ALPHA158, *ALPHA360))}
ALPHA_NEEDS: dict[str, tuple[str, ...]] = {n: _needs(n) for n in ALPHA_FEATURES if _needs(n)}


@dataclass
class _Bars:
    """Adjusted ``[D, N]`` prices and volume as Qlib's fields, NaN without a bar, and
    ``outside``: the days before each stock's first bar (not in its series)."""

    open: np.ndarray
    high: np.ndarray
    low: np.ndarray
    close: np.ndarray
    vwap: np.ndarray
    volume: np.ndarray
    outside: np.ndarray


def _bars(panel: Panel) -> _Bars:
    listed = panel.listed
    close = np.where(listed, panel["close"], np.nan)
    prev = pd.DataFrame(close).ffill().shift(1).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        step = prev / panel["preclose"]
    # exactly 1 where preclose is the previous close: the factor moves on ex-dates only
    step = np.where(listed & np.isfinite(step) & (step > 0), step, 1.0)
    factor = np.cumprod(step, axis=0)
    first = np.argmax(listed, axis=0)
    factor = factor / factor[first, np.arange(panel.n_stocks)]
    nan = np.full(close.shape, np.nan)

    def snap(values: np.ndarray) -> np.ndarray:
        # float32, as Qlib stores its fields: prices equal but for the last bits of the
        # adjustment's rounding (6.60 x 6.76 / 6.60 and 6.76) tie, as they do in Qlib's ranks
        return values.astype(np.float32).astype(float)

    def adjusted(name: str) -> np.ndarray:
        return snap(np.where(listed, panel[name] * factor, np.nan)) if name in panel.fields else nan

    volume = np.where(listed, panel["volume"] / factor, np.nan) if "volume" in panel.fields else nan
    vwap = nan
    if "amount" in panel.fields and "volume" in panel.fields:
        with np.errstate(invalid="ignore", divide="ignore"):
            vwap = snap(np.where(listed & (panel["volume"] > 0), panel["amount"] / panel["volume"] * factor,
                                 np.nan))
    outside = np.arange(panel.n_days)[:, None] < np.where(listed.any(axis=0), first, panel.n_days)[None, :]
    return _Bars(adjusted("open"), adjusted("high"), adjusted("low"), adjusted("close"), vwap, volume,
                 outside)


# ------------------------------------------------------------------ Qlib's operators on [D, N]
def _ref(x: np.ndarray, days: int) -> np.ndarray:
    out = np.full_like(x, np.nan)
    if days == 0:
        return x.copy()
    out[days:] = x[:-days]
    return out


def _roll(x: np.ndarray, days: int, how: str, *args, **kwargs) -> np.ndarray:
    """pandas' rolling ``how`` with ``min_periods=1``, as Qlib's ``Rolling`` operators (each
    stock's column contiguous: twice as fast)."""
    frame = pd.DataFrame(np.asfortranarray(x))
    return getattr(frame.rolling(days, min_periods=1), how)(*args, **kwargs).to_numpy()


def _flat(x: np.ndarray, days: int) -> np.ndarray:
    return np.isclose(_roll(x, days, "std"), 0.0, atol=FLAT)


def _centred(x: np.ndarray, present: np.ndarray) -> np.ndarray:
    """``x`` less its column's first present value, 0 where not ``present`` (windowed sums
    of centred values keep their precision)."""
    base = np.nan_to_num(x[np.argmax(present, axis=0), np.arange(x.shape[1])])
    return np.where(present, x - base, 0.0)


def _corr(a: np.ndarray, b: np.ndarray, days: int) -> np.ndarray:
    """pandas' rolling correlation (over the days both have a value), by windowed sums, blank
    where either series is flat (Qlib's ``Corr``)."""
    both = np.isfinite(a) & np.isfinite(b)
    x, y = _centred(a, both), _centred(b, both)
    n, sx, sy = _wsum(both.astype(float), days), _wsum(x, days), _wsum(y, days)
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = _wsum(x * y, days) - sx * sy / n
        var = (_wsum(x * x, days) - sx * sx / n) * (_wsum(y * y, days) - sy * sy / n)
        out = np.where((n > 1) & (var > 0), cov / np.sqrt(var), np.nan)
    return np.where(_flat(a, days) | _flat(b, days), np.nan, np.clip(out, -1.0, 1.0))


def _wsum(x: np.ndarray, days: int) -> np.ndarray:
    """Sum over the last ``days`` rows of each column (``x`` without NaN)."""
    c = np.vstack([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0)])
    lo = np.maximum(np.arange(1, len(x) + 1) - days, 0)
    return c[1:] - c[lo]


def _regression(y: np.ndarray, days: int, what: str) -> np.ndarray:
    """Qlib's ``rolling_slope`` / ``rolling_rsquare`` / ``rolling_resi``: least squares of the
    window's non-NaN values on their positions, by windowed sums (centred for precision)."""
    present = np.isfinite(y)
    yc = _centred(y, present)
    k = np.arange(len(y), dtype=float)[:, None]
    km = np.where(present, k, 0.0)
    n, sk, sy = _wsum(present.astype(float), days), _wsum(km, days), _wsum(yc, days)
    with np.errstate(invalid="ignore", divide="ignore"):
        sxx = n * _wsum(km * k, days) - sk * sk
        sxy = n * _wsum(k * yc, days) - sk * sy
        sxx = np.where((n > 1) & (sxx > 0), sxx, np.nan)
        slope = sxy / sxx
        if what == "slope":
            return slope
        if what == "resi":
            return np.where(present, yc - (slope * k + (sy - slope * sk) / n), np.nan)
        syy = n * _wsum(yc * yc, days) - sy * sy
        return np.where(_flat(y, days), np.nan, sxy * sxy / (sxx * syy))


def _position(x: np.ndarray, outside: np.ndarray, days: int, largest: bool, chunk: int = 256) -> np.ndarray:
    """Qlib's ``IdxMax`` / ``IdxMin``: 1-based position of the extreme in the window (numpy's
    argmax: the first NaN if any), over the days of the stock's series only."""
    fill = -np.inf if largest else np.inf
    rows, cols = x.shape
    # stocks by rows, so that each window is contiguous (8x faster than windows across rows)
    # float32 (the bars are float32 values already): half the memory to scan, the same argmax
    padded = np.hstack([np.full((cols, days - 1), fill, np.float32),
                        np.where(outside, fill, x).T.astype(np.float32)])
    windows = sliding_window_view(padded, days, axis=1)  # [N, D, days], a view
    pick = np.argmax if largest else np.argmin
    out = np.empty((cols, rows))
    for lo in range(0, cols, chunk):
        out[lo:lo + chunk] = pick(windows[lo:lo + chunk], axis=-1)
    out = out.T
    first = np.argmin(outside, axis=0) + np.where(outside.all(axis=0), rows, 0)
    lead = np.clip(first[None, :] - (np.arange(rows)[:, None] - days + 1), 0, days)
    counted = _wsum(np.isfinite(x).astype(float), days) > 0
    return np.where(counted, out - lead + 1, np.nan)


def _greater0(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)  # Qlib's Greater(x, 0): NaN stays NaN


def _sum_ratio(x: np.ndarray, days: int, op: str) -> np.ndarray:
    """SUMP / SUMN / SUMD (and their volume forms) of the series ``x``."""
    d = x - _ref(x, 1)
    up, down = _roll(_greater0(d), days, "sum"), _roll(_greater0(-d), days, "sum")
    total = _roll(np.abs(d), days, "sum") + EPS
    return {"P": up, "N": down, "D": up - down}[op] / total


def _rolling(b: _Bars, op: str, d: int) -> np.ndarray:
    c = b.close
    if op == "ROC":
        return _ref(c, d) / c
    if op in ("MA", "STD"):
        return _roll(c, d, {"MA": "mean", "STD": "std"}[op]) / c
    if op in ("BETA", "RESI"):
        return _regression(c, d, {"BETA": "slope", "RESI": "resi"}[op]) / c
    if op == "RSQR":
        return _regression(c, d, "rsquare")
    if op == "MAX":
        return _roll(b.high, d, "max") / c
    if op == "MIN":
        return _roll(b.low, d, "min") / c
    if op in ("QTLU", "QTLD"):
        return _roll(c, d, "quantile", 0.8 if op == "QTLU" else 0.2) / c
    if op == "RANK":
        return _roll(c, d, "rank", pct=True)
    if op == "RSV":
        low = _roll(b.low, d, "min")
        return (c - low) / (_roll(b.high, d, "max") - low + EPS)
    if op == "IMAX":
        return _position(b.high, b.outside, d, True) / d
    if op == "IMIN":
        return _position(b.low, b.outside, d, False) / d
    if op == "IMXD":
        return (_position(b.high, b.outside, d, True) - _position(b.low, b.outside, d, False)) / d
    if op == "CORR":
        with np.errstate(invalid="ignore", divide="ignore"):
            return _corr(c, np.log(b.volume + 1), d)
    if op == "CORD":
        with np.errstate(invalid="ignore", divide="ignore"):
            return _corr(c / _ref(c, 1), np.log(b.volume / _ref(b.volume, 1) + 1), d)
    if op in ("CNTP", "CNTN", "CNTD"):
        prev = _ref(c, 1)
        with np.errstate(invalid="ignore"):
            up = np.where(b.outside, np.nan, (c > prev).astype(float))
            down = np.where(b.outside, np.nan, (c < prev).astype(float))
        if op == "CNTD":
            return _roll(up, d, "mean") - _roll(down, d, "mean")
        return _roll(up if op == "CNTP" else down, d, "mean")
    if op in ("SUMP", "SUMN", "SUMD"):
        return _sum_ratio(c, d, op[-1])
    if op in ("VSUMP", "VSUMN", "VSUMD"):
        return _sum_ratio(b.volume, d, op[-1])
    if op == "VMA":
        return _roll(b.volume, d, "mean") / (b.volume + EPS)
    if op == "VSTD":
        return _roll(b.volume, d, "std") / (b.volume + EPS)
    # WVMA
    weighted = np.abs(c / _ref(c, 1) - 1) * b.volume
    return _roll(weighted, d, "std") / (_roll(weighted, d, "mean") + EPS)


def alpha_feature(panel: Panel, name: str, chunk_bytes: int = 32 * 2**20) -> np.ndarray:
    """The Alpha158 / Alpha360 column ``name`` ``[D, N]`` (float64; NaN on days without a
    bar), from the panel's adjusted bars (kept on the panel for the next column). Every
    operator reads one stock's series, so the column is computed a block of stocks at a time
    (``chunk_bytes`` of one float64 ``[D, stocks]`` array): the operators' temporaries, some
    twenty such arrays, are a block's, not the whole market's."""
    if name not in ALPHA_FEATURES:
        raise ValueError(f"unknown Qlib feature {name!r}")
    b = panel.derived(("alpha_bars",), lambda: _bars(panel))
    out = np.empty(b.close.shape)
    size = max(1, chunk_bytes // (8 * max(1, panel.n_days)))
    for a in range(0, panel.n_stocks, size):
        block = _Bars(*(getattr(b, f.name)[:, a:a + size] for f in dataclasses.fields(_Bars)))
        out[:, a:a + size] = _column(block, name)
    out[~panel.listed] = np.nan
    return out


def _column(b: _Bars, name: str) -> np.ndarray:
    """The column ``name`` of the stocks of ``b``, ``[D, stocks]``."""
    c = b.close
    with np.errstate(invalid="ignore", divide="ignore"):
        if name in KBAR:
            o, h, lo = b.open, b.high, b.low
            body, span = {"KMID": (c - o, None), "KLEN": (h - lo, None), "KMID2": (c - o, 1),
                          "KUP": (h - np.maximum(o, c), None), "KUP2": (h - np.maximum(o, c), 1),
                          "KLOW": (np.minimum(o, c) - lo, None), "KLOW2": (np.minimum(o, c) - lo, 1),
                          "KSFT": (2 * c - h - lo, None), "KSFT2": (2 * c - h - lo, 1)}[name]
            return body / o if span is None else body / (h - lo + EPS)
        if _REF.match(name):
            field, days = _REF.match(name).groups()
            values = getattr(b, field.lower())
            return _ref(values, int(days)) / ((b.volume + EPS) if field == "VOLUME" else c)
        op, days = _ROLL.match(name).groups()
        return _rolling(b, op, int(days))
