"""Checks of option values, shared by every config dataclass and estimator of the package, so
each kind of bad value is refused with one wording (naming the option and what was expected);
:class:`ConfigError`, the error of a bad option value; and :class:`NotEnoughData`, the one error
that says data are too thin rather than wrong."""

from __future__ import annotations

import numpy as np


class ConfigError(ValueError):
    """A bad experiment file or option: names the file, section and key (the checks below name
    the field; :func:`forecaster.app.fields.config_error` rewrites it as the option typed).
    Defined here, where every part may raise it; importable from ``forecaster.app.fields``.
    A ``ValueError``, so callers that catch those still do."""


class NotEnoughData(ValueError):
    """Too few rows, days or stocks to fit: the data are thin, not wrong. A model's ``fit``
    raises this (and only this) when what it was given cannot fit it; the walk-forward then
    skips the model on that fold, where any other error is recorded as its failure. A
    ``ValueError``, so callers that catch those still do."""


def check_int(name: str, value, minimum: int = 1, allow_none: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``value`` is an integer ``>= minimum`` (or ``None`` where
    ``allow_none``). ``True``/``False`` are not integers here, and neither are floats or
    strings such as ``"20"``."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{name} must be {'None or ' if allow_none else ''}{what}, got {value!r}")


def check_date(name: str, value, allow_none: bool = False):
    """``value`` (``"YYYY-MM-DD"``, a ``date``/``datetime`` or a ``Timestamp``) as a
    ``pd.Timestamp`` at midnight; :class:`ConfigError` naming the option otherwise (``"2025-13-45"``
    is refused, not read as some other day)."""
    import datetime

    import pandas as pd

    if value is None and allow_none:
        return None
    if isinstance(value, (datetime.date, pd.Timestamp)):
        out = pd.Timestamp(value)
    elif isinstance(value, str):
        try:
            out = pd.Timestamp(datetime.datetime.strptime(value.strip(), "%Y-%m-%d"))
        except ValueError:
            out = None
    else:
        out = None
    if out is None or pd.isna(out):
        raise ConfigError(f"{name} must be {'None or ' if allow_none else ''}a date YYYY-MM-DD, "
                         f"got {value!r}")
    return out.normalize()


def check_choice(name: str, value, choices) -> None:
    """Raise :class:`ConfigError` unless ``value`` is one of ``choices`` (a tuple, shown as given)."""
    if value not in choices:
        raise ConfigError(f"{name} must be one of {choices}, got {value!r}")
