"""The point-in-time risk model of a Panel (:mod:`forecaster.risk`), fitted once per panel and
kept by it: style exposures from its prices, volumes and (carried) float market values over the
day's members, then the daily regressions, with industry factors where the run has industries
(:func:`~forecaster.portfolio.industry_groups.risk_industries`)."""

from __future__ import annotations

import hashlib

import numpy as np

from forecaster.portfolio.index_weights import carried_float_mv, growth
from forecaster.risk import RiskModel, style_exposures, universe_key


def _returns(data) -> np.ndarray:
    # a suspended day with a bar (baostock's folders keep them) has no return, not a zero one
    return np.where(data.listed & ~data.suspended, growth(data) - 1.0, np.nan)


def _universe(data) -> np.ndarray:
    return data.listed if data.members is None else (data.members & data.listed)


def style_exposures_of(data) -> np.ndarray:
    """``[days, stocks, styles]`` the Panel ``data``'s style exposures over its members (computed
    once per panel and members)."""
    def compute():
        returns = _returns(data)
        volume = data.fields.get("volume", np.ones_like(returns))
        return style_exposures(returns, data.fields["close"], volume, carried_float_mv(data), _universe(data))

    return data.derived(("style_exposures", universe_key(data.members)), compute)


def _industries_key(industries) -> str:
    if industries is None:
        return "none"
    labels, names = industries
    digest = hashlib.blake2b(np.ascontiguousarray(labels, dtype=np.int32).tobytes(), digest_size=16)
    digest.update("\x00".join(names).encode())
    return digest.hexdigest()


def risk_model_of(data, industries=None):
    """The point-in-time risk model of the Panel ``data`` (fitted once per panel, members and
    industries): :func:`style_exposures_of`, the daily regressions and their residuals
    weighted by float market value. ``industries``: ``(labels [days, stocks], names)`` the
    industry factors (labels -1: none); None: none. The cache keys on the members and the
    industries, so a panel whose members change gets a model of its own."""
    def fit():
        labels, names = (None, ()) if industries is None else industries
        return RiskModel().fit(_returns(data), style_exposures_of(data), _universe(data), data.dates,
                               weights=carried_float_mv(data), industries=labels, industry_names=names)

    return data.derived(("risk_model", universe_key(data.members), _industries_key(industries)), fit)


__all__ = ["risk_model_of", "style_exposures_of"]
