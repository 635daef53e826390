"""Token-budget batching with length bucketing, and padding of id sequences into tensors.

Sentences of similar length are batched together so that little of each batch is padding; the
number of sentences per batch then follows from a budget of (padded) tokens. The order of
batches is shuffled every epoch with a seeded generator, so runs are reproducible.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from .tokenization import BOS_ID, EOS_ID, PAD_ID


@dataclass
class Batch:
    """One padded batch.

    Attributes:
        src: source ids with ``<eos>`` appended, ``[batch, src_len]``.
        tgt_in: ``<bos>`` + target ids (decoder input), ``[batch, tgt_len]``.
        tgt_out: target ids + ``<eos>`` (what to predict), ``[batch, tgt_len]``.
        index: positions of these sentences in the dataset, ``[batch]``.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: torch.Tensor

    @property
    def n_target_tokens(self) -> int:
        return int((self.tgt_out != PAD_ID).sum())

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device), self.index)


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Right-pad id lists into a ``[batch, max_len]`` long tensor."""
    width = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), max(width, 1)), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        if len(s):
            out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def source_tensor(seqs: Sequence[Sequence[int]]) -> torch.Tensor:
    """Source ids with ``<eos>`` appended and padded: ``[batch, max_len + 1]``."""
    return pad_sequences([list(s) + [EOS_ID] for s in seqs])


def make_batch(src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]], index: Sequence[int]) -> Batch:
    """Build a :class:`Batch` from the source and target id lists of the chosen sentences."""
    return Batch(
        src=source_tensor(src),
        tgt_in=pad_sequences([[BOS_ID] + list(t) for t in tgt]),
        tgt_out=pad_sequences([list(t) + [EOS_ID] for t in tgt]),
        index=torch.as_tensor(list(index), dtype=torch.long),
    )


class TokenBatchSampler:
    """Yields lists of sentence indices whose padded size stays within ``max_tokens``.

    The cost of a sentence is ``max(src_len, tgt_len) + 1`` (for ``<eos>``/``<bos>``), and a
    batch costs ``n_sentences * max_cost``. Sentences are sorted by cost (ties broken randomly
    when shuffling), cut into batches, and the batch order is shuffled per epoch.

    Args:
        src_lengths, tgt_lengths: token counts per sentence.
        max_tokens: padded-token budget per batch (a longer sentence gets a batch of its own).
        shuffle: randomise the tie order and batch order (training); otherwise sorted order.
        seed: base seed; epoch ``e`` uses ``seed + e``.
    """

    def __init__(self, src_lengths: Sequence[int], tgt_lengths: Sequence[int], max_tokens: int,
                 shuffle: bool = True, seed: int = 0):
        if len(src_lengths) != len(tgt_lengths):
            raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths")
        if max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        self.cost = torch.as_tensor(
            [max(s, t) + 1 for s, t in zip(src_lengths, tgt_lengths, strict=True)], dtype=torch.long
        )
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _batches(self) -> list[list[int]]:
        n = len(self.cost)
        if self.shuffle:
            gen = torch.Generator().manual_seed(self.seed + self.epoch)
            order = torch.randperm(n, generator=gen)
            # Stable sort of a random permutation: sorted by length, random among equals.
            order = order[torch.sort(self.cost[order], stable=True).indices]
        else:
            gen = None
            order = torch.sort(self.cost, stable=True).indices
        batches: list[list[int]] = []
        current: list[int] = []
        width = 0
        for idx, cost in zip(order.tolist(), self.cost[order].tolist(), strict=True):
            new_width = max(width, cost)
            if current and new_width * (len(current) + 1) > self.max_tokens:
                batches.append(current)
                current, new_width = [], cost
            current.append(idx)
            width = new_width
        if current:
            batches.append(current)
        if gen is not None:
            batches = [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._batches())

    def __len__(self) -> int:
        return len(self._batches())


class ParallelDataset:
    """Encoded sentence pairs plus batching.

    Args:
        src, tgt: id lists per sentence (without specials).
    """

    def __init__(self, src: Sequence[Sequence[int]], tgt: Sequence[Sequence[int]]):
        if len(src) != len(tgt):
            raise ValueError(f"{len(src)} source but {len(tgt)} target sentences")
        self.src = [list(s) for s in src]
        self.tgt = [list(t) for t in tgt]

    def __len__(self) -> int:
        return len(self.src)

    def filter_length(self, max_len: int) -> int:
        """Drop pairs with a side longer than ``max_len`` tokens (and empty pairs); returns
        how many were dropped."""
        keep = [i for i in range(len(self))
                if 0 < len(self.src[i]) <= max_len and 0 < len(self.tgt[i]) <= max_len]
        dropped = len(self) - len(keep)
        self.src = [self.src[i] for i in keep]
        self.tgt = [self.tgt[i] for i in keep]
        return dropped

    def truncate(self, max_len: int) -> int:
        """Cut each side to at most ``max_len`` tokens (validation data keeps every pair, so
        that it stays aligned with its references); returns how many pairs were cut."""
        cut = 0
        for i in range(len(self)):
            if len(self.src[i]) > max_len or len(self.tgt[i]) > max_len:
                self.src[i], self.tgt[i] = self.src[i][:max_len], self.tgt[i][:max_len]
                cut += 1
        return cut

    def sampler(self, max_tokens: int, shuffle: bool = True, seed: int = 0) -> TokenBatchSampler:
        return TokenBatchSampler([len(s) for s in self.src], [len(t) for t in self.tgt], max_tokens,
                                 shuffle=shuffle, seed=seed)

    def batch(self, idx: Sequence[int]) -> Batch:
        """The padded :class:`Batch` of sentences ``idx``."""
        return make_batch([self.src[i] for i in idx], [self.tgt[i] for i in idx], idx)

    def batches(self, sampler: TokenBatchSampler) -> Iterator[Batch]:
        for idx in sampler:
            yield self.batch(idx)
