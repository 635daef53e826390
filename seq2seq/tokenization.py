"""Tokenizers: a simple word-level one and subword ones (BPE, unigram) trained with the
Hugging Face ``tokenizers`` library.

Every tokenizer reserves the same special ids: ``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2,
``<unk>`` = 3, and serialises to a plain dict of strings/lists (``to_dict``) so it can travel
inside a ``weights_only`` checkpoint.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
TOKENIZER_KINDS = ("word", "bpe", "unigram")

# Words (letters/digits, with inner hyphens or apostrophes) or single punctuation marks.
_WORD_RE = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")
# Detokenisation: no space before closing punctuation, none after opening punctuation.
_NO_SPACE_BEFORE = frozenset(".,!?;:%)]}…'’")
_NO_SPACE_AFTER = frozenset("([{¿¡")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _strip_specials(ids: Iterable[int]) -> list[int]:
    """Ids up to the first ``<eos>``, without ``<pad>``/``<bos>``."""
    out = []
    for i in ids:
        i = int(i)
        if i == EOS_ID:
            break
        if i not in (PAD_ID, BOS_ID):
            out.append(i)
    return out


def _valid_unicode(text: str) -> str:
    """``text`` with lone surrogates (e.g. undecodable bytes of a command-line argument) replaced
    by U+FFFD, which the ``tokenizers`` library accepts and maps to ``<unk>``."""
    return _SURROGATE_RE.sub("\ufffd", text)


def word_split(text: str) -> list[str]:
    """Split into words and punctuation marks: ``"Hallo, Welt!"`` -> ``["Hallo", ",", "Welt", "!"]``."""
    return _WORD_RE.findall(text)


def word_join(tokens: Sequence[str]) -> str:
    """Inverse of :func:`word_split` for ordinary prose (punctuation re-attached, paired
    double quotes hugging their content)."""
    out: list[str] = []
    open_quote = False
    glue_next = False
    for tok in tokens:
        if tok == '"':
            glue = open_quote  # a closing quote sticks to the word before it
            open_quote = not open_quote
            attach_after = open_quote
        else:
            glue = tok in _NO_SPACE_BEFORE
            attach_after = tok in _NO_SPACE_AFTER
        if out and not glue and not glue_next:
            out.append(" ")
        out.append(tok)
        glue_next = attach_after
    return "".join(out)


class WordTokenizer:
    """Word-level tokenizer with a frequency-built vocabulary.

    Args:
        itos: id -> token, starting with :data:`SPECIALS`.
        lowercase: lower-case text before splitting.
    """

    kind = "word"

    def __init__(self, itos: Sequence[str], lowercase: bool = False):
        if tuple(itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {list(itos[:4])}")
        self.itos = list(itos)
        self.stoi = {tok: i for i, tok in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("vocabulary has duplicate tokens")
        self.lowercase = lowercase

    @classmethod
    def train(cls, texts: Iterable[str], min_freq: int = 1, max_size: int | None = None,
              lowercase: bool = False) -> WordTokenizer:
        """Vocabulary of the tokens seen at least ``min_freq`` times (most frequent first,
        ties alphabetical so the result is deterministic), capped at ``max_size`` entries."""
        if min_freq < 1:
            raise ValueError(f"min_freq must be >= 1, got {min_freq}")
        counts: Counter[str] = Counter()
        for text in texts:
            counts.update(word_split(text.lower() if lowercase else text))
        words = sorted((w for w, c in counts.items() if c >= min_freq and w not in SPECIALS),
                       key=lambda w: (-counts[w], w))
        if max_size is not None:
            words = words[: max(0, max_size - len(SPECIALS))]
        return cls(list(SPECIALS) + words, lowercase)

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def pieces(self, text: str) -> list[str]:
        """The tokens of ``text`` as strings (unknown words kept as written)."""
        return word_split(text.lower() if self.lowercase else text)

    def encode(self, text: str) -> list[int]:
        return [self.stoi.get(tok, UNK_ID) for tok in self.pieces(text)]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def id_to_piece(self, i: int) -> str:
        return self.itos[i] if 0 <= i < len(self.itos) else "<unk>"

    def decode(self, ids: Iterable[int]) -> str:
        """Ids (stopping at ``<eos>``, skipping ``<pad>``/``<bos>``) -> detokenised text."""
        return word_join([self.itos[i] for i in _strip_specials(ids)])

    def to_dict(self) -> dict:
        return {"kind": self.kind, "itos": list(self.itos), "lowercase": self.lowercase}


class SubwordTokenizer:
    """BPE or unigram subwords from the ``tokenizers`` library, SentencePiece-style
    (``▁`` marks a preceding space), so decoding restores the original spacing.

    Args:
        tokenizer: a trained :class:`tokenizers.Tokenizer` whose first ids are :data:`SPECIALS`.
        kind: ``"bpe"`` or ``"unigram"`` (recorded for the checkpoint).
    """

    def __init__(self, tokenizer: Tokenizer, kind: str):
        if kind not in ("bpe", "unigram"):
            raise ValueError(f"subword kind must be 'bpe' or 'unigram', got {kind!r}")
        for i, tok in enumerate(SPECIALS):
            if tokenizer.token_to_id(tok) != i:
                raise ValueError(f"subword tokenizer must map {tok} to id {i}, "
                                 f"got {tokenizer.token_to_id(tok)}")
        self.tokenizer = tokenizer
        self.kind = kind

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 8000, kind: str = "bpe",
              min_freq: int = 2, lowercase: bool = False) -> SubwordTokenizer:
        if vocab_size <= len(SPECIALS):
            raise ValueError(f"vocab_size must exceed {len(SPECIALS)}, got {vocab_size}")
        if kind == "bpe":
            tok = Tokenizer(models.BPE(unk_token="<unk>"))
            trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_freq,
                                          special_tokens=list(SPECIALS), show_progress=False)
        elif kind == "unigram":
            tok = Tokenizer(models.Unigram())
            trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS),
                                              unk_token="<unk>", show_progress=False)
        else:
            raise ValueError(f"subword kind must be 'bpe' or 'unigram', got {kind!r}")
        # The normaliser is saved with the tokenizer, so lower-casing also applies at inference.
        tok.normalizer = (normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
                          if lowercase else normalizers.NFKC())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(list(texts), trainer)
        return cls(tok, kind)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def pieces(self, text: str) -> list[str]:
        return self.tokenizer.encode(_valid_unicode(text), add_special_tokens=False).tokens

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; characters outside the vocabulary become ``<unk>``."""
        return self.tokenizer.encode(_valid_unicode(text), add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        encoded = self.tokenizer.encode_batch([_valid_unicode(t) for t in texts], add_special_tokens=False)
        return [e.ids for e in encoded]

    def id_to_piece(self, i: int) -> str:
        return self.tokenizer.id_to_token(i) or "<unk>"

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode(_strip_specials(ids), skip_special_tokens=True)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "json": self.tokenizer.to_str()}


