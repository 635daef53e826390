"""The ``seq2seq`` command end to end on the embedded toy corpus."""

import pytest
import torch
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


def _translate_lines(ckpt, lines):
    """The CLI's translation of each line on its own (one TEXT argument per call)."""
    outs = []
    for line in lines:
        result = CliRunner().invoke(main, ["translate", "-c", ckpt, "--beam", "1", line])
        assert result.exit_code == 0, result.output
        outs.append(result.output.rstrip("\n"))
    return outs


def test_translate_blank_lines_give_blank_lines(toy_run, tmp_path):
    out, _ = toy_run
    ckpt = str(out / "best.pt")
    src = tmp_path / "in.de"
    src.write_text("\nIch möchte ein Bier.\n   \n\t\nDer Hund schläft.\n\n", encoding="utf-8")
    runner = CliRunner()
    from_file = runner.invoke(main, ["translate", "-c", ckpt, "-i", str(src)])
    from_stdin = runner.invoke(main, ["translate", "-c", ckpt], input=src.read_text(encoding="utf-8"))
    args = runner.invoke(main, ["translate", "-c", ckpt, "", "Der Hund schläft.", " "])
    assert from_file.output == from_stdin.output == "\nI want a beer.\n\n\nThe dog sleeps.\n\n"
    assert args.output == "\nThe dog sleeps.\n\n"
    only_blank = tmp_path / "blank.de"
    only_blank.write_text("\n  \n", encoding="utf-8")
    result = runner.invoke(main, ["translate", "-c", ckpt, "-i", str(only_blank)])
    assert result.exit_code == 0 and result.output == "\n\n"


