"""--precision fp32|bf16|auto: auto follows a measurement, bfloat16 autocast keeps CPU attention in
float32 (training under it: test_seq2seq_model.test_one_pair_task_is_learned)."""

import pytest
import torch
import torch.nn.functional as F

from seq2seq.core import autocast, precision, resolve_precision, scaled_dot_product_attention
from seq2seq.training import TrainConfig


def test_explicit_precisions_pass_through_and_unknown_ones_are_refused():
    assert resolve_precision("fp32") == "fp32"
    assert resolve_precision("bf16") == "bf16"
    with pytest.raises(ValueError, match="precision must be one of"):
        resolve_precision("fp16")
    with pytest.raises(ValueError, match="precision must be one of"):
        TrainConfig(precision="half")
    with pytest.raises(ValueError, match="resolve the precision first"):
        autocast("cpu", "auto")


def test_auto_follows_the_measured_speedup(monkeypatch):
    monkeypatch.setattr(precision, "bf16_speedup", lambda device: 2.4)
    assert resolve_precision("auto", "cpu") == "bf16"
    monkeypatch.setattr(precision, "bf16_speedup", lambda device: 0.06)  # emulated on AVX2
    assert resolve_precision("auto", "cpu") == "fp32"
    assert resolve_precision("auto", "mps") == "fp32"


def test_the_speedup_is_measured_on_this_cpu():
    assert precision.bf16_speedup("cpu", size=64, repeats=2) > 0.0


def test_cpu_attention_runs_its_fused_kernel_in_float32_under_autocast(monkeypatch):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 7, 16, generator=gen) for _ in range(3))
    mask = torch.ones(7, 7, dtype=torch.bool).tril()
    reference, _ = scaled_dot_product_attention(q, k, v, mask)
    seen = []
    fused = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        seen.append(args[0].dtype)
        return fused(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    with autocast("cpu", "bf16"):
        out, _ = scaled_dot_product_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask)
    assert seen == [torch.float32]
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), reference, atol=3e-2, rtol=3e-2)
