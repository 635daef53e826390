"""Checks of option values, shared by every config dataclass and estimator of the package, so
each kind of bad value is refused with one wording (naming the option and what was expected)."""

from __future__ import annotations

import numpy as np


def check_int(name: str, value, minimum: int = 1, allow_none: bool = False) -> None:
    """Raise ``ValueError`` unless ``value`` is an integer ``>= minimum`` (or ``None`` where
    ``allow_none``). ``True``/``False`` are not integers here, and neither are floats or
    strings such as ``"20"``."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {'None or ' if allow_none else ''}{what}, got {value!r}")
