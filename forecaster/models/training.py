"""The training loop of both Transformers (:func:`fit_loop`): AdamW steps with gradient
clipping, an optional schedule, a validation score each epoch, early stopping with the best
weights restored.

The loop knows nothing about features or labels. The panel models use it through
:func:`train_days`, which asks ``batch(days)`` (a block of consecutive days) for ``x``
(whatever the network takes), ``labels [days, stocks]``, ``mask [days, stocks]`` (stocks with
a label) and ``present [days, stocks]`` (stocks the network scores); the single-stock
forecaster steps on batches of windows and validates on a held-out loss.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from forecaster.checks import check_choice, check_int
from forecaster.metrics import stat_text
from forecaster.models.panel.losses import RANK_LOSSES, rank_loss

log = logging.getLogger(__name__)

PRECISIONS = ("float32", "bfloat16")


def autocast(device: torch.device, precision: str):
    """The context a forward pass runs in: bfloat16 autocast for ``"bfloat16"``, else none."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")


@dataclass
class LoopConfig:
    """Optimisation settings.

    Attributes:
        loss: one of ``ranking_losses.RANK_LOSSES``.
        max_epochs: passes over the training days.
        days_per_batch: consecutive trading days per optimiser step (all their stocks).
        lr, weight_decay: AdamW; weight decay applies to weight matrices only, not to biases,
            norms or embeddings of positions.
        grad_clip: max gradient norm.
        patience: epochs without a better validation score before stopping.
        steps_per_epoch: this many batches an epoch, a fresh random order each epoch,
            batches drawn again when it exceeds their number (``None``: every batch once).
        average_last: without validation, the weights kept are the mean of the last this many
            epochs' (stochastic weight averaging); 1: the last epoch's.
        icir_floor: added to the spread of the daily correlations under ``loss="icir"``.
        precision: ``"float32"``, or ``"bfloat16"``: the network's forward pass under bfloat16
            autocast (weights, optimiser and loss stay float32).
    """

    loss: str = "ic"
    max_epochs: int = 20
    days_per_batch: int = 4
    lr: float = 1e-3
    weight_decay: float = 1e-2
    grad_clip: float = 1.0
    patience: int = 4
    steps_per_epoch: int | None = None
    average_last: int = 1
    icir_floor: float = 0.3
    precision: str = "float32"

    def __post_init__(self) -> None:
        check_choice("loss", self.loss, RANK_LOSSES)
        check_choice("precision", self.precision, PRECISIONS)
        for name in ("max_epochs", "days_per_batch", "patience", "average_last"):
            check_int(name, getattr(self, name))
        if self.lr <= 0 or self.weight_decay < 0 or self.grad_clip <= 0:
            raise ValueError("lr and grad_clip must be positive and weight_decay >= 0")
        if not self.icir_floor > 0:
            raise ValueError(f"icir_floor must be positive, got {self.icir_floor}")


