"""No command loses a user's file or mixes outputs of two runs (issue 49): ``--overwrite``
removes only what a run of this tool wrote, known from its manifest, never by suffix; predict
never leaves orders of another signal day beside a new list; plot and compare never write inside
their inputs, and compare never replaces a file without ``--overwrite``."""

from __future__ import annotations

import pandas as pd
import pytest
from test_forecaster_trust import QUICK, _digests, _invoke

from forecaster.data import write_synthetic_panel
from seq2seq.core.outputs import MANIFEST, ownership, read_manifest


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A data folder of 6 stocks, a report of it, and a trained panel run."""
    root = tmp_path_factory.mktemp("files")
    write_synthetic_panel(root / "data", n_stocks=6, n_days=260, seed=4)
    res = _invoke("backtest", root / "data", "--out", root / "rep", *QUICK, "--top-k", "50")
    assert res.exit_code == 0, res.output
    root.joinpath("backtest_output.txt").write_text(res.output)
    res = _invoke("train", root / "data", "--out", root / "run", *QUICK[:8])
    assert res.exit_code == 0, res.output
    return root


def test_every_file_a_backtest_writes_is_in_its_manifest(root):
    owned = ownership(root / "rep")
    assert owned.foreign == () and owned.changed == ()
    listed = read_manifest(root / "rep")
    assert {"report.html", "metrics.json", "experiment.toml", "predictions.csv"} <= set(listed)
    assert any(name.startswith("folds/") for name in listed)
    assert ownership(root / "run").foreign == ()  # train's files too


def test_top_k_at_or_above_the_universe_warns(root):
    text = root.joinpath("backtest_output.txt").read_text()
    assert "--top-k 50 is at or above the 6 stocks of the universe" in text


@pytest.mark.parametrize("user_files", [
    ("sh.600000.csv", "sz.000001.csv", "holdings.csv"),  # a folder of the user's data, never a run
    ("notes.txt",),  # a note beside an earlier report
])
def test_overwrite_never_deletes_a_users_file(root, tmp_path, user_files):
    out = tmp_path / "out"
    if user_files == ("notes.txt",):
        import shutil

        shutil.copytree(root / "rep", out)
    else:
        out.mkdir()
    for name in user_files:
        (out / name).write_text("code,shares\nsh.600000,100\n")
    before = _digests(out)
    res = _invoke("backtest", root / "data", "--out", out, "--overwrite", *QUICK)
    assert res.exit_code == 1, res.output
    assert res.output.count("Error:") == 1 and "Traceback" not in res.output
    # beside a report: not listed in its manifest; a folder with no manifest: nothing can be told apart
    said = "no run of this tool wrote" if user_files == ("notes.txt",) else "cannot be told from yours"
    assert f"{said}: {', '.join(sorted(user_files))}" in res.output
    assert _digests(out) == before


def test_predict_never_leaves_orders_of_another_signal_day(root, tmp_path):
    run = tmp_path / "run"
    import shutil

    shutil.copytree(root / "run", run)
    res = _invoke("predict", "--run", run, root / "data", "--capital", "1e6")
    assert res.exit_code == 0, res.output
    assert (run / "orders.csv").exists()
    # A later list without --capital: the orders of the earlier list go, and the command says so.
    res = _invoke("predict", "--run", run, root / "data")
    assert res.exit_code == 0, res.output
    assert f"removed {run / 'orders.csv'} (orders for the signal day" in res.output
    assert not (run / "orders.csv").exists() and (run / "next_day.csv").exists()
    # An orders file this command did not write is never removed: refused before anything is written.
    (run / "orders.csv").write_text("code,side,shares\nsh.600000,buy,100\n")
    before = _digests(run)
    res = _invoke("predict", "--run", run, root / "data")
    assert res.exit_code == 1 and "orders this command did not write" in res.output, res.output
    assert _digests(run) == before
    # A list written over a user's file needs --overwrite.
    mine = tmp_path / "mine.csv"
    mine.write_text("mine\n")
    res = _invoke("predict", "--run", run, root / "data", "--out", mine)
    assert res.exit_code == 1 and "already exists; pass --overwrite" in res.output
    assert mine.read_text() == "mine\n"


def test_plot_and_compare_never_write_inside_an_input_or_over_a_file(root, tmp_path):
    data_before = _digests(root / "data")
    res = _invoke("plot", "--run", root / "run", root / "data", "--out", root / "data")
    assert res.exit_code == 1 and "would write over or inside the input" in res.output, res.output
    res = _invoke("compare", root / "rep", "--out", root / "rep" / "cmp.csv")
    assert res.exit_code == 1 and "would write over or inside the input" in res.output, res.output
    assert _digests(root / "data") == data_before
    cmp = tmp_path / "cmp.csv"
    _refused_then_replaced(["compare", root / "rep"], cmp)
    assert "transformer" in pd.read_csv(cmp).to_string()


def _refused_then_replaced(command: list, out) -> None:
    """``command --out OUT`` over a user's file refuses and leaves it as it was; with
    ``--overwrite`` it replaces it."""
    out.write_text("a user's file\n")
    res = _invoke(*command, "--out", out)
    assert res.exit_code == 1 and "already exists; pass --overwrite" in res.output, res.output
    assert out.read_text() == "a user's file\n"
    res = _invoke(*command, "--out", out, "--overwrite")
    assert res.exit_code == 0, res.output


def test_the_manifest_lists_what_was_written_with_its_digest(tmp_path):
    from seq2seq.core import atomic_write, check_output
    from seq2seq.core.outputs import file_digest, remove_own_file

    out = check_output(tmp_path / "o").claim()
    assert (out / MANIFEST).is_file()
    with atomic_write(out / "a.csv", "w") as f:
        f.write("x\n")
    assert read_manifest(out) == {"a.csv": file_digest(out / "a.csv")}
    (out / "b.csv").write_text("y\n")  # not written by a run
    assert not remove_own_file(out / "b.csv") and (out / "b.csv").exists()
    assert remove_own_file(out / "a.csv") and not (out / "a.csv").exists()
    # outside a claimed folder nothing is recorded (and nothing is removed)
    with atomic_write(tmp_path / "loose.csv", "w") as f:
        f.write("z\n")
    assert not remove_own_file(tmp_path / "loose.csv")


def test_export_qlib_and_fetch_never_replace_a_users_file_without_overwrite(root, tmp_path):
    mine = tmp_path / "pred.pkl"
    _refused_then_replaced(["export-qlib", root / "rep"], mine)
    assert pd.read_pickle(mine).columns.tolist() == ["score"]
    # the report's own default export is replaced freely: it is in the report's manifest
    for _ in range(2):
        assert _invoke("export-qlib", root / "rep").exit_code == 0
    csv = tmp_path / "sh.600000.csv"
    csv.write_text("date,close\n")
    # refused before going online
    res = _invoke("fetch", "sh.600000", "--start", "2024-01-02", "--end", "2024-01-05", "--out", csv)
    assert res.exit_code == 1 and "already exists; pass --overwrite" in res.output, res.output
    assert csv.read_text() == "date,close\n"


def test_plot_replaces_its_own_figures_and_refuses_a_users_file(root, tmp_path):
    out = tmp_path / "figs"
    for _ in range(2):  # its own earlier figures: replaced
        res = _invoke("plot", "--run", root / "run", root / "data", "--out", out)
        assert res.exit_code == 0, res.output
    (out / "training.png").write_bytes(b"a user's picture")
    res = _invoke("plot", "--run", root / "run", root / "data", "--out", out)
    assert res.exit_code == 1 and "training.png: already exists; pass --overwrite" in res.output, res.output
    res = _invoke("plot", "--run", root / "run", root / "data", "--out", out, "--overwrite")
    assert res.exit_code == 0 and (out / "training.png").read_bytes() != b"a user's picture", res.output
