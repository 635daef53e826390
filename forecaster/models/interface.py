"""The model interface the walk-forward relies on, written down once.

A model is an sklearn-style estimator (``__init__`` stores keywords, so ``sklearn.base.clone``
gives each fold a fresh copy) with ``fit`` and ``predict``. Two input kinds exist:

* ``input_kind = "panel"`` (panel Transformer, factor scores, gradient boosting): ``fit`` and
  ``predict`` take a :class:`~forecaster.data.panel.Panel` slice; ``predict`` returns a Series
  named ``forecast`` indexed by ``(date, code)``, the date being the forecast date (the
  trading day after the last input row).
* ``input_kind = "frames"`` (the default when the attribute is missing: the single-stock
  forecaster, time-series baselines, ``PerStock``): they take ``{code: frame}`` and return
  ``{code: Series indexed by the date forecast}``.

``fit`` sees rows up to the fold's cut-off only and must use nothing else; ``predict`` at a
date may use rows before that date only. ``is_return_forecast`` says whether the output is a
return (scored by error metrics and Diebold-Mariano) or a score (rank statistics only).

``fit`` raises :class:`forecaster.checks.NotEnoughData` when the rows, days or stocks it was
given are too few to fit it: the walk-forward then skips the model on that fold. Any other
exception (a plain ``ValueError`` included) is the model's failure on the fold.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Forecaster(Protocol):
    is_return_forecast: bool

    def fit(self, data) -> Forecaster: ...

    def predict(self, data): ...


def input_kind(model) -> str:
    """``"panel"`` or ``"frames"`` (see the module docstring)."""
    return getattr(model, "input_kind", "frames")
