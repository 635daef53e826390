"""Device selection shared by both packages (``--device auto``)."""

from __future__ import annotations

import torch


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` -> CUDA when available, else MPS when available, else CPU; anything else
    is passed to :class:`torch.device` and checked for availability."""
    if isinstance(device, torch.device):
        return device
    name = str(device).strip().lower()
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        resolved = torch.device(name)
    except RuntimeError as exc:
        raise ValueError(f"unknown device {device!r}; use 'auto', 'cpu', 'cuda' or 'cuda:N'") from exc
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available; use --device auto or cpu")
    return resolved
