"""`forecaster plot` on a panel run: every figure it can draw, and the one it cannot named with
the reason (a model trained to the data's last day has no day to score out of sample);
next_day.png shows the stocks' names where the data carry them and marks the stocks at a price
limit on the signal day and those held; the training plot names its loss and marks the chosen
epoch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

import forecaster.reporting.plots as plots
from forecaster.app.cli import main
from forecaster.data import write_synthetic_panel

NAMES = ["浦发银行", "平安银行", "万科A", "招商银行", "贵州茅台", "中国平安", "宁德时代", "比亚迪"]
TINY = ["--window", "8", "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "2", "--n-seeds", "1"]


def _folder(tmp_path):
    """Eight synthetic stocks whose files carry a name column; the first closes at limit-up on
    the last day."""
    folder = tmp_path / "data"
    write_synthetic_panel(folder, n_stocks=8, n_days=220, signal_ic=0.1, seed=4)
    files = sorted(folder.glob("*.csv"))
    names = {}
    for i, path in enumerate(files):
        frame = pd.read_csv(path)
        frame["name"] = NAMES[i]
        if i == 0:
            up = round(frame["preclose"].iloc[-1] * 1.1, 2)
            frame.loc[frame.index[-1], ["close", "high"]] = [up, up]
        frame.to_csv(path, index=False)
        names[str(frame["code"].iloc[0])] = NAMES[i]
    return folder, names


def test_plot_names_what_it_cannot_draw_and_marks_the_list(tmp_path, monkeypatch):
    folder, names = _folder(tmp_path)
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(folder), "--out", str(run), *TINY])  # to the last day
    assert res.exit_code == 0, res.output
    drawn = {}
    ranked, training = plots.plot_ranked_list, plots.plot_panel_training

    def keep_ranked(table, path, **kwargs):
        drawn["table"] = table.copy()
        return ranked(table, path, **kwargs)

    def keep_training(histories, path, **kwargs):
        drawn["training"] = kwargs
        return training(histories, path, **kwargs)

    monkeypatch.setattr(plots, "plot_ranked_list", keep_ranked)
    monkeypatch.setattr(plots, "plot_panel_training", keep_training)
    held = sorted(names)[3]
    (tmp_path / "h.csv").write_text(f"code,shares\n{held},1000\ncash,10000\n")
    res = CliRunner().invoke(main, ["plot", "--run", str(run), "--holdings", str(tmp_path / "h.csv")])
    assert res.exit_code == 0, res.output
    assert (run / "training.png").is_file() and (run / "next_day.png").is_file()
    assert not (run / "rolling_ic.png").exists()
    assert "rolling_ic.png not written" in res.output and "after that" in res.output
    table = drawn["table"].set_index("code")
    assert table["name"].to_dict() == {c: names[c] for c in table.index if c in names}
    first = sorted(names)[0]
    assert table.loc[first, "at_limit"] == "up" and (table["at_limit"] != "").sum() == 1
    assert table["held"].to_dict() == {c: c == held for c in table.index}
    assert drawn["training"]["loss"] and drawn["training"]["best_epochs"]


def test_ranked_list_labels_names_held_and_limits(tmp_path):
    table = pd.DataFrame({"code": ["sh.600000", "sz.000001", "sz.000002"], "score": [0.5, 0.1, -0.3],
                          "rank": [1, 2, 3], "buyable": [False, True, True],
                          "name": ["浦发银行", "", "万科A"], "held": [False, True, False],
                          "at_limit": ["up", "", "down"]})
    assert plots.ranked_list_labels(table) == ["1. sh.600000 浦发银行", "2. sz.000001 [held]",
                                               "3. sz.000002 万科A"]
    title = plots.ranked_list_title(table)
    assert "[held]: in the book" in title and "closed at the limit on the signal day" in title
    plots.plot_ranked_list(table, tmp_path / "next_day.png")
    assert (tmp_path / "next_day.png").read_bytes()[:4] == b"\x89PNG"


def test_stock_names_draw_with_the_shipped_cjk_font(tmp_path):
    """The names render on any machine: the packaged Noto Sans CJK is registered and drawing
    Chinese names warns of no missing glyph (in a fresh process, so that no font another test
    loaded decides it)."""
    script = f"""
