"""Per-day cross-sectional losses for ranking models: every loss compares the scores of the
stocks of one day with that day's (normalised) labels, averaged over days.

Shapes: ``scores``, ``labels`` ``[days, stocks]``; ``mask`` ``[days, stocks]`` bool (True =
a stock with a label that day), or float weights >= 0 (a training universe's members weighted
above the other stocks: each stock-day counts by its weight, 0 as unlabelled; a bool mask is
weights of 1 and 0, bit for bit). Days with fewer than two stocks carry no ranking
information and are left out.
"""

from __future__ import annotations

import torch

RANK_LOSSES = ("mse", "ic", "icir", "pairwise", "listnet")


def _sqrt_or_zero(x: torch.Tensor) -> torch.Tensor:
    """``sqrt(x)`` where ``x > 0``, else 0 with a zero gradient: the square root's gradient at
    0 is infinite, and times a zero weight or zero deviations NaN, which would poison every
    weight of the network (bit-identical to ``sqrt`` where ``x > 0``)."""
    positive = x > 0
    return torch.where(positive, torch.where(positive, x, torch.ones_like(x)).sqrt(), torch.zeros_like(x))


def _day_weights(mask: torch.Tensor) -> torch.Tensor:
    return ((mask > 0).sum(1) >= 2).to(torch.float32)


def mse_loss(scores, labels, mask):
    """Mean squared error on the normalised labels, over all stock-days."""
    w = mask.to(scores.dtype)
    return (((scores - labels.nan_to_num()) ** 2) * w).sum() / w.sum().clamp_min(1.0)


def _daily_corr(scores, labels, mask):
    """``[days]`` Pearson correlation of each day's scores and labels over its stocks,
    weighted by ``mask``."""
    w = mask.to(scores.dtype)
    n = w.sum(1, keepdim=True).clamp_min(1.0)
    y = labels.nan_to_num()
    s_d = scores - (scores * w).sum(1, keepdim=True) / n
    y_d = y - (y * w).sum(1, keepdim=True) / n
    s_c, y_c = s_d * w, y_d * w  # weighted deviations: sums of w * d * d below
    spread = (s_c * s_d).sum(1) * (y_c * y_d).sum(1)
    # A day with no spread (no labelled stock among a step's drawn ones, or equal scores) has a
    # correlation of 0, with a zero gradient.
    corr = (s_c * y_d).sum(1) / (_sqrt_or_zero(spread) + 1e-8)
    return torch.where(spread > 0, corr, torch.zeros_like(corr))


def ic_loss(scores, labels, mask):
    """Minus the mean over days of the Pearson correlation of scores and labels."""
    corr, days = _daily_corr(scores, labels, mask), _day_weights(mask)
    return -(corr * days).sum() / days.sum().clamp_min(1.0)


def icir_loss(scores, labels, mask, floor: float):
    """Minus the batch's ICIR: the mean of the daily correlations over their standard
    deviation across the batch's days (plus ``floor``, so a batch of equally good days does
    not divide by zero; a larger floor leans towards the mean alone). It rewards steady days,
    not only good ones."""
    corr, days = _daily_corr(scores, labels, mask), _day_weights(mask)
    n = days.sum().clamp_min(1.0)
    mean = (corr * days).sum() / n
    # One scored day in the batch (a block cut short) or equal days: a spread of 0 (once NaN
    # gradients, which lost a cn_qlib fold's weights in its first epoch).
    sd = _sqrt_or_zero((((corr - mean) ** 2) * days).sum().div(n))
    return -mean / (sd + floor)


def pairwise_loss(scores, labels, mask, n_pairs: int = 2048, generator=None):
    """Logistic loss on sampled pairs of stocks of the same day: the better label should
    score higher (RankNet), each pair weighted by the product of its stocks' weights.
    ``n_pairs`` per day keeps the cost linear in the stocks."""
    B, S = scores.shape
    i = torch.randint(S, (B, n_pairs), generator=generator).to(scores.device)
    j = torch.randint(S, (B, n_pairs), generator=generator).to(scores.device)
    y = labels.nan_to_num()
    weight = mask.to(scores.dtype)
    diff_y = y.gather(1, i) - y.gather(1, j)
    diff_s = scores.gather(1, i) - scores.gather(1, j)
    per = torch.nn.functional.softplus(-torch.sign(diff_y) * diff_s)
    w = weight.gather(1, i) * weight.gather(1, j) * (diff_y != 0).to(scores.dtype)
    return (per * w).sum() / w.sum().clamp_min(1.0)


def listnet_loss(scores, labels, mask, temperature: float = 1.0):
    """ListNet: cross-entropy between the softmax of the labels and of the scores per day
    (each stock's term weighted by ``mask``)."""
    neg = torch.finfo(scores.dtype).min
    off = ~(mask > 0)
    target = torch.softmax((labels.nan_to_num() / temperature).masked_fill(off, neg), dim=1)
    logp = torch.log_softmax(scores.masked_fill(off, neg), dim=1)
    per_day = -(target * logp.masked_fill(off, 0.0) * mask.to(scores.dtype)).sum(1)
    days = _day_weights(mask)
    return (per_day * days).sum() / days.sum().clamp_min(1.0)


def rank_loss(name: str, scores, labels, mask, generator=None, icir_floor: float = 0.3):
    if name == "mse":
        return mse_loss(scores, labels, mask)
    if name == "ic":
        return ic_loss(scores, labels, mask)
    if name == "icir":
        return icir_loss(scores, labels, mask, floor=icir_floor)
    if name == "pairwise":
        return pairwise_loss(scores, labels, mask, generator=generator)
    if name == "listnet":
        return listnet_loss(scores, labels, mask)
    raise ValueError(f"loss must be one of {RANK_LOSSES}, got {name!r}")