def test_translate_long_line_is_an_error_naming_file_and_line(toy_run, tmp_path):
    out, _ = toy_run
    ckpt = str(out / "best.pt")
    src = tmp_path / "long.de"  # the toy model has max_len 256: at most 255 source tokens
    src.write_text("Ich möchte ein Bier.\n\n" + "Bier " * 300 + "\nDer Hund schläft.\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["translate", "-c", ckpt, "-i", str(src), "-o", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert f"Error: {src}: line 3: too long: 300 source tokens, but the model takes at most 255" \
        in result.output
    assert not (tmp_path / "o").exists()
    result = CliRunner().invoke(main, ["translate", "-c", ckpt], input=src.read_text(encoding="utf-8"))
    assert result.exit_code == 1 and "<stdin>: line 3: too long" in result.output
    result = CliRunner().invoke(main, ["translate", "-c", ckpt, "Hallo", "Bier " * 300])
    assert result.exit_code == 1 and "argument 2: too long: 300 source tokens" in result.output
    ref = tmp_path / "long.en"
    ref.write_text("I want a beer.\n\nbeer\nThe dog sleeps.\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["evaluate", "-c", ckpt, "--src", str(src), "--ref", str(ref)])
    assert result.exit_code == 1 and f"{src}: line 3: too long" in result.output


def test_translate_file_keeps_one_line_per_input_line_in_order(toy_run, tmp_path):
    out, _ = toy_run
    ckpt = str(out / "best.pt")
    pairs = read_parallel(*toy_corpus_paths())
    # Lengths that sorting reorders, blank lines, unknown characters, a stray \r inside a line;
    # --max-tokens 24 makes several batches.
    lines = [pairs.src[i] for i in (7, 3, 60, 0, 100, 31)]
    lines.insert(2, "")
    lines.insert(5, "Ich möchte 😀 ein ☃ Bier.")
    lines.insert(6, "Der Hund\rschläft.")
    src = tmp_path / "in.de"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["translate", "-c", ckpt, "--beam", "1", "--max-tokens", "24",
                                       "-i", str(src), "-o", str(tmp_path / "out.en")])
    assert result.exit_code == 0, result.output
    written = (tmp_path / "out.en").read_text(encoding="utf-8")
    assert written.count("\n") == len(lines) and written.endswith("\n")
    assert written.split("\n")[:-1] == _translate_lines(ckpt, lines)
    assert written.split("\n")[2] == "" and written.split("\n")[0] == pairs.tgt[7]


def test_translate_output_line_breaks_become_spaces(sealed, toy_run, tmp_path):
    out, _ = toy_run
    data = torch.load(out / "best.pt", weights_only=True)
    itos = data["tokenizers"]["tgt"]["itos"]
    itos[itos.index("beer")] = "be\ner"  # a target vocabulary with a line break in a token
    torch.save(sealed(data), tmp_path / "nl.pt")
    src = tmp_path / "in.de"
    src.write_text("Ich möchte ein Bier.\nDer Hund schläft.\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["translate", "-c", str(tmp_path / "nl.pt"), "-i", str(src)])
    assert result.exit_code == 0, result.output
    assert result.output == "I want a be er.\nThe dog sleeps.\n"


def test_evaluate_several_test_sets(toy_run, tmp_path):
    out, _ = toy_run
    pairs = read_parallel(*toy_corpus_paths())
    sets = []
    for name, lo, hi in (("first", 0, 30), ("second", 30, 40)):
        s, r = tmp_path / f"{name}.de", tmp_path / f"{name}.en"
        s.write_text("\n".join(pairs.src[lo:hi]) + "\n", encoding="utf-8")
        r.write_text("\n".join(pairs.tgt[lo:hi]) + "\n", encoding="utf-8")
        sets.append((s, r))
    args = ["evaluate", "-c", str(out / "best.pt"), "--beam", "1", "--json", str(tmp_path / "s.json")]
    for s, r in sets:
        args += ["--src", str(s), "--ref", str(r), "-o", str(s.with_suffix(".hyp"))]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.output.splitlines()]
    header = next(i for i, row in enumerate(rows) if row[:2] == ["test", "set"])
    assert rows[header + 1][:2] == [str(sets[0][0]), "30"] and rows[header + 2][:2] == [str(sets[1][0]), "10"]
    assert float(rows[header + 1][2]) > 90  # BLEU
    import json

    scores = json.loads((tmp_path / "s.json").read_text())
    assert [(s["src"], s["n_sentences"]) for s in scores["sets"]] == [(str(sets[0][0]), 30),
                                                                     (str(sets[1][0]), 10)]
    assert scores["sets"][0]["bleu"] == pytest.approx(float(rows[header + 1][2]), abs=0.01)
    assert len(sets[1][0].with_suffix(".hyp").read_text(encoding="utf-8").splitlines()) == 10
    bad = CliRunner().invoke(main, ["evaluate", "-c", str(out / "best.pt"), "--src", str(sets[0][0]),
                                    "--src", str(sets[1][0]), "--ref", str(sets[0][1])])
    assert bad.exit_code == 2 and "got 2 --src and 1 --ref" in bad.output


def test_evaluate_and_translate_with_an_ensemble_of_checkpoints(toy_run, tmp_path):
    out, _ = toy_run
    best, last = str(out / "best.pt"), str(out / "last.pt")
    json_out = tmp_path / "s.json"
    result = CliRunner().invoke(main, ["evaluate", "-c", best, "-c", last, "--beam", "2",
                                       "--json", str(json_out)])
    assert result.exit_code == 0, result.output
    import json

    scores = json.loads(json_out.read_text())
    assert scores["checkpoint"] == f"{best} + {last}" and scores["bleu"] > 90
    both = CliRunner().invoke(main, ["translate", "-c", best, "-c", best, "Ich möchte ein Bier."])
    assert both.exit_code == 0 and both.output == "I want a beer.\n", both.output
    missing = CliRunner().invoke(main, ["translate", "-c", best, "-c", str(tmp_path / "no.pt"), "Hallo"])
    assert missing.exit_code == 1 and "no.pt" in missing.output


def test_sweep_decoding_names_the_best_checkpoint_for_the_recipe(toy_run):
    """scripts/train_multi30k.sh keeps the checkpoint named on the sweep's ``# best:`` line."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    out, _ = toy_run
    src, ref = toy_corpus_paths()
    ckpts = [str(out / "best.pt"), str(out / "last.pt")]
    script = Path(__file__).resolve().parents[1] / "scripts" / "sweep_decoding.py"
    proc = subprocess.run([sys.executable, str(script), *ckpts, "--src", str(src), "--ref", str(ref),
                           "--beams", "1,2", "--length-penalties", "1.0", "--threads", "1"],
                          capture_output=True, text=True, check=True)
    rows = [line for line in proc.stdout.splitlines() if line.startswith("decode ")]
    assert len(rows) == 4  # 2 checkpoints x (greedy, beam 2)
    bleus = [float(re.search(r" bleu=([\d.]+)", row).group(1)) for row in rows]
    best = re.search(r"^# best: (.*) beam .*\(validation BLEU ([\d.]+)\)$", proc.stdout, re.M)
    assert best is not None and best.group(1) in ckpts
    assert float(best.group(2)) == max(bleus) > 90
