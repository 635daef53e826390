"""The translator's attention heatmaps: a colour bar of the weight, axis titles naming source
and target, square cells, and files written whole through atomic_write at twice the
resolution."""

from __future__ import annotations

import torch

import seq2seq.plots as plots


def test_attention_heatmap_has_colour_bar_axis_titles_and_square_cells(tmp_path, monkeypatch):
    kept = []
    save = plots.save_figure

    def keep(fig, path, *args, **kwargs):
        kept.append(fig)
        return save(fig, path, *args, **kwargs)

    monkeypatch.setattr(plots, "save_figure", keep)
    src, tgt = ["Ein", "Hund", ".", "<eos>"], ["A", "dog", ".", "<eos>"]
    w = torch.softmax(torch.randn(2, len(tgt), len(src)), -1)
    path = plots.plot_attention(w, tgt, src, tmp_path / "cross.png", "cross-attention, layer 0")
    assert path.read_bytes()[:4] == b"\x89PNG"
    fig = kept[-1]
    heads = [ax for ax in fig.axes if ax.get_images()]
    bars = [ax for ax in fig.axes if ax.get_ylabel() == "attention weight"]
    assert len(heads) == 2 and len(bars) == 1  # one colour bar shared by the heads
    assert heads[0].get_ylabel() == "target token being produced (query)"
    assert all(ax.get_xlabel() == "source token attended to (key)" for ax in heads)
    assert all(ax.get_aspect() == 1.0 for ax in heads)  # square cells
    plots.plot_attention(w[0], src, src, tmp_path / "enc.png", "encoder self-attention, layer 0")
    enc = [ax for ax in kept[-1].axes if ax.get_images()][0]
    assert enc.get_xlabel().startswith("source") and enc.get_ylabel().startswith("source")
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically: no temporary file left