import logging, warnings
logging.basicConfig(level=logging.WARNING)
import numpy as np
import matplotlib.pyplot as plt
from forecaster.reporting import figures
assert figures.CJK_FONT == "Noto Sans CJK SC", figures.CJK_FONT
assert "manimgx_fonts_cjk" in __import__("matplotlib").font_manager.findfont("Noto Sans CJK SC")
def ink(text, family):
    fig = plt.figure(figsize=(3, 0.5), dpi=100)
    fig.text(0.02, 0.3, text, family=family, fontsize=14)
    fig.canvas.draw()
    arr = np.asarray(fig.canvas.buffer_rgba())[..., 0] < 128
    plt.close(fig)
    return arr
with warnings.catch_warnings():
    warnings.simplefilter("error")  # "Glyph ... missing from font(s)" is a UserWarning
    drawn = ink("浦发银行 宁德时代", list(__import__("matplotlib").rcParams["font.family"]))
    __import__("forecaster.reporting.plots").reporting.plots.plot_ranked_list(__import__("pandas").DataFrame({{
        "code": ["sh.600000", "sz.300750"], "score": [0.2, -0.1], "rank": [1, 2], "buyable": [True, True],
        "name": ["浦发银行", "宁德时代"]}}), r"{tmp_path / 'next_day.png'}")
assert drawn.sum() > 200, drawn.sum()
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Failed to find font" not in res.stderr and "missing from font" not in res.stderr, res.stderr
    assert (tmp_path / "next_day.png").stat().st_size > 1000


def test_predict_and_plot_draw_one_next_day_figure(tmp_path, monkeypatch):
    """predict and plot of the same run, data and book draw next_day.png by one function from
    equal inputs: names, [held], and the note on a held stock without a score in both."""
    folder, names = _folder(tmp_path)
    codes = sorted(names)
    new = codes[5]  # listed five days ago: too new for the model's window, no score
    for path in folder.glob("*.csv"):
        frame = pd.read_csv(path)
        if frame["code"].iloc[0] == new:
            frame.iloc[-5:].to_csv(path, index=False)
    run = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(folder), "--out", str(run), *TINY])
    assert res.exit_code == 0, res.output
    book = tmp_path / "h.csv"
    book.write_text(f"code,shares\n{codes[3]},1000\n{new},500\ncash,10000\n")
    calls = []
    ranked = plots.plot_ranked_list

    def keep(table, path, **kwargs):
        calls.append((table.copy(), Path(path).name, kwargs))
        return ranked(table, path, **kwargs)

    monkeypatch.setattr(plots, "plot_ranked_list", keep)
    said = []
    for command in ("predict", "plot"):
        res = CliRunner().invoke(main, [command, "--run", str(run), str(folder), "--holdings", str(book)])
        assert res.exit_code == 0, res.output
        said.append([line for line in res.output.splitlines() if line.startswith("next_day.png: ")])
    assert len(calls) == 2
    (table, path, kwargs), (table_plot, path_plot, kwargs_plot) = calls
    pd.testing.assert_frame_equal(table, table_plot)
    assert path == path_plot == "next_day.png" and kwargs == kwargs_plot
    assert said[0] == said[1] and len(said[0]) == 1 and new in said[0][0] and "too new" in said[0][0]
    labels = plots.ranked_list_labels(table.dropna(subset=["score"]))
    assert any(names[codes[3]] in label and label.endswith("[held]") for label in labels)
    assert all(names[c] in label for c, label in zip(table.dropna(subset=["score"])["code"], labels,
                                                      strict=True))
    title = plots.ranked_list_title(table, signal_date=kwargs["signal_date"])
    assert f"held stock has no score, not shown: {new} (too new" in title
    assert f"for the open of {table['trade_date'].iloc[0]}" in title
