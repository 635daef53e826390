"""Training: label-smoothed loss, warm-up + inverse-square-root (Noam) schedule, the epoch
loop with validation, best-checkpoint keeping, checkpoint averaging and resuming."""

from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from tqdm.auto import tqdm

from .batching import ParallelDataset
from .checkpoint import CheckpointError, average_state_dicts, load_checkpoint, save_checkpoint
from .core import PRECISIONS, autocast, resolve_precision
from .decoding import DecodeConfig, translate_ids
from .evaluation import bleu
from .model import Transformer
from .tokenization import PAD_ID, TextTokenizer

logger = logging.getLogger(__name__)


LR_SCHEDULES = ("inverse-sqrt", "linear")


@dataclass
class TrainConfig:
    """Optimisation settings.

    Attributes:
        epochs: passes over the training data.
        max_tokens: padded-token budget per batch.
        lr: peak learning rate, reached after ``warmup`` steps.
        warmup: warm-up steps (linear increase from 0).
        lr_schedule: after warm-up, ``"inverse-sqrt"`` decays as 1/sqrt(step) (Noam);
            ``"linear"`` decays linearly to zero at the end of the training budget: the last
            step of ``epochs`` or, when ``max_minutes`` binds first, the time limit (budgeted
            training anneals the weights by the deadline instead of leaving the lr high).
        betas, eps, weight_decay: AdamW.
        clip_norm: gradient-norm clipping (0 = off).
        label_smoothing: probability mass spread over the vocabulary.
        seed: seeds weights, dropout and batch order.
        average_last: average the last N epoch checkpoints at the end (0/1 = off).
        ema: decays of exponential moving averages of the weights, updated every step and
            written (validated) as ``ema<decay>.pt`` at the end; empty = off. Several decays
            cost one weight copy each and let validation pick the averaging horizon.
        max_minutes: stop (after validating and saving) once training would exceed this.
        val_bleu: decode the validation set each epoch (greedy) and keep the best by BLEU
            (otherwise by validation loss).
        val_bleu_sentences: decode only the first N validation sentences (0 = all).
        progress: show a tqdm bar (loss, target tokens/s, ETA).
        precision: ``"fp32"``; ``"bf16"`` runs the training forward pass under bfloat16
            autocast (weights, optimizer and loss stay float32; validation runs in float32);
            ``"auto"`` takes bf16 where it measures faster on the device
            (:func:`seq2seq.core.resolve_precision`).
    """

    epochs: int = 10
    max_tokens: int = 4096
    lr: float = 1e-3
    warmup: int = 4000
    lr_schedule: str = "inverse-sqrt"
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 1.0
    label_smoothing: float = 0.1
    seed: int = 0
    average_last: int = 0
    ema: tuple[float, ...] = ()
    max_minutes: float = 0.0
    val_bleu: bool = True
    val_bleu_sentences: int = 0
    progress: bool = True
    precision: str = "fp32"
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {self.label_smoothing}")
        if self.clip_norm < 0 or self.average_last < 0 or self.max_minutes < 0 or self.val_bleu_sentences < 0:
            raise ValueError("clip_norm, average_last, max_minutes and val_bleu_sentences must be >= 0")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        self.ema = tuple(float(d) for d in self.ema)
        if any(not 0.0 < d < 1.0 for d in self.ema) or len(set(self.ema)) != len(self.ema):
            raise ValueError(f"ema decays must be distinct and in (0, 1), got {list(self.ema)}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["betas"] = list(self.betas)
        d["ema"] = list(self.ema)
        return d


class _SmoothedNLL(torch.autograd.Function):
    """Summed label-smoothed NLL of ``[tokens, vocab]`` logits with a hand-written backward:
    ``weight * (softmax - q)`` with ``q = (1 - smoothing) * onehot + smoothing / vocab``, three
    passes over the largest activation instead of autograd's six (gather, mean and
    log-softmax backward, each a full ``[tokens, vocab]`` tensor)."""

    @staticmethod
    def forward(ctx, logits, target, weight, smoothing):
        logp = torch.log_softmax(logits.float(), dim=-1)
        nll = -(logp.gather(1, target.unsqueeze(1)).squeeze(1) * weight).sum()
        loss = (1.0 - smoothing) * nll - smoothing * (logp.mean(dim=-1) * weight).sum()
        ctx.save_for_backward(logp, target, weight)
        ctx.smoothing, ctx.logits_dtype = smoothing, logits.dtype
        ctx.mark_non_differentiable(nll)
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        logp, target, weight = ctx.saved_tensors
        s = ctx.smoothing
        grad = logp.exp().sub_(s / logp.size(-1))
        grad.scatter_add_(1, target.unsqueeze(1), grad.new_full((target.numel(), 1), s - 1.0))
        grad.mul_((weight * grad_loss).unsqueeze(1))
        return grad.to(ctx.logits_dtype), None, None, None


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float,
                        pad_id: int = PAD_ID) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Label-smoothed cross-entropy, padding ignored; equals
    ``F.cross_entropy(..., label_smoothing=smoothing, ignore_index=pad_id, reduction="sum")``.

    Args:
        logits: ``[batch, tgt_len, vocab]``.
        target: ``[batch, tgt_len]`` ids; ``pad_id`` positions do not count.
        smoothing: mass spread uniformly over the vocabulary.

    Returns:
        ``(loss_sum, nll_sum, n_tokens)``: summed smoothed loss (to optimise), summed plain
        negative log-likelihood (to report, no gradient), number of non-pad target tokens.
    """
    # One log-softmax serves both the smoothed loss and the reported NLL (the vocabulary
    # projection is the largest activation, so each pass over it matters on CPU).
    flat_target = target.reshape(-1)
    real = flat_target != pad_id
    loss, nll = _SmoothedNLL.apply(logits.reshape(-1, logits.size(-1)), flat_target, real.float(),
                                   float(smoothing))
    return loss, nll, int(real.sum())


def noam_lr(step: int, peak: float, warmup: int) -> float:
    """Learning rate at optimizer step ``step`` (1-based): linear warm-up to ``peak`` over
    ``warmup`` steps, then ``peak * sqrt(warmup / step)``."""
    step = max(step, 1)
    if warmup == 0:
        return peak / math.sqrt(step)
    return peak * min(step / warmup, math.sqrt(warmup / step))


def linear_decay_lr(step: int, peak: float, warmup: int, progress: float) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, then ``peak * (1 - progress)``, where
    ``progress`` in [0, 1] is the fraction of the training budget spent (zero lr at the end)."""
    step = max(step, 1)
    ramp = step / warmup if warmup > 0 else 1.0
    return peak * min(ramp, max(1.0 - progress, 0.0))


