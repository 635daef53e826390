"""The ``seq2seq`` command end to end on the embedded toy corpus."""

import pytest
from click.testing import CliRunner

from seq2seq.cli import main
from seq2seq.text import read_parallel, toy_corpus_paths

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """``seq2seq train`` with no data arguments (the embedded toy corpus, default settings)."""
    out = tmp_path_factory.mktemp("toy")
    result = CliRunner().invoke(main, ["train", "--out-dir", str(out), "--no-progress", "--threads", "1"])
    assert result.exit_code == 0, result.output
    return out, result.output


def test_default_train_translates_its_training_sentences(toy_run):
    out, output = toy_run
    assert "I want a beer." in output
    assert {p.name for p in out.iterdir()} >= {"best.pt", "last.pt"}
    pairs = read_parallel(*toy_corpus_paths())
    result = CliRunner().invoke(main, ["translate", "-c", str(out / "best.pt"), "--beam", "1",
                                       *pairs.src[:20]])
    assert result.exit_code == 0, result.output
    hyps = result.output.splitlines()
    assert sum(h == t for h, t in zip(hyps, pairs.tgt[:20], strict=True)) >= 18


def test_translate_from_file_and_stdin(toy_run, tmp_path):
    out, _ = toy_run
    ckpt = str(out / "best.pt")
    src = tmp_path / "in.de"
    src.write_text("Ich möchte ein Bier.\nDer Hund schläft.\n", encoding="utf-8")
    runner = CliRunner()
    from_file = runner.invoke(main, ["translate", "-c", ckpt, "-i", str(src)])
    from_stdin = runner.invoke(main, ["translate", "-c", ckpt],
                               input="Ich möchte ein Bier.\nDer Hund schläft.\n")
    assert from_file.exit_code == 0 and from_stdin.exit_code == 0, from_file.output + from_stdin.output
    assert from_file.output == from_stdin.output == "I want a beer.\nThe dog sleeps.\n"


def test_evaluate_prints_scores(toy_run, tmp_path):
    out, _ = toy_run
    result = CliRunner().invoke(main, ["evaluate", "-c", str(out / "best.pt"), "--beam", "3",
                                       "--json", str(tmp_path / "s.json")])
    assert result.exit_code == 0, result.output
    assert "BLEU = " in result.output and "chrF = " in result.output
    assert "tokenized lower-cased BLEU" in result.output
    import json

    scores = json.loads((tmp_path / "s.json").read_text())
    assert scores["bleu"] > 90 and scores["n_sentences"] == 120


def test_attention_and_positions_plots(toy_run, tmp_path):
    out, _ = toy_run
    result = CliRunner().invoke(main, ["attention", "Ich möchte ein Bier.", "-c", str(out / "best.pt"),
                                       "--out-dir", str(tmp_path / "att"), "--layer", "-1"])
    assert result.exit_code == 0, result.output
    assert "target: I want a beer." in result.output
    pngs = sorted(p.name for p in (tmp_path / "att").iterdir())
    assert pngs == ["cross_layer1_heads.png", "cross_layer1_mean.png", "decoder_self_layer1.png",
                    "encoder_self_layer1.png"]
    assert all((tmp_path / "att" / p).read_bytes()[:4] == b"\x89PNG" for p in pngs)
    result = CliRunner().invoke(main, ["positions", "-o", str(tmp_path / "pe.png"), "--dims", "0,1,6"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "pe.png").read_bytes()[:4] == b"\x89PNG"
    bad = CliRunner().invoke(main, ["positions", "-o", str(tmp_path / "x.png"), "--dims", "500"])
    assert bad.exit_code != 0 and "outside" in bad.output


def test_long_validation_pairs_unequal_depths_and_resume_errors(tmp_path):
    # The toy validation set has sentences longer than --max-len: they are cut for the loss.
    out = tmp_path / "short"
    runner = CliRunner()
    result = runner.invoke(main, ["train", "--out-dir", str(out), "--no-progress", "--epochs", "1",
                                  "--max-len", "8", "--encoder-layers", "2", "--decoder-layers", "1",
                                  "--d-model", "16", "--heads", "2", "--ff", "32"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["attention", "Ich möchte ein Bier.", "-c", str(out / "best.pt"),
                                  "--out-dir", str(tmp_path / "att")])
    assert result.exit_code == 0, result.output
    pngs = sorted(p.name for p in (tmp_path / "att").iterdir())
    assert pngs == ["cross_layer0_heads.png", "cross_layer0_mean.png", "decoder_self_layer0.png",
                    "encoder_self_layer0.png", "encoder_self_layer1.png"]
    result = runner.invoke(main, ["train", "--out-dir", str(out), "--no-progress", "--resume",
                                  str(out / "best.pt")])
    assert result.exit_code == 1 and "no training state" in result.output


def test_clear_errors(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"garbage")
    result = runner.invoke(main, ["translate", "-c", str(bad), "Hallo"])
    assert result.exit_code == 1 and "cannot read checkpoint" in result.output
    a, b = tmp_path / "a.de", tmp_path / "b.en"
    a.write_text("x\ny\n", encoding="utf-8")
    b.write_text("x\n", encoding="utf-8")
    result = runner.invoke(main, ["train", "--train-src", str(a), "--train-tgt", str(b), "--out-dir",
                                  str(tmp_path / "o")])
    assert result.exit_code == 1 and "a.de has 2 lines" in result.output and "b.en has 1" in result.output


@pytest.mark.parametrize("command", ["train", "translate", "evaluate", "attention", "positions"])
def test_help_lists_options(command):
    result = CliRunner().invoke(main, [command, "--help"])
    assert result.exit_code == 0
    assert "--device" in result.output or command == "positions"
    if command == "train":
        for opt in ("--tokenizer", "--joint-vocab", "--share-embeddings", "--positional", "--average-last",
                    "--resume", "--max-tokens", "--warmup", "--label-smoothing", "--seed"):
            assert opt in result.output
