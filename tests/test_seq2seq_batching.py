"""Token-budget batching with length bucketing."""

import random

import torch

from seq2seq.batching import ParallelDataset, TokenBatchSampler, make_batch
from seq2seq.tokenization import BOS_ID, EOS_ID, PAD_ID


def _lengths(n=500, seed=0):
    rng = random.Random(seed)
    src = [rng.randint(1, 40) for _ in range(n)]
    return src, [max(1, s + rng.randint(-3, 3)) for s in src]


def test_every_sentence_once_within_budget_and_little_padding():
    src, tgt = _lengths()
    sampler = TokenBatchSampler(src, tgt, max_tokens=400, seed=1)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(src)))
    real = padded = 0
    for b in batches:
        width = max(max(src[i], tgt[i]) + 1 for i in b)
        assert width * len(b) <= 400
        padded += width * len(b)
        real += sum(max(src[i], tgt[i]) + 1 for i in b)
    assert real / padded > 0.9  # bucketing: under 10% padding
    random_order = TokenBatchSampler(src, tgt, max_tokens=10**9, shuffle=False)
    assert len(list(random_order)) == 1


def test_shuffle_is_seeded_and_changes_per_epoch():
    src, tgt = _lengths()
    a = TokenBatchSampler(src, tgt, 400, seed=3)
    b = TokenBatchSampler(src, tgt, 400, seed=3)
    first = list(a)
    assert first == list(b)
    a.set_epoch(1)
    assert list(a) != first
    assert list(TokenBatchSampler(src, tgt, 400, seed=4)) != first


def test_oversized_sentence_gets_its_own_batch():
    batches = list(TokenBatchSampler([50, 2, 2], [50, 2, 2], max_tokens=10, shuffle=False))
    assert [0] in batches and sum(len(b) for b in batches) == 3


def test_batch_tensors():
    batch = make_batch([[5, 6, 7], [8]], [[9, 10], [11, 12, 13]], [0, 1])
    assert batch.src.tolist() == [[5, 6, 7, EOS_ID], [8, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 9, 10, PAD_ID], [BOS_ID, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[9, 10, EOS_ID, PAD_ID], [11, 12, 13, EOS_ID]]
    assert batch.n_target_tokens == 7
    data = ParallelDataset([[5], [], [6] * 30], [[7], [8], [9]])
    assert data.filter_length(10) == 2 and data.src == [[5]]
    assert isinstance(batch.index, torch.Tensor)
