"""The dataset handler of the panel models (Qlib's handler + dataset, in one small room):
features, their processor, labels and the day batches a network reads, for one panel.

Shapes: features ``[days, stocks, features]``; a batch of consecutive days gives the network
``x [stocks, context + days, features]`` (each day's output needs ``context`` earlier days);
labels and masks ``[days, stocks]``, rows by signal day.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from forecaster.data.panel import Panel
from forecaster.features.factors import missing_inputs_text
from forecaster.features.labels import normalise_per_day, tradeable_label
from forecaster.features.store import FeatureStore, FeatureView

log = logging.getLogger(__name__)



def as_panel(data) -> Panel:
    """A :class:`Panel` from a panel, ``{code: frame}`` or one frame."""
    return data if isinstance(data, Panel) else Panel.from_frames(data)


def warn_missing_inputs(panel: Panel, names, when: str) -> None:
    """Log the stocks without any value of a column their features need while other stocks
    have it (a file without ``turn``/``amount`` among files with them): their features are
    NaN, which the processor turns into 0, as any missing value."""
    text = missing_inputs_text(panel, names)
    if text:
        log.warning("PanelTransformer %s: %s; the network reads them as 0 after normalisation (the "
                    "training median, or a middle rank), as any missing value", when, text)


@dataclass
class SequenceData:
    """Processed inputs of one panel, ready to be cut into batches of consecutive days.

    Attributes:
        dates, codes: the panel's calendar ``[D]`` and stocks ``[N]``.
        X: the processed features ``[context + D, N, F]``, zero-padded in front, read a
            window at a time (:class:`ProcessedFeatures`).
        context: days of history each output needs.
        present: ``[D, N]`` a stock is scored that day (it has a bar and ``min_days`` days
            since its first bar).
        label: ``[D, N]`` raw tradeable label (NaN where none), or None when not needed.
        target: ``[D, N]`` the per-day normalised label the loss sees.
        market: ``[context + D, M]`` market context of each day (:func:`market_context`),
            appended to every stock's features in a batch; None without it.
        aux_target: ``[D, N, A]`` normalised labels of auxiliary horizons, trained by extra
            heads; None without them.
        weight: ``[D, N]`` each stock-day's weight in training (a training universe,
            :meth:`~forecaster.data.panel.Panel.learn_weights`); None: all alike.
    """

    dates: pd.DatetimeIndex
    codes: np.ndarray
    X: ProcessedFeatures
    context: int
    present: np.ndarray
    label: np.ndarray | None = None
    target: np.ndarray | None = None
    market: torch.Tensor | None = None
    aux_target: np.ndarray | None = None
    weight: np.ndarray | None = None

    def batch(self, days: np.ndarray, max_stocks: int | None = None,
              rng: np.random.Generator | None = None, stocks: np.ndarray | None = None
              ) -> tuple[torch.Tensor, ...]:
        """For consecutive signal days ``days``: ``(x [S, context + B, F], target [B, S],
        mask [B, S], present [B, S], stocks [S])`` (target and mask ``[B, S, 1 + A]`` with
        ``aux_target``, the forecast's horizon first), ``S`` being the stocks present on any of
        the days (absent ones cost nothing), or ``max_stocks`` of them drawn with ``rng``
        (the losses rank within a day, so any subset of a day's stocks is a valid batch).
        With ``weight``, ``mask`` is float: each stock-day's weight where it has a label.

        The draw ignores the weights (why: docs/history.md, drawing a training universe's
        members). ``stocks``: these stocks (sorted indices) instead of a draw."""
        first, last = day_span(days)
        present = self.present[first:last + 1]
        if stocks is None:
            stocks = choose_stocks(present, max_stocks, rng)
        x = torch.from_numpy(self.X.window(first, last + 1 + self.context, stocks))  # padded rows: +context
        if self.market is not None:  # the same market row for every stock of a day
            m = self.market[first:last + 1 + self.context]
            x = torch.cat([x, m.expand(len(stocks), -1, -1)], dim=-1)
        present_t = torch.as_tensor(present[:, stocks])
        if self.target is None:
            target = torch.zeros(present_t.shape)
            mask = torch.zeros(present_t.shape, dtype=torch.bool)
        else:
            y = self.target[first:last + 1][:, stocks]
            scored = present_t
            if self.aux_target is not None:  # [B, S, 1 + A]: one label per head
                y = np.concatenate([y[..., None], self.aux_target[first:last + 1][:, stocks]], axis=-1)
                scored = present_t[..., None]
            mask = torch.as_tensor(np.isfinite(y)) & scored
            if self.weight is not None:
                w = torch.as_tensor(self.weight[first:last + 1][:, stocks])
                mask = mask * (w if mask.dim() == 2 else w[..., None])
            target = torch.as_tensor(np.nan_to_num(y), dtype=torch.float32)
        return x.contiguous(), target, mask, present_t, torch.as_tensor(stocks)


    def on(self, device: torch.device) -> SequenceData | DeviceBatches:
        """The training batches read from ``device``: ``self`` on the CPU, else a
        :class:`DeviceBatches` holding every array there once (for the whole fit)."""
        return self if device.type == "cpu" else DeviceBatches.of(self, device)


def day_span(days: np.ndarray) -> tuple[int, int]:
    """``(first, last)`` of a block of consecutive signal days (refused otherwise)."""
    days = np.asarray(days)
    first, last = int(days[0]), int(days[-1])
    if last - first + 1 != len(days):
        raise ValueError("a batch must hold consecutive days")
    return first, last


def choose_stocks(present: np.ndarray, max_stocks: int | None, rng: np.random.Generator | None) -> np.ndarray:
    """Sorted indices of the stocks present on any day of ``present [B, N]``, or
    ``max_stocks`` of them drawn with ``rng``."""
    stocks = np.flatnonzero(present.any(axis=0))
    if max_stocks is not None and len(stocks) > max_stocks:
        if rng is None:
            raise ValueError("sampling max_stocks stocks needs an rng")
        stocks = np.sort(rng.choice(stocks, max_stocks, replace=False))
    return stocks


@dataclass
class DeviceBatches:
    """A :class:`SequenceData`'s training batches with its arrays on an accelerator, copied
    once per fit: a step then only sends the indices of its stocks (asynchronously) and
    gathers on the device, so the host never waits for the device between steps. The stocks
    are drawn on the host exactly as :meth:`SequenceData.batch` draws them.

    Attributes:
        present: ``[D, N]`` on the host (to draw a step's stocks); ``present_t`` the same on
            the device.
        X: the processed features ``[N, context + D, F]`` (stock-major), on the device.
        market: as :class:`SequenceData`'s, on the device.
        target: ``[D, N]`` (``[D, N, 1 + A]`` with auxiliary horizons) normalised labels,
            NaN as 0; ``labelled``: where they were finite.
        weight: ``[D, N]`` each stock-day's weight in training, on the device; None: all alike.
    """

    present: np.ndarray
    present_t: torch.Tensor
    X: torch.Tensor
    market: torch.Tensor | None
    target: torch.Tensor
    labelled: torch.Tensor
    context: int
    weight: torch.Tensor | None = None

    @classmethod
    def of(cls, data: SequenceData, device: torch.device) -> DeviceBatches:
        if data.target is None:
            raise ValueError("device batches are for training: the data need labels")
        y = data.target
        if data.aux_target is not None:  # [D, N, 1 + A]: the forecast's horizon first
            y = np.concatenate([y[..., None], data.aux_target], axis=-1)
        return cls(present=data.present, present_t=torch.as_tensor(data.present).to(device),
                   X=data.X.to(device), market=None if data.market is None else data.market.to(device),
                   target=torch.as_tensor(np.nan_to_num(y), dtype=torch.float32).to(device),
                   labelled=torch.as_tensor(np.isfinite(y)).to(device), context=data.context,
                   weight=None if data.weight is None else torch.as_tensor(data.weight).to(device))

    def batch(self, days: np.ndarray, max_stocks: int | None = None,
              rng: np.random.Generator | None = None) -> tuple[torch.Tensor, ...]:
        """:meth:`SequenceData.batch`'s ``(x, target, mask, present, stocks)``, on the device."""
        first, last = day_span(days)
        stocks = choose_stocks(self.present[first:last + 1], max_stocks, rng)
        # pageable memory, non-blocking: staged at once, with no wait for the device's queue
        at = torch.from_numpy(stocks).to(self.X.device, non_blocking=True)
        x = self.X[:, first:last + 1 + self.context].index_select(0, at)
        if self.market is not None:
            m = self.market[first:last + 1 + self.context]
            x = torch.cat([x, m.expand(len(stocks), -1, -1)], dim=-1)
        present = self.present_t[first:last + 1].index_select(1, at)
        target = self.target[first:last + 1].index_select(1, at)
        scored = present if target.dim() == 2 else present[..., None]
        mask = self.labelled[first:last + 1].index_select(1, at) & scored
        if self.weight is not None:
            w = self.weight[first:last + 1].index_select(1, at)
            mask = mask * (w if mask.dim() == 2 else w[..., None])
        return x.contiguous(), target, mask, present, at


def input_present(panel: Panel, min_days: int) -> np.ndarray:
    """``[D, N]``: the stock has a bar on the day and ``min_days`` days since its first bar."""
    since = np.cumsum(panel.listed, axis=0)
    return panel.listed & (since >= min_days)


@dataclass
class ProcessedFeatures:
    """A panel's features as the network reads them, ``[context + D, N, F]`` with zero rows in
    front, processed by a fitted processor: from a
    :class:`~forecaster.features.store.FeatureView` a window at a time when the processor is
    elementwise (the robust z-score: nothing the size of the panel is held), otherwise
    (per-day ranks, which need every stock of a day) processed once and held stock-major.

    Attributes:
        view: the raw features (``[D, N, F]`` as it reads).
        processor: fitted; ``transform(x, out=x)``.
        context: zero rows in front.
        held: ``[N, context + D, F]`` processed, or ``None`` (processed on demand).
    """

    view: FeatureView
    processor: object
    context: int
    held: np.ndarray | None = None

    @classmethod
    def of(cls, view: FeatureView, processor, context: int) -> ProcessedFeatures:
        out = cls(view, processor, context)
        if not getattr(processor, "elementwise", False):
            D, N, F = view.shape
            days = view.days()
            processor.transform(days, out=days)
            out.held = np.zeros((N, context + D, F), np.float32)
            out.held[:, context:] = days.transpose(1, 0, 2)
        return out

    @property
    def shape(self) -> tuple[int, int, int]:
        D, N, F = self.view.shape
        return self.context + D, N, F

    def window(self, lo: int, hi: int, stocks: np.ndarray) -> np.ndarray:
        """Padded rows ``lo..hi-1`` of ``stocks``: ``[len(stocks), hi - lo, F]`` float32."""
        if self.held is not None:
            return self.held[np.asarray(stocks, dtype=np.intp), lo:hi]
        c = self.context
        out = np.zeros((len(stocks), hi - lo, self.shape[2]), np.float32)
        first = max(lo, c)
        if hi > first:
            raw = self.view.read(first - c, hi - c, stocks)
            out[:, first - lo:] = self.processor.transform(raw, out=raw)
        return out

    def stock_chunks(self):
        """``(first, end, [end - first, D, F])``: every day of the stocks of each chunk,
        processed (no padding)."""
        for a, b in self.view.stock_chunks():
            yield a, b, self.window(self.context, self.shape[0], np.arange(a, b))

    def to(self, device: torch.device) -> torch.Tensor:
        """``[N, context + D, F]`` on ``device``, filled a chunk of stocks at a time."""
        out = torch.zeros(self.shape[1], self.shape[0], self.shape[2], device=device)
        for a, b, x in self.stock_chunks():
            out[a:b, self.context:] = torch.from_numpy(x).to(device)
        return out


def market_context(features: ProcessedFeatures | np.ndarray, listed: np.ndarray) -> np.ndarray:
    """The market of each day as the universe itself shows it (MASTER's market-guided idea,
    computed from the stocks rather than from an index): the cross-sectional mean and standard
    deviation of every processed feature over the stocks with a bar that day: equal-weight
    return, dispersion, mean volatility, turnover, valuation...

    Args:
        features: the processed features (or an array ``[D, N, F]`` of them), read in chunks
            of stocks: two passes (the means, then the deviations from them).
        listed: ``[D, N]`` bool, the stock has a bar that day.

    Returns:
        ``[D, 2F]`` float32 (means, then standard deviations; 0 on a day without stocks).
        Row ``t`` uses day ``t``'s stocks only, so it leaks nothing a stock's own row would not.
    """
    if isinstance(features, np.ndarray):
        chunks = lambda: [(0, features.shape[1], features.transpose(1, 0, 2))]  # noqa: E731
    else:
        chunks = features.stock_chunks
    w = listed.astype(np.float32)
    n = np.maximum(w.sum(axis=1), 1.0)[:, None]
    total = 0.0
    for a, b, x in chunks():  # x [stocks, D, F]
        total = total + np.einsum("sdf,ds->df", x, w[:, a:b])
    mean = (total / n).astype(np.float32)
    total = 0.0
    for a, b, x in chunks():
        total = total + np.einsum("sdf,ds->df", np.square(x - mean[None]), w[:, a:b])
    return np.concatenate([mean, np.sqrt(total / n)], axis=-1).astype(np.float32)


def feature_view(panel: Panel, names) -> FeatureView:
    """``panel``'s features ``names``: its feature store's view when that holds them, otherwise
    computed now into an in-memory store."""
    if panel.features is not None and panel.features.covers(names):
        return panel.features.select(names)
    return FeatureView.whole(FeatureStore.build(panel, names))


def build_sequences(panel: Panel, features: tuple[str, ...], processor, context: int, min_days: int,
                    horizon: int | None = None, execution: str = "next_open",
                    label_norm: str = "rank", drop_tails: float = 0.0,
                    view: FeatureView | None = None, market: bool = False,
                    aux_horizons: tuple[int, ...] = ()) -> SequenceData:
    """Features processed by the (fitted) ``processor`` and, with ``horizon``, the labels
    (and those of ``aux_horizons``, normalised alike).
    ``view``: the raw features (:func:`feature_view`) when the caller has them. ``market``:
    add each day's :func:`market_context`."""
    if view is None:
        view = feature_view(panel, features)
    X = ProcessedFeatures.of(view, processor, context)
    data = SequenceData(panel.dates, panel.codes, X, context, input_present(panel, min_days))
    if market:
        rows = market_context(X, panel.listed)
        front = np.zeros((context, rows.shape[1]), np.float32)
        data.market = torch.from_numpy(np.concatenate([front, rows]))
    if horizon is not None:
        label, _ = tradeable_label(panel, horizon, execution)
        data.label = label
        data.weight = panel.learn_weights()
        data.target = normalise_per_day(label, label_norm, drop_tails)
        if aux_horizons:
            data.aux_target = np.stack([normalise_per_day(tradeable_label(panel, h, execution)[0], label_norm,
                                                          drop_tails) for h in aux_horizons], axis=-1)
    return data


def day_blocks(days: np.ndarray, size: int) -> list[np.ndarray]:
    """Split sorted day indices into runs of at most ``size`` consecutive days."""
    if not len(days):
        return []
    breaks = np.flatnonzero(np.diff(days) != 1) + 1
    blocks = []
    for run in np.split(days, breaks):
        blocks.extend(run[i:i + size] for i in range(0, len(run), size))
    return blocks
