"""Scoring with sacreBLEU.

The headline numbers are sacreBLEU's corpus BLEU (default ``13a`` tokenisation, cased) and chrF
on detokenised output against raw references. ``tok_lc_bleu`` is the older-tutorial style
figure: both sides lower-cased and split into words and punctuation with
:func:`seq2seq.tokenization.word_split`, then scored by sacreBLEU with ``tokenize="none"``.
It is typically a few points higher than the cased detokenised BLEU.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu

from .tokenization import word_split


@dataclass
class Scores:
    """Corpus scores (0-100)."""

    bleu: float
    chrf: float
    tok_lc_bleu: float
    signature: str
    n_sentences: int

    def to_dict(self) -> dict:
        return {"bleu": self.bleu, "chrf": self.chrf, "tok_lc_bleu": self.tok_lc_bleu,
                "n_sentences": self.n_sentences}

    def lines(self) -> list[str]:
        return [
            f"BLEU = {self.bleu:.2f}  (sacreBLEU, cased, detokenized; {self.signature})",
            f"chrF = {self.chrf:.2f}",
            f"tokenized lower-cased BLEU = {self.tok_lc_bleu:.2f}  "
            "(lower-cased, split into words and punctuation, sacreBLEU tokenize=none; "
            "comparable with older tutorials' BLEU)",
        ]


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """sacreBLEU corpus BLEU, cased, default 13a tokenisation."""
    _check(hypotheses, references)
    return sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score


def tokenized_lowercase_bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """BLEU over lower-cased word/punctuation tokens (see the module docstring)."""
    _check(hypotheses, references)

    def prep(text: str) -> str:
        return " ".join(word_split(text.lower()))

    # force=True: the input is tokenized on purpose, so silence sacreBLEU's warning about it.
    metric = sacrebleu.metrics.BLEU(tokenize="none", force=True)
    return metric.corpus_score([prep(h) for h in hypotheses], [[prep(r) for r in references]]).score


def score(hypotheses: Sequence[str], references: Sequence[str]) -> Scores:
    """BLEU, chrF and tokenized lower-cased BLEU of detokenised ``hypotheses``."""
    _check(hypotheses, references)
    hyps, refs = list(hypotheses), [list(references)]
    b = sacrebleu.metrics.BLEU()
    bleu_score = b.corpus_score(hyps, refs)
    chrf = sacrebleu.metrics.CHRF().corpus_score(hyps, refs)
    return Scores(bleu_score.score, chrf.score, tokenized_lowercase_bleu(hypotheses, references),
                  str(b.get_signature()), len(hyps))


def _check(hypotheses: Sequence[str], references: Sequence[str]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    if not hypotheses:
        raise ValueError("nothing to score: no hypotheses")
