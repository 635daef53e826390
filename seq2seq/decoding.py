"""Batched greedy and beam-search decoding.

Both use the decoder's key/value cache (``use_cache=True``): each step feeds only the newest
token, so a step costs one position instead of the whole prefix. ``use_cache=False`` re-runs the
decoder over the full prefix each step; it exists as a reference for tests and benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .batching import TokenBatchSampler, source_tensor
from .core import StackCache
from .model import Transformer
from .tokenization import BOS_ID, EOS_ID, PAD_ID


@dataclass
class DecodeConfig:
    """How to decode.

    Attributes:
        beam_size: 1 = greedy.
        length_penalty: beam hypotheses are ranked by ``log_prob / length ** length_penalty``
            (0 = raw log-probability; larger favours longer outputs).
        max_len_ratio, max_len_extra: at most ``ratio * source_len + extra`` output tokens.
    """

    beam_size: int = 1
    length_penalty: float = 1.0
    max_len_ratio: float = 1.5
    max_len_extra: int = 10

    def __post_init__(self) -> None:
        if not isinstance(self.beam_size, int) or self.beam_size < 1:
            raise ValueError(f"beam_size must be a positive integer, got {self.beam_size!r}")
        if self.max_len_ratio < 0 or self.max_len_extra < 0:
            raise ValueError("max_len_ratio and max_len_extra must be >= 0")
        if self.max_len_ratio == 0 and self.max_len_extra == 0:
            raise ValueError("max_len_ratio and max_len_extra cannot both be 0")


def max_lengths(src: torch.Tensor, ratio: float, extra: int, model_max_len: int) -> torch.Tensor:
    """Per-sentence output limits ``[batch]``: ``floor(ratio * src_len) + extra``, at least 1,
    and within the model's positions (``<bos>`` takes one)."""
    src_len = (src != PAD_ID).sum(dim=1)
    limit = torch.floor(src_len.double() * ratio).long() + extra
    return limit.clamp(min=1, max=model_max_len - 1)


Models = Transformer | Sequence[Transformer]


def as_models(model: Models) -> list[Transformer]:
    """``model`` as a list: one model, or the members of an ensemble, in eval mode.

    An ensemble's members share one tokenizer pair (the caller's duty); here they must at least
    have the same vocabulary sizes, or their probabilities could not be averaged.
    """
    models = [model] if isinstance(model, Transformer) else list(model)
    if not models:
        raise ValueError("no model to decode with: the ensemble is empty")
    sizes = sorted({(m.config.src_vocab_size, m.config.tgt_vocab_size) for m in models})
    if len(sizes) > 1:
        raise ValueError(f"the models of an ensemble must share their vocabularies; got (source, target) "
                         f"sizes {sizes}")
    for m in models:
        m.eval()
    return models


def models_max_len(models: list[Transformer]) -> int:
    """The longest sequence every model covers."""
    return min(m.config.max_len for m in models)


