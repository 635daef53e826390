"""The cross-sectional panel Transformer: a public sklearn-style model over the private
:class:`~forecaster.models.panel.network.PanelTransformerNet`, coordinating data, processor, network
and training loop.

It scores stocks against each other for the tradeable label (see :mod:`forecaster.features.labels`):
scores rank stocks within a day and are not return forecasts.
"""

from __future__ import annotations

import logging
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from forecaster.checks import NotEnoughData, check_choice, check_int
from forecaster.data.panel import Panel
from forecaster.data.sources import DataError
from forecaster.features.factors import (
    available_features,
    check_available,
    check_feature_names,
    lookback,
    resolve_features,
)
from forecaster.features.labels import EXECUTIONS, LABEL_NORMS
from forecaster.features.processors import NORMS, make_processor
from forecaster.metrics import daily_ic
from forecaster.models.panel.checkpoint import fitted_payload, restore_fitted
from forecaster.models.panel.dataset import (  # noqa: F401  (as_panel: imported from here too)
    SequenceData,
    as_panel,
    build_sequences,
    day_blocks,
    feature_view,
    warn_missing_inputs,
)
from forecaster.models.panel.network import MARKET_MODES, PanelNetConfig, PanelTransformerNet
from forecaster.models.panel.scores import blend_scores, ensemble_scores, scores_to_series
from forecaster.models.panel.sizing import BUDGET_KEYS, PRESETS, SizeRules
from forecaster.models.persistence import content_errors, load_model, save_model
from forecaster.models.training import LoopConfig, train_days
from seq2seq.core import resolve_device

log = logging.getLogger(__name__)

CHECKPOINT_KIND = "forecaster.PanelTransformer"
CHECKPOINT_VERSION = 1


