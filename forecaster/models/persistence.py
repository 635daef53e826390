"""Saving and loading a fitted Transformer estimator, shared by both: the estimator's keywords,
its network config and weights, and whatever else it fitted, in one checkpoint file of the
core's format (tagged with the estimator's kind and format version, written atomically)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from seq2seq.core import CheckpointError, load_checkpoint, resolve_device, save_checkpoint


def save_model(model, path: str | Path, kind: str, version: int, payload: dict) -> Path:
    """Write ``model``'s keywords (``get_params``), ``net_config_`` and ``payload``."""
    params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in model.get_params().items()}
    return save_checkpoint({"params": params, "net_config": model.net_config_.to_dict(), **payload},
                           path, kind, version)


@contextmanager
def content_errors(path: str | Path, what: str) -> Iterator[None]:
    """A checkpoint of the right kind whose content does not fit: one clear error naming it."""
    try:
        yield
    except (KeyError, TypeError, RuntimeError, ValueError) as exc:
        raise CheckpointError(f"{path}: checkpoint content does not fit this {what}: {exc}") from exc


def load_model(cls, path: str | Path, kind: str, version: int, device: str, config_cls,
               tuple_params: tuple[str, ...] = ()) -> tuple[object, dict]:
    """``(model, data)``: ``cls`` rebuilt from the saved keywords on ``device``, with its
    ``net_config_`` and ``device_`` set; ``data`` holds the rest for the caller to restore."""
    data = load_checkpoint(path, kind, (version,))
    with content_errors(path, cls.__name__):
        params = dict(data["params"])
        for key in tuple_params:
            if params.get(key) is not None:
                params[key] = tuple(params[key])
        model = cls(**{**params, "device": device})
        model.net_config_ = config_cls(**data["net_config"])
        model.device_ = resolve_device(device)
    return model, data
