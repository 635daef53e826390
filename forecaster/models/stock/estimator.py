"""The public forecaster: sklearn-style ``fit``/``predict`` around the private causal network.

As in scikit-learn, ``__init__`` only stores its keywords; ``fit`` validates them, resolves
``random_state`` and ``device``, builds the network once the input width is known, and sets
fitted attributes ending in ``_``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler

from forecaster.checks import NotEnoughData, check_choice, check_int
from forecaster.features.series import FEATURES, make_features, mask_suspended
from forecaster.features.windows import shift_targets, sliding_windows
from forecaster.models.persistence import content_errors, load_model, save_model
from forecaster.models.stock.losses import LOSSES, gaussian_scale, masked_loss, n_outputs
from forecaster.models.stock.network import CausalTransformerNet, NetConfig
from forecaster.models.training import fit_loop
from seq2seq.core import resolve_device

log = logging.getLogger(__name__)

CHECKPOINT_KIND = "forecaster.CausalTransformerForecaster"
CHECKPOINT_VERSION = 2  # 2: per-stock scalers and targets (panels)
_SINGLE = "series"  # the name a single-stock fit files its statistics under


@dataclass
class _Series:
    """One stock's rows after feature computation: ``x [days, F]``, ``y [days]`` (log
    returns) and ``valid [days]`` (may be a training target)."""

    name: str
    dates: pd.DatetimeIndex
    x: np.ndarray
    y: np.ndarray
    valid: np.ndarray


class CausalTransformerForecaster(BaseEstimator):
    """Forecast the daily log return H trading days ahead from the last ``window`` days.

    Args:
        window: input days L per forecast.
        horizon: H >= 1; the window ending on day t forecasts the return of day t + H.
        features: inputs, from ``forecaster.features.series.FEATURES``.
        d_model, n_heads, n_layers, d_ff, dropout, norm_first: network size (``d_ff=None`` is
            4 * d_model).
        attention_dropout: dropout on attention probabilities (0 keeps CPU training fast).
        positional: ``"sinusoidal"``, ``"learned"`` or ``"rotary"``.
        loss: ``"mse"`` (point forecast), ``"gaussian"`` (mean and scale) or ``"quantile"``.
        quantiles: levels for ``loss="quantile"``.
        max_epochs, batch_size, lr, weight_decay: AdamW training.
        train_stride: use every n-th training window (counted back from the latest). The loss
            covers every position of a window, so a stride up to ``window`` still trains on
            every target each epoch, with fewer, less overlapping windows (much faster on
            panels).
        lr_step_size, lr_gamma: step decay of the learning rate (every ``lr_step_size`` epochs).
        grad_clip: max gradient norm.
        val_fraction: the latest fraction of training windows held out, in time order, for
            early stopping; 0 trains for ``max_epochs`` on everything.
        patience: epochs without a better validation loss before stopping.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        random_state: seed; ``None`` draws one in ``fit`` (stored as ``random_state_``).
        progress: show a progress bar while fitting.
    """

    def __init__(self, window=60, horizon=1, features=("log_return",), d_model=64, n_heads=4,
                 n_layers=2, d_ff: int | None = None, dropout=0.1, attention_dropout=0.0, norm_first=True,
                 positional="sinusoidal", loss="mse", quantiles=(0.1, 0.5, 0.9), max_epochs=30,
                 batch_size=256, train_stride=1, lr=1e-3, weight_decay=0.01, lr_step_size=10,
                 lr_gamma=0.5, grad_clip=1.0, val_fraction=0.15, patience=5, device="auto",
                 random_state: int | None = None, progress=True):
        self.window = window
        self.horizon = horizon
        self.features = features
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_layers = n_layers
        self.d_ff = d_ff
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.norm_first = norm_first
        self.positional = positional
        self.loss = loss
        self.quantiles = quantiles
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.train_stride = train_stride
        self.lr = lr
        self.weight_decay = weight_decay
        self.lr_step_size = lr_step_size
        self.lr_gamma = lr_gamma
        self.grad_clip = grad_clip
        self.val_fraction = val_fraction
        self.patience = patience
        self.device = device
        self.random_state = random_state
        self.progress = progress

    # ----------------------------------------------------------------- validation and data
    def _validate_params(self) -> None:
        for name in ("window", "horizon", "max_epochs", "batch_size", "train_stride", "lr_step_size",
                     "patience"):
            check_int(name, getattr(self, name))
        feats = tuple(self.features) if not isinstance(self.features, str) else (self.features,)
        bad = [f for f in feats if f not in FEATURES]
        if bad or not feats or len(set(feats)) != len(feats):
            raise ValueError(f"{self.features!r} is not a set of distinct features of one stock's model; "
                             f"expected some of {', '.join(FEATURES)} (named sets such as alpha158 are "
                             "computed across a folder of stocks)")
        check_choice("loss", self.loss, LOSSES)
        if self.loss == "quantile":
            qs = tuple(self.quantiles)
            if not qs or any(not 0 < q < 1 for q in qs) or sorted(set(qs)) != list(qs):
                raise ValueError(f"quantiles must be increasing levels in (0, 1), got {self.quantiles!r}")
        if not 0 <= self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.lr <= 0 or self.weight_decay < 0 or self.grad_clip <= 0 or not 0 < self.lr_gamma <= 1:
            raise ValueError("lr and grad_clip must be positive, weight_decay >= 0, lr_gamma in (0, 1]")
        self._net_config(n_features=len(feats))  # validates the network sizes

    def _features(self) -> tuple[str, ...]:
        return (self.features,) if isinstance(self.features, str) else tuple(self.features)

    def _net_config(self, n_features: int) -> NetConfig:
        return NetConfig(
            n_features=n_features, n_outputs=n_outputs(self.loss, tuple(self.quantiles)),
            window=self.window, d_model=self.d_model, n_heads=self.n_heads,
            n_layers=self.n_layers, d_ff=self.d_ff or 4 * self.d_model, dropout=self.dropout,
            attention_dropout=self.attention_dropout,
            positional=self.positional, norm_first=self.norm_first,
        )

    def _series(self, frame: pd.DataFrame, name: str = "data") -> _Series:
        if not isinstance(frame, pd.DataFrame) or not isinstance(frame.index, pd.DatetimeIndex):
            raise TypeError("expected a canonical frame with a DatetimeIndex (see forecaster.data.load_csv)")
        if not frame.index.is_monotonic_increasing or frame.index.has_duplicates:
            raise ValueError(f"{name}: dates must be unique and increasing (load with load_csv)")
        names = self._features()
        table = make_features(frame, tuple(dict.fromkeys(("log_return", *names))), source=name)
        x = table[list(names)]
        usable = x.notna().all(axis=1).to_numpy()
        lead = int(np.argmax(usable)) if usable.any() else len(usable)
        if not usable[lead:].all():
            bad = x.iloc[lead:].isna()
            col = bad.any().idxmax()
            day = bad[col].idxmax()
            raise ValueError(f"{name}: feature {col!r} is missing on {int(bad[col].sum())} day(s), "
                             f"first {day.date()}; choose other features or fix the data")
        if lead:
            log.info("%s: first %d day(s) have no feature values (no previous day) and are skipped",
                     name, lead)
        y = mask_suspended(table["log_return"], frame).to_numpy()[lead:]
        valid = ~np.isnan(y)
        return _Series(name, frame.index[lead:], x.to_numpy()[lead:], y, valid)

    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit(frame) "
                                 "or CausalTransformerForecaster.load(path) first")

    def _scaled(self, s: _Series) -> torch.Tensor:
        return torch.as_tensor(self.scalers_[s.name].transform(s.x), dtype=torch.float32)

    # Single-stock views of the per-stock statistics (a panel model has one per stock).
    def _only(self, attr: str):
        table = getattr(self, attr)
        if len(table) != 1:
            raise AttributeError(f"a panel model has one entry per stock: use {attr}[code]")
        return next(iter(table.values()))

    @property
    def scaler_(self) -> StandardScaler:
        return self._only("scalers_")

    @property
    def target_mean_(self) -> float:
        return self._only("target_stats_")[0]

    @property
    def target_scale_(self) -> float:
        return self._only("target_stats_")[1]

    def _inputs(self, data) -> list[_Series]:
        if isinstance(data, Mapping):
            if not data:
                raise ValueError("an empty panel: expected {code: frame, ...}")
            return [self._series(frame, str(name)) for name, frame in data.items()]
        return [self._series(data, _SINGLE)]

    # ----------------------------------------------------------------------------- fitting
    def fit(self, data: pd.DataFrame | Mapping[str, pd.DataFrame]) -> CausalTransformerForecaster:
        """Fit on one stock's canonical frame, or on a panel ``{code: frame}`` (one global model
        across stocks, each stock scaled by its own training statistics). Returns ``self``.

        The latest ``val_fraction`` of windows (by the date they forecast, across all stocks)
        is held out for early stopping; scalers see only rows up to the training cut-off
        ``train_end_``. A stock with fewer than two usable training days is left out and
        listed in ``excluded_``.
        """
        self._validate_params()
        seed = (int(self.random_state) if self.random_state is not None
                else int(np.random.SeedSequence().entropy % (2**31)))
        device = resolve_device(self.device)
        series = self._inputs(data)
        L, H = self.window, self.horizon
        ends = []
        for s in series:
            e = np.arange(L - 1, len(s.y) - H)
            ends.append(e[s.valid[e + H]])
        target_days = np.sort(np.concatenate(
            [s.dates[e + H].to_numpy() for s, e in zip(series, ends, strict=True)]))
        total = len(target_days)
        n_val = int(round(self.val_fraction * total)) if self.val_fraction > 0 else 0
        if total - n_val < 2 or (self.val_fraction > 0 and n_val < 1):
            raise NotEnoughData(
                f"too little data: {sum(len(s.y) for s in series)} usable days give {total} training "
                f"windows (window={L}, horizon={H}); need more rows or a shorter window"
            )
        cut_day = pd.Timestamp(target_days[total - n_val - 1])  # last training target day

        self.scalers_, self.target_stats_, self.excluded_ = {}, {}, []
        xs, ys, oks, train_starts, val_starts, y_vals, offset = [], [], [], [], [], [], 0
        for s, e in zip(series, ends, strict=True):
            n_in = int(np.searchsorted(s.dates, cut_day, side="right"))  # rows up to the cut-off
            y_in = s.y[:n_in][s.valid[:n_in]]
            if n_in < 2 or len(y_in) < 2:
                self.excluded_.append(s.name)
                continue
            # Scalers see the training segment only: this stock's rows up to the cut-off day.
            self.scalers_[s.name] = StandardScaler().fit(s.x[:n_in])
            mean, scale = float(y_in.mean()), float(y_in.std()) or 1.0
            self.target_stats_[s.name] = (mean, scale)
            y = torch.as_tensor((np.nan_to_num(s.y) - mean) / scale, dtype=torch.float32)
            y_shift, ok = shift_targets(y, torch.as_tensor(s.valid), H)
            is_val = s.dates[e + H] > cut_day
            y_vals.append(y_shift[e[is_val]])
            ok[max(n_in - H, 0) :] = False  # training targets end at the cut-off
            xs.append(self._scaled(s))
            ys.append(y_shift)
            oks.append(ok)
            train_ends = e[~is_val][::-1][:: self.train_stride][::-1]
            train_starts.append(offset + train_ends - L + 1)
            val_starts.append(offset + e[is_val] - L + 1)
            offset += len(s.y)
        if self.excluded_:
            log.warning("left out %d stock(s) with no training days before %s: %s",
                        len(self.excluded_), cut_day.date(), ", ".join(self.excluded_))
        if not xs:
            raise NotEnoughData("no stock has training data")
        self.panel_ = isinstance(data, Mapping)
        self.train_end_ = cut_day
        self.n_features_in_ = series[0].x.shape[1]
        self.feature_names_in_ = list(self._features())
        self.random_state_ = seed
        self.device_ = device
        self.net_config_ = self._net_config(self.n_features_in_)
        # Windows over the concatenated stocks; their starts never cross a stock's boundary.
        xw = sliding_windows(torch.cat(xs), L)
        yw = sliding_windows(torch.cat(ys), L)
        mw = sliding_windows(torch.cat(oks), L)
        y_val = torch.cat(y_vals).to(device)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(seed)
            self.net_ = CausalTransformerNet(self.net_config_).to(device)
            self.history_ = self._train(xw, yw, mw, np.concatenate(train_starts),
                                        np.concatenate(val_starts), y_val, seed)
        return self

    def _train(self, xw, yw, mw, train_starts, val_starts, y_val, seed) -> list[dict]:
        net, device = self.net_, self.device_
        qs = tuple(self.quantiles)
        # The fused kernel does the whole update in one pass (CPU and CUDA).
        opt = torch.optim.AdamW(net.parameters(), lr=self.lr, weight_decay=self.weight_decay,
                                fused=device.type in ("cpu", "cuda"))
        gen = torch.Generator().manual_seed(seed)
        starts = torch.as_tensor(train_starts)
        n = len(starts)

        def epoch_batches():
            return starts[torch.randperm(n, generator=gen)].split(self.batch_size)

        def step(idx):
            xb, yb, mb = xw[idx].to(device), yw[idx].to(device), mw[idx].to(device)
            return masked_loss(self.loss, net(xb), yb, mb, qs), len(idx)

        def validate():
            out = self._forward_last(xw, torch.as_tensor(val_starts))
            return float(masked_loss(self.loss, out, y_val, torch.ones_like(y_val, dtype=torch.bool), qs))

        history, self.best_epoch_ = fit_loop(
            net, opt, epoch_batches, step, max_epochs=self.max_epochs, grad_clip=self.grad_clip,
            patience=self.patience, validate=validate if len(val_starts) else None, val_key="val_loss",
            higher_is_better=False, scheduler=torch.optim.lr_scheduler.StepLR(opt, self.lr_step_size,
                                                                              self.lr_gamma),
            count_name="windows", progress=self.progress, total=self.max_epochs * n, unit="win")
        return history

    @torch.no_grad()
    def _forward_last(self, xw: torch.Tensor, starts: torch.Tensor, chunk: int = 4096
                      ) -> torch.Tensor:
        """Network output at the last position of windows ``starts``: ``[n, n_outputs]``."""
        net = self.net_
        was_training = net.training
        net.eval()
        outs = [net(xw[idx].to(self.device_), last_only=True)[:, -1] for idx in starts.split(chunk)]
        net.train(was_training)
        return torch.cat(outs) if outs else torch.zeros(0, self.net_config_.n_outputs)

    # -------------------------------------------------------------------------- prediction
    def _format(self, raw: torch.Tensor, index, name: str) -> pd.Series | pd.DataFrame:
        raw = raw.double().cpu()
        mu, sd = self.target_stats_[name]
        index = pd.DatetimeIndex(index, name="date")
        if self.loss == "mse":
            return pd.Series(raw[:, 0].numpy() * sd + mu, index=index, name="forecast")
        if self.loss == "gaussian":
            return pd.DataFrame({"mean": raw[:, 0].numpy() * sd + mu,
                                 "scale": gaussian_scale(raw[:, 1]).numpy() * sd}, index=index)
        values = torch.sort(raw, dim=1).values.numpy() * sd + mu  # no crossing quantiles
        return pd.DataFrame(values, index=index, columns=[f"q{q:g}" for q in self.quantiles])

    def _known(self, data) -> list[_Series]:
        if not isinstance(data, Mapping) and self.panel_:
            data = {str(data["code"].iloc[0]): data}  # one stock of the panel
        series = self._inputs(data)
        unknown = [s.name for s in series if s.name not in self.scalers_]
        if unknown:
            raise ValueError(f"no training statistics for {unknown}: the model was fitted on "
                             f"{sorted(self.scalers_)}")
        return series

    def predict(self, data: pd.DataFrame | Mapping[str, pd.DataFrame]):
        """Forecasts for every day that has ``window`` earlier days (+ horizon).

        Args:
            data: one canonical frame, or ``{code: frame}`` for a panel model.

        Returns:
            Indexed by the date of the return being forecast; each value made only from rows
            before that date. A Series ``forecast`` for ``loss="mse"``, a DataFrame
            (``mean``/``scale`` or one column per quantile) otherwise; for a panel input, a
            dict ``{code: that}``.
        """
        self._check_fitted()
        series = self._known(data)
        L, H = self.window, self.horizon
        xs, starts, ends, offset = [], [], [], 0
        for s in series:
            e = np.arange(L - 1, len(s.y) - H)
            xs.append(self._scaled(s))
            starts.append(offset + e - L + 1)
            ends.append(e)
            offset += len(s.y)
        if sum(len(e) for e in ends) == 0:
            raise NotEnoughData(f"too few usable days for window={L}, horizon={H}")
        raw = self._forward_last(sliding_windows(torch.cat(xs), L), torch.as_tensor(np.concatenate(starts)))
        out, at = {}, 0
        for s, e in zip(series, ends, strict=True):
            out[s.name] = self._format(raw[at : at + len(e)], s.dates[e + H], s.name)
            at += len(e)
        return out if isinstance(data, Mapping) else next(iter(out.values()))

    def predict_next(self, data: pd.DataFrame | Mapping[str, pd.DataFrame]):
        """Forecast for the trading day ``horizon`` days after the last row. Its index is the
        next weekday(s): exchange holidays are not known here."""
        self._check_fitted()
        out = {}
        for s in self._known(data):
            if len(s.y) < self.window:
                raise NotEnoughData(f"{s.name}: {len(s.y)} usable days are fewer than window={self.window}")
            x = self._scaled(s)[-self.window :].unsqueeze(0)
            raw = self._forward_last(x, torch.tensor([0]))
            out[s.name] = self._format(raw, [s.dates[-1] + pd.offsets.BDay(self.horizon)], s.name)
        return out if isinstance(data, Mapping) else next(iter(out.values()))

    @torch.no_grad()
    def attention(self, frame: pd.DataFrame) -> tuple[list[np.ndarray], pd.DatetimeIndex]:
        """Self-attention of the last input window, per layer ``[heads, window, window]``,
        with the window's dates."""
        self._check_fitted()
        s = self._known(frame)[0]
        x = self._scaled(s)[-self.window :].unsqueeze(0).to(self.device_)
        self.net_.eval()
        _, weights = self.net_.forward_with_weights(x)
        return [w[0].cpu().numpy() for w in weights], s.dates[-self.window :]

    # ------------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        """Write state dict, parameters, scaler and fitted values (atomically)."""
        self._check_fitted()
        payload = {
            "state_dict": {k: v.detach().cpu() for k, v in self.net_.state_dict().items()},
            "scalers": {name: {"mean": sc.mean_.tolist(), "scale": sc.scale_.tolist(),
                               "var": sc.var_.tolist(), "n_samples_seen": int(sc.n_samples_seen_)}
                        for name, sc in self.scalers_.items()},
            "targets": {name: list(stats) for name, stats in self.target_stats_.items()},
            "fitted": {"panel": self.panel_, "excluded": self.excluded_,
                       "train_end": str(self.train_end_.date()), "random_state": self.random_state_,
                       "best_epoch": self.best_epoch_, "history": self.history_,
                       "feature_names": self.feature_names_in_},
        }
        return save_model(self, path, CHECKPOINT_KIND, CHECKPOINT_VERSION, payload)

    @classmethod
    def load(cls, path: str | Path, device: str = "auto") -> CausalTransformerForecaster:
        """Rebuild a fitted forecaster from :meth:`save`'s file."""
        model, data = load_model(cls, path, CHECKPOINT_KIND, CHECKPOINT_VERSION, device, NetConfig,
                                 ("features", "quantiles"))
        with content_errors(path, "forecaster"):
            model.net_ = CausalTransformerNet(model.net_config_)
            model.net_.load_state_dict(data["state_dict"])
            model.net_.to(model.device_).eval()
            model.scalers_ = {}
            for name, sc in data["scalers"].items():
                scaler = StandardScaler()
                scaler.mean_, scaler.scale_ = np.asarray(sc["mean"]), np.asarray(sc["scale"])
                scaler.var_, scaler.n_samples_seen_ = np.asarray(sc["var"]), sc["n_samples_seen"]
                scaler.n_features_in_ = len(sc["mean"])
                model.scalers_[name] = scaler
            model.target_stats_ = {name: tuple(v) for name, v in data["targets"].items()}
            fitted = data["fitted"]
            model.panel_, model.excluded_ = fitted["panel"], list(fitted["excluded"])
            model.train_end_ = pd.Timestamp(fitted["train_end"])
            model.random_state_ = fitted["random_state"]
            model.best_epoch_ = fitted["best_epoch"]
            model.history_ = fitted["history"]
            model.feature_names_in_ = list(fitted["feature_names"])
            model.n_features_in_ = len(model.feature_names_in_)
        return model