class _StepDecoder:
    """Next-token log-probabilities for growing prefixes, with or without the cache.

    With several models (an ensemble) each keeps its own encoder output and cache, and a step
    scores the log of the mean of their probabilities.
    """

    def __init__(self, models: list[Transformer], src: torch.Tensor, use_cache: bool):
        """``src`` ``[batch, src_len]`` is encoded here, once per model."""
        self.models = models
        encoded = [m.encode(src) for m in models]
        self.memories = [memory for memory, _ in encoded]
        src_mask = encoded[0][1]  # depends on the padding of src only
        # A mask that masks nothing (no padding in the batch) is left out: attention is then
        # cheaper and identical.
        self.src_mask = None if bool(src_mask.all()) else src_mask
        self.caches: list[StackCache] | None = (
            [m.decoder.new_cache() for m in models] if use_cache else None)

    def __call__(self, prefix: torch.Tensor, log_probs: bool = True) -> torch.Tensor:
        """``prefix`` ``[rows, t]`` -> log-probs of token ``t+1`` ``[rows, vocab]`` (a transposed
        view of a ``[vocab, rows]`` tensor). One model with ``log_probs=False`` gives its raw
        logits (enough for an argmax); an ensemble always gives log-probs, since the logits of
        different models are not on one scale."""
        logits = []
        for i, model in enumerate(self.models):
            if self.caches is not None:
                h = model.decode_hidden(prefix[:, -1:], self.memories[i], self.src_mask, self.caches[i])
            else:
                h = model.decode_hidden(prefix, self.memories[i], self.src_mask)
            # The vocabulary projection is the largest matmul of a cached step. As [vocab, d] @
            # [d, rows] it splits over the vocabulary and takes 1.2 ms instead of 2.0 ms for
            # [32, 256] x [256, 8000] on two CPU cores (a few rows split badly), with no weight copy.
            logits.append(torch.mm(model.output.weight, h[:, -1].t()).float())  # (V, rows)
        if len(logits) == 1:
            return (torch.log_softmax(logits[0], dim=0) if log_probs else logits[0]).t()
        per_model = torch.stack([torch.log_softmax(x, dim=0) for x in logits])  # (models, V, rows)
        return (per_model.logsumexp(dim=0) - math.log(len(logits))).t()

    def select(self, rows: torch.Tensor) -> None:
        """Keep batch rows ``rows`` ``[new_rows]`` (beam expansion and reordering, dropping
        finished rows)."""
        self.memories = [memory.index_select(0, rows) for memory in self.memories]
        if self.src_mask is not None:
            self.src_mask = self.src_mask.index_select(0, rows)
        for cache in self.caches or []:
            cache.reorder(rows)


def _trim(ids: list[int]) -> list[int]:
    return ids[: ids.index(EOS_ID)] if EOS_ID in ids else ids


@torch.inference_mode()
def greedy_decode(model: Models, src: torch.Tensor, max_len_ratio: float = 1.5,
                  max_len_extra: int = 10, use_cache: bool = True) -> list[list[int]]:
    """Greedy decoding of a batch.

    Args:
        model: a model, or several sharing one vocabulary (an ensemble: their probabilities
            are averaged).
        src: source ids ``[batch, src_len]`` (padded with ``<pad>``, ending in ``<eos>``).

    Returns:
        per sentence, the output ids without ``<bos>``/``<eos>``.
    """
    models = as_models(model)
    limits = max_lengths(src, max_len_ratio, max_len_extra, models_max_len(models))
    step = _StepDecoder(models, src, use_cache)
    batch = src.size(0)
    prefix = torch.full((batch, 1), BOS_ID, dtype=torch.long, device=src.device)
    rows = torch.arange(batch, device=src.device)  # original sentence of each live row
    row_limits = limits
    results: list[list[int]] = [[] for _ in range(batch)]
    for t in range(int(limits.max())):
        # max(dim) returns the first maximal index, as argmax does, and reduces a transposed
        # view faster; no softmax needed for the argmax.
        next_tok = step(prefix, log_probs=False).max(dim=-1).indices
        prefix = torch.cat([prefix, next_tok[:, None]], dim=1)
        # A row is done at <eos> or at its length limit; drop done rows so later steps are cheaper.
        done = (next_tok == EOS_ID) | (row_limits <= t + 1)
        if bool(done.any()):
            for r in done.nonzero().flatten().tolist():
                results[int(rows[r])] = _trim(prefix[r, 1:].tolist())
            keep = (~done).nonzero().flatten()
            if keep.numel() == 0:
                break
            prefix, rows, row_limits = prefix[keep], rows[keep], row_limits[keep]
            step.select(keep)
    return results


