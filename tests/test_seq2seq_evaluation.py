"""Scores agree with sacreBLEU."""

import pytest
import sacrebleu

from seq2seq.evaluation import bleu, score, tokenized_lowercase_bleu

HYPS = ["The cat sat on the mat.", "A dog runs in the park!", "Two men are talking."]
REFS = ["The cat is sitting on the mat.", "A dog is running in the park!", "Two men are talking."]


def test_bleu_equals_sacrebleu():
    expected = sacrebleu.corpus_bleu(HYPS, [REFS]).score
    assert bleu(HYPS, REFS) == pytest.approx(expected, abs=1e-9)
    assert 30 < expected < 90
    s = score(HYPS, REFS)
    assert s.bleu == pytest.approx(expected, abs=1e-9)
    assert s.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPS, [REFS]).score, abs=1e-9)
    assert s.n_sentences == 3
    assert "13a" in s.signature and "BLEU" in s.lines()[0]
    assert bleu(REFS, REFS) == pytest.approx(100.0)


def test_tokenized_lowercase_bleu():
    hyps, refs = ["THE DOG'S ball , here."], ["the dog's ball, here ."]
    assert tokenized_lowercase_bleu(hyps, refs) == pytest.approx(100.0)
    assert bleu(hyps, refs) < 60  # cased, detokenised BLEU sees the differences
    expected = sacrebleu.corpus_bleu(["the cat sat on the mat ."], [["the cat is sitting on the mat ."]],
                                     tokenize="none").score
    assert tokenized_lowercase_bleu(["The cat sat on the mat."], ["The cat is sitting on the mat."]) == \
        pytest.approx(expected)


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="nothing to score"):
        score([], [])
