"""``seq2seq attention`` and ``seq2seq positions``: figures of a model's attention and of the
sinusoidal position encoding."""

from __future__ import annotations

from pathlib import Path

import click

from .options import DEFAULT_CHECKPOINT, common_options, load_model, pick_device, setup


@click.command()
@click.argument("sentence")
@click.option("-c", "--checkpoint", default=DEFAULT_CHECKPOINT, show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="Model checkpoint.")
@click.option("--target", help="Translation to show attention for (teacher-forced). Default: the "
                               "model's own greedy translation.")
@click.option("--out-dir", default=Path("runs") / "attention", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Folder for the PNG files.")
@click.option("--layer", type=int, default=None,
              help="Only this layer (0-based; negative counts from the end). Default: all layers.")
@click.option("--self-attention/--no-self-attention", default=True, show_default=True,
              help="Also plot encoder and decoder self-attention per layer and head.")
@common_options
def attention(sentence, checkpoint, target, out_dir, layer, self_attention, device, threads, verbose) -> None:
    """Plot attention heatmaps for SENTENCE: cross-attention (mean over heads and per head)
    and self-attention per layer and head, tokens on the axes."""
    from ..batching import pad_sequences, source_tensor
    from ..decoding import greedy_decode
    from ..plots import plot_attention
    from ..tokenization import BOS_ID, EOS_ID

    setup(verbose, threads)
    dev = pick_device(device)
    loaded = load_model(checkpoint, dev)
    model, src_tok, tgt_tok = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
    src_ids = src_tok.encode(sentence)[: model.config.max_len - 1]
    src = source_tensor([src_ids]).to(dev)
    if target is None:
        tgt_ids = greedy_decode(model, src)[0]
        target = tgt_tok.decode(tgt_ids)
    else:
        tgt_ids = tgt_tok.encode(target)[: model.config.max_len - 1]
    tgt_in = pad_sequences([[BOS_ID] + tgt_ids]).to(dev)
    weights = model.attention(src, tgt_in)
    src_labels = [src_tok.id_to_piece(i) for i in src_ids] + ["<eos>"]
    # Row t of the decoder predicts token t+1, so label rows by the token being produced.
    tgt_labels = [tgt_tok.id_to_piece(i) for i in tgt_ids] + [tgt_tok.id_to_piece(EOS_ID)]
    in_labels = ["<bos>"] + [tgt_tok.id_to_piece(i) for i in tgt_ids]
    def chosen(n_layers: int) -> list[int]:  # encoder and decoder depths may differ
        return list(range(n_layers)) if layer is None else [layer % n_layers]

    written = []
    for i in chosen(len(weights["cross"])):
        cross = weights["cross"][i][0]  # [heads, tgt, src]
        written.append(plot_attention(cross.mean(0), tgt_labels, src_labels,
                                      out_dir / f"cross_layer{i}_mean.png",
                                      f"cross-attention, layer {i}, mean over heads"))
        written.append(plot_attention(cross, tgt_labels, src_labels, out_dir / f"cross_layer{i}_heads.png",
                                      f"cross-attention, layer {i}"))
        if self_attention:
            written.append(plot_attention(weights["decoder_self"][i][0], tgt_labels, in_labels,
                                          out_dir / f"decoder_self_layer{i}.png",
                                          f"decoder self-attention, layer {i}"))
    if self_attention:
        for i in chosen(len(weights["encoder"])):
            written.append(plot_attention(weights["encoder"][i][0], src_labels, src_labels,
                                          out_dir / f"encoder_self_layer{i}.png",
                                          f"encoder self-attention, layer {i}"))
    click.echo(f"source: {sentence}")
    click.echo(f"target: {target}")
    for path in written:
        click.echo(f"wrote {path}")


@click.command()
@click.option("--d-model", default=128, show_default=True, type=click.IntRange(min=2), help="Model width.")
@click.option("--max-len", default=100, show_default=True, type=click.IntRange(min=1),
              help="Positions to plot.")
@click.option("--dims", default="0,1,8,16,32,64", show_default=True,
              help="Comma-separated dimensions to draw as curves.")
@click.option("-o", "--output", default=Path("runs") / "positional_encoding.png", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="PNG file to write.")
def positions(d_model, max_len, dims, output) -> None:
    """Plot sinusoidal positional-encoding curves (chosen dimensions over positions) and the table."""
    from ..plots import plot_positional_encoding

    try:
        chosen = [int(d) for d in dims.split(",") if d.strip()]
        path = plot_positional_encoding(d_model, max_len, chosen, output)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    click.echo(f"wrote {path}")
