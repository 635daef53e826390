"""``seq2seq train``: train a translation model, into a checked output folder."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import click
import torch

from ..core.precision import PRECISIONS
from ..training import LR_SCHEDULES
from .options import DEFAULT_OUT, common_options, pick_device, setup


@click.command()
@click.option("--train-src", type=click.Path(dir_okay=False, path_type=Path),
              help="Training source sentences (plain or .gz, one per line). Default: embedded toy German.")
@click.option("--train-tgt", type=click.Path(dir_okay=False, path_type=Path),
              help="Training target sentences, line-aligned with --train-src. Default: embedded toy English.")
@click.option("--val-src", type=click.Path(dir_okay=False, path_type=Path),
              help="Validation source sentences. Default: the training data when it is the toy corpus.")
@click.option("--val-tgt", type=click.Path(dir_okay=False, path_type=Path), help="Validation references.")
@click.option("--out-dir", default=DEFAULT_OUT, show_default=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Where best.pt, last.pt, epoch<N>.pt and averaged.pt are written. A folder that "
                   "already holds files is refused, unless --resume continues the run there or "
                   "--overwrite replaces it.")
@click.option("--resume", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Continue from a last.pt (model, tokenizers, optimizer and schedule are taken from it). "
                   "The last.pt of --out-dir continues that run in its folder; one from elsewhere "
                   "starts a run in --out-dir (which must then be empty, or --overwrite).")
@click.option("--overwrite", is_flag=True,
              help="--out-dir holds an earlier run: remove its files, once the options and data are "
                   "checked and training starts (a folder with files a run does not write is refused).")
@click.option("--tokenizer", "tokenizer_kind", type=click.Choice(["word", "bpe", "unigram"]), default="word",
              show_default=True, help="Word-level, or subwords trained with the 'tokenizers' library.")
@click.option("--vocab-size", default=8000, show_default=True, type=click.IntRange(min=8),
              help="Subword vocabulary size (a cap for word vocabularies).")
@click.option("--joint-vocab/--separate-vocab", default=False, show_default=True,
              help="One tokenizer for both languages (required by --share-embeddings).")
@click.option("--min-freq", default=1, show_default=True, type=click.IntRange(min=1),
              help="Minimum count of a word (word tokenizer) or merge (subwords, at least 2).")
@click.option("--lowercase", is_flag=True, help="Lower-case all text before tokenising.")
@click.option("--d-model", default=128, show_default=True, type=int, help="Model width.")
@click.option("--heads", default=4, show_default=True, type=int, help="Attention heads.")
@click.option("--ff", default=256, show_default=True, type=int, help="Feed-forward hidden width.")
@click.option("--encoder-layers", default=2, show_default=True, type=int, help="Encoder layers.")
@click.option("--decoder-layers", default=2, show_default=True, type=int, help="Decoder layers.")
@click.option("--dropout", default=0.1, show_default=True, type=float, help="Dropout.")
@click.option("--attention-dropout", type=float, default=None,
              help="Dropout on attention probabilities (default: --dropout). 0 keeps the fused "
                   "attention kernel on CPU.")
@click.option("--activation", type=click.Choice(["relu", "gelu"]), default="relu", show_default=True,
              help="Feed-forward activation.")
@click.option("--positional", type=click.Choice(["sinusoidal", "learned", "rotary"]), default="sinusoidal",
              show_default=True, help="Position encoding.")
@click.option("--norm-first/--post-norm", default=True, show_default=True,
              help="Pre-norm (stabler) or post-norm (the original Transformer) residual blocks.")
@click.option("--tie-embeddings/--no-tie-embeddings", default=True, show_default=True,
              help="Decoder output projection shares the decoder input embedding.")
@click.option("--share-embeddings", is_flag=True,
              help="Source and target share one embedding (needs --joint-vocab).")
@click.option("--max-len", default=256, show_default=True, type=click.IntRange(min=4),
              help="Longest sequence in tokens; longer training pairs are dropped.")
@click.option("--epochs", default=40, show_default=True, type=click.IntRange(min=1), help="Training epochs.")
@click.option("--max-tokens", default=256, show_default=True, type=click.IntRange(min=1),
              help="Padded-token budget per batch (sentences of similar length are batched together).")
@click.option("--lr", default=2e-3, show_default=True, type=float, help="Peak learning rate (after warm-up).")
@click.option("--warmup", default=50, show_default=True, type=click.IntRange(min=0),
              help="Warm-up steps (linear increase to --lr).")
@click.option("--lr-schedule", type=click.Choice(LR_SCHEDULES), default=LR_SCHEDULES[0],
              show_default=True,
              help="After warm-up: inverse-square-root decay, or linear decay to zero at the end of "
                   "the budget (--epochs, or --max-minutes when that comes first).")
@click.option("--weight-decay", default=0.0, show_default=True, type=float, help="AdamW weight decay.")
@click.option("--clip-norm", default=1.0, show_default=True, type=float,
              help="Gradient-norm clipping (0 = off).")
@click.option("--label-smoothing", default=0.1, show_default=True, type=float, help="Label smoothing.")
@click.option("--average-last", default=0, show_default=True, type=click.IntRange(min=0),
              help="Average the last N epoch checkpoints into averaged.pt (0 = off).")
@click.option("--ema", multiple=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Keep an exponential moving average of the weights with this decay (repeatable), "
                   "written as ema<DECAY>.pt.")
@click.option("--max-minutes", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="Stop (validated and saved) before this much training time (0 = no limit).")
@click.option("--val-bleu/--no-val-bleu", default=True, show_default=True,
              help="Greedy-decode the validation set each epoch and keep the best by BLEU.")
@click.option("--val-bleu-sentences", default=0, show_default=True, type=click.IntRange(min=0),
              help="Decode only the first N validation sentences for BLEU (0 = all).")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Seed for weights, dropout and batch order.")
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True,
              help="Training forward pass in float32, or bfloat16 autocast (bf16), or bf16 where "
                   "it measures faster on the device (auto).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="tqdm progress bar.")
@common_options
def train(**opts) -> None:
    """Train a translation model (no data options: the embedded toy German-English corpus)."""
    from ..batching import ParallelDataset
    from ..checkpoint import CheckpointError, load_checkpoint, model_from_payload
    from ..decoding import DecodeConfig, translate_texts
    from ..model import Transformer, TransformerConfig
    from ..text import DataError, read_parallel, toy_corpus_paths
    from ..tokenization import build_tokenizers
    from ..training import TrainConfig, Trainer, ValidationSet

    setup(opts["verbose"], opts["threads"])
    device = pick_device(opts["device"])
    target = _check_out_dir(opts)
    log = logging.getLogger("seq2seq.train")
    start = time.perf_counter()
    try:
        if (opts["train_src"] is None) != (opts["train_tgt"] is None):
            raise click.UsageError("give both --train-src and --train-tgt, or neither (toy corpus)")
        if (opts["val_src"] is None) != (opts["val_tgt"] is None):
            raise click.UsageError("give both --val-src and --val-tgt, or neither")
        toy = opts["train_src"] is None
        train_src, train_tgt = toy_corpus_paths() if toy else (opts["train_src"], opts["train_tgt"])
        train_text = read_parallel(train_src, train_tgt)
        if opts["val_src"] is not None:
            val_text = read_parallel(opts["val_src"], opts["val_tgt"])
        else:
            val_text = train_text if toy else None
    except DataError as exc:
        raise click.ClickException(str(exc)) from exc
    log.info("training data: %s / %s, %d pairs", train_src, train_tgt, len(train_text))

    try:
        train_cfg = TrainConfig(
            epochs=opts["epochs"], max_tokens=opts["max_tokens"], lr=opts["lr"], warmup=opts["warmup"],
            lr_schedule=opts["lr_schedule"],
            weight_decay=opts["weight_decay"], clip_norm=opts["clip_norm"],
            label_smoothing=opts["label_smoothing"], seed=opts["seed"], average_last=opts["average_last"],
            ema=opts["ema"],
            max_minutes=opts["max_minutes"], val_bleu=opts["val_bleu"],
            val_bleu_sentences=opts["val_bleu_sentences"], progress=opts["progress"],
            precision=opts["precision"],
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    torch.manual_seed(opts["seed"])
    resume_payload = None
    if opts["resume"] is not None:
        try:
            resume_payload = load_checkpoint(opts["resume"])
            loaded = model_from_payload(resume_payload, opts["resume"])
        except CheckpointError as exc:
            raise click.ClickException(str(exc)) from exc
        model, src_tok, tgt_tok = loaded.model, loaded.src_tokenizer, loaded.tgt_tokenizer
    else:
        if opts["share_embeddings"] and not opts["joint_vocab"]:
            raise click.BadParameter("--share-embeddings needs --joint-vocab",
                                     param_hint="--share-embeddings")
        src_tok, tgt_tok = build_tokenizers(
            train_text.src, train_text.tgt, kind=opts["tokenizer_kind"], vocab_size=opts["vocab_size"],
            joint=opts["joint_vocab"], min_freq=opts["min_freq"], lowercase=opts["lowercase"],
        )
        try:
            config = TransformerConfig(
                src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size,
                d_model=opts["d_model"], n_heads=opts["heads"], d_ff=opts["ff"],
                encoder_layers=opts["encoder_layers"], decoder_layers=opts["decoder_layers"],
                dropout=opts["dropout"], attention_dropout=opts["attention_dropout"],
                activation=opts["activation"], norm_first=opts["norm_first"],
                positional=opts["positional"], max_len=opts["max_len"],
                tie_embeddings=opts["tie_embeddings"], share_embeddings=opts["share_embeddings"],
            )
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from exc
        model = Transformer(config)
    log.info("vocabularies: source %d, target %d (%s%s); model: %d parameters; device %s",
             src_tok.vocab_size, tgt_tok.vocab_size, getattr(src_tok, "kind", "?"),
             ", joint" if src_tok is tgt_tok else "", model.num_parameters(), device)

    def encode(text) -> ParallelDataset:
        return ParallelDataset(src_tok.encode_batch(text.src), tgt_tok.encode_batch(text.tgt))

    data = encode(train_text)
    dropped = data.filter_length(model.config.max_len - 1)
    if dropped:
        log.info("dropped %d training pairs longer than %d tokens or empty", dropped,
                 model.config.max_len - 1)
    val = None
    if val_text is not None:
        val = ValidationSet(encode(val_text), list(val_text.src), list(val_text.tgt))
        cut = val.data.truncate(model.config.max_len - 1)
        if cut:
            log.info("validation loss: cut %d pairs to %d tokens (BLEU still uses the full references)",
                     cut, model.config.max_len - 1)
    trainer = Trainer(model, src_tok, tgt_tok, data, val, train_cfg, opts["out_dir"], device)
    if resume_payload is not None:
        try:
            trainer.resume(opts["resume"], resume_payload)
        except CheckpointError as exc:
            raise click.ClickException(str(exc)) from exc
    target.claim()  # every option and input checked: only now is an earlier run removed
    history = trainer.fit()
    minutes = (time.perf_counter() - start) / 60
    last = history[-1] if history else {}
    click.echo(f"trained {trainer.epoch} epochs, {trainer.step} steps in {minutes:.1f} min; "
               f"{model.num_parameters()} parameters")
    if "val_bleu" in last:
        best = max(history, key=lambda r: r.get("val_bleu", -1.0))
        click.echo(f"best validation BLEU {best['val_bleu']:.2f} (epoch {best['epoch']}), "
                   f"last {last['val_bleu']:.2f}")
    extra = [p.name for p in [opts["out_dir"] / "averaged.pt"] + sorted(opts["out_dir"].glob("ema*.pt"))
             if p.exists()]
    click.echo(f"checkpoints in {opts['out_dir']}: " + ", ".join(["best.pt", "last.pt"] + extra))
    if toy:
        sample = train_text.src[:5]
        outs = translate_texts(model, src_tok, tgt_tok, sample, DecodeConfig(beam_size=1), device=device)
        for s, o in zip(sample, outs, strict=True):
            click.echo(f"  {s}  ->  {o}")


def _check_out_dir(opts: dict):
    """``train``'s --out-dir, checked before any work (:func:`seq2seq.core.check_output`): a
    folder that holds files is refused unless --resume continues the run there (its checkpoint
    lies in the folder) or --overwrite replaces it; an input of the run is never overwritten."""
    from ..core import OutputError, check_output

    out, resume, overwrite = opts["out_dir"], opts["resume"], opts["overwrite"]
    continues = resume is not None and resume.resolve().parent == out.resolve()
    last = out / "last.pt"
    try:
        target = check_output(out, overwrite=overwrite, resume=continues, option="--out-dir",
                              resume_with=f"--resume {last}" if last.is_file() else None)
    except OutputError as exc:
        note = (f" (--resume {resume} is not in {out}: it starts a new run there)"
                if resume is not None and not continues else "")
        raise click.ClickException(f"{exc}{note}") from exc
    removed = {p.resolve() for p in target.earlier}
    for option in ("train_src", "train_tgt", "val_src", "val_tgt", "resume"):
        path = opts[option]
        if target.overwrite and path is not None and path.resolve() in removed:
            raise click.ClickException(
                f"--out-dir {out}: --overwrite would remove --{option.replace('_', '-')} {path}, an "
                "input of this run: move it out of the folder or choose another folder")
    return target
