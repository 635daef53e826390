"""Training losses on scaled targets: point (MSE), Gaussian NLL and quantile (pinball)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOSSES = ("mse", "gaussian", "quantile")


def n_outputs(loss: str, quantiles: tuple[float, ...]) -> int:
    return {"mse": 1, "gaussian": 2}.get(loss, len(quantiles))


def gaussian_scale(raw: torch.Tensor) -> torch.Tensor:
    """Positive scale from the network's raw second output."""
    return F.softplus(raw) + 1e-4


def masked_loss(loss: str, out: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                quantiles: tuple[float, ...] = ()) -> torch.Tensor:
    """Mean loss over positions where ``mask`` is True.

    Args:
        out: ``[..., n_outputs]`` network output.
        target: ``[...]`` scaled targets.
        mask: ``[...]`` bool.
    """
    if loss == "mse":
        per = (out[..., 0] - target) ** 2
    elif loss == "gaussian":
        scale = gaussian_scale(out[..., 1])
        per = torch.log(scale) + 0.5 * ((target - out[..., 0]) / scale) ** 2
    else:
        q = torch.tensor(quantiles, dtype=out.dtype, device=out.device)
        diff = target.unsqueeze(-1) - out  # (..., Q)
        per = torch.maximum(q * diff, (q - 1) * diff).mean(-1)
    weight = mask.to(per.dtype)
    return (per * weight).sum() / weight.sum().clamp_min(1.0)
