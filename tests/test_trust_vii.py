"""Issue 85 (trust VII): no file, folder or state a user meets can stall the tool, lose a report
or mislead. Each case is planted, and each refusal is one line naming the file and the cause."""

from __future__ import annotations

import time

import pytest
import torch
from click.testing import CliRunner

from test_forecaster_trust import QUICK, _digests, _invoke

from forecaster.data import write_synthetic_panel
from seq2seq.cli import main as seq2seq_main
from seq2seq.core.checkpoint import CheckpointError, load_checkpoint

PANEL_KIND = "forecaster.PanelTransformer"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A data folder of 6 stocks, a report of it and a trained panel run."""
    root = tmp_path_factory.mktemp("trust7")
    write_synthetic_panel(root / "data", n_stocks=6, n_days=260, seed=4)
    res = _invoke("backtest", root / "data", "--out", root / "rep", *QUICK)
    assert res.exit_code == 0, res.output
    res = _invoke("train", root / "data", "--out", root / "run", *QUICK[:8])
    assert res.exit_code == 0, res.output
    return root


def _save(obj, path):
    """torch.save, with the stack a deeply nested payload needs to be written at all."""
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        torch.save(obj, path)
    finally:
        sys.setrecursionlimit(limit)


def _one_line(res):
    assert res.exit_code != 0, res.output
    assert "Traceback" not in res.output and res.output.count("Error") == 1, res.output
    return res.output


# ------------------------------------------------------------------ 1, 3: checkpoints


def _doubling(levels):
    x = [1]
    for _ in range(levels):
        x = [x, x]  # each level refers to the one below twice: 2**levels visits, a few bytes
    return x


def _nested(levels):
    x = []
    for _ in range(levels):
        x = [x]
    return x


class _RunsCode:
    def __reduce__(self):
        import os

        return (os.system, ("true",))


@pytest.mark.parametrize("payload, message", [
    (_doubling(40), "unfold into more than"),
    (_doubling(64), "nest deeper than 64 levels"),
    (_nested(20_000), "nest deeper than 64 levels"),
    ([torch.zeros(100_000)] * 10_000, "bytes of tensors and text"),
])
@pytest.mark.parametrize("kind", ["seq2seq translation", PANEL_KIND])
def test_a_checkpoint_that_unfolds_without_end_is_refused_within_a_second(tmp_path, payload, message, kind):
    path = tmp_path / "m.pt"
    _save({"kind": kind, "version": 1, "sha256": "0" * 64, "meta": payload}, path)
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(path, kind, (1,))
    assert time.perf_counter() - start < 1.0


def test_a_checkpoint_that_asks_to_run_code_is_called_so_and_never_advised_open(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"kind": "seq2seq translation", "version": 1, "x": _RunsCode()}, path)
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path, "seq2seq translation", (1,))
    text = str(err.value)
    assert "asks to run code (posix.system)" in text or "asks to run code (nt.system)" in text
    assert "weights_only" not in text and "corrupt" not in text


def test_the_commands_refuse_a_bomb_in_one_line(root, tmp_path):
    import shutil

    from forecaster.app.cli import main as forecaster_main

    bomb = tmp_path / "bomb.pt"
    _save({"kind": "seq2seq translation", "version": 1, "sha256": "0", "m": _doubling(40)}, bomb)
    res = CliRunner().invoke(seq2seq_main, ["translate", "-c", str(bomb), "Hallo"])
    assert res.exit_code != 0 and "unfold into more than" in res.output and "Traceback" not in res.output
    run = tmp_path / "run"
    shutil.copytree(root / "run", run)
    _save({"kind": PANEL_KIND, "version": 1, "sha256": "0", "m": _nested(20_000)}, run / "model.pt")
    res = CliRunner().invoke(forecaster_main, ["predict", "--run", str(run), str(root / "data")])
    assert "nest deeper than 64 levels" in _one_line(res)
