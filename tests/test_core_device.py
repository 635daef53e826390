"""--device auto: CUDA when there is one, the CPU otherwise; a named device that is missing
is refused. (No GPU here: availability is patched; the CUDA run itself is not exercised.)"""

import pytest
import torch

from seq2seq.core import resolve_device


def test_auto_prefers_cuda_then_falls_back_to_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    assert resolve_device(" CPU ") == torch.device("cpu")


def test_a_missing_or_unknown_device_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="unknown device"):
        resolve_device("tpu9")


def test_the_panel_model_asks_for_the_resolved_device(monkeypatch):
    """PanelTransformer(device='auto') resolves through the shared helper at fit time."""
    from forecaster.models.panel import model as panel_model

    seen = []
    monkeypatch.setattr(panel_model, "resolve_device", lambda d: seen.append(d) or torch.device("cpu"))
    from forecaster.data import synthetic_panel
    from forecaster.data.panel import Panel

    panel = Panel.from_frames(synthetic_panel(8, 120, signal_ic=0.05, seed=0))
    model = panel_model.PanelTransformer(window=5, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                                         max_epochs=1, days_per_batch=16).fit(panel)
    assert seen == ["auto"] and model.device_ == torch.device("cpu")
