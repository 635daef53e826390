"""A panel model's scores: the networks' scoring pass, per-day standardisation, the blend
of several sets' scores, and the ``(date, code)`` Series a forecast is handed on as."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import torch

from forecaster.data.panel import Panel
from forecaster.models.panel.dataset import SequenceData, choose_stocks, day_blocks, day_span
from forecaster.models.training import autocast

# The inputs a CPU pass scores at once, at most: a wide second set with its market columns
# is ten times the default's, and its block of every stock would not fit beside the rest.
GROUP_BYTES = 128 * 2**20


def scores_to_series(scores: np.ndarray, panel: Panel, rows: np.ndarray) -> pd.Series:
    """Scores ``[len(rows), N]`` of signal days ``rows`` as a Series indexed by
    ``(forecast date, code)``, the forecast date being the next trading day; NaN dropped."""
    dates = panel.dates[rows + 1]
    frame = pd.DataFrame(scores, index=pd.DatetimeIndex(dates, name="date"), columns=panel.codes)
    frame.columns.name = "code"
    return frame.stack().dropna().rename("forecast")


def standardise_per_day(scores: np.ndarray) -> np.ndarray:
    """``[D, N]`` minus each day's mean over its standard deviation (NaN kept)."""
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # days without any score
        mean = np.nanmean(scores, axis=1, keepdims=True)
        sd = np.nanstd(scores, axis=1, keepdims=True)
    return (scores - mean) / np.where(sd > 0, sd, 1.0)


def blend_scores(parts: list[np.ndarray]) -> np.ndarray:
    """The mean of each part's per-day standardised scores ``[D, N]``, over the parts that
    score a stock (NaN where none does)."""
    z = np.stack([standardise_per_day(p) for p in parts])
    count = np.isfinite(z).sum(axis=0)
    return np.where(count > 0, np.nansum(z, axis=0) / np.maximum(count, 1), np.nan)


@torch.no_grad()
def ensemble_scores(nets, data: SequenceData, rows: np.ndarray, device: torch.device, precision: str,
                    width: int, cross_stock: bool, chunk: int | None = None,
                    max_stocks: int | None = None, rng: np.random.Generator | None = None) -> np.ndarray:
    """The networks' mean scores ``[len(rows), N]`` for sorted signal days ``rows`` (each
    network's per-day standardised when there are several); NaN where a stock is not present,
    or not among the ``max_stocks`` drawn with ``rng`` for a block of ``chunk`` days.
    ``chunk=None``: 64 days on the CPU, 512 on an accelerator (fewer, larger passes; a day's
    score does not depend on the chunk). ``width``: input columns a stock-day (features and
    market); ``cross_stock``: a layer mixes stocks, so a block's stocks are scored together."""
    if chunk is None:
        chunk = 64 if device.type == "cpu" else 512
    out = np.full((len(rows), len(data.codes)), np.nan)
    together = device.type != "cpu" or cross_stock
    for net in nets:
        net.eval()
    for block in day_blocks(rows, chunk):
        first, last = day_span(block)
        stocks = choose_stocks(data.present[first:last + 1], max_stocks, rng)
        present_np = data.present[first:last + 1][:, stocks]
        raw = np.zeros((len(nets), *present_np.shape))
        for part in stock_groups(data.context + len(block), len(stocks), width, together):
            x, _, _, present, _ = data.batch(block, stocks=stocks[part])
            for k, net in enumerate(nets):
                with autocast(device, precision):
                    s = net(x.to(device), present.to(device))
                raw[k][:, part] = s.double().cpu().numpy()
        total = np.zeros(present_np.shape)
        for s in raw:
            if not np.isfinite(s[present_np]).all():  # else they would average to 0, silently
                raise FloatingPointError("a network scored stocks as NaN or infinite: its weights "
                                         "are not finite")
            s = np.where(present_np, s, np.nan)
            total += np.nan_to_num(standardise_per_day(s)) if len(nets) > 1 else s
        at = np.searchsorted(rows, block)
        out[np.ix_(at, stocks)] = np.where(present_np, total / len(nets), np.nan)
    return out


def stock_groups(steps: int, n_stocks: int, width: int, together: bool,
                 budget_bytes: int | None = None) -> list[slice]:
    """Slices of a block's ``n_stocks`` stocks scored in one pass: all of them ``together``
    (an accelerator, or a layer across stocks), otherwise as many as keep the float32 inputs
    ``[stocks, steps, width]`` within ``budget_bytes`` (default :data:`GROUP_BYTES`). A
    stock's score does not depend on the others scored with it."""
    if together or not n_stocks:
        return [slice(0, n_stocks)]
    budget = GROUP_BYTES if budget_bytes is None else budget_bytes
    size = max(1, budget // max(1, steps * width * 4))
    return [slice(a, min(n_stocks, a + size)) for a in range(0, n_stocks, size)]