@torch.no_grad()
def validation_loss(model: Transformer, data: ParallelDataset, max_tokens: int,
                    device: torch.device) -> float:
    """Mean per-token negative log-likelihood (no smoothing) over ``data``."""
    model.eval()
    total, tokens = 0.0, 0
    for batch in data.batches(data.sampler(max_tokens, shuffle=False)):
        batch = batch.to(device)
        _, nll, n = label_smoothed_loss(model(batch.src, batch.tgt_in), batch.tgt_out, 0.0)
        total += float(nll)
        tokens += n
    return total / max(tokens, 1)


@dataclass
class ValidationSet:
    """Validation data: encoded pairs (for the loss) and raw text (for BLEU)."""

    data: ParallelDataset
    src_text: list[str]
    ref_text: list[str]


def evaluate_bleu(model: Transformer, tgt_tokenizer: TextTokenizer, val: ValidationSet,
                  decode: DecodeConfig, device: torch.device, limit: int = 0) -> float:
    """Decode the first ``limit`` (0 = all) validation sources (cut to the model's length, as
    for the loss); sacreBLEU corpus BLEU."""
    n = len(val.ref_text) if limit == 0 else min(limit, len(val.ref_text))
    ids = translate_ids(model, val.data.src[:n], decode, device=device, truncate=True)
    return bleu([tgt_tokenizer.decode(i) for i in ids], val.ref_text[:n])


