"""Word and subword tokenizers: special ids, round trips, serialisation."""

import pytest

from seq2seq.tokenization import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIALS,
    UNK_ID,
    SubwordTokenizer,
    WordTokenizer,
    build_tokenizers,
    tokenizer_from_dict,
    word_join,
    word_split,
)

SENTENCES = [
    "Ein Mann mit einem roten Hut geht über die Straße.",
    'Er sagte: "Ja, das ist (vielleicht) 5% teurer!"',
    "Zwei Hunde spielen im Schnee; ein Kind schaut zu.",
    "Don't worry, it's fine - really?",
]


def test_specials_have_fixed_ids():
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert SPECIALS == ("<pad>", "<bos>", "<eos>", "<unk>")


@pytest.mark.parametrize("text", SENTENCES)
def test_word_split_join_round_trip(text):
    assert word_join(word_split(text)) == text


def test_word_tokenizer_round_trip_and_unknowns():
    tok = WordTokenizer.train(SENTENCES)
    assert tok.itos[:4] == list(SPECIALS)
    for text in SENTENCES:
        ids = tok.encode(text)
        assert UNK_ID not in ids
        assert tok.decode([BOS_ID] + ids + [EOS_ID, PAD_ID, PAD_ID]) == text
    ids = tok.encode("Ein Zebra geht.")
    assert ids[1] == UNK_ID and tok.decode(ids) == "Ein <unk> geht."
    assert tok.decode(tok.encode("Ein Mann") + [EOS_ID] + tok.encode("Hund")) == "Ein Mann"


def test_word_vocab_is_frequency_ordered_and_capped():
    tok = WordTokenizer.train(["b a a", "c a b"], max_size=6)
    assert tok.itos == list(SPECIALS) + ["a", "b"]
    assert WordTokenizer.train(["b a a", "c a b"], min_freq=2).itos == list(SPECIALS) + ["a", "b"]


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_subword_round_trip_restores_real_text(kind):
    corpus = SENTENCES * 20 + ["Eine Frau liest ein Buch im Park.", "Die Kinder essen Kuchen."] * 20
    tok = SubwordTokenizer.train(corpus, vocab_size=120, kind=kind)
    assert [tok.tokenizer.token_to_id(s) for s in SPECIALS] == [0, 1, 2, 3]
    for text in SENTENCES:
        ids = tok.encode(text)
        assert len(ids) > len(text.split())  # really split below words at this vocabulary size
        assert tok.decode([BOS_ID] + ids + [EOS_ID]) == text
    again = tokenizer_from_dict(tok.to_dict())
    assert again.encode(SENTENCES[0]) == tok.encode(SENTENCES[0])
    assert again.kind == kind


def test_joint_and_separate_vocabularies():
    src, tgt = ["Hallo Welt", "Guten Tag"], ["Hello world", "Good day"]
    s, t = build_tokenizers(src, tgt, kind="word", joint=True)
    assert s is t and "Hallo" in s.stoi and "Hello" in s.stoi
    s, t = build_tokenizers(src, tgt, kind="word", joint=False)
    assert "Hello" not in s.stoi and "Hello" in t.stoi
    low, _ = build_tokenizers(src, tgt, kind="word", lowercase=True)
    assert low.encode("HALLO") == [low.stoi["hallo"]]
    assert tokenizer_from_dict(low.to_dict()).lowercase


def test_bad_tokenizer_inputs():
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        build_tokenizers(["a"], ["b"], kind="chars")
    with pytest.raises(ValueError, match="must start with"):
        WordTokenizer(["a", "b", "c", "d"])
    with pytest.raises(ValueError, match="unknown tokenizer kind"):
        tokenizer_from_dict({"kind": "chars"})
