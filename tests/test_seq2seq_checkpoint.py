"""Checkpoints: atomic save, weights-only load, clear errors, averaging, resume."""

import dataclasses

import pytest
import torch

from seq2seq.batching import ParallelDataset, source_tensor
from seq2seq.checkpoint import (
    CHECKPOINT_VERSION,
    CheckpointError,
    average_state_dicts,
    load_checkpoint,
    load_ensemble,
    load_model,
    save_checkpoint,
)
from seq2seq.decoding import greedy_decode
from seq2seq.model import Transformer, TransformerConfig
from seq2seq.tokenization import SubwordTokenizer, WordTokenizer
from seq2seq.training import TrainConfig, Trainer

SRC = ["ein hund läuft", "eine katze schläft", "der mann liest ein buch", "die frau trinkt tee"]
TGT = ["a dog runs", "a cat sleeps", "the man reads a book", "the woman drinks tea"]


pytestmark = pytest.mark.usefixtures("one_thread")


def _model(src_tok, tgt_tok, **kw):
    torch.manual_seed(0)
    return Transformer(TransformerConfig(src_tok.vocab_size, tgt_tok.vocab_size, d_model=16, n_heads=2,
                                         d_ff=32, encoder_layers=1, decoder_layers=1, **kw))


def test_save_load_round_trip_is_weights_only(tmp_path):
    src_tok = SubwordTokenizer.train(SRC * 5, vocab_size=40)
    tgt_tok = WordTokenizer.train(TGT)
    model = _model(src_tok, tgt_tok, positional="learned").eval()
    path = save_checkpoint(tmp_path / "sub" / "m.pt", model, src_tok, tgt_tok, meta={"note": "x"})
    assert [p.name for p in path.parent.iterdir()] == ["m.pt"]  # no temporary file left behind
    raw = torch.load(path, weights_only=True)  # plain data only: loads without pickled code
    assert raw["version"] == CHECKPOINT_VERSION and raw["meta"] == {"note": "x"}
    loaded = load_model(path)
    assert loaded.model.config == model.config
    assert loaded.src_tokenizer.encode(SRC[0]) == src_tok.encode(SRC[0])
    src = source_tensor(src_tok.encode_batch(SRC))
    tgt_in = src[:, :3].clamp(max=5)
    torch.testing.assert_close(loaded.model(src, tgt_in), model(src, tgt_in))


