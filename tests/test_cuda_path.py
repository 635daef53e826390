"""The CUDA path, where a GPU is present (skipped elsewhere; CI has none): a panel Transformer
fitted on the GPU predicts on the CPU after save -> load what it predicted on the GPU, a
planted signal is recovered by a fit on the GPU, and translation decodes alike with and
without the key/value cache on the GPU."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from forecaster.data import synthetic_panel
from forecaster.data.panel import Panel
from forecaster.metrics import daily_ic
from forecaster.models.panel.model import PanelTransformer
from seq2seq.batching import source_tensor
from seq2seq.decoding import beam_search, greedy_decode
from seq2seq.model import Transformer, TransformerConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

TINY = dict(window=10, d_model=16, n_heads=2, n_layers=1, d_ff=32, max_epochs=3, patience=2,
            days_per_batch=8, random_state=0)


def test_panel_transformer_on_cuda_saves_and_predicts_alike_on_cpu(tmp_path):
    panel = Panel.from_frames(synthetic_panel(n_stocks=30, n_days=260, signal_ic=0.1, seed=3))
    model = PanelTransformer(**TINY, device="auto", market="gate", n_seeds=2).fit(
        panel.slice(end=panel.dates[199]))
    assert model.device_.type == "cuda" and next(model.nets_[0].parameters()).is_cuda
    test = panel.slice(start=panel.dates[150])
    on_gpu = model.predict(test)
    on_cpu = PanelTransformer.load(model.save(tmp_path / "m.pt"), device="cpu").predict(test)
    pd.testing.assert_index_equal(on_gpu.index, on_cpu.index)
    np.testing.assert_allclose(on_gpu.to_numpy(), on_cpu.to_numpy(), rtol=1e-4, atol=1e-4)


def test_panel_transformer_on_cuda_recovers_a_planted_signal():
    panel = Panel.from_frames(synthetic_panel(n_stocks=80, n_days=600, signal_ic=0.1, seed=1))
    cut = panel.dates[449]
    model = PanelTransformer(**{**TINY, "max_epochs": 8}, device="cuda").fit(panel.slice(end=cut))
    pred = model.predict(panel.slice(start=panel.dates[420]))
    pred = pred[pred.index.get_level_values("date") > cut]
    from forecaster.features.labels import tradeable_label

    label, _ = tradeable_label(panel, 1, "next_open")
    actual = pd.DataFrame(label[:-1], index=panel.dates[1:], columns=panel.codes)
    scores = pred.unstack("code").reindex(columns=panel.codes)
    ic = daily_ic(scores, actual.loc[scores.index])
    assert ic.mean() > 0.04, ic.mean()


def test_device_batches_on_cuda_equal_the_hosts_and_bfloat16_recovers_a_signal():
    from forecaster.models.panel.dataset import DeviceBatches

    panel = Panel.from_frames(synthetic_panel(n_stocks=80, n_days=600, signal_ic=0.1, seed=1))
    model = PanelTransformer(**{**TINY, "max_epochs": 8}, device="cuda", market="gate",
                             precision="bfloat16").fit(panel.slice(end=panel.dates[449]))
    data = model._sequences(panel, model.features_, model.processor_, with_labels=True)
    on_gpu = DeviceBatches.of(data, torch.device("cuda"))
    days = np.arange(200, 208)
    host, dev = (d.batch(days, 30, np.random.default_rng(2)) for d in (data, on_gpu))
    for a, b in zip(host, dev, strict=True):
        torch.testing.assert_close(a, b.cpu(), rtol=0, atol=0)
    pred = model.predict(panel.slice(start=panel.dates[420]))
    scores = pred.unstack("code").reindex(columns=panel.codes)
    scores = scores[scores.index > panel.dates[449]]
    from forecaster.features.labels import tradeable_label

    label, _ = tradeable_label(panel, 1, "next_open")
    actual = pd.DataFrame(label[:-1], index=panel.dates[1:], columns=panel.codes)
    assert daily_ic(scores, actual.loc[scores.index]).mean() > 0.04


def test_translation_decodes_alike_with_and_without_the_cache_on_cuda():
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(30, 30, d_model=32, n_heads=4, d_ff=64, encoder_layers=2,
                                      decoder_layers=2, dropout=0.0, max_len=64)).cuda().eval()
    g = torch.Generator().manual_seed(1)
    src = source_tensor([torch.randint(4, 30, (n,), generator=g).tolist() for n in (7, 3, 12, 5)]).cuda()
    assert greedy_decode(m, src, use_cache=True) == greedy_decode(m, src, use_cache=False)
    assert beam_search(m, src, beam_size=4, use_cache=True) == beam_search(m, src, beam_size=4,
                                                                            use_cache=False)
