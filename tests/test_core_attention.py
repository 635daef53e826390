"""Attention against torch.nn references, masks, and the weights/fused paths."""

import pytest
import torch
from torch import nn

from seq2seq.core import (
    MultiHeadAttention,
    causal_mask,
    combine_masks,
    padding_mask,
    scaled_dot_product_attention,
)


def _copy_mha(ours: MultiHeadAttention, ref: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        ours.in_proj.weight.copy_(ref.in_proj_weight)
        ours.in_proj.bias.copy_(ref.in_proj_bias)
        ours.out_proj.weight.copy_(ref.out_proj.weight)
        ours.out_proj.bias.copy_(ref.out_proj.bias)


@pytest.fixture
def pair():
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(32, 4, batch_first=True).eval()
    ours = MultiHeadAttention(32, 4).eval()
    _copy_mha(ours, ref)
    return ours, ref


def test_causal_mask_values():
    m = causal_mask(3)
    assert m.dtype == torch.bool
    assert m.tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # With two cached positions the new query rows see them all.
    assert causal_mask(2, offset=2).tolist() == [[True, True, True, False], [True, True, True, True]]


def test_padding_mask_shape_and_convention():
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    m = padding_mask(tokens, pad_id=0)
    assert m.shape == (2, 1, 1, 3)
    assert m[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    assert combine_masks(None, None) is None


def test_self_attention_matches_torch(pair):
    ours, ref = pair
    x = torch.randn(3, 7, 32)
    out, w = ours(x, x, x, need_weights=True)
    ref_out, ref_w = ref(x, x, x, need_weights=True, average_attn_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-5, rtol=1e-5)
    fused, none = ours(x, x, x)
    assert none is None
    torch.testing.assert_close(fused, ref_out, atol=1e-5, rtol=1e-5)


def test_masked_attention_matches_torch(pair):
    ours, ref = pair
    x = torch.randn(2, 5, 32)
    tokens = torch.tensor([[1, 2, 3, 0, 0], [1, 2, 3, 4, 0]])
    keep = combine_masks(causal_mask(5), padding_mask(tokens, 0))
    out, _ = ours(x, x, x, mask=keep)
    # torch.nn uses the opposite convention: True = blocked.
    ref_out, _ = ref(
        x, x, x, attn_mask=~causal_mask(5), key_padding_mask=tokens == 0, need_weights=False
    )
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    out_w, w = ours(x, x, x, mask=keep, need_weights=True)
    torch.testing.assert_close(out_w, ref_out, atol=1e-5, rtol=1e-5)
    assert torch.all(w[0, :, :, 3:] == 0)  # padded keys get no weight


def test_cross_attention_matches_torch(pair):
    ours, ref = pair
    q = torch.randn(2, 4, 32)
    mem = torch.randn(2, 6, 32)
    out, _ = ours(q, mem, mem)
    ref_out, _ = ref(q, mem, mem, need_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
    v = torch.randn(2, 6, 32)
    out, _ = ours(q, mem, v)
    ref_out, _ = ref(q, mem, v, need_weights=False)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)


def test_fused_and_explicit_paths_agree():
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 3, 6, 8) for _ in range(3))
    mask = causal_mask(6)
    fused, _ = scaled_dot_product_attention(q, k, v, mask)
    explicit, w = scaled_dot_product_attention(q, k, v, mask, need_weights=True)
    torch.testing.assert_close(fused, explicit, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 6))


def test_non_boolean_mask_is_rejected():
    q = torch.randn(1, 1, 2, 4)
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, q, q, mask=torch.ones(2, 2))


def test_bad_head_count():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(30, 4)


def test_single_query_with_padding_matches_the_explicit_path():
    # A cached decoding step: one query per row, rows padded differently.
    torch.manual_seed(2)
    q = torch.randn(3, 4, 1, 8)
    k, v = torch.randn(3, 4, 9, 8), torch.randn(3, 4, 9, 8)
    keep = torch.tensor([[True] * 9, [True] * 5 + [False] * 4, [True] * 7 + [False] * 2])[:, None, None, :]
    out, weights = scaled_dot_product_attention(q, k, v, keep)
    assert weights is None
    expected, w = scaled_dot_product_attention(q, k, v, keep, need_weights=True)
    assert bool((w[1, :, :, 5:] == 0).all()) and bool((w[2, :, :, 7:] == 0).all())
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=1e-5)
