"""--precision fp32|bf16|auto: auto follows a measurement, bfloat16 autocast keeps CPU attention in
float32 and still trains a model whose weights stay float32."""

import pytest
import torch
import torch.nn.functional as F

from seq2seq.batching import ParallelDataset, source_tensor
from seq2seq.core import autocast, precision, resolve_precision, scaled_dot_product_attention
from seq2seq.decoding import greedy_decode
from seq2seq.model import Transformer, TransformerConfig
from seq2seq.tokenization import WordTokenizer
from seq2seq.training import TrainConfig, Trainer


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


def test_bf16_training_learns_the_one_pair_task_with_float32_weights(tmp_path):
    torch.manual_seed(0)
    src_text, tgt_text = ["ich mochte ein bier"], ["i want a beer"]
    src_tok, tgt_tok = WordTokenizer.train(src_text), WordTokenizer.train(tgt_text)
    model = Transformer(TransformerConfig(src_tok.vocab_size, tgt_tok.vocab_size, d_model=32, n_heads=4,
                                          d_ff=64, encoder_layers=2, decoder_layers=2, dropout=0.1))
    data = ParallelDataset(src_tok.encode_batch(src_text), tgt_tok.encode_batch(tgt_text))
    cfg = TrainConfig(epochs=60, max_tokens=64, lr=3e-3, warmup=10, seed=0, val_bleu=False,
                      progress=False, precision="bf16")
    trainer = Trainer(model, src_tok, tgt_tok, data, None, cfg, tmp_path)
    history = trainer.fit()
    assert trainer.precision == "bf16"
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert history[-1]["train_nll"] < 0.1 * history[0]["train_nll"]
    out = greedy_decode(model, source_tensor(src_tok.encode_batch(src_text)))
    assert tgt_tok.decode(out[0]) == "i want a beer"
