"""Checkpoints: model state dict + config + tokenizers (+ optional training state).

Written and read by the toolkit's one checkpoint implementation (:mod:`seq2seq.core.checkpoint`):
atomically, and with ``torch.load(..., weights_only=True)``: a checkpoint holds only tensors,
dicts, lists, strings and numbers, never pickled code.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .core import checkpoint as core_checkpoint
from .core.checkpoint import CheckpointError
from .model import Transformer, TransformerConfig
from .tokenization import TextTokenizer, tokenizer_from_dict

logger = logging.getLogger(__name__)


CHECKPOINT_FORMAT = "seq2seq translation"
CHECKPOINT_VERSION = 1


def save_checkpoint(path: str | Path, model: Transformer, src_tokenizer: TextTokenizer,
                    tgt_tokenizer: TextTokenizer, train_state: dict | None = None,
                    meta: dict | None = None) -> Path:
    """Write ``model`` (state dict + config), both tokenizers and optional training state,
    atomically (:func:`seq2seq.core.save_checkpoint`).

    Args:
        train_state: optimizer state, step, epoch, RNG state... (tensors and plain values).
        meta: free-form plain values (scores, arguments).
    """
    payload = {
        "model_config": model.config.to_dict(),
        # As is (loading maps to CPU): per-tensor .cpu() copies on a GPU would store tied
        # embedding matrices once per name.
        "model_state": model.state_dict(),
        "tokenizers": {"src": src_tokenizer.to_dict(), "tgt": tgt_tokenizer.to_dict(),
                       "joint": src_tokenizer is tgt_tokenizer},
        "train_state": train_state or {},
        "meta": meta or {},
    }
    saved = core_checkpoint.save_checkpoint(payload, path, CHECKPOINT_FORMAT, CHECKPOINT_VERSION)
    logger.debug("saved checkpoint %s", saved)
    return saved


def load_checkpoint(path: str | Path) -> dict:
    """Load and check a checkpoint's raw payload (on CPU, ``weights_only=True``).

    Raises:
        CheckpointError: missing file, unreadable/corrupt data, not a translation checkpoint,
            or a format version this code does not read.
    """
    data = core_checkpoint.load_checkpoint(path, CHECKPOINT_FORMAT, (CHECKPOINT_VERSION,))
    for key in ("model_config", "model_state", "tokenizers"):
        if key not in data:
            raise CheckpointError(f"{path}: checkpoint lacks '{key}'")
    return data


@dataclass
class LoadedModel:
    """A model ready to translate, with its tokenizers and the raw checkpoint payload."""

    model: Transformer
    src_tokenizer: TextTokenizer
    tgt_tokenizer: TextTokenizer
    payload: dict


def model_from_payload(data: dict, path: str | Path = "<checkpoint>",
                       device: torch.device | str = "cpu") -> LoadedModel:
    """Build the model and tokenizers held in a payload from :func:`load_checkpoint`.

    Raises:
        CheckpointError: when config, state dict and tokenizers do not fit together.
    """
    try:
        config = TransformerConfig.from_dict(dict(data["model_config"]))
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path}: invalid model config: {exc}") from exc
    try:
        tok = data["tokenizers"]
        src_tok = tokenizer_from_dict(tok["src"])
        tgt_tok = src_tok if tok.get("joint") else tokenizer_from_dict(tok["tgt"])
    except Exception as exc:  # tokenizers raises its own exception types on bad JSON
        raise CheckpointError(f"{path}: invalid tokenizer data: {exc}") from exc
    if (src_tok.vocab_size, tgt_tok.vocab_size) != (config.src_vocab_size, config.tgt_vocab_size):
        raise CheckpointError(
            f"{path}: tokenizer vocabularies ({src_tok.vocab_size}, {tgt_tok.vocab_size}) do not match "
            f"the model config ({config.src_vocab_size}, {config.tgt_vocab_size})"
        )
    model = Transformer(config)
    try:
        model.load_state_dict(data["model_state"], strict=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{path}: model weights do not match the saved config: {exc}") from exc
    return LoadedModel(model.to(device).eval(), src_tok, tgt_tok, data)


def load_model(path: str | Path, device: torch.device | str = "cpu") -> LoadedModel:
    """:func:`load_checkpoint` + :func:`model_from_payload`."""
    return model_from_payload(load_checkpoint(path), path, device)


def load_ensemble(paths: Sequence[str | Path], device: torch.device | str = "cpu") -> list[LoadedModel]:
    """Load checkpoints to decode together as an ensemble (one checkpoint: a list of one).

    Raises:
        CheckpointError: a checkpoint cannot be loaded, or its tokenizers differ from the first
            one's (an ensemble averages probabilities over one vocabulary).
    """
    if not paths:
        raise ValueError("load_ensemble needs at least one checkpoint")
    loaded = [load_model(path, device) for path in paths]
    first = loaded[0]
    for path, other in zip(paths[1:], loaded[1:], strict=True):
        for side in ("src", "tgt"):
            if getattr(other, f"{side}_tokenizer").to_dict() != getattr(first, f"{side}_tokenizer").to_dict():
                raise CheckpointError(f"{path}: its {side} tokenizer differs from that of {paths[0]}; the "
                                      "checkpoints of an ensemble must share their tokenizers")
    return loaded


def average_state_dicts(paths: list[str | Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the model weights of several checkpoints of one model.

    Raises:
        CheckpointError: when the checkpoints hold different parameter names or shapes.
    """
    if not paths:
        raise ValueError("average_state_dicts needs at least one checkpoint")
    total: dict[str, torch.Tensor] | None = None
    for path in paths:
        state = load_checkpoint(path)["model_state"]
        if total is None:
            total = {k: v.double().clone() if v.is_floating_point() else v.clone() for k, v in state.items()}
            continue
        if set(state) != set(total) or any(state[k].shape != total[k].shape for k in state):
            raise CheckpointError(f"{path}: parameters differ from {paths[0]}; cannot average")
        for k, v in state.items():
            if v.is_floating_point():
                total[k] += v.double()
    assert total is not None
    return {k: (v / len(paths)).float() if v.is_floating_point() else v for k, v in total.items()}
