"""The Transformer: configuration checks, embeddings, positions and learning a toy pair."""

import math

import pytest
import torch
import torch.nn.functional as F

from seq2seq.batching import ParallelDataset, source_tensor
from seq2seq.decoding import greedy_decode
from seq2seq.model import Transformer, TransformerConfig
from seq2seq.tokenization import PAD_ID, WordTokenizer
from seq2seq.training import TrainConfig, Trainer, label_smoothed_loss

pytestmark = pytest.mark.usefixtures("one_thread")



def _config(**kw):
    base = dict(src_vocab_size=20, tgt_vocab_size=20, d_model=16, n_heads=2, d_ff=32, encoder_layers=1,
                decoder_layers=2, dropout=0.0, max_len=32)
    base.update(kw)
    return TransformerConfig(**base)


@pytest.mark.parametrize(("kw", "match"), [
    (dict(d_model=30, n_heads=4), "divisible"),
    (dict(positional="alibi"), "positional must be one of"),
    (dict(share_embeddings=True, tgt_vocab_size=21), "share_embeddings needs one joint vocabulary"),
    (dict(encoder_layers=0), "encoder_layers must be a positive integer"),
    (dict(dropout=1.5), "dropout"),
])
def test_config_validation(kw, match):
    with pytest.raises(ValueError, match=match):
        _config(**kw)


def test_config_round_trips_through_dict():
    cfg = _config(positional="rotary", norm_first=False)
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown TransformerConfig fields"):
        TransformerConfig.from_dict({**cfg.to_dict(), "n_experts": 4})


def test_tied_and_shared_embeddings():
    m = Transformer(_config(share_embeddings=True))
    assert m.output.weight is m.tgt_embed.weight is m.src_embed.weight
    n_shared = m.num_parameters()
    m2 = Transformer(_config(tie_embeddings=False))
    assert m2.output.weight is not m2.tgt_embed.weight
    assert m2.num_parameters() == n_shared + 2 * 20 * 16  # separate source and output matrices
    assert torch.all(m.src_embed.weight[PAD_ID] == 0)


def test_xavier_init_and_scaled_embeddings():
    torch.manual_seed(0)
    m = Transformer(_config(src_vocab_size=400, tgt_vocab_size=400, d_model=64, n_heads=4))
    w = m.encoder.layers[0].ff.linear1.weight  # [d_ff, d_model]
    bound = math.sqrt(6.0 / (w.size(0) + w.size(1)))
    assert w.abs().max() <= bound and w.abs().max() > 0.9 * bound
    assert m.embed_scale == 8.0


@pytest.mark.parametrize("positional", ["sinusoidal", "learned", "rotary"])
@pytest.mark.parametrize("norm_first", [True, False])
def test_forward_shapes_and_causality(positional, norm_first):
    torch.manual_seed(0)
    m = Transformer(_config(positional=positional, norm_first=norm_first)).eval()
    src = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    tgt = torch.tensor([[1, 9, 10, 11], [1, 12, 13, 0]])
    out = m(src, tgt)
    assert out.shape == (2, 4, 20)
    changed = tgt.clone()
    changed[:, 3] = 4  # a later target token must not change earlier logits
    torch.testing.assert_close(m(src, changed)[:, :3], out[:, :3])
    # Padding in the source does not leak: the short sentence alone gives the same logits.
    torch.testing.assert_close(m(src[1:, :2], tgt[1:])[0], out[1], atol=1e-5, rtol=1e-5)
    weights = m.attention(src, tgt)
    assert len(weights["cross"]) == 2 and weights["cross"][0].shape == (2, 2, 4, 4)
    assert torch.all(weights["cross"][0][1, :, :, 2:] == 0)  # padded source keys get no attention


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_one_pair_task_is_learned(tmp_path, precision):
    """A published tutorial's model emitted "E E E E E" here; ours must output the target, in
    float32 and under bfloat16 autocast (whose weights stay float32)."""
    torch.manual_seed(0)
    src_text, tgt_text = ["ich mochte ein bier"], ["i want a beer"]
    src_tok, tgt_tok = WordTokenizer.train(src_text), WordTokenizer.train(tgt_text)
    model = Transformer(TransformerConfig(src_tok.vocab_size, tgt_tok.vocab_size, d_model=32, n_heads=4,
                                          d_ff=64, encoder_layers=2, decoder_layers=2, dropout=0.1))
    data = ParallelDataset(src_tok.encode_batch(src_text), tgt_tok.encode_batch(tgt_text))
    cfg = TrainConfig(epochs=60, max_tokens=64, lr=3e-3, warmup=10, seed=0, val_bleu=False, progress=False,
                      precision=precision)
    trainer = Trainer(model, src_tok, tgt_tok, data, None, cfg, tmp_path)
    history = trainer.fit()
    assert trainer.precision == precision
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert history[-1]["train_nll"] < 0.1 * history[0]["train_nll"]
    out = greedy_decode(model, source_tensor(src_tok.encode_batch(src_text)))
    assert tgt_tok.decode(out[0]) == "i want a beer"
    assert len(set(out[0])) == 4


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_label_smoothed_loss_and_its_gradient_match_torch(smoothing):
    """The hand-written backward against autograd through torch's cross-entropy, pads ignored."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 11, generator=gen, dtype=torch.float64)
    target = torch.randint(1, 11, (3, 5), generator=gen)
    target[0, 3:] = PAD_ID
    target[2, 1:] = PAD_ID
    ours = logits.clone().requires_grad_(True)
    loss, nll, n = label_smoothed_loss(ours, target, smoothing)
    (2.5 * loss).backward()
    ref = logits.clone().requires_grad_(True)
    ref_loss = F.cross_entropy(ref.reshape(-1, 11), target.reshape(-1), ignore_index=PAD_ID,
                               label_smoothing=smoothing, reduction="sum")
    (2.5 * ref_loss).backward()
    ref_nll = F.cross_entropy(logits.reshape(-1, 11), target.reshape(-1), ignore_index=PAD_ID,
                              reduction="sum")
    assert n == 15 - 2 - 4
    # The loss is computed in float32 whatever the logits' dtype.
    torch.testing.assert_close(loss.double(), ref_loss, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(nll.double(), ref_nll, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(ours.grad, ref.grad, rtol=1e-5, atol=1e-6)
    assert not nll.requires_grad


def test_label_smoothed_loss_hands_back_a_gradient_in_the_logits_dtype():
    logits = torch.randn(2, 3, 7).bfloat16().requires_grad_(True)
    loss, _, _ = label_smoothed_loss(logits, torch.tensor([[1, 2, 0], [3, 4, 5]]), 0.1)
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16 and logits.grad[0, 2].abs().sum() == 0
