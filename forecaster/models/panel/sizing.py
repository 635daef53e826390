"""What a :class:`~forecaster.models.panel.model.PanelTransformer` fit uses where a parameter
is left ``None``: chosen from the panel's size, so that a 60-stock panel and a whole market
both train well with no option set (docs/scale.md and docs/results.md hold the measurements).

Two regimes, split at :attr:`SizeRules.market_above` stocks:

- up to it (60 or 240 large caps): whole days in every step, early stopping on the latest
  fifth of the training days, the pairwise loss, the base features;
- past it (a whole market): each step draws a subset of a block's stocks, an epoch is a
  fixed budget of stock-days, a fixed schedule with the last epochs' weights averaged, the
  ICIR loss, wider feed-forward layers, the market gate and four more features (for gradient
  boosting and ridge on the same features too).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from forecaster.checks import check_choice
from forecaster.features.factors import DEFAULT_FEATURES, MARKET_FEATURES

# Parameters a fit's budget resolves (each ``None`` on the model means "chosen here").
BUDGET_KEYS = ("epoch_stock_days", "stocks_per_batch", "days_per_batch", "loss", "max_epochs",
               "val_fraction", "average_last")
# The named regimes: ``auto`` picks one by the panel's breadth (an experiment records which).
PRESETS = ("auto", "panel", "market")


def _schedule(**values) -> dict:
    return field(default_factory=lambda: dict(values))


@dataclass(frozen=True)
class SizeRules:
    """The size thresholds and what ``None`` resolves to on each side of them.

    Attributes:
        market_above: stocks past which a panel is a whole market.
        d_ff, market_d_ff: the feed-forward width up to and past that breadth.
        epoch_above: training stock-days of a fold past which an epoch is bounded (up to
            500 stocks) at ``epoch_stock_days``.
        stocks_per_batch: past ``market_above``, a step trains on this many of a block's
            stocks over ``4 * days_per_batch`` days (the stock-days of ``days_per_batch`` days
            of 1,000 stocks), and an epoch is ``market_epoch_stock_days`` (blocks visited
            again, other stocks each time).
        market_warm_start: a walk-forward's ``warm_start=None`` past ``market_above``, whatever
            the machine and ``n_jobs``.
        features, market_features: ``features=None`` resolved (before the data's columns
            are consulted), for the Transformer and the feature regressions alike.
        schedule, market_schedule: loss, epochs, validation share and weights averaged, up
            to and past ``market_above``.
    """

    market_above: int = 500
    d_ff: int = 64
    market_d_ff: int = 128
    epoch_above: int = 400_000
    epoch_stock_days: int = 200_000
    stocks_per_batch: int = 250
    market_epoch_stock_days: int = 600_000
    features: tuple = DEFAULT_FEATURES
    market_features: tuple = MARKET_FEATURES
    # Up to 500 stocks: early stopping on a validation tail and the pairwise loss
    # (scripts/sweep_panel.py). Beyond: a fixed schedule on every training day, the last
    # epochs' weights averaged, and the ICIR loss (as a pair of seeds, +0.06 of ICIR for -0.003
    # of rank IC against the daily correlation; on 60 stocks it lost).
    schedule: dict = _schedule(loss="pairwise", max_epochs=20, val_fraction=0.2, average_last=1)
    market_schedule: dict = _schedule(loss="icir", max_epochs=12, val_fraction=0.0, average_last=6)
    # A walk-forward's refits past the threshold start from the fold two back
    # (WalkForwardConfig.warm_start): the stride docs/scale.md measured on both markets, the one
    # the 2-core machine resolved to. Fixed, not the number of workers: the stride decides which
    # state each fold starts from, so a stride taken from the machine gave other forecasts on 2
    # cores than on 16. A run with more workers keeps them busy with --warm-start N.
    market_warm_start: int = 2
    # Past the threshold a second set of inputs, one network on each (1 + 1: docs/results.md,
    # "Two sets of inputs, blended"); up to it one set and two networks, as measured there.
    market_blend: tuple = ("alpha158",)
    n_seeds: int = 2
    market_blend_seeds: int = 1

    def is_market(self, n_stocks: int, preset: str = "auto") -> bool:
        """Whether a fit on ``n_stocks`` uses the whole-market regime: ``preset`` ``"market"``
        or ``"panel"`` says so; ``"auto"``: past the threshold. Another name (``"MARKET"``,
        ``"bogus"``) is a ``ConfigError`` naming ``preset`` and the choices, never read as
        ``"panel"``."""
        check_choice("preset", preset, PRESETS)
        if preset != "auto":
            return preset == "market"
        return n_stocks > self.market_above

    def preset(self, n_stocks: int, preset: str = "auto") -> str:
        """``preset`` resolved to ``"panel"`` or ``"market"`` for ``n_stocks``."""
        return "market" if self.is_market(n_stocks, preset) else "panel"

    def describe(self, preset: str, given: Mapping | None = None, blend: tuple | None = None,
                 warm_start: int | None = None) -> str:
        """What a resolved preset (``"panel"`` or ``"market"``) sets, for a run's summary: the
        rule's values, each replaced by ``given``'s (the Transformer's parameters) where that
        is not ``None``, so the line says what the run uses (``--epochs 1``: 1 epoch);
        ``blend``: the second set of inputs as resolved (``None``: the preset's);
        ``warm_start``: the walk-forward's, as resolved (``None``: the preset's)."""
        given = {k: v for k, v in (given or {}).items() if v is not None}
        market = preset == "market"
        s = {**(self.market_schedule if market else self.schedule),
             **{k: given[k] for k in self.schedule if k in given}}
        subsample = market and "stocks_per_batch" not in given  # the rule's epoch of stock-days
        epoch = given.get("epoch_stock_days", self.market_epoch_stock_days if subsample else None)
        epochs = f"{s['max_epochs']} epoch{'s' if s['max_epochs'] != 1 else ''}"
        epochs += f" of {epoch:,} stock-days" if epoch else ""
        if s["val_fraction"]:
            training = (f"up to {epochs} with early stopping on the latest {s['val_fraction']:.0%} of "
                        "the training days")
        else:
            kept = min(s["average_last"], s["max_epochs"])  # no more epochs averaged than run
            last = "the last epoch's weights" if kept == 1 else f"the last {kept} averaged"
            training = f"{epochs}, {last}, no validation"
        context = {"gate": "the market gate", "input": "the market's context as inputs",
                   "none": "no market context"}[self.market_mode(given.get("market", "auto"), 0, preset)]
        names = given.get("features") or (self.market_features if market else self.features)
        blend = tuple(self.default_blend(0, preset) if blend is None else blend)
        seeds = given.get("n_seeds", self.default_seeds(0, preset, bool(blend)))
        second = given.get("blend_seeds", seeds)
        sets = f"a second set ({', '.join(blend)}), {seeds} network(s)"
        nets = (f"{seeds} network(s)" if not blend else f"{sets} on each" if second == seeds
                else f"{sets} on the first and {second} on the second")
        warm = self.warm_start(0, preset) if warm_start is None else warm_start
        head = (f"preset market (the whole-market regime, chosen past {self.market_above} stocks)" if market
                else f"preset panel (up to {self.market_above} stocks)")
        return (f"{head}: {s['loss']} loss, {training}; feed-forward "
                f"{given.get('d_ff', self.market_d_ff if market else self.d_ff)}, {context}, up to "
                f"{len(names)} features (as the data's columns allow), {nets}; "
                + (f"refits warm-started {warm} folds back" if warm else "each refit from scratch")
                + ("; no per-stock time-series baselines" if market else ""))

    def budget(self, given: dict, n_stocks: int, n_fit_days: int, preset: str = "auto") -> dict:
        """``{BUDGET_KEYS: value}`` for a fit on ``n_stocks`` x ``n_fit_days`` training days:
        ``given``'s value where it is not ``None``, otherwise the rule's (``None`` for
        ``epoch_stock_days`` and ``stocks_per_batch``: unbounded)."""
        market = self.is_market(n_stocks, preset)
        schedule = {k: v if given[k] is None else given[k]
                    for k, v in (self.market_schedule if market else self.schedule).items()}
        epoch, per_step = given["epoch_stock_days"], given["stocks_per_batch"]
        days = int(given["days_per_batch"])
        subsample = per_step is None and market
        if subsample:
            per_step, days = self.stocks_per_batch, 4 * days
        if epoch is None and subsample:
            epoch = self.market_epoch_stock_days
        elif epoch is None and n_stocks * n_fit_days > self.epoch_above:
            epoch = self.epoch_stock_days
        return {"epoch_stock_days": epoch, "stocks_per_batch": per_step, "days_per_batch": days, **schedule}

    def warm_start(self, n_stocks: int, preset: str = "auto") -> int:
        """``WalkForwardConfig.warm_start=None`` resolved for a panel of ``n_stocks``: past the
        threshold each fold starts from the fold ``market_warm_start`` back, up to it from
        scratch (0). From the data alone: never the workers or the machine, which change how
        long a run takes, not what it forecasts."""
        return self.market_warm_start if self.is_market(n_stocks, preset) else 0

    def market_mode(self, market: str, n_stocks: int, preset: str = "auto") -> str:
        """``market="auto"`` resolved: the gate past the threshold, none up to it."""
        if market != "auto":
            return market
        return "gate" if self.is_market(n_stocks, preset) else "none"

    def default_blend(self, n_stocks: int, preset: str = "auto") -> tuple[str, ...]:
        """``blend_features=None`` resolved: the second set of inputs (none up to the threshold)."""
        return self.market_blend if self.is_market(n_stocks, preset) else ()

    def default_seeds(self, n_stocks: int, preset: str = "auto", blending: bool = False) -> int:
        """``n_seeds=None`` resolved: the networks on each set of inputs (one each past the
        threshold with a second set, else ``n_seeds``)."""
        return self.market_blend_seeds if blending and self.is_market(n_stocks, preset) else self.n_seeds

    def default_features(self, n_stocks: int, preset: str = "auto") -> tuple[str, ...]:
        """The features a model with ``features=None`` computes (where the columns allow)."""
        return self.market_features if self.is_market(n_stocks, preset) else self.features

    def feed_forward(self, d_ff: int | None, n_stocks: int, preset: str = "auto") -> int:
        """``d_ff=None`` resolved."""
        if d_ff is not None:
            return d_ff
        return self.market_d_ff if self.is_market(n_stocks, preset) else self.d_ff
