"""The training loop of the panel models: batches of whole days, a per-day ranking loss,
early stopping on the validation tail's mean daily rank IC, best weights restored.

The loop knows nothing about features or labels: it asks ``batch(days)`` (a block of
consecutive days) for ``x`` (whatever the network takes), ``labels [days, stocks]``,
``mask [days, stocks]`` (stocks with a label) and ``present [days, stocks]`` (stocks the
network scores), and ``validate()`` for a score where higher is better.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from forecaster.models.panel.losses import RANK_LOSSES, rank_loss

log = logging.getLogger(__name__)


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
        steps_per_epoch: at most this many batches an epoch, a fresh random subset each
            epoch (``None``: every batch).
    """

    loss: str = "ic"
    max_epochs: int = 20
    days_per_batch: int = 4
    lr: float = 1e-3
    weight_decay: float = 1e-2
    grad_clip: float = 1.0
    patience: int = 4
    steps_per_epoch: int | None = None

    def __post_init__(self) -> None:
        if self.loss not in RANK_LOSSES:
            raise ValueError(f"loss must be one of {RANK_LOSSES}, got {self.loss!r}")
        for name in ("max_epochs", "days_per_batch", "patience"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.lr <= 0 or self.weight_decay < 0 or self.grad_clip <= 0:
            raise ValueError("lr and grad_clip must be positive and weight_decay >= 0")


def param_groups(net: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on matrices (linear and attention weights) only."""
    decay = [p for p in net.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in net.parameters() if p.requires_grad and p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


def train_days(net: nn.Module, batch: Callable, blocks: list[np.ndarray],
               validate: Callable[[], float] | None, config: LoopConfig, seed: int, device: torch.device,
               progress: bool = False, desc: str = "fit") -> tuple[list[dict], int]:
    """Train ``net`` on ``blocks`` of consecutive signal days (one optimiser step each, in a
    new random order every epoch); returns ``(history, best_epoch)``.

    With ``validate``, the weights of the epoch with the best validation score are restored;
    without, the last epoch's are kept.
    """
    opt = torch.optim.AdamW(param_groups(net, config.weight_decay), lr=config.lr,
                            fused=device.type in ("cpu", "cuda"))
    gen = torch.Generator().manual_seed(seed)
    history: list[dict] = []
    best, best_state, best_epoch, stale = -math.inf, None, 0, 0
    steps = min(len(blocks), config.steps_per_epoch or len(blocks))
    bar = tqdm(total=config.max_epochs * steps, unit="step", desc=desc, disable=not progress,
               dynamic_ncols=True, leave=False)
    for epoch in range(1, config.max_epochs + 1):
        net.train()
        t0, total = time.perf_counter(), 0.0
        for b in torch.randperm(len(blocks), generator=gen)[:steps].tolist():
            x, labels, mask, present = (t.to(device) for t in batch(blocks[b])[:4])
            loss = rank_loss(config.loss, net(x, present), labels, mask, generator=gen)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), config.grad_clip)
            opt.step()
            total += float(loss.detach())
            bar.update(1)
        row = {"epoch": epoch, "train_loss": total / steps, "seconds": time.perf_counter() - t0}
        if validate is not None:
            row["val_rank_ic"] = float(validate())
            score = row["val_rank_ic"] if math.isfinite(row["val_rank_ic"]) else -math.inf
            if score > best:
                best, best_epoch, stale = score, epoch, 0
                best_state = copy.deepcopy(net.state_dict())
            else:
                stale += 1
        history.append(row)
        bar.set_postfix(loss=f"{row['train_loss']:.4f}", val_ic=f"{row.get('val_rank_ic', math.nan):.4f}")
        if validate is not None and stale >= config.patience:
            log.info("early stop at epoch %d (best %d, validation rank IC %.4f)", epoch, best_epoch, best)
            break
    bar.close()
    if best_state is not None:
        net.load_state_dict(best_state)
    else:
        best_epoch = len(history)
    net.eval()
    return history, best_epoch
