"""Layers and stacks: equivalence with torch.nn, causality, padding, cached decoding."""

import pytest
import torch
from torch import nn

from seq2seq.core import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LayerConfig,
    StackConfig,
    causal_mask,
    padding_mask,
)


def _copy_attn(ours, ref_mha):
    ours.in_proj.weight.copy_(ref_mha.in_proj_weight)
    ours.in_proj.bias.copy_(ref_mha.in_proj_bias)
    ours.out_proj.weight.copy_(ref_mha.out_proj.weight)
    ours.out_proj.bias.copy_(ref_mha.out_proj.bias)


def _copy_common(ours, ref):
    ours.ff.linear1.load_state_dict(ref.linear1.state_dict())
    ours.ff.linear2.load_state_dict(ref.linear2.state_dict())
    ours.norm1.load_state_dict(ref.norm1.state_dict())
    _copy_attn(ours.self_attn, ref.self_attn)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first, activation):
    torch.manual_seed(0)
    cfg = LayerConfig(d_model=32, n_heads=4, d_ff=64, dropout=0.0, activation=activation,
                      norm_first=norm_first)
    ref = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation=activation,
                                     batch_first=True, norm_first=norm_first)
    ours = EncoderLayer(cfg)
    with torch.no_grad():
        _copy_common(ours, ref)
        ours.norm2.load_state_dict(ref.norm2.state_dict())
    x = torch.randn(3, 9, 32)
    tokens = torch.tensor([[1] * 9, [1] * 6 + [0] * 3, [1] * 2 + [0] * 7])
    for train in (True, False):
        ours.train(train)
        ref.train(train)
        out, _ = ours(x)
        torch.testing.assert_close(out, ref(x), atol=1e-5, rtol=1e-5)
        masked, _ = ours(x, mask=padding_mask(tokens, 0))
        ref_masked = ref(x, src_key_padding_mask=tokens == 0)
        keep = tokens.bool()  # the fast path in eval zeroes padded rows; compare real tokens
        torch.testing.assert_close(masked[keep], ref_masked[keep], atol=1e-5, rtol=1e-5)
        causal, _ = ours(x, mask=causal_mask(9))
        ref_causal = ref(x, src_mask=~causal_mask(9))
        torch.testing.assert_close(causal, ref_causal, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first):
    torch.manual_seed(1)
    cfg = LayerConfig(d_model=32, n_heads=4, d_ff=64, dropout=0.0, norm_first=norm_first)
    ref = nn.TransformerDecoderLayer(32, 4, 64, dropout=0.0, batch_first=True,
                                     norm_first=norm_first).eval()
    ours = DecoderLayer(cfg).eval()
    with torch.no_grad():
        _copy_common(ours, ref)
        _copy_attn(ours.cross_attn, ref.multihead_attn)
        ours.norm_cross.load_state_dict(ref.norm2.state_dict())
        ours.norm2.load_state_dict(ref.norm3.state_dict())
    x, mem = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    src = torch.tensor([[1] * 7, [1] * 4 + [0] * 3])
    out, _ = ours(x, mask=causal_mask(5), memory=mem, memory_mask=padding_mask(src, 0))
    expected = ref(x, mem, tgt_mask=~causal_mask(5), memory_key_padding_mask=src == 0)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_causal_encoder_ignores_the_future(rotary, norm_first):
    torch.manual_seed(2)
    enc = Encoder(StackConfig(d_model=32, n_heads=4, d_ff=64, n_layers=3, causal=True,
                              rotary=rotary, norm_first=norm_first, max_len=32)).eval()
    x = torch.randn(2, 12, 32)
    base = enc(x)
    for t in (0, 5, 11):
        changed = x.clone()
        changed[:, t:] = torch.randn_like(changed[:, t:]) * 10
        out = enc(changed)
        assert torch.equal(out[:, :t], base[:, :t])  # exactly unchanged
        assert not torch.allclose(out[:, t:], base[:, t:])


