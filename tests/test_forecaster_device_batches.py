"""The accelerator's training path, checked on the CPU: batches read from the device copy
(:class:`DeviceBatches`) are the host's batches exactly, stock draws included, with and
without auxiliary horizons; a fit under bfloat16 autocast trains in bfloat16 (its scores
differ from float32's) and still recovers a planted signal."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.features.labels import tradeable_label
from forecaster.metrics import daily_ic
from forecaster.models.panel.dataset import DeviceBatches
from forecaster.models.panel.model import PanelTransformer
from forecaster.models.training import LoopConfig

TINY = dict(window=8, d_model=16, n_heads=2, n_layers=1, d_ff=32, n_seeds=1, days_per_batch=8,
            device="cpu", random_state=0)


@pytest.fixture(scope="module")
def panel():
    return Panel.from_frames(synthetic_panel(n_stocks=60, n_days=500, signal_ic=0.1, seed=1))


def _sequences(panel, aux=()):
    model = PanelTransformer(**TINY, market="gate", aux_horizons=aux)
    model.net_config_ = model._net_config(3, panel.n_stocks)
    from forecaster.features.processors import make_processor
    from forecaster.models.panel.dataset import feature_view

    names = ("ret_1d", "volatility_20d", "return_5d")
    raw = feature_view(panel, names)
    processor = make_processor("robust").fit(raw, panel.dates)
    return model._sequences(panel, names, processor, with_labels=True, view=raw)


@pytest.mark.parametrize("aux", [(), (5,)])
@pytest.mark.parametrize("max_stocks", [None, 17])
def test_device_batches_equal_the_hosts(panel, aux, max_stocks):
    data = _sequences(panel, aux)
    device = DeviceBatches.of(data, torch.device("cpu"))
    assert data.on(torch.device("cpu")) is data  # the host reads its own arrays
    for days in (np.arange(130, 138), np.arange(300, 304), np.arange(490, 499)):
        host = data.batch(days, max_stocks, np.random.default_rng(4))
        dev = device.batch(days, max_stocks, np.random.default_rng(4))
        for a, b in zip(host, dev, strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    with pytest.raises(ValueError, match="consecutive"):
        device.batch(np.array([3, 5]))


def _ic(model, panel, cut):
    pred = model.predict(panel.slice(start=panel.dates[350]))
    pred = pred[pred.index.get_level_values("date") > cut]
    label, _ = tradeable_label(panel, 1, "next_open")
    actual = pd.DataFrame(label[:-1], index=panel.dates[1:], columns=panel.codes)
    scores = pred.unstack("code").reindex(columns=panel.codes)
    return scores, daily_ic(scores, actual.loc[scores.index]).mean()


def test_a_bfloat16_fit_trains_in_bfloat16_and_recovers_the_signal(panel):
    cut = panel.dates[379]
    fits = {p: PanelTransformer(**TINY, max_epochs=6, precision=p).fit(panel.slice(end=cut))
            for p in ("float32", "bfloat16")}
    (s32, ic32), (s16, ic16) = (_ic(fits[p], panel, cut) for p in ("float32", "bfloat16"))
    assert ic16 > 0.04 and ic32 > 0.04, (ic16, ic32)
    assert not np.allclose(s32.to_numpy(), s16.to_numpy(), equal_nan=True)  # autocast did apply
    assert fits["bfloat16"].get_params()["precision"] == "bfloat16"


def test_an_unknown_precision_is_refused_before_fitting(panel):
    with pytest.raises(ValueError, match="precision"):
        PanelTransformer(**TINY, precision="float16").fit(panel)
    with pytest.raises(ValueError, match="precision"):
        LoopConfig(precision="half")
