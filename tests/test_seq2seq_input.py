"""Input handling of the translation functions: blank lines, over-long lines, unknown
characters, one output line per input (tokenizers trained on the embedded toy corpus)."""

import pytest
import torch

from seq2seq.decoding import DecodeConfig, InputTooLongError, one_line, translate_ids, translate_texts
from seq2seq.model import Transformer, TransformerConfig
from seq2seq.text import read_lines, read_parallel, toy_corpus_paths
from seq2seq.tokenization import UNK_ID, build_tokenizers

pytestmark = pytest.mark.usefixtures("one_thread")

GREEDY = DecodeConfig(beam_size=1)


@pytest.fixture(scope="module")
def toy():
    return read_parallel(*toy_corpus_paths())


@pytest.fixture(scope="module", params=["word", "bpe", "unigram"])
def tokenizers(request, toy):
    return build_tokenizers(toy.src, toy.tgt, kind=request.param, vocab_size=200)


def _model(src_tok, tgt_tok, max_len=64):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(src_tok.vocab_size, tgt_tok.vocab_size, d_model=16, n_heads=2,
                                         d_ff=32, encoder_layers=1, decoder_layers=1, dropout=0.0,
                                         max_len=max_len)).eval()


def test_blank_texts_translate_to_empty_strings(tokenizers, toy):
    src_tok, tgt_tok = tokenizers
    model = _model(src_tok, tgt_tok)
    texts = ["", toy.src[0], "   ", "\t \u3000", toy.src[1]]
    outs = translate_texts(model, src_tok, tgt_tok, texts, GREEDY, max_tokens=8)
    assert len(outs) == len(texts)
    assert outs[0] == outs[2] == outs[3] == ""
    # The untrained model says something for real sentences (its <eos> is not the best first token).
    assert outs[1] and outs[4]
    assert outs[1] == translate_texts(model, src_tok, tgt_tok, [toy.src[0]], GREEDY)[0]
    ids = translate_ids(model, [[], src_tok.encode(toy.src[0])], GREEDY)
    assert ids[0] == [] and ids[1]


def test_too_long_source_is_a_value_error_naming_the_line(toy):
    src_tok, tgt_tok = build_tokenizers(toy.src, toy.tgt)
    model = _model(src_tok, tgt_tok, max_len=8)  # at most 7 source tokens
    texts = [toy.src[0], "", " ".join(["Bier"] * 7), " ".join(["Bier"] * 8)]
    with pytest.raises(ValueError, match=r"^line 4: too long: 8 source tokens, but the model takes at "
                                         r"most 7 \(max_len 8") as info:
        translate_texts(model, src_tok, tgt_tok, texts, GREEDY)
    assert isinstance(info.value, InputTooLongError)
    assert (info.value.index, info.value.n_tokens, info.value.limit) == (3, 8, 7)
    assert len(translate_texts(model, src_tok, tgt_tok, texts[:3], GREEDY)) == 3  # 7 tokens fit
    # Validation BLEU during training cuts instead (the loss sees the same cut sentences).
    cut = translate_ids(model, [src_tok.encode(texts[3])], GREEDY, truncate=True)
    assert cut == translate_ids(model, [src_tok.encode(texts[2])], GREEDY)


def test_unknown_characters_become_unk(tokenizers):
    src_tok, tgt_tok = tokenizers
    # Emoji, a snowman, Greek, control characters and a lone surrogate (an undecodable byte of a
    # command-line argument) are all outside the toy vocabulary.
    texts = ["Ich möchte 😀 ein Bier.", "☃ Ωμέγα", "\x00\x07 Bier", "Bier \udcff"]
    for text in texts:
        ids = src_tok.encode(text)
        assert UNK_ID in ids and all(0 <= i < src_tok.vocab_size for i in ids)
        assert src_tok.pieces(text)
    assert src_tok.encode_batch(texts) == [src_tok.encode(t) for t in texts]
    outs = translate_texts(_model(src_tok, tgt_tok), src_tok, tgt_tok, texts, GREEDY)
    assert len(outs) == len(texts) and all("\n" not in o for o in outs)


class _MultiLineTarget:
    """A target tokenizer whose every output spans several lines."""

    def decode(self, ids):
        return "a\nb\r\nc\rd\u2028e\n"


def test_outputs_are_single_lines(toy):
    src_tok, tgt_tok = build_tokenizers(toy.src, toy.tgt)
    model = _model(src_tok, tgt_tok)
    outs = translate_texts(model, src_tok, _MultiLineTarget(), [toy.src[0], toy.src[5]], GREEDY)
    assert outs == ["a b c d e", "a b c d e"]
    assert one_line("no break") == "no break" and one_line("") == ""


def test_files_split_lines_at_newline_only(tmp_path):
    # A stray \r (old Mac line end) inside a line must not split it: line N of the file is
    # input N, as wc -l and paste count lines. A blank file is allowed when asked for.
    path = tmp_path / "in.de"
    path.write_bytes(b"eins\r\nzwei\rdrei\n\n  \nvier")
    assert read_lines(path) == ["eins", "zwei\rdrei", "", "  ", "vier"]
    (tmp_path / "blank.de").write_bytes(b"\n \n")
    assert read_lines(tmp_path / "blank.de", allow_blank=True) == ["", " "]