def test_padding_tokens_do_not_affect_real_positions():
    torch.manual_seed(3)
    enc = Encoder(d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.0).eval()
    tokens = torch.tensor([[3, 4, 5, 0, 0], [3, 4, 5, 6, 7]])
    x = torch.randn(2, 5, 32)
    base = enc(x, mask=padding_mask(tokens, 0))
    changed = x.clone()
    changed[0, 3:] = torch.randn(2, 32) * 5
    out = enc(changed, mask=padding_mask(tokens, 0))
    torch.testing.assert_close(out[0, :3], base[0, :3], atol=1e-6, rtol=0)
    torch.testing.assert_close(out[1], base[1], atol=0, rtol=0)


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
def test_cached_decoding_equals_full_recomputation(rotary, norm_first):
    torch.manual_seed(4)
    dec = Decoder(StackConfig(d_model=32, n_heads=4, d_ff=64, n_layers=3, rotary=rotary,
                              norm_first=norm_first, max_len=32)).eval()
    assert dec.causal
    y, mem = torch.randn(3, 8, 32), torch.randn(3, 6, 32)
    src = torch.tensor([[1] * 6, [1] * 3 + [0] * 3, [1] * 5 + [0]])
    mmask = padding_mask(src, 0)
    full = dec(y, mem, memory_mask=mmask)
    cache = dec.new_cache()
    steps = []
    for t in range(8):
        steps.append(dec(y[:, t : t + 1], mem, memory_mask=mmask, cache=cache))
        assert len(cache) == t + 1
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    # A cache can also take a multi-token chunk (prefix), then continue one by one.
    cache = dec.new_cache()
    head = dec(y[:, :5], mem, memory_mask=mmask, cache=cache)
    tail = [dec(y[:, t : t + 1], mem, memory_mask=mmask, cache=cache) for t in range(5, 8)]
    torch.testing.assert_close(torch.cat([head, *tail], dim=1), full, atol=1e-5, rtol=1e-5)
    # Cached keys/values are stored contiguous [batch, heads, length, head_dim] (attention
    # over strided views of the packed projections is slower at every step).
    for layer in cache.layers:
        for kv in (layer.self_attn, layer.cross_attn):
            assert kv.k.shape == (3, 4, 8 if kv is layer.self_attn else 6, 8)
            assert kv.k.is_contiguous() and kv.v.is_contiguous()


@pytest.mark.parametrize("rotary", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("causal", [False, True])
def test_last_only_equals_the_last_position_of_the_full_output(rotary, norm_first, causal):
    torch.manual_seed(6)
    enc = Encoder(StackConfig(d_model=32, n_heads=4, d_ff=64, n_layers=3, rotary=rotary,
                              norm_first=norm_first, causal=causal, max_len=16)).eval()
    x = torch.randn(5, 9, 32)
    mask = padding_mask(torch.tensor([[1] * 9] * 3 + [[1] * 6 + [0] * 3] * 2), 0)
    for m in (None, mask):
        full = enc(x, mask=m)
        last = enc(x, mask=m, last_only=True)
        assert last.shape == (5, 1, 32)
        torch.testing.assert_close(last, full[:, -1:], atol=1e-5, rtol=1e-5)


def test_cache_reorder_selects_rows():
    torch.manual_seed(5)
    dec = Decoder(d_model=16, n_heads=2, d_ff=32, n_layers=2).eval()
    y, mem = torch.randn(2, 4, 16), torch.randn(2, 3, 16)
    cache = dec.new_cache()
    dec(y[:, :3], mem, cache=cache)
    cache.reorder(torch.tensor([1, 1, 0]))
    out = dec(y[[1, 1, 0], 3:4], mem[[1, 1, 0]], cache=cache)
    full = dec(y[[1, 1, 0]], mem[[1, 1, 0]])
    torch.testing.assert_close(out, full[:, 3:4], atol=1e-5, rtol=1e-5)


def test_weights_are_returned_per_layer():
    dec = Decoder(d_model=16, n_heads=2, d_ff=32, n_layers=2).eval()
    out, weights = dec.forward_with_weights(torch.randn(1, 4, 16), torch.randn(1, 3, 16))
    assert out.shape == (1, 4, 16)
    assert len(weights) == 2
    assert weights[0]["self"].shape == (1, 2, 4, 4)
    assert weights[0]["cross"].shape == (1, 2, 4, 3)
    assert torch.all(weights[1]["self"][0, :, 0, 1:] == 0)  # causal


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"d_model": 30, "n_heads": 4}, "divisible"),
        ({"d_model": 0}, "positive"),
        ({"n_heads": -1}, "positive"),
        ({"dropout": 1.5}, "dropout"),
        ({"activation": "tanh"}, "activation"),
        ({"n_layers": 0}, "n_layers"),
    ],
)
def test_config_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StackConfig(**kwargs)


@pytest.mark.parametrize("norm_first", [True, False])
def test_forward_local_equals_the_masked_full_forward(norm_first):
    from seq2seq.core import local_causal_mask

    torch.manual_seed(0)
    enc = Encoder(StackConfig(d_model=16, n_heads=2, d_ff=32, n_layers=3, dropout=0.0, causal=True,
                              rotary=True, norm_first=norm_first)).eval()
    x = torch.randn(3, 30, 16)
    full = enc(x, mask=local_causal_mask(30, 5))
    torch.testing.assert_close(enc.forward_local(x, window=5, keep=4), full[:, -4:])
    # Query i sees keys i-4..i only: changing position 0 leaves position 5 (layer 1) unchanged
    # and, three layers deep, positions from 13 on.
    x2 = x.clone()
    x2[:, 0] = torch.randn(3, 16)  # (a constant shift would vanish in the layer norms)
    out2 = enc(x2, mask=local_causal_mask(30, 5))
    torch.testing.assert_close(out2[:, 13:], full[:, 13:])
    assert not torch.allclose(out2[:, 12], full[:, 12])