@torch.inference_mode()
def beam_search(model: Models, src: torch.Tensor, beam_size: int = 5, length_penalty: float = 1.0,
                max_len_ratio: float = 1.5, max_len_extra: int = 10,
                use_cache: bool = True) -> list[list[int]]:
    """Batched beam search.

    Each step scores the ``2 * beam`` best continuations of every sentence; those ending in
    ``<eos>`` among the top ``beam`` become finished hypotheses (ranked by
    ``log_prob / (len + 1) ** length_penalty``, counting ``<eos>``), the best ``beam`` others
    stay live. A sentence is finished with ``beam`` finished hypotheses; at its length limit
    only ``<eos>`` is allowed. With ``beam_size=1`` this is exactly greedy decoding.

    Args:
        model: a model or an ensemble, as for :func:`greedy_decode`.
        src: source ids ``[batch, src_len]``.

    Returns:
        per sentence, the best output ids without ``<bos>``/``<eos>``.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    models = as_models(model)
    k = beam_size
    device = src.device
    limits = max_lengths(src, max_len_ratio, max_len_extra, models_max_len(models))
    batch = src.size(0)
    step = _StepDecoder(models, src, use_cache)  # encodes each sentence once...
    step.select(torch.arange(batch, device=device).repeat_interleave(k))  # ...then copies it k times
    prefix = torch.full((batch * k, 1), BOS_ID, dtype=torch.long, device=device)
    scores = torch.full((batch, k), -math.inf, device=device)
    scores[:, 0] = 0.0  # all beams start identical: keep only one alive at first
    sent = torch.arange(batch, device=device)  # original sentence of each live group of k rows
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(batch)]
    results: list[list[int]] = [[] for _ in range(batch)]
    t = 0
    while sent.numel() > 0:
        n = sent.numel()
        logp = step(prefix)  # [n*k, V]
        vocab = logp.size(-1)
        at_limit = (limits[sent] <= t).repeat_interleave(k)
        if bool(at_limit.any()):  # only <eos> may follow a full-length hypothesis
            forced = torch.full_like(logp[0], -math.inf)
            forced[EOS_ID] = 0.0
            logp[at_limit] = logp[at_limit][:, EOS_ID:EOS_ID + 1] + forced
        cand = (scores.view(-1, 1) + logp).reshape(n, k * vocab)
        top_scores, top_idx = cand.topk(min(2 * k, k * vocab), dim=1)
        beam_idx, tokens = top_idx // vocab, top_idx % vocab
        new_rows, new_tokens, new_scores, done = [], [], [], []
        top_scores_l, beam_l, tok_l = top_scores.tolist(), beam_idx.tolist(), tokens.tolist()
        for g in range(n):
            b = int(sent[g])
            live: list[tuple[int, int, float]] = []
            for rank, (sc, beam, tok) in enumerate(zip(top_scores_l[g], beam_l[g], tok_l[g], strict=True)):
                if sc == -math.inf:
                    break
                if tok == EOS_ID:
                    if rank < k:
                        hyp = prefix[g * k + beam, 1:].tolist()
                        finished[b].append((sc / (len(hyp) + 1) ** length_penalty, hyp))
                elif len(live) < k:
                    live.append((g * k + beam, tok, sc))
                if len(live) == k and rank >= k - 1:
                    break
            is_done = len(finished[b]) >= k or not live
            done.append(is_done)
            if is_done:
                results[b] = max(finished[b], key=lambda h: h[0])[1] if finished[b] else []
            else:
                while len(live) < k:  # pad with dead beams
                    live.append((live[0][0], PAD_ID, -math.inf))
                for row, tok, sc in live:
                    new_rows.append(row)
                    new_tokens.append(tok)
                    new_scores.append(sc)
        keep_groups = [g for g in range(n) if not done[g]]
        if not keep_groups:
            break
        rows = torch.tensor(new_rows, device=device)
        prefix = torch.cat([prefix[rows], torch.tensor(new_tokens, device=device)[:, None]], dim=1)
        scores = torch.tensor(new_scores, device=device).view(len(keep_groups), k)
        sent = sent[torch.tensor(keep_groups, device=device)]
        step.select(rows)
        t += 1
    return results


def decode_batch(model: Models, src: torch.Tensor, config: DecodeConfig,
                 use_cache: bool = True) -> list[list[int]]:
    """Greedy (``beam_size == 1``) or beam search per ``config``; see those functions."""
    if config.beam_size == 1:
        return greedy_decode(model, src, config.max_len_ratio, config.max_len_extra, use_cache)
    return beam_search(model, src, config.beam_size, config.length_penalty, config.max_len_ratio,
                       config.max_len_extra, use_cache)


class InputTooLongError(ValueError):
    """A source sentence has more tokens than the model's positions cover.

    Attributes:
        index: 0-based position of the sentence in the input (line ``index + 1``).
        n_tokens: its source tokens.
        limit: the most source tokens the model takes (``max_len - 1``: ``<eos>`` takes one).
    """

    def __init__(self, index: int, n_tokens: int, limit: int):
        self.index, self.n_tokens, self.limit = index, n_tokens, limit
        super().__init__(f"line {index + 1}: {self.reason}")

    @property
    def reason(self) -> str:
        """Why the sentence is refused, without its position."""
        return (f"too long: {self.n_tokens} source tokens, but the model takes at most {self.limit} "
                f"(max_len {self.limit + 1}, one position is <eos>); split the line, or use a model "
                "trained with a larger --max-len")


def fit_sources(sources: list[list[int]], limit: int, truncate: bool = False) -> list[list[int]]:
    """Check that no source has more than ``limit`` tokens, or cut them to it (``truncate``).

    Raises:
        InputTooLongError: for the first source over the limit, unless ``truncate``.
    """
    if truncate:
        return [s[:limit] for s in sources]
    for i, s in enumerate(sources):
        if len(s) > limit:
            raise InputTooLongError(i, len(s), limit)
    return list(sources)


def one_line(text: str) -> str:
    """``text`` with line breaks (``\\n``, ``\\r``, and the others :meth:`str.splitlines` knows)
    replaced by spaces, so that one translation stays one line of a file."""
    return " ".join(text.splitlines())


def translate_ids(model: Models, sources: list[list[int]], config: DecodeConfig,
                  max_tokens: int = 4000, device: torch.device | str = "cpu",
                  use_cache: bool = True, truncate: bool = False) -> list[list[int]]:
    """Decode many tokenised sentences, batched by length (within ``max_tokens`` source
    tokens per batch) and returned in input order.

    An empty source gives an empty output without decoding (a bare ``<eos>`` would decode to
    whatever sentence the model likes best).

    Args:
        sources: per sentence, source ids without specials (``<eos>`` is added here).
        truncate: cut sources longer than the model takes instead of raising (validation
            BLEU during training, where the loss sees the same cut sentences).

    Raises:
        InputTooLongError: a source has more than ``max_len - 1`` tokens (and not ``truncate``).
    """
    models = as_models(model)  # checked once, not per batch
    sources = fit_sources(sources, models_max_len(models) - 1, truncate)
    out: list[list[int]] = [[] for _ in sources]
    todo = [i for i, s in enumerate(sources) if s]
    lengths = [len(sources[i]) for i in todo]
    # Sorted by length, as in training, so batches carry little padding.
    for batch in TokenBatchSampler(lengths, lengths, max_tokens, shuffle=False):
        idx = [todo[b] for b in batch]
        src = source_tensor([sources[i] for i in idx]).to(device)
        for i, ids in zip(idx, decode_batch(models, src, config, use_cache), strict=True):
            out[i] = ids
    return out


def translate_texts(model: Models, src_tokenizer, tgt_tokenizer, texts: list[str],
                    config: DecodeConfig, max_tokens: int = 4000,
                    device: torch.device | str = "cpu") -> list[str]:
    """Tokenise ``texts``, decode, and detokenise: plain text in, plain text out, one output
    per text, in order.

    Empty or whitespace-only texts give ``""``; characters the source tokenizer does not know
    become ``<unk>``; each output is one line (embedded line breaks become spaces).

    Raises:
        InputTooLongError: a text has more source tokens than the model takes; its ``index``
            says which.
    """
    sources = src_tokenizer.encode_batch([t if t.strip() else "" for t in texts])
    ids = translate_ids(model, sources, config, max_tokens, device)
    return [one_line(tgt_tokenizer.decode(i)) for i in ids]