def param_groups(net: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices (linear and attention weights) only."""
    decay = [p for p in net.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in net.parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def fit_loop(net: nn.Module, optimizer: torch.optim.Optimizer, epoch_batches: Callable[[], Iterable],
             step: Callable[[object], tuple[torch.Tensor, int]], *, max_epochs: int, grad_clip: float,
             patience: int, validate: Callable[[], float] | None = None, val_key: str = "val",
             higher_is_better: bool = True, scheduler=None, count_name: str | None = None,
             progress: bool = False, total: int | None = None, unit: str = "step", desc: str = "fit",
             average_last: int = 1) -> tuple[list[dict], int]:
    """The one training loop of the forecaster's Transformers; returns ``(history, best_epoch)``.

    Each epoch: ``epoch_batches()`` gives the batches (in the epoch's random order), ``step(b)``
    the loss of one and its weight in the epoch's mean (windows, or 1 per step); then
    ``scheduler.step()`` and ``validate()`` (stored under ``val_key``). With ``validate``, the
    weights of the best epoch are restored and training stops after ``patience`` epochs without
    a better score (a NaN score is never better); without, the last epoch's are kept, or the
    mean of the last ``average_last`` epochs' weights.
    """
    history: list[dict] = []
    best, best_state, best_epoch, stale = -math.inf, None, 0, 0
    averaged, n_averaged = None, 0
    bar = tqdm(total=total, unit=unit, unit_scale=count_name is not None, desc=desc,
               disable=not progress, dynamic_ncols=True, leave=False)
    for epoch in range(1, max_epochs + 1):
        net.train()
        t0, losses, weights = time.perf_counter(), [], []
        for batch in epoch_batches():
            loss, weight = step(batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), grad_clip)
            optimizer.step()
            # read once an epoch: reading each step's loss would make the host wait for the
            # device after every step (on CUDA, the steps' queue would run dry)
            losses.append(loss.detach())
            weights.append(weight)
            bar.update(weight)
        if scheduler is not None:
            scheduler.step()
        summed = sum(v * w for v, w in zip(torch.stack(losses).float().cpu().tolist(), weights, strict=True))
        count = sum(weights)
        if not math.isfinite(summed):  # NaN weights would score every stock alike, silently
            raise FloatingPointError(f"{desc}: training diverged in epoch {epoch} (mean loss "
                                     f"{summed / count}); try a lower lr")
        seconds = time.perf_counter() - t0
        row = {"epoch": epoch, "train_loss": summed / count, "seconds": seconds}
        if count_name:
            row.update({count_name: count, f"{count_name}_per_s": count / seconds})
        if validate is not None:
            row[val_key] = float(validate())
            score = row[val_key] if higher_is_better else -row[val_key]
            if math.isfinite(score) and score > best:
                best, best_epoch, stale = score, epoch, 0
                best_state = copy.deepcopy(net.state_dict())
            else:
                stale += 1
        history.append(row)
        if validate is None and average_last > 1 and epoch > max_epochs - average_last:
            averaged, n_averaged = _running_mean(averaged, n_averaged, net.state_dict()), n_averaged + 1
        bar.set_postfix(loss=f"{row['train_loss']:.4f}",
                        val=stat_text(row.get(val_key, math.nan), ".4f", "too few stocks or days"))
        if validate is not None and stale >= patience:
            log.info("early stop at epoch %d (best %d, %s %s)", epoch, best_epoch, val_key,
                     stat_text(best if higher_is_better else -best, ".4f", "no finite validation score"))
            break
    bar.close()
    if best_state is not None:
        net.load_state_dict(best_state)
    else:
        if averaged is not None:
            net.load_state_dict(averaged)
        best_epoch = len(history)
    net.eval()
    return history, best_epoch


def _running_mean(mean: dict | None, n: int, state: dict) -> dict:
    """The mean of ``n`` earlier state dicts updated with ``state`` (floating tensors; others,
    such as counters, are taken from the latest)."""
    if mean is None:
        return {k: v.detach().clone() for k, v in state.items()}
    for k, v in state.items():
        if v.is_floating_point():
            mean[k].mul_(n / (n + 1)).add_(v.detach(), alpha=1 / (n + 1))
        else:
            mean[k] = v.detach().clone()
    return mean


def train_days(net: nn.Module, batch: Callable, blocks: list[np.ndarray],
               validate: Callable[[], float] | None, config: LoopConfig, seed: int, device: torch.device,
               progress: bool = False, desc: str = "fit") -> tuple[list[dict], int]:
    """The panel models' use of :func:`fit_loop`: one optimiser step per block of consecutive
    signal days (a new random order every epoch; ``steps_per_epoch`` steps, blocks visited
    again when it exceeds their number), a per-day
    ranking loss, early stopping on the validation days' mean daily rank IC. Labels
    ``[days, stocks, K]`` train the network's ``K`` heads (``net(x, present, all_outputs=True)``)
    on the mean of their losses."""
    opt = torch.optim.AdamW(param_groups(net, config.weight_decay), lr=config.lr,
                            fused=device.type in ("cpu", "cuda"))
    gen = torch.Generator().manual_seed(seed)
    steps = config.steps_per_epoch or len(blocks)

    def epoch_batches():
        # A budget past the number of blocks visits blocks again: with ``stocks_per_batch`` a
        # visit trains on another random subset of the block's stocks.
        order: list[int] = []
        while len(order) < steps:
            order += torch.randperm(len(blocks), generator=gen).tolist()
        return order[:steps]

    def step(b):
        x, labels, mask, present = (t.to(device) for t in batch(blocks[b])[:4])
        with autocast(device, config.precision):
            scores = net(x, present, all_outputs=labels.dim() == 3)
        scores = scores.float()  # the losses' sums in float32 whatever the forward's precision
        if labels.dim() == 2:
            return rank_loss(config.loss, scores, labels, mask, generator=gen,
                             icir_floor=config.icir_floor), 1
        # Several horizons ``[days, stocks, K]``: one head each, their losses averaged.
        losses = [rank_loss(config.loss, scores[..., k], labels[..., k], mask[..., k], generator=gen,
                            icir_floor=config.icir_floor) for k in range(labels.size(-1))]
        return torch.stack(losses).mean(), 1

    return fit_loop(net, opt, epoch_batches, step, max_epochs=config.max_epochs,
                    grad_clip=config.grad_clip, patience=config.patience, validate=validate,
                    val_key="val_rank_ic", progress=progress, total=config.max_epochs * steps,
                    desc=desc, average_last=config.average_last)
