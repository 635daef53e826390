"""``seq2seq train --out-dir``: a folder that holds a run is refused, resumed or overwritten
(the forecaster's rule, :mod:`seq2seq.core.outputs`); ``translate`` warns about input the model
does not know; an unknown or unavailable ``--device`` is one ``Error:`` line before any work."""

import shutil

import pytest
import torch
from click.testing import CliRunner

from seq2seq.checkpoint import load_checkpoint
from seq2seq.cli import main
from seq2seq.core import MANIFEST, OutputError, atomic_write, check_output
from seq2seq.core.outputs import LOCK, release_lock

pytestmark = pytest.mark.usefixtures("one_thread")

# The smallest model that trains on the embedded toy corpus: one epoch of 4 batches, no BLEU.
TINY = ["--epochs", "1", "--d-model", "16", "--heads", "2", "--ff", "32", "--encoder-layers", "1",
        "--decoder-layers", "1", "--no-val-bleu", "--no-progress", "--threads", "1"]


def _train(out, *args):
    return CliRunner().invoke(main, ["train", "--out-dir", str(out), *TINY, *args])


def _errors(result) -> list[str]:
    """The non-blank lines of a failed command (stdout and stderr)."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "Usage:" not in result.output, result.output
    return [line for line in result.output.splitlines() if line.strip()]


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny") / "run"
    result = _train(out)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "best.pt", "last.pt"]
    return out


@pytest.fixture
def run(tiny_run, tmp_path):
    """A copy of the tiny run, for a test to reuse, resume or overwrite."""
    return shutil.copytree(tiny_run, tmp_path / "run")


def test_what_a_run_writes_is_overwritten_and_resuming_is_offered_only_when_possible(tmp_path):
    run = check_output(tmp_path / "run").claim()
    written = ("best.pt", "ema0.998.pt", "val_selection.txt", "test_scores.json", "train.log",
               "cross_layer0_mean.png")
    for name in written:
        with atomic_write(run / name, "w") as f:
            f.write("x")
    with pytest.raises(OutputError, match="--overwrite to remove its files and write a new run there, "
                                          "--resume X to continue it, or choose another folder$"):
        check_output(run, option="--out-dir", resume_with="--resume X")
    with pytest.raises(OutputError, match=r"^--out-dir \S+: already holds an earlier run \(6 entries: .*"
                                          "; pass --overwrite to remove its files and write a new run "
                                          "there, or choose another folder$"):
        check_output(run, option="--out-dir", resume_with=None)
    checked = check_output(run, overwrite=True)
    # removed only by claim(); the claimed folder is locked while this process holds it
    assert sorted(p.name for p in run.iterdir()) == sorted([*written, MANIFEST, LOCK])
    assert checked.claim() == run and sorted(p.name for p in run.iterdir()) == [LOCK, MANIFEST]
    release_lock(run)
    assert [p.name for p in run.iterdir()] == [MANIFEST]


def test_a_folder_with_a_run_is_refused_and_left_as_it_was(run):
    before = _snapshot(run)
    result = _train(run)
    assert _errors(result) == [
        f"Error: --out-dir {run}: already holds an earlier run (2 entries: best.pt, last.pt); pass "
        f"--overwrite to remove its files and write a new run there, --resume {run / 'last.pt'} to "
        "continue it, or choose another folder"]
    assert _snapshot(run) == before
    # Without a last.pt there is nothing to resume, and the message does not offer it.
    (run / "last.pt").unlink()
    errors = _errors(_train(run))
    assert "--overwrite" in errors[0] and "--resume" not in errors[0] and "best.pt" in errors[0]


def test_resume_continues_the_run_in_its_folder(run):
    result = _train(run, "--resume", str(run / "last.pt"), "--epochs", "2")
    assert result.exit_code == 0, result.output
    assert "trained 2 epochs, 8 steps" in result.output
    state = load_checkpoint(run / "last.pt")["train_state"]
    assert state["epoch"] == 2 and [r["epoch"] for r in state["history"]] == [1, 2]


def test_resume_from_elsewhere_needs_an_empty_or_overwritten_folder(run, tiny_run):
    """A checkpoint from another folder starts a new run: --out-dir must be empty (or overwritten)."""
    result = _train(run, "--resume", str(tiny_run / "last.pt"), "--epochs", "2")
    [error] = _errors(result)
    assert error.startswith(f"Error: --out-dir {run}: already holds an earlier run")
    assert f"(--resume {tiny_run / 'last.pt'} is not in {run}: it starts a new run there)" in error
    fresh = run.parent / "fresh"
    result = _train(fresh, "--resume", str(tiny_run / "last.pt"), "--epochs", "2")
    assert result.exit_code == 0, result.output
    assert load_checkpoint(fresh / "last.pt")["train_state"]["epoch"] == 2
    [error] = _errors(_train(run, "--resume", str(run / "last.pt"), "--overwrite"))
    assert error == ("Error: --overwrite and --resume contradict each other: resume continues the "
                     "earlier run, overwrite removes it")


def test_overwrite_replaces_the_earlier_run_files(run):
    assert _train(run, "--resume", str(run / "last.pt"), "--epochs", "2").exit_code == 0
    with atomic_write(run / "ema0.99.pt") as f:
        f.write(b"an earlier run's checkpoint")
    result = _train(run, "--overwrite")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in run.iterdir()) == [MANIFEST, "best.pt", "last.pt"]
    assert load_checkpoint(run / "last.pt")["train_state"]["epoch"] == 1  # a new run, not epoch 3


@pytest.mark.parametrize("bad, message", [
    (["--d-model", "15"], "even d_model"),  # a model option
    (["--train-src", "missing.de", "--train-tgt", "missing.en"], "no such file"),  # an input
    (["--share-embeddings"], "--share-embeddings needs --joint-vocab"),
    (["--resume", "{elsewhere}/best.pt"], "no training state"),  # a checkpoint, read after the check
])
def test_overwrite_that_fails_validation_leaves_the_earlier_run(run, tiny_run, bad, message):
    before = _snapshot(run)
    result = _train(run, "--overwrite", *(a.format(elsewhere=tiny_run) for a in bad))
    assert result.exit_code != 0 and message in result.output, result.output
    assert "Traceback" not in result.output
    assert _snapshot(run) == before


def test_overwrite_never_empties_a_folder_of_other_files_or_removes_an_input(run):
    (run / "notes.docx").write_text("mine")
    before = _snapshot(run)
    assert _errors(_train(run, "--overwrite")) == [
        f"Error: --out-dir {run}: holds 1 file(s) no run of this tool wrote: notes.docx. --overwrite "
        f"removes only the files a run lists in its {MANIFEST}, as written: move the others or choose "
        "another folder"]
    assert _snapshot(run) == before
    (run / "notes.docx").unlink()
    (run / "src.txt").write_text("a b\n")
    (run / "tgt.txt").write_text("c d\n")
    before = _snapshot(run)
    [error] = _errors(_train(run, "--overwrite", "--train-src", str(run / "src.txt"),
                             "--train-tgt", str(run / "tgt.txt")))
    assert error == (f"Error: --out-dir {run}: holds 2 file(s) no run of this tool wrote: src.txt, tgt.txt. "
                     f"--overwrite removes only the files a run lists in its {MANIFEST}, as written: move "
                     "the others or choose another folder")  # the inputs among them
    assert _snapshot(run) == before


def test_translate_warns_about_mostly_unknown_lines(tiny_run, tmp_path):
    ckpt = str(tiny_run / "best.pt")
    # 4 tokens: 3 unknown (75%), 2 unknown (50%: not most), all known.
    result = CliRunner().invoke(main, ["translate", "-c", ckpt, "--beam", "1", "Xyz qqq zzz.",
                                       "Der Hund xyz qqq", "Ich möchte ein Bier."])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "Warning: argument 1: 3 of 4 tokens (75%) are unknown to the model; its translation is unreliable"]
    assert len(result.stdout.splitlines()) == 3  # still translated, one line each
    src = tmp_path / "in.de"
    src.write_text("Ich möchte ein Bier.\n\nblub blab blob\n", encoding="utf-8")
    for args, where in ((["-i", str(src)], f"{src}: line 3"), ([], "<stdin>: line 3")):
        result = CliRunner().invoke(main, ["translate", "-c", ckpt, "--beam", "1", *args],
                                    input=src.read_text(encoding="utf-8"))
        assert result.exit_code == 0, result.output
        assert result.stderr.splitlines() == [
            f"Warning: {where}: 3 of 3 tokens (100%) are unknown to the model; its translation is "
            "unreliable"]
    many = tmp_path / "many.de"
    many.write_text("blub\n" * 12, encoding="utf-8")
    result = CliRunner().invoke(main, ["translate", "-c", ckpt, "--beam", "1", "-i", str(many)])
    warnings = result.stderr.splitlines()
    assert len(warnings) == 11 and warnings[-1] == ("Warning: 2 more lines are mostly unknown tokens "
                                                    "(12 of 12 in all)")


UNAVAILABLE = [d for d, there in (("cuda", torch.cuda.is_available()),
                                  ("mps", torch.backends.mps.is_available())) if not there]


@pytest.mark.parametrize("device", ["gpu", "meta", *UNAVAILABLE])
@pytest.mark.parametrize("command", ["train", "translate", "evaluate", "attention"])
def test_bad_device_is_one_error_line_before_any_work(tiny_run, tmp_path, command, device):
    ckpt = str(tiny_run / "best.pt")
    args = {"train": ["train", "--out-dir", str(tmp_path / "out"), *TINY],
            "translate": ["translate", "-c", ckpt, "-o", str(tmp_path / "out" / "t.txt"), "Hallo"],
            "evaluate": ["evaluate", "-c", ckpt, "--json", str(tmp_path / "out" / "s.json")],
            "attention": ["attention", "Hallo", "-c", ckpt, "--out-dir", str(tmp_path / "out")]}[command]
    [error] = _errors(CliRunner().invoke(main, [*args, "--device", device]))
    assert error.startswith("Error: --device: ") and repr(device) in error, error
    assert ("unknown device" in error) == (device in ("gpu", "meta")), error
    assert not (tmp_path / "out").exists()  # nothing written
