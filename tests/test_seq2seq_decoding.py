"""Greedy and beam search: cache equivalence, beam 1 = greedy, length limits."""

import pytest
import torch

from seq2seq.batching import source_tensor
from seq2seq.decoding import DecodeConfig, beam_search, greedy_decode, max_lengths, translate_ids
from seq2seq.model import Transformer, TransformerConfig
from seq2seq.tokenization import BOS_ID, EOS_ID

pytestmark = pytest.mark.usefixtures("one_thread")



@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(30, 30, d_model=32, n_heads=4, d_ff=64, encoder_layers=2,
                                      decoder_layers=2, dropout=0.0, max_len=64))
    with torch.no_grad():  # make <eos> plausible so hypotheses end at different lengths
        m.output.weight[EOS_ID] *= 4
    return m.eval()


@pytest.fixture(scope="module")
def src():
    g = torch.Generator().manual_seed(1)
    return source_tensor([torch.randint(4, 30, (n,), generator=g).tolist() for n in (7, 3, 12, 5, 9, 1)])


@pytest.mark.parametrize("positional", ["sinusoidal", "rotary"])
def test_cached_step_logits_equal_full_prefix_logits(positional):
    torch.manual_seed(0)
    m = Transformer(TransformerConfig(30, 30, d_model=32, n_heads=4, d_ff=64, encoder_layers=1,
                                      decoder_layers=2, dropout=0.0, positional=positional)).eval()
    src = source_tensor([[5, 6, 7], [8, 9]])
    tgt = torch.tensor([[BOS_ID, 10, 11, 12, 13], [BOS_ID, 14, 15, 16, 17]])
    memory, mask = m.encode(src)
    full = m.decode(tgt, memory, mask)
    cache = m.decoder.new_cache()
    steps = [m.decode(tgt[:, t:t + 1], memory, mask, cache) for t in range(tgt.size(1))]
    assert len(cache) == tgt.size(1)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_cached_decoding_equals_uncached(model, src):
    cached = greedy_decode(model, src, use_cache=True)
    assert cached == greedy_decode(model, src, use_cache=False)
    assert len({len(x) for x in cached}) > 1  # outputs of different lengths were exercised
    beam = beam_search(model, src, beam_size=4, use_cache=True)
    assert beam == beam_search(model, src, beam_size=4, use_cache=False)


def test_beam_one_equals_greedy(model, src):
    assert beam_search(model, src, beam_size=1) == greedy_decode(model, src)


def test_beam_finds_higher_scoring_outputs(model, src):
    def logprob(ids, i):
        tgt = torch.tensor([[BOS_ID] + ids])
        memory, mask = model.encode(src[i:i + 1])
        lp = torch.log_softmax(model.decode(tgt, memory, mask)[0], -1)
        return float(sum(lp[t, tok] for t, tok in enumerate(ids + [EOS_ID])).detach())

    greedy = greedy_decode(model, src)
    beam = beam_search(model, src, beam_size=5, length_penalty=0.0)
    limits = max_lengths(src, 1.5, 10, model.config.max_len)
    better = 0
    for i, (g, b) in enumerate(zip(greedy, beam, strict=True)):
        if len(g) < limits[i] and len(b) < limits[i]:  # both finished with <eos>
            assert logprob(b, i) >= logprob(g, i) - 1e-4
            better += logprob(b, i) > logprob(g, i) + 1e-4
    assert better >= 1


def test_length_limits_follow_source_length(model, src):
    limits = max_lengths(src, 1.0, 2, model.config.max_len)
    assert limits.tolist() == [10, 6, 15, 8, 12, 4]  # source tokens (with <eos>) + 2
    for out, lim in zip(greedy_decode(model, src, 1.0, 2), limits.tolist(), strict=True):
        assert len(out) <= lim
    for out, lim in zip(beam_search(model, src, 3, 1.0, 1.0, 2), limits.tolist(), strict=True):
        assert len(out) <= lim


def test_translate_ids_keeps_input_order(model, src):
    sources = [[5, 6, 7, 8, 9, 10, 11], [12], [13, 14, 15]]
    batched = translate_ids(model, sources, DecodeConfig(beam_size=1), max_tokens=5)
    one_by_one = [greedy_decode(model, source_tensor([s]))[0] for s in sources]
    assert batched == one_by_one


def test_decode_config_validation():
    with pytest.raises(ValueError, match="beam_size"):
        DecodeConfig(beam_size=0)
    with pytest.raises(ValueError, match="cannot both be 0"):
        DecodeConfig(max_len_ratio=0, max_len_extra=0)


def _other_model(seed: int, max_len: int = 64, vocab: int = 30) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(TransformerConfig(vocab, vocab, d_model=32, n_heads=4, d_ff=64, encoder_layers=1,
                                         decoder_layers=2, dropout=0.0, max_len=max_len)).eval()


def test_ensemble_step_is_the_log_of_the_mean_probability(model, src):
    from seq2seq.decoding import _StepDecoder

    other = _other_model(5)
    prefix = torch.tensor([[BOS_ID, 7, 9]] * src.size(0))
    expected = []
    for m in (model, other):
        memory, mask = m.encode(src)
        expected.append(torch.softmax(m.output(m.decode_hidden(prefix, memory, mask)[:, -1]), dim=-1))
    mean = (expected[0] + expected[1]) / 2
    got = _StepDecoder([model, other], src, use_cache=False)(prefix)
    torch.testing.assert_close(got, mean.log(), atol=1e-5, rtol=1e-5)
    cached = _StepDecoder([model, other], src, use_cache=True)
    for t in range(1, prefix.size(1) + 1):
        step = cached(prefix[:, :t])
    torch.testing.assert_close(step, mean.log(), atol=1e-5, rtol=1e-5)


def test_ensemble_of_copies_decodes_as_the_model_and_caches_like_uncached(model, src):
    assert greedy_decode([model, model], src) == greedy_decode(model, src)
    assert beam_search([model, model], src, beam_size=4) == beam_search(model, src, beam_size=4)
    pair = [model, _other_model(5)]
    greedy = greedy_decode(pair, src)
    assert greedy == greedy_decode(pair, src, use_cache=False)
    assert greedy != greedy_decode(model, src)  # the second model changed something
    beam = beam_search(pair, src, beam_size=4)
    assert beam == beam_search(pair, src, beam_size=4, use_cache=False)
    assert beam_search(pair, src, beam_size=1) == greedy


def test_ensemble_needs_one_vocabulary_and_takes_the_shortest_max_len(model, src):
    with pytest.raises(ValueError, match="share their vocabularies"):
        greedy_decode([model, _other_model(5, vocab=31)], src)
    with pytest.raises(ValueError, match="empty"):
        greedy_decode([], src)
    from seq2seq.decoding import InputTooLongError

    short = _other_model(5, max_len=8)
    assert len(translate_ids([model, short], [[5] * 7], DecodeConfig(beam_size=1))[0]) <= 7
    with pytest.raises(InputTooLongError):
        translate_ids([model, short], [[5] * 8], DecodeConfig(beam_size=1))
