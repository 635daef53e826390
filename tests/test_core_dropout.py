"""The core's CPU dropout: rate, unbiasedness, exact scaling, gradients, reproducibility."""

from __future__ import annotations

import pytest
import torch

from seq2seq.core import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_rate_and_expectation(p):
    torch.manual_seed(0)
    n = 600_000
    y = dropout(torch.ones(n), p)
    dropped = (y == 0).double()
    sd = (p * (1 - p) / n) ** 0.5
    assert abs(dropped.mean().item() - p) < 5 * sd
    # Every one of the four 16-bit draws taken from a 64-bit word is uniform (a word without
    # its sign bit would leave one of them never dropping anything at p=0.5).
    for k in range(4):
        assert abs(dropped[k::4].mean().item() - p) < 5 * sd * 2
    assert abs(y.double().mean().item() - 1.0) < 5 * (p / (1 - p) / n) ** 0.5


def test_kept_values_are_scaled_by_the_inverse_keep_probability():
    torch.manual_seed(1)
    x = torch.randn(1000, 50)
    y = dropout(x, 0.25)
    kept = y != 0
    scale = 65536 / (65536 - round(0.25 * 65536))
    torch.testing.assert_close(y[kept], x[kept] * scale, rtol=0, atol=0)


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(300, 40, requires_grad=True)
    y = dropout(x, 0.3)
    y.sum().backward()
    expected = (y != 0).float() * (65536 / (65536 - round(0.3 * 65536)))
    assert torch.equal(x.grad, expected)


def test_identity_when_not_training_or_zero_rate_and_zeros_at_one():
    x = torch.randn(10, 10)
    assert dropout(x, 0.5, training=False) is x
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    module = Dropout(0.5).eval()
    assert module(x) is x
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Dropout(1.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        dropout(x, -0.1)


def test_masks_follow_torch_manual_seed():
    x = torch.randn(64, 33)  # numel not a multiple of 3
    torch.manual_seed(5)
    a = dropout(x, 0.1)
    torch.manual_seed(5)
    b = dropout(x, 0.1)
    c = dropout(x, 0.1)
    assert torch.equal(a, b)
    assert not torch.equal(b, c)
    assert a.shape == x.shape