class Trainer:
    """Runs training and writes checkpoints to ``out_dir``:
    ``last.pt`` (with optimizer state, for ``resume``), ``best.pt``, ``epoch<N>.pt`` (the last
    ``average_last``), ``averaged.pt`` when averaging and ``ema<decay>.pt`` per EMA decay.
    """

    def __init__(self, model: Transformer, src_tokenizer: TextTokenizer, tgt_tokenizer: TextTokenizer,
                 train_data: ParallelDataset, val: ValidationSet | None, config: TrainConfig,
                 out_dir: str | Path, device: torch.device | str = "cpu"):
        self.model = model.to(device)
        self.src_tokenizer, self.tgt_tokenizer = src_tokenizer, tgt_tokenizer
        self.train_data, self.val = train_data, val
        self.config = config
        self.out_dir = Path(out_dir)
        self.device = torch.device(device)
        self.precision = resolve_precision(config.precision, self.device)
        self.optimizer = torch.optim.AdamW(
            model.parameters(), lr=noam_lr(1, config.lr, config.warmup), betas=config.betas,
            eps=config.eps, weight_decay=config.weight_decay,
        )
        # Shadow weights on the training device; the update is one fused lerp per decay.
        self.emas = {d: AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(d), use_buffers=True)
                     for d in config.ema}
        self.step = 0
        self.epoch = 0  # completed epochs
        # Fraction of the training budget spent (lr_schedule="linear"); saved, so a resumed run
        # continues the decay instead of restarting it.
        self.progress = 0.0
        self.best_score: float | None = None
        self.history: list[dict] = []

    # -- state -------------------------------------------------------------------------------

    def _train_state(self) -> dict:
        return {
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "epoch": self.epoch,
            "progress": self.progress,
            "best_score": self.best_score,
            "history": self.history,
            "rng": torch.get_rng_state(),
            "train_config": self.config.to_dict(),
            "ema": {str(d): m.state_dict() for d, m in self.emas.items()},
        }

    def resume(self, path: str | Path, data: dict | None = None) -> None:
        """Continue from ``last.pt`` of an earlier run: model, optimizer, step, epoch, RNG and
        the learning-rate schedule (peak ``lr``, ``warmup``, ``lr_schedule`` and the budget
        fraction spent) come from it.

        Args:
            data: the checkpoint's payload when the caller has already loaded ``path``.

        Raises:
            CheckpointError: unreadable, or a checkpoint without training state (not a last.pt).
        """
        data = load_checkpoint(path) if data is None else data
        state = data.get("train_state") or {}
        if "optimizer" not in state:
            raise CheckpointError(f"{path}: checkpoint has no training state to resume from (use last.pt)")
        self.model.load_state_dict(data["model_state"])
        self.optimizer.load_state_dict(state["optimizer"])
        saved = state.get("train_config", {})
        schedule = {k: saved[k] for k in ("lr", "warmup", "lr_schedule") if k in saved}
        if any(getattr(self.config, k) != v for k, v in schedule.items()):
            logger.info("resuming with the checkpoint's schedule %s (not the given %s)", schedule,
                        {k: getattr(self.config, k) for k in schedule})
        self.config = replace(self.config, **schedule)
        self.step, self.epoch = int(state["step"]), int(state["epoch"])
        self.progress = float(state.get("progress", 0.0))
        self.best_score = state.get("best_score")
        self.history = list(state.get("history", []))
        torch.set_rng_state(state["rng"])
        saved_ema = state.get("ema", {})
        for decay, averaged in self.emas.items():
            if str(decay) in saved_ema:
                averaged.load_state_dict(saved_ema[str(decay)])
            else:
                logger.info("EMA %g starts at the resumed weights (not in %s)", decay, path)
        logger.info("resumed from %s at epoch %d, step %d", path, self.epoch, self.step)

    def _save(self, name: str, with_state: bool = False, meta: dict | None = None) -> Path:
        return save_checkpoint(self.out_dir / name, self.model, self.src_tokenizer, self.tgt_tokenizer,
                               self._train_state() if with_state else None, meta)

    # -- loop --------------------------------------------------------------------------------

    def _lr(self, total_steps: int, clock: tuple[float, float, float] | None) -> float:
        """Learning rate for ``self.step``; updates ``self.progress`` (linear schedule).

        Args:
            total_steps: optimizer steps in ``epochs`` epochs.
            clock: ``(start, budget_seconds, progress_at_start)`` of a time-limited fit.
        """
        cfg = self.config
        if cfg.lr_schedule == "inverse-sqrt":
            return noam_lr(self.step, cfg.lr, cfg.warmup)
        progress = self.step / max(total_steps, 1)
        if clock is not None:
            start, budget, p0 = clock
            progress = max(progress, p0 + (1.0 - p0) * (time.perf_counter() - start) / budget)
        self.progress = min(progress, 1.0)
        return linear_decay_lr(self.step, cfg.lr, cfg.warmup, self.progress)

    def _train_epoch(self, deadline: float | None, clock: tuple[float, float, float] | None = None) -> dict:
        """One pass over the training data; stops early (mid-epoch) at ``deadline``.
        ``clock`` is the time budget the linear lr schedule decays over (see ``_lr``)."""
        cfg = self.config
        self.model.train()
        sampler = self.train_data.sampler(cfg.max_tokens, shuffle=True, seed=cfg.seed)
        sampler.set_epoch(self.epoch)
        batches = list(sampler)
        total_steps = cfg.epochs * len(batches)
        bar = tqdm(total=len(batches), desc=f"epoch {self.epoch + 1}/{cfg.epochs}", unit="batch",
                   disable=not cfg.progress, dynamic_ncols=True,
                   # Into a log file, update rarely rather than every second.
                   mininterval=1.0 if sys.stderr.isatty() else 30.0)
        loss_sum = nll_sum = 0.0
        tokens = 0
        start = time.perf_counter()
        stopped_early = False
        for idx in batches:
            batch = self.train_data.batch(idx).to(self.device)
            self.step += 1
            lr = self._lr(total_steps, clock)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            with autocast(self.device, self.precision):
                logits = self.model(batch.src, batch.tgt_in)
            loss, nll, n = label_smoothed_loss(logits, batch.tgt_out, cfg.label_smoothing)
            self.optimizer.zero_grad(set_to_none=True)
            (loss / max(n, 1)).backward()
            if cfg.clip_norm > 0:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm)
            self.optimizer.step()
            for averaged in self.emas.values():
                averaged.update_parameters(self.model)
            loss_value = loss.item()
            loss_sum += loss_value
            nll_sum += float(nll)
            tokens += n
            elapsed = time.perf_counter() - start
            bar.set_postfix(loss=f"{loss_value / max(n, 1):.3f}", tok_s=f"{tokens / max(elapsed, 1e-9):.0f}",
                            lr=f"{lr:.2e}", refresh=False)
            bar.update(1)
            if deadline is not None and time.perf_counter() > deadline:
                stopped_early = True
                break
        bar.close()
        elapsed = time.perf_counter() - start
        return {"train_loss": loss_sum / max(tokens, 1), "train_nll": nll_sum / max(tokens, 1),
                "train_tokens_per_s": tokens / max(elapsed, 1e-9), "train_seconds": elapsed,
                "stopped_early": stopped_early}

    def _validate(self) -> dict:
        if self.val is None:
            return {}
        cfg = self.config
        out = {"val_nll": validation_loss(self.model, self.val.data, cfg.max_tokens, self.device)}
        if cfg.val_bleu:
            out["val_bleu"] = evaluate_bleu(self.model, self.tgt_tokenizer, self.val, cfg.decode,
                                            self.device, cfg.val_bleu_sentences)
        return out

    def _score(self, record: dict) -> float | None:
        """Higher is better: validation BLEU, else minus validation loss, else minus train loss."""
        if "val_bleu" in record:
            return record["val_bleu"]
        if "val_nll" in record:
            return -record["val_nll"]
        return -record["train_loss"]

    def fit(self) -> list[dict]:
        """Train for the remaining epochs; returns the per-epoch history."""
        cfg = self.config
        if self.step == 0:  # seeds the dropout stream; a resumed run restored its RNG state instead
            torch.manual_seed(cfg.seed)
        t0 = time.perf_counter()
        deadline = t0 + cfg.max_minutes * 60 if cfg.max_minutes > 0 else None
        clock = None if deadline is None else (t0, cfg.max_minutes * 60, self.progress)
        val_seconds = 0.0
        while self.epoch < cfg.epochs:
            # Leave room for the validation that follows the (possibly cut short) epoch.
            record = self._train_epoch(None if deadline is None else deadline - val_seconds, clock)
            self.epoch += 1
            v_start = time.perf_counter()
            record.update(self._validate())
            val_seconds = time.perf_counter() - v_start
            record.update(epoch=self.epoch, step=self.step, minutes=(time.perf_counter() - t0) / 60)
            score_now = self._score(record)
            improved = self.best_score is None or score_now > self.best_score
            if improved:
                self.best_score = score_now
            self.history.append(record)
            if improved:
                self._save("best.pt", meta={"epoch": self.epoch, "record": record})
            if cfg.average_last > 1:
                self._save(f"epoch{self.epoch}.pt")
                old = self.out_dir / f"epoch{self.epoch - cfg.average_last}.pt"
                old.unlink(missing_ok=True)
            self._save("last.pt", with_state=True, meta={"epoch": self.epoch, "record": record})
            logger.info("epoch %d: %s%s", self.epoch,
                        ", ".join(f"{k}={v:.4g}" for k, v in record.items()
                                  if isinstance(v, float | int) and not isinstance(v, bool)),
                        " (best)" if improved else "")
            if deadline is not None and (record["stopped_early"] or time.perf_counter() > deadline):
                logger.info("stopping in epoch %d: time budget of %.1f minutes used", self.epoch,
                            cfg.max_minutes)
                break
        if cfg.average_last > 1:
            self.average_checkpoints()
        for decay in self.emas:
            self.save_ema(decay)
        return self.history

    def _validate_weights(self, state: dict[str, torch.Tensor], name: str, meta: dict) -> Path:
        """Validate and save other weights of this model (averaged, EMA) as ``name``, then
        put the trained weights back."""
        current = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.model.load_state_dict(state)
        record = self._validate()
        path = self._save(name, meta={**meta, "record": record})
        logger.info("%s: %s", path, ", ".join(f"{k}={v:.4g}" for k, v in record.items()))
        self.model.load_state_dict(current)
        return path

    def save_ema(self, decay: float) -> Path:
        """Validate and write the moving average of the weights with ``decay`` as ``ema<decay>.pt``."""
        return self._validate_weights(self.emas[decay].module.state_dict(), f"ema{decay:g}.pt",
                                      {"ema": decay, "step": self.step})

    def average_checkpoints(self) -> Path | None:
        """Average the last ``average_last`` epoch checkpoints into ``averaged.pt`` (and
        report its validation scores)."""
        n = self.config.average_last
        paths = [self.out_dir / f"epoch{e}.pt" for e in range(max(1, self.epoch - n + 1), self.epoch + 1)]
        paths = [p for p in paths if p.is_file()]
        if len(paths) < 2:
            logger.info("not averaging: only %d epoch checkpoint(s)", len(paths))
            return None
        return self._validate_weights(average_state_dicts(paths), "averaged.pt",
                                      {"averaged": [p.name for p in paths]})
