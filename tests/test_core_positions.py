"""Positional encodings: closed-form values, offsets and RoPE's relative property."""

import math

import pytest
import torch

from seq2seq.core import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
)


def test_sinusoidal_table_closed_form():
    pe = SinusoidalPositionalEncoding(4, max_len=10)
    table = pe(torch.zeros(1, 5, 4))[0]
    assert table[1].tolist() == pytest.approx([0.8415, 0.5403, 0.0100, 0.9999], abs=1e-4)
    for pos in range(5):
        expected = [
            math.sin(pos), math.cos(pos), math.sin(pos / 100), math.cos(pos / 100)
        ]
        assert table[pos].tolist() == pytest.approx(expected, abs=1e-6)


def test_sinusoidal_offset_and_limits():
    pe = SinusoidalPositionalEncoding(8, max_len=6)
    full = pe(torch.zeros(1, 6, 8))
    torch.testing.assert_close(pe(torch.zeros(1, 2, 8), offset=3), full[:, 3:5])
    with pytest.raises(ValueError, match="max_len"):
        pe(torch.zeros(1, 7, 8))
    with pytest.raises(ValueError, match="even d_model"):
        SinusoidalPositionalEncoding(5)


def test_learned_offset():
    pe = LearnedPositionalEncoding(8, max_len=6)
    x = torch.randn(2, 6, 8)
    torch.testing.assert_close(pe(x[:, 2:4], offset=2), pe(x)[:, 2:4])


def test_rope_score_depends_only_on_relative_position():
    torch.manual_seed(0)
    rope = RotaryEmbedding(16, max_len=64)
    q = torch.randn(16)
    k = torch.randn(16)

    def score(m: int, n: int) -> float:
        qm = rope(q.expand(1, 1, 1, 16), offset=m)
        kn = rope(k.expand(1, 1, 1, 16), offset=n)
        return float((qm * kn).sum())

    for delta in (0, 1, 5, -3):
        scores = [score(m, m - delta) for m in range(max(delta, 0), 40, 7)]
        assert max(scores) - min(scores) < 1e-4, (delta, scores)
    # ... and it does depend on the distance.
    assert abs(score(10, 10) - score(10, 3)) > 1e-3


def test_rope_preserves_norm():
    rope = RotaryEmbedding(8, max_len=20)
    x = torch.randn(2, 3, 20, 8)
    torch.testing.assert_close(rope(x).norm(dim=-1), x.norm(dim=-1))
