"""What a fitted :class:`~forecaster.models.panel.model.PanelTransformer` keeps in its
checkpoint besides its keywords (every network's weights, the processor, the fitted
attributes, and the second set of inputs' model, nested the same way), and its restoration."""

from __future__ import annotations

import pandas as pd

from forecaster.features.processors import processor_from_state
from forecaster.models.panel.network import PanelNetConfig, PanelTransformerNet


def fitted_payload(model) -> dict:
    """The fitted state of ``model`` (a fitted PanelTransformer), on the CPU."""
    payload = {
        "state_dicts": [{k: v.detach().cpu() for k, v in net.state_dict().items()} for net in model.nets_],
        "processor": model.processor_.state(),
        "fitted": {"features": list(model.features_), "train_end": str(model.train_end_.date()),
                   "histories": model.histories_, "best_epochs": model.best_epochs_},
    }
    if model.blend_ is not None:
        payload["blend"] = {"net_config": model.blend_.net_config_.to_dict(), **fitted_payload(model.blend_)}
    return payload


def restore_fitted(model, data: dict) -> None:
    """Set ``model``'s fitted state from :func:`fitted_payload`'s ``data`` (its ``net_config_``
    and ``device_`` already set)."""
    model.nets_ = []
    for state in data["state_dicts"]:
        net = PanelTransformerNet(model.net_config_)
        net.load_state_dict(state)
        model.nets_.append(net.to(model.device_).eval())
    model.processor_ = processor_from_state(data["processor"])
    fitted = data["fitted"]
    model.features_ = tuple(fitted["features"])
    model.train_end_ = pd.Timestamp(fitted["train_end"])
    model.histories_ = fitted["histories"]
    model.best_epochs_ = fitted["best_epochs"]
    model.blend_ = None
    model.n_seeds_ = len(model.nets_)
    if data.get("blend") is not None:
        blend = model._blend_model(tuple(data["blend"]["fitted"]["features"]))
        blend.net_config_ = PanelNetConfig(**data["blend"]["net_config"])
        blend.device_ = model.device_
        restore_fitted(blend, data["blend"])
        model.blend_ = blend