def test_unknown_version_corrupt_and_mismatched_checkpoints(sealed, tmp_path):
    tok = WordTokenizer.train(SRC + TGT)
    model = _model(tok, tok)
    path = save_checkpoint(tmp_path / "m.pt", model, tok, tok)
    data = torch.load(path, weights_only=True)

    data["version"] = 99
    torch.save(sealed(data), tmp_path / "v99.pt")
    with pytest.raises(CheckpointError, match=r"v99\.pt: checkpoint format version 99 is not supported"):
        load_model(tmp_path / "v99.pt")

    (tmp_path / "corrupt.pt").write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match=r"corrupt\.pt: cannot read checkpoint"):
        load_model(tmp_path / "corrupt.pt")

    torch.save({"state_dict": {}}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a seq2seq translation checkpoint"):
        load_model(tmp_path / "other.pt")

    data["version"] = CHECKPOINT_VERSION
    data["model_config"] = {**data["model_config"], "d_ff": 64}
    torch.save(sealed(data), tmp_path / "mismatch.pt")
    with pytest.raises(CheckpointError, match="weights do not match the saved config"):
        load_model(tmp_path / "mismatch.pt")

    data["model_config"] = {**data["model_config"], "d_ff": 32, "src_vocab_size": 7}
    torch.save(sealed(data), tmp_path / "vocab.pt")
    with pytest.raises(CheckpointError, match="tokenizer vocabularies"):
        load_model(tmp_path / "vocab.pt")

    with pytest.raises(CheckpointError, match="no such checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")


def test_average_state_dicts(tmp_path):
    tok = WordTokenizer.train(SRC + TGT)
    a, b = _model(tok, tok), _model(tok, tok)
    with torch.no_grad():
        for p in b.parameters():
            p.add_(1.0)
    pa = save_checkpoint(tmp_path / "a.pt", a, tok, tok)
    pb = save_checkpoint(tmp_path / "b.pt", b, tok, tok)
    avg = average_state_dicts([pa, pb])
    key = "encoder.layers.0.ff.linear1.weight"
    torch.testing.assert_close(avg[key], a.state_dict()[key] + 0.5)
    other = Transformer(TransformerConfig(tok.vocab_size, tok.vocab_size, d_model=16, n_heads=2, d_ff=64,
                                          encoder_layers=1, decoder_layers=1))
    pc = save_checkpoint(tmp_path / "c.pt", other, tok, tok)
    with pytest.raises(CheckpointError, match="cannot average"):
        average_state_dicts([pa, pc])


def test_load_ensemble_needs_one_tokenizer_pair(tmp_path):
    tok = WordTokenizer.train(SRC + TGT)
    upper = WordTokenizer.train([s.upper() for s in SRC + TGT])
    assert upper.vocab_size == tok.vocab_size  # same sizes: only the tokenizer check can tell
    pa = save_checkpoint(tmp_path / "a.pt", _model(tok, tok), tok, tok)
    pb = save_checkpoint(tmp_path / "b.pt", _model(tok, tok, max_len=32), tok, tok)
    pc = save_checkpoint(tmp_path / "c.pt", _model(upper, tok), upper, tok)
    loaded = load_ensemble([pa, pb])
    assert [m.model.config.max_len for m in loaded] == [256, 32]
    with pytest.raises(CheckpointError, match=r"c\.pt: its src tokenizer differs from that of .*a\.pt"):
        load_ensemble([pa, pc])


def _trainer(tmp_path, epochs, average_last=0, ema=(), **kw):
    src_tok, tgt_tok = WordTokenizer.train(SRC), WordTokenizer.train(TGT)
    model = _model(src_tok, tgt_tok)
    data = ParallelDataset(src_tok.encode_batch(SRC), tgt_tok.encode_batch(TGT))
    cfg = TrainConfig(epochs=epochs, max_tokens=12, lr=3e-3, warmup=5, seed=3, val_bleu=False,
                      progress=False, average_last=average_last, ema=ema, **kw)
    return Trainer(model, src_tok, tgt_tok, data, None, cfg, tmp_path)


def test_training_is_deterministic_and_resume_continues_exactly(tmp_path):
    straight = _trainer(tmp_path / "a", epochs=4)
    straight.fit()
    first = _trainer(tmp_path / "b", epochs=2)
    first.fit()
    resumed = _trainer(tmp_path / "c", epochs=4)
    resumed.resume(tmp_path / "b" / "last.pt")
    assert resumed.epoch == 2 and resumed.step == first.step
    resumed.fit()
    assert resumed.step == straight.step
    for (name, p), q in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(),
                            strict=True):
        torch.testing.assert_close(p, q, msg=name)
    again = _trainer(tmp_path / "d", epochs=4)
    again.fit()
    assert [r["train_loss"] for r in again.history] == [r["train_loss"] for r in straight.history]
    assert straight.history[-1]["train_loss"] < straight.history[0]["train_loss"]


def test_resume_takes_the_schedule_from_the_checkpoint_and_needs_training_state(tmp_path):
    first = _trainer(tmp_path / "a", epochs=1)
    first.fit()
    other = _trainer(tmp_path / "b", epochs=2)
    other.config = dataclasses.replace(other.config, lr=5.0, warmup=7)
    other.resume(tmp_path / "a" / "last.pt")
    assert (other.config.lr, other.config.warmup) == (3e-3, 5)
    with pytest.raises(CheckpointError, match="no training state"):
        other.resume(tmp_path / "a" / "best.pt")