TextTokenizer = WordTokenizer | SubwordTokenizer


def tokenizer_from_dict(data: dict) -> TextTokenizer:
    """Rebuild a tokenizer saved with ``to_dict`` (e.g. from a checkpoint)."""
    if not isinstance(data, dict) or "kind" not in data:
        raise ValueError("saved tokenizer must be a dict with a 'kind' key")
    kind = data["kind"]
    if kind == "word":
        return WordTokenizer(data["itos"], bool(data.get("lowercase", False)))
    if kind in ("bpe", "unigram"):
        return SubwordTokenizer(Tokenizer.from_str(data["json"]), kind)
    raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {TOKENIZER_KINDS}")


def build_tokenizers(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    kind: str = "word",
    vocab_size: int = 8000,
    joint: bool = False,
    min_freq: int = 1,
    lowercase: bool = False,
) -> tuple[TextTokenizer, TextTokenizer]:
    """Train source and target tokenizers; ``joint=True`` trains one on both sides and
    returns it twice (needed for shared source/target embeddings).

    ``vocab_size`` is the subword vocabulary size, or the word vocabulary cap.
    """
    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"tokenizer must be one of {TOKENIZER_KINDS}, got {kind!r}")

    def train(texts: Sequence[str]) -> TextTokenizer:
        if kind == "word":
            return WordTokenizer.train(texts, min_freq=min_freq, max_size=vocab_size, lowercase=lowercase)
        return SubwordTokenizer.train(texts, vocab_size=vocab_size, kind=kind, min_freq=max(min_freq, 2),
                                      lowercase=lowercase)

    if joint:
        tok = train(list(src_texts) + list(tgt_texts))
        return tok, tok
    return train(src_texts), train(tgt_texts)