class PanelTransformer(BaseEstimator):
    """Rank the stocks of each day by their expected tradeable return ``horizon`` days ahead.

    Past 500 stocks the schedule is fixed rather than early-stopped (``None`` for
    ``max_epochs``, ``val_fraction`` and ``average_last``): 12 epochs on every training day,
    the last 6 epochs' weights averaged (early stopping would hold the most recent fifth of
    the history out of training and choose its epoch on one noisy stretch of days). The loss
    there rewards a steady daily correlation (``loss=None`` resolves to ``"icir"``),
    the feed-forward layers are twice as wide (``d_ff=None``) and four more features are
    computed (``features=None``), with a second set of inputs (``blend_features=None``:
    Qlib's Alpha158 where the data's columns allow) and one network on each set
    (``n_seeds=None``); up to 500 stocks one set and two networks from two seeds, averaged.
    :mod:`forecaster.models.panel.sizing` holds these rules.

    Args:
        window: days each attention layer looks back over (the stack sees
            ``n_layers * (window - 1) + 1`` days of features per stock and day).
        horizon: H >= 1; the label runs from the execution after the signal day to the
            execution H trading days later.
        aux_horizons: further label horizons trained together with ``horizon``, one extra
            score head each, their per-day losses averaged with the forecast's
            (multi-horizon training); the forecast is ``horizon``'s head alone.
        execution: ``"next_open"`` or ``"close"`` (how the label is earned).
        features: names from :data:`forecaster.features.factors.FEATURES`, or a set's name
            (``alpha158``, ``alpha360``: Qlib's, :mod:`forecaster.features.alpha`); ``None``: those of
            ``DEFAULT_FEATURES`` the data's columns allow, and past 500 stocks four more
            (``MARKET_ONLY_FEATURES``: 20-day skewness, idiosyncratic volatility, price-volume
            correlation and 5/60-day abnormal turnover).
        blend_features: a second set of inputs, named as ``features`` (e.g. ``("alpha158",)``):
            ``blend_seeds`` more networks are trained on them (seeds after the first set's), and
            the forecast is the mean of the two sets' per-day standardised scores; empty: one set;
            ``None``: ``("alpha158",)`` past 500 stocks, else one set.
        norm: ``"robust"`` (pooled robust z-score fitted on training days, clipped at 3) or
            ``"rank"`` (per-day ranks across stocks).
        label_norm: per-day label normalisation for training (``"rank"``, ``"zscore"``).
        drop_tails: share of each day's labels cut from each tail before training.
        d_model, n_heads, n_layers, dropout: the causal encoder.
        d_ff: the encoder's feed-forward width; ``None``: 64 up to 500 stocks, 128 beyond (the
            width a whole market's stock-days support). (For one stock, ``None`` is
            ``4 * d_model``.)
        positional: ``"rotary"`` (relative positions) or ``"none"``.
        cross_stock: one attention layer across the stocks of a day after the encoder.
        market: market context from the universe itself (each day's cross-sectional mean and
            standard deviation of every processed feature): ``"gate"`` (MASTER's
            market-guided gating of each stock's features), ``"input"`` (appended to every
            stock's inputs), ``"none"``, or ``"auto"`` (the default): ``"gate"`` past 500
            stocks, ``"none"`` up to 500 (a few dozen stocks' mean is a poor picture of the
            market).
        loss: per-day ``"pairwise"`` (RankNet on sampled pairs of the same day),
            ``"ic"`` (minus the daily correlation), ``"icir"`` (minus the batch days' mean
            correlation over its spread), ``"mse"`` (on the normalised label) or
            ``"listnet"``; ``None``: ``"pairwise"`` up to 500 stocks, ``"icir"`` beyond.
        icir_floor: under ``loss="icir"``, added to the spread of the days' correlations: a
            large floor makes the loss the mean correlation (``"ic"``), a small one rewards
            steady days more than good ones.
        days_per_batch, lr, weight_decay, patience: the training loop (a batch is
            ``days_per_batch`` consecutive days of every stock).
        max_epochs: passes (of ``epoch_stock_days`` each when set) over the training days;
            ``None``: 20 up to 500 stocks, 12 beyond (:meth:`budget`).
        val_fraction: the latest share of training days held out for early stopping on the
            mean daily rank IC (with a gap of the longest horizon + 1 days so that no
            validation label overlaps a training one); 0: no validation, every training day
            trained on for ``max_epochs`` epochs; ``None``: 0.2 up to 500 stocks, 0 beyond.
        average_last: without validation, the network keeps the mean of the last this many
            epochs' weights (stochastic weight averaging); 1: the last epoch's; ``None``: 1 up
            to 500 stocks, 6 beyond.
        n_seeds: an ensemble of networks from seeds ``random_state .. + n_seeds - 1``; their
            per-day standardised scores are averaged. ``None``: 1 past 500 stocks with a second
            set of inputs, else 2.
        blend_seeds: the networks trained on ``blend_features`` (``None``: as many as on the
            first set).
        epoch_stock_days: a budget for an epoch, in stock-days: an epoch takes that many
            (rounded to whole batches, at least one), drawn at random from all training days
            anew each epoch, so a fold's training cost stays bounded whatever the number of
            stocks and days; ``None`` visits every training day each epoch. It also bounds
            each epoch's validation: at most that many stock-days, the validation days'
            stocks drawn at random (the same draw every epoch, so epochs compare alike).
            ``None``: chosen from the panel's size at fit time (:meth:`budget`): every
            training day while a fold has at most 400,000 training stock-days (60 or 240
            stocks over five years), 200,000 stock-days beyond, and 600,000 stock-days (blocks
            visited again, other stocks each time) past 500 stocks.
        stocks_per_batch: each step trains on this many of the batch days' stocks, drawn at
            random, so a step's time and memory do not grow with the number of stocks; with
            ``epoch_stock_days`` an epoch then holds more, smaller steps. ``None``: all of them
            up to 500 stocks; beyond, 250 stocks x ``4 * days_per_batch`` days a step (the
            stock-days of ``days_per_batch`` days of 1,000 stocks).
        warm_epochs: a fit started from an earlier fold's networks (the walk-forward's
            ``warm_start``) trains this many epochs instead of ``max_epochs``
            (and averages at most this many epochs' weights).
        preset: the regime the parameters left ``None`` are resolved in: ``"panel"`` (a few
            hundred stocks), ``"market"`` (a whole market), or ``"auto"``: ``"market"`` past 500
            stocks.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        precision: ``"float32"``, or ``"bfloat16"``: the networks' forward passes (training and
            scoring) under bfloat16 autocast, for an accelerator with bfloat16 units (weights,
            optimiser and losses stay float32). On the CPU it is slower.
        random_state: seed of the first network.
        progress: progress bars while fitting.
    """

    is_return_forecast = False  # scores rank stocks; they are not return forecasts
    input_kind = "panel"

    def __init__(self, window=20, horizon=1, aux_horizons=(), execution="next_open", features=None,
                 blend_features=None, norm="robust", label_norm="rank", drop_tails=0.0, d_model=32, n_heads=4,
                 n_layers=2,
                 d_ff: int | None = None, dropout=0.1, positional="rotary", cross_stock=False, market="auto",
                 loss: str | None = None, icir_floor=0.3, max_epochs: int | None = None, days_per_batch=8,
                 lr=1e-3, weight_decay=1e-2, patience=4, val_fraction: float | None = None,
                 average_last: int | None = None, n_seeds: int | None = None, blend_seeds: int | None = None,
                 epoch_stock_days: int | None = None,
                 stocks_per_batch: int | None = None, warm_epochs=3, preset="auto", device="auto",
                 precision="float32", random_state=0, progress=False):
        self.window = window
        self.horizon = horizon
        self.aux_horizons = aux_horizons
        self.execution = execution
        self.features = features
        self.blend_features = blend_features
        self.norm = norm
        self.label_norm = label_norm
        self.drop_tails = drop_tails
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.d_ff = d_ff
        self.dropout = dropout
        self.positional = positional
        self.cross_stock = cross_stock
        self.market = market
        self.loss = loss
        self.icir_floor = icir_floor
        self.max_epochs = max_epochs
        self.days_per_batch = days_per_batch
        self.lr = lr
        self.weight_decay = weight_decay
        self.patience = patience
        self.val_fraction = val_fraction
        self.average_last = average_last
        self.n_seeds = n_seeds
        self.blend_seeds = blend_seeds
        self.epoch_stock_days = epoch_stock_days
        self.stocks_per_batch = stocks_per_batch
        self.warm_epochs = warm_epochs
        self.preset = preset
        self.device = device
        self.precision = precision
        self.random_state = random_state
        self.progress = progress

    # What ``None`` resolves to, by the panel's size (forecaster.models.panel.sizing).
    rules = SizeRules()

    def budget(self, n_stocks: int, n_fit_days: int) -> dict:
        """``{epoch_stock_days, stocks_per_batch, days_per_batch, loss, max_epochs, val_fraction,
        average_last}`` a fit on ``n_stocks`` x ``n_fit_days`` training days uses: the
        parameters where set, otherwise chosen from the size by :attr:`rules` (``None``:
        unbounded)."""
        return self.rules.budget({k: getattr(self, k) for k in BUDGET_KEYS}, n_stocks, n_fit_days,
                                 self.preset)

    # ------------------------------------------------------------------ validation
    def _loop_config(self, n_stocks: int = 1) -> LoopConfig:
        budget = getattr(self, "budget_", None) or self.budget(n_stocks, 0)
        days_per_batch = budget["days_per_batch"]
        per_step = min(n_stocks, budget["stocks_per_batch"] or n_stocks)
        steps = (None if budget["epoch_stock_days"] is None
                 else max(1, int(budget["epoch_stock_days"]) // (days_per_batch * max(per_step, 1))))
        return LoopConfig(loss=budget["loss"], max_epochs=budget["max_epochs"], days_per_batch=days_per_batch,
                          lr=self.lr, weight_decay=self.weight_decay, patience=self.patience,
                          steps_per_epoch=steps, average_last=budget["average_last"],
                          icir_floor=self.icir_floor, precision=self.precision)

    def market_mode(self, n_stocks: int) -> str:
        """The market context a fit on ``n_stocks`` uses (``market="auto"`` resolved)."""
        return self.rules.market_mode(self.market, n_stocks, self.preset)

    def _net_config(self, n_features: int, n_stocks: int = 0) -> PanelNetConfig:
        market = self.market_mode(n_stocks)
        d_ff = self.rules.feed_forward(self.d_ff, n_stocks, self.preset)
        return PanelNetConfig(n_features=n_features, window=self.window, d_model=self.d_model,
                              n_heads=self.n_heads, n_layers=self.n_layers, d_ff=d_ff,
                              dropout=self.dropout, positional=self.positional,
                              cross_stock=bool(self.cross_stock), market=market,
                              n_market=0 if market == "none" else 2 * n_features,
                              n_outputs=1 + len(self.aux_horizons))

    def _validate_params(self) -> None:
        for name in ("window", "horizon"):
            check_int(name, getattr(self, name))
        check_int("n_seeds", self.n_seeds, allow_none=True)
        check_int("blend_seeds", self.blend_seeds, allow_none=True)
        for h in self.aux_horizons:
            check_int("aux_horizons", h)
        if self.horizon in self.aux_horizons or len(set(self.aux_horizons)) < len(self.aux_horizons):
            raise ValueError(f"aux_horizons must be distinct horizons other than horizon={self.horizon}, "
                             f"got {tuple(self.aux_horizons)}")
        check_choice("execution", self.execution, EXECUTIONS)
        check_choice("norm", self.norm, NORMS)
        check_choice("label_norm", self.label_norm, LABEL_NORMS)
        check_choice("market", self.market, (*MARKET_MODES, "auto"))
        check_choice("preset", self.preset, PRESETS)
        if not 0 <= self.drop_tails < 0.5:
            raise ValueError(f"drop_tails must be in [0, 0.5), got {self.drop_tails}")
        check_int("max_epochs", self.max_epochs, allow_none=True)
        check_int("warm_epochs", self.warm_epochs)
        check_int("average_last", self.average_last, allow_none=True)
        if self.val_fraction is not None and not 0 <= self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        check_int("epoch_stock_days", self.epoch_stock_days, allow_none=True)
        check_int("stocks_per_batch", self.stocks_per_batch, minimum=2, allow_none=True)
        for name in ("features", "blend_features"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ValueError(f"{name} is a list of names, e.g. ({value!r},), got the string {value!r}")
        if self.features is not None:
            check_feature_names(self.features)
        if self.blend_features:
            check_feature_names(self.blend_features)
        self._loop_config()
        self._net_config(1)

    def _check_fitted(self) -> None:
        if not hasattr(self, "nets_"):
            raise NotFittedError("PanelTransformer is not fitted yet; call fit first")

    # ------------------------------------------------------------------ fitting
    def fit(self, data) -> PanelTransformer:
        """Fit on a panel (or ``{code: frame}``) using every row it holds: the caller's slice
        is the training segment. The processor sees these rows only; labels whose exit lies
        beyond the last row are unknown and not used."""
        self._validate_params()
        panel = as_panel(data)
        if self.features is not None:  # asked for by name: each must be computable
            check_available(panel, self.features)
        names = (resolve_features(panel, self.features) if self.features is not None
                 else available_features(panel, self.rules.default_features(panel.n_stocks, self.preset)))
        if not names:
            raise ValueError("no feature can be computed from the data's columns")
        warn_missing_inputs(panel, names, "fit")
        device = resolve_device(self.device)
        self.net_config_ = self._net_config(len(names), panel.n_stocks)
        warm = getattr(self, "_warm", None)
        if warm is not None and (tuple(warm["features"]) != names or warm["net_config"] != self.net_config_):
            log.warning("warm start not used: the earlier fit's features or network differ from this "
                        "fit's; training from scratch")
            warm = None
        self.warm_started_ = warm is not None
        # The raw features (the run's store, or computed now): the processor is fitted on
        # them, and the network reads them processed, a window at a time.
        raw = feature_view(panel, names)
        processor = make_processor(self.norm).fit(raw, panel.dates)
        data_ = self._sequences(panel, names, processor, with_labels=True, view=raw)
        usable = (np.isfinite(data_.target) & data_.present).sum(axis=1) >= 2
        # Rows before the longest feature lookback have mostly empty inputs.
        usable[: min(lookback(names), panel.n_days)] = False
        days = np.flatnonzero(usable)
        schedule = self.budget(panel.n_stocks, 0)
        val_fraction = schedule["val_fraction"]
        if val_fraction > 0 and schedule["average_last"] > 1:
            log.warning("average_last=%d is not used: with val_fraction=%g the best validation epoch's "
                        "weights are kept (set val_fraction=0 to average the last epochs)",
                        schedule["average_last"], val_fraction)
        n_val = int(round(val_fraction * len(days)))
        gap = max((self.horizon, *self.aux_horizons)) + 1  # no training label reaches a validation day
        if len(days) - n_val - gap < 2 or (val_fraction > 0 and n_val < 2):
            raise NotEnoughData(f"too little data: {len(days)} days with at least two labelled stocks "
                             f"(window={self.window}, horizon={self.horizon}); need more history")
        val_days = days[len(days) - n_val:] if n_val else days[:0]
        fit_days = days[: len(days) - n_val - (gap if n_val else 0)]
        self.features_ = names
        self.processor_ = processor
        self.device_ = device
        self.train_end_ = panel.dates[-1]
        self.nets_, self.histories_, self.best_epochs_ = [], [], []
        self.budget_ = self.budget(panel.n_stocks, len(fit_days))
        if warm is not None:  # a fraction of a full fit's epochs, from the earlier weights
            self.budget_ = {**self.budget_, "max_epochs": int(self.warm_epochs),
                            "average_last": min(int(self.budget_["average_last"]), int(self.warm_epochs))}
        if self.budget_ != self.budget(0, 0):
            log.info("training budget for %d stocks x %d days: %s", panel.n_stocks, len(fit_days),
                     self.budget_)
        blend = self.inputs_blend(panel.n_stocks)
        self.n_seeds_ = self.seeds(panel.n_stocks, bool(blend))
        source = data_.on(device)  # on an accelerator, every training array there once
        for k in range(self.n_seeds_):
            seed = int(self.random_state or 0) + k
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                torch.manual_seed(seed)
                net = PanelTransformerNet(self.net_config_).to(device)
                if warm is not None:
                    net.load_state_dict(warm["nets"][k % len(warm["nets"])])
                validate = ((lambda net=net, seed=seed: self._val_ic(net, data_, val_days, seed)) if n_val
                            else None)
                batch = source.batch
                if self.budget_["stocks_per_batch"] is not None:
                    batch = partial(source.batch, max_stocks=int(self.budget_["stocks_per_batch"]),
                                    rng=np.random.default_rng(seed))
                history, best = train_days(net, batch, day_blocks(fit_days, self.budget_["days_per_batch"]),
                                           validate, self._loop_config(panel.n_stocks), seed, device,
                                           self.progress,
                                           f"fit seed {seed}")
            self.nets_.append(net)
            self.histories_.append(history)
            self.best_epochs_.append(best)
        # the second set's warm start is its own state's, whether or not the first set's fits
        warm_all = getattr(self, "_warm", None)
        self.blend_ = self._fit_blend(panel, blend, warm_all) if blend else None
        return self

    def inputs_blend(self, n_stocks: int) -> tuple[str, ...]:
        """``blend_features`` resolved for a fit on ``n_stocks`` (``None``: the preset's)."""
        if self.blend_features is None:
            return tuple(self.rules.default_blend(n_stocks, self.preset))
        return tuple(self.blend_features)

    def seeds(self, n_stocks: int, blending: bool) -> int:
        """``n_seeds`` resolved for a fit on ``n_stocks`` (``None``: the preset's)."""
        if self.n_seeds is None:
            return self.rules.default_seeds(n_stocks, self.preset, blending)
        return int(self.n_seeds)

    def _blend_model(self, names: tuple[str, ...]) -> PanelTransformer:
        """The second set's model: these parameters, ``names`` as its features, and the seeds
        after this one's."""
        return clone(self).set_params(features=tuple(names), blend_features=(),
                                      n_seeds=self.blend_seeds or self.n_seeds_, blend_seeds=None,
                                      random_state=int(self.random_state or 0) + int(self.n_seeds_))

    def _fit_blend(self, panel: Panel, names: tuple[str, ...], warm: dict | None) -> PanelTransformer:
        blend = self._blend_model(names)
        if warm is not None and warm.get("blend") is not None:
            blend.warm_from(warm["blend"])
        return blend.fit(panel)

    def warm_state(self) -> dict:
        """What a later fit can start from (:meth:`warm_from`): the features, the network
        configuration and every network's weights (on the CPU)."""
        self._check_fitted()
        return {"features": tuple(self.features_), "net_config": self.net_config_,
                "nets": [{k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
                         for net in self.nets_],
                "blend": None if self.blend_ is None else self.blend_.warm_state()}

    def warm_from(self, state: dict) -> PanelTransformer:
        """Start the next :meth:`fit` from ``state`` (an earlier fit's :meth:`warm_state`):
        its networks begin with those weights and train ``warm_epochs`` epochs. Ignored, with
        a warning, when the features or the network differ."""
        self._warm = state
        return self

    def _sequences(self, panel: Panel, names, processor, with_labels: bool = False,
                   view=None) -> SequenceData:
        config = self.net_config_
        return build_sequences(panel, names, processor, config.context, min_days=self.window,
                               horizon=self.horizon if with_labels else None, execution=self.execution,
                               label_norm=self.label_norm, drop_tails=self.drop_tails, view=view,
                               market=config.market != "none",
                               aux_horizons=tuple(self.aux_horizons) if with_labels else ())

    def _scores(self, nets, data: SequenceData, rows: np.ndarray, **kwargs) -> np.ndarray:
        """:func:`ensemble_scores` ``[len(rows), N]`` on this model's device and precision."""
        config = self.net_config_
        return ensemble_scores(nets, data, rows, self.device_, self.precision,
                               config.n_features + config.n_market, config.cross_stock, **kwargs)

    def _val_ic(self, net, data: SequenceData, days: np.ndarray, seed: int) -> float:
        """Mean daily rank IC on the validation ``days``; within ``epoch_stock_days``
        stock-days when it is set (a random subset of each block's stocks, the same every
        epoch), since scoring every stock would outgrow the bounded training at scale."""
        epoch = self.budget_["epoch_stock_days"]
        max_stocks = None if epoch is None else max(2, int(epoch) // max(len(days), 1))
        was = net.training
        scores = self._scores([net], data, days, max_stocks=max_stocks, rng=np.random.default_rng(seed))
        net.train(was)
        ic = daily_ic(pd.DataFrame(scores), pd.DataFrame(data.label[days]))
        return float(ic.mean()) if len(ic) else float("nan")

    # ------------------------------------------------------------------ prediction
    def _windows(self, panel: Panel) -> SequenceData:
        try:  # computing them as empty would feed the network zeros in their place
            check_available(panel, self.features_)
        except DataError as exc:
            raise DataError(f"the model was fitted on features that this data cannot give: {exc}") from None
        warn_missing_inputs(panel, self.features_, "predict")
        return self._sequences(panel, self.features_, self.processor_)

    def _panel_scores(self, panel: Panel, rows: np.ndarray) -> np.ndarray:
        """Scores ``[len(rows), N]`` of signal days ``rows``: this set's networks, blended with
        the second set's (``blend_features``) when there is one."""
        scores = self._scores(self.nets_, self._windows(panel), rows)
        if self.blend_ is None:
            return scores
        return blend_scores([scores, self.blend_._panel_scores(panel, rows)])

    def predict(self, data) -> pd.Series:
        """Scores for every (forecast date, code) the data allows: row ``t``'s inputs end at
        the close before the forecast date. Returns a Series named ``forecast`` indexed by
        ``(date, code)``; the day after the last row is :meth:`predict_next`'s."""
        self._check_fitted()
        panel = as_panel(data)
        rows = np.arange(panel.n_days - 1)
        return scores_to_series(self._panel_scores(panel, rows), panel, rows)

    def predict_next(self, data) -> pd.Series:
        """Scores for the trading day after the last row, indexed by code."""
        self._check_fitted()
        panel = as_panel(data)
        scores = self._panel_scores(panel, np.array([panel.n_days - 1]))[0]
        return pd.Series(scores, index=pd.Index(panel.codes, name="code"), name="forecast").dropna()

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write parameters, processor state and every network (atomically)."""
        self._check_fitted()
        return save_model(self, path, CHECKPOINT_KIND, CHECKPOINT_VERSION, fitted_payload(self))

    @classmethod
    def load(cls, path: str | Path, device: str = "auto") -> PanelTransformer:
        """Rebuild a fitted model from :meth:`save`'s file."""
        model, data = load_model(cls, path, CHECKPOINT_KIND, CHECKPOINT_VERSION, device, PanelNetConfig,
                                 ("features", "blend_features"))
        with content_errors(path, "model"):
            restore_fitted(model, data)
        return model