def _recorded_lrs(trainer):
    lrs = []
    trainer.optimizer.register_step_pre_hook(lambda opt, *_: lrs.append(opt.param_groups[0]["lr"]))
    return lrs


def test_linear_schedule_decays_to_zero_at_the_end_of_the_budget_and_resumes(tmp_path):
    from seq2seq.training import linear_decay_lr

    assert linear_decay_lr(1, 1.0, 4, 0.0) == 0.25  # warm-up
    assert linear_decay_lr(8, 2.0, 4, 0.25) == 1.5  # 2 * (1 - 0.25)
    assert linear_decay_lr(8, 2.0, 4, 1.3) == 0.0
    straight = _trainer(tmp_path / "a", epochs=4, lr_schedule="linear")
    lrs = _recorded_lrs(straight)
    straight.fit()
    steps = straight.step
    expected = [3e-3 * min(s / 5, 1 - s / steps) for s in range(1, steps + 1)]
    assert lrs == pytest.approx(expected) and lrs[-1] == 0.0 and straight.progress == 1.0
    interrupted = _trainer(tmp_path / "b", epochs=4, lr_schedule="linear")

    def crash_in_epoch_3(*_):
        if interrupted.step > steps // 2:  # last.pt then holds epoch 2, half way through the decay
            raise KeyboardInterrupt

    interrupted.optimizer.register_step_pre_hook(crash_in_epoch_3)
    with pytest.raises(KeyboardInterrupt):
        interrupted.fit()
    resumed = _trainer(tmp_path / "c", epochs=4)  # the schedule comes from the checkpoint
    resumed.resume(tmp_path / "b" / "last.pt")
    assert resumed.config.lr_schedule == "linear"
    resumed.fit()
    for (name, p), q in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(),
                            strict=True):
        torch.testing.assert_close(p, q, msg=name)
    # With a time limit that binds first, the decay follows the clock: progress is the larger of
    # the step and time fractions, so the lr falls faster than the step fraction alone allows.
    timed = _trainer(tmp_path / "d", epochs=4, lr_schedule="linear", max_minutes=1e-6)
    timed_lrs = _recorded_lrs(timed)
    timed.fit()
    assert timed.step < steps and timed.progress == 1.0 and timed_lrs[-1] == 0.0
    with pytest.raises(ValueError, match="lr_schedule"):
        TrainConfig(lr_schedule="cosine")


def test_averaging_writes_averaged_checkpoint(tmp_path):
    trainer = _trainer(tmp_path, epochs=3, average_last=2)
    trainer.fit()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["averaged.pt", "best.pt", "epoch2.pt", "epoch3.pt", "last.pt"]
    avg = load_checkpoint(tmp_path / "averaged.pt")
    assert avg["meta"]["averaged"] == ["epoch2.pt", "epoch3.pt"]
    loaded = load_model(tmp_path / "averaged.pt")
    src = source_tensor(loaded.src_tokenizer.encode_batch(SRC))
    assert len(greedy_decode(loaded.model, src)) == 4


