"""Sliding windows over daily rows, without copying."""

from __future__ import annotations

import torch

from forecaster.checks import NotEnoughData


def sliding_windows(values: torch.Tensor, length: int) -> torch.Tensor:
    """All windows of ``length`` consecutive rows, as a view (no copy).

    Args:
        values: ``[days, ...]``.
        length: window length L.

    Returns:
        ``[days - L + 1, L, ...]``; window ``i`` holds rows ``i .. i + L - 1``.
    """
    if length < 1:
        raise ValueError(f"window length must be >= 1, got {length}")
    if values.size(0) < length:
        raise NotEnoughData(f"{values.size(0)} rows are fewer than one window of {length}")
    # unfold puts the window dimension last; move it next to the window index.
    return values.unfold(0, length, 1).movedim(-1, 1)


def shift_targets(values: torch.Tensor, valid: torch.Tensor, horizon: int
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Align targets with the day whose data forecasts them.

    Args:
        values: ``[days]`` daily targets (e.g. log returns).
        valid: ``[days]`` bool, False where a day must not be a target (suspended, missing).
        horizon: H >= 1; the row of day t is paired with the target of day t + H.

    Returns:
        ``(shifted [days], shifted_valid [days])`` with ``shifted[t] = values[t + H]``; the last
        H rows have no target and are marked invalid.
    """
    if horizon < 1:
        raise ValueError(f"horizon must be >= 1, got {horizon}")
    shifted = torch.zeros_like(values)
    ok = torch.zeros_like(valid)
    if values.size(0) > horizon:
        shifted[:-horizon] = values[horizon:]
        ok[:-horizon] = valid[horizon:]
    # NaN targets are already invalid; zero them so they cannot poison a masked loss.
    return torch.nan_to_num(shifted), ok
