"""What each fold of a walk-forward is given: the stocks it trains on, its training and
forecast slices of the panel, and the run's feature store those slices read.

The features are computed once for the whole panel (:func:`with_feature_store`) into a
float32 store that every fold reads (:mod:`forecaster.features.store`); a fold's training
slice then copies only the fields its labels need (:data:`LABEL_FIELDS`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import numpy as np

from forecaster.data.panel import Panel, PanelFiles
from forecaster.evaluation.backends import release_freed_heap
from forecaster.evaluation.folds import Fold, WalkForwardConfig
from forecaster.features.factors import available_features, expand_features, lacking, resolve_features
from forecaster.features.store import FeatureStore, FeatureView
from forecaster.models.interface import input_kind

log = logging.getLogger(__name__)


# The fields a fold's training reads besides its features (the tradeable label and the
# delisting rule): a fold whose features come from the run's store copies only these.
LABEL_FIELDS = frozenset({"open", "close", "preclose", "delisting"})


def fold_members(grid: Panel, folds: list[Fold], min_stock_days: int) -> dict[int, list[str]]:
    """``{fold: codes}``: the stocks with at least ``min_stock_days`` bars from the fold's
    training start to its cut-off (vectorised: cumulative bar counts over the calendar)."""
    counts = np.vstack([np.zeros((1, len(grid.codes)), int), np.cumsum(grid.listed, axis=0)])
    out = {}
    for f in folds:
        lo, hi = grid.dates.searchsorted(f.train_start), grid.dates.searchsorted(f.cut, side="right")
        out[f.fold] = [str(c) for c in grid.codes[(counts[hi] - counts[lo]) >= min_stock_days]]
    return out


def fold_inputs(panel: dict, grid: Panel | PanelFiles, fold: Fold, codes: list[str],
                config: WalkForwardConfig, kinds: set[str]):
    """The inputs of one fold's models for the stocks ``codes``: rows up to the cut-off for
    training, and the forecast block with ``margin_days`` of history before it (in-memory
    copies; ``grid`` given as files is mapped only while they are cut). With the run's feature
    store, the training slice copies only :data:`LABEL_FIELDS` (:meth:`Panel.lean`)."""
    if isinstance(grid, PanelFiles):
        grid = grid.open()
    calendar = grid.dates
    train, test = {}, {}
    if "frames" in kinds:
        for code in codes:
            frame = panel[code]
            train[code] = frame.loc[fold.train_start : fold.cut]
            first = frame.index.searchsorted(fold.test_days[0])
            test[code] = frame.iloc[max(0, first - config.margin_days) :].loc[: fold.test_days[-1]]
    train_panel = test_panel = None
    if "panel" in kinds:
        first = max(0, int(calendar.searchsorted(fold.test_days[0])) - config.margin_days)
        train_panel = grid.slice(fold.train_start, fold.cut)
        if train_panel.features is not None:  # features from the store: copy only the labels' fields
            train_panel = train_panel.lean(LABEL_FIELDS)
        train_panel = train_panel.take(codes)
        test_panel = grid.slice(calendar[first], fold.test_days[-1]).take(codes)
    return {"frames": train, "panel": train_panel}, {"frames": test, "panel": test_panel}


def store_features(models: dict, grid: Panel) -> tuple[str, ...]:
    """The features the run's panel models read (each computable from ``grid``'s columns):
    a model's own ``features`` (and ``blend_features``), or its default at the panel's
    breadth (a fold has no more stocks than the panel, and the defaults of fewer stocks are a
    subset)."""
    names: dict[str, None] = {}
    for model in models.values():
        if input_kind(model) != "panel" or not hasattr(model, "rules") or not hasattr(model, "features"):
            continue
        preset = getattr(model, "preset", "auto")
        wanted = (resolve_features(grid, model.features) if model.features is not None
                  else available_features(grid, model.rules.default_features(grid.n_stocks, preset)))
        blend = model.inputs_blend(grid.n_stocks) if hasattr(model, "inputs_blend") else ()
        wanted += resolve_features(grid, blend)  # a second set
        names.update(dict.fromkeys(n for n in expand_features(wanted) if not lacking(grid, (n,))))
    return tuple(names)


def with_feature_store(grid: Panel, models: dict, path: Path | None) -> Panel:
    """``grid`` carrying the store of its models' features (:func:`store_features`), written to
    ``path`` (``None``: in memory); ``grid`` itself when no model reads features."""
    names = store_features(models, grid)
    if not names:
        return grid
    started = time.perf_counter()
    cached = set(grid._cache)
    store = FeatureStore.build(grid, names, path)
    for key in set(grid._cache) - cached:  # what the build derived (Alpha158's adjusted bars: six
        del grid._cache[key]  # whole-market arrays) would stay on the caller's panel to the end
    log.info("feature store: %d features of %d stocks x %d days (%.2f GB float32%s) in %.1f s", len(names),
             grid.n_stocks, grid.n_days, grid.n_stocks * grid.n_days * len(names) * 4 / 2**30,
             ", on file" if path is not None else "", time.perf_counter() - started)
    release_freed_heap()  # the store's build: one float64 feature at a time, and the array itself on file
    return dataclasses.replace(grid, features=FeatureView.whole(store), _cache={})