def test_ema_checkpoints_hold_the_moving_average_of_every_step_and_survive_resume(tmp_path):
    trainer = _trainer(tmp_path / "a", epochs=3, ema=(0.5, 0.9))
    seen = []
    trainer.optimizer.register_step_post_hook(
        lambda *_: seen.append({k: v.detach().clone() for k, v in trainer.model.state_dict().items()}))
    trainer.fit()
    assert len(seen) == trainer.step > 3
    for decay in (0.5, 0.9):
        expected = dict(seen[0])  # the first update copies the weights
        for state in seen[1:]:
            expected = {k: decay * expected[k] + (1 - decay) * state[k] for k in expected}
        saved = load_checkpoint(tmp_path / "a" / f"ema{decay:g}.pt")
        assert saved["meta"]["ema"] == decay and saved["meta"]["step"] == trainer.step
        for key, value in saved["model_state"].items():
            torch.testing.assert_close(value, expected[key], msg=key)
    assert not torch.equal(load_checkpoint(tmp_path / "a" / "ema0.9.pt")["model_state"]["output.weight"],
                           trainer.model.state_dict()["output.weight"])
    first = _trainer(tmp_path / "b", epochs=1, ema=(0.5, 0.9))
    first.fit()
    resumed = _trainer(tmp_path / "c", epochs=3, ema=(0.5, 0.9))
    resumed.resume(tmp_path / "b" / "last.pt")
    resumed.fit()
    for decay in (0.5, 0.9):
        a = load_checkpoint(tmp_path / "a" / f"ema{decay:g}.pt")["model_state"]
        c = load_checkpoint(tmp_path / "c" / f"ema{decay:g}.pt")["model_state"]
        for key in a:
            torch.testing.assert_close(a[key], c[key], msg=key)
    with pytest.raises(ValueError, match="ema decays"):
        TrainConfig(ema=(1.0,))


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    from seq2seq.core import atomic_write

    path = tmp_path / "bars.csv"
    with atomic_write(path, "w") as f:
        f.write("date,close\n2024-01-02,10.5\n")
    assert path.read_text(encoding="utf-8") == "date,close\n2024-01-02,10.5\n"
    with pytest.raises(RuntimeError, match="disk full"), atomic_write(path, "w") as f:
        f.write("date,close\n")
        raise RuntimeError("disk full")
    assert path.read_text(encoding="utf-8") == "date,close\n2024-01-02,10.5\n"  # untouched
    assert [p.name for p in tmp_path.iterdir()] == ["bars.csv"]  # no temporary file left


def _flip_middle(path, n: int = 14):
    raw = bytearray(path.read_bytes())
    mid = len(raw) // 2
    raw[mid:mid + n] = bytes(b ^ 0xFF for b in raw[mid:mid + n])
    path.write_bytes(bytes(raw))


def test_flipped_bytes_in_a_checkpoint_stop_with_corrupt(tmp_path, caplog):
    tok = WordTokenizer.train(SRC + TGT)
    path = save_checkpoint(tmp_path / "m.pt", _model(tok, tok), tok, tok)
    assert len(torch.load(path, weights_only=True)["sha256"]) == 64
    load_model(path)  # intact: loads
    _flip_middle(path)
    with pytest.raises(CheckpointError, match=r"m\.pt: checkpoint is corrupt"):
        load_model(path)
    # one weight changed and saved by hand (a valid torch file): the digest catches it
    good = save_checkpoint(tmp_path / "g.pt", _model(tok, tok), tok, tok)
    data = torch.load(good, weights_only=True)
    data["model_state"]["encoder.layers.0.ff.linear1.weight"][0, 0] += 1e-3
    torch.save(data, tmp_path / "edited.pt")
    with pytest.raises(CheckpointError, match=r"edited\.pt: checkpoint is corrupt"):
        load_model(tmp_path / "edited.pt")
    # a file from before digests loads with a warning that it cannot be checked
    del data["sha256"]
    data["model_state"]["encoder.layers.0.ff.linear1.weight"][0, 0] -= 1e-3
    torch.save(data, tmp_path / "old.pt")
    with caplog.at_level("WARNING"):
        load_model(tmp_path / "old.pt")
    assert "cannot be checked" in caplog.text


def test_averaged_checkpoint_carries_a_digest(tmp_path):
    tok = WordTokenizer.train(SRC + TGT)
    pa = save_checkpoint(tmp_path / "a.pt", _model(tok, tok), tok, tok)
    pb = save_checkpoint(tmp_path / "b.pt", _model(tok, tok), tok, tok)
    model = _model(tok, tok)
    model.load_state_dict(average_state_dicts([pa, pb]))
    avg = save_checkpoint(tmp_path / "avg.pt", model, tok, tok)
    load_model(avg)
    _flip_middle(avg)
    with pytest.raises(CheckpointError, match="corrupt"):
        load_model(avg)
