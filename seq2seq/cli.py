"""The ``seq2seq`` command: ``train``, ``translate``, ``evaluate``, ``attention``, ``positions``."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import click
import torch

from .core.precision import PRECISIONS
from .training import LR_SCHEDULES

if TYPE_CHECKING:
    from .evaluation import Scores

DEFAULT_OUT = Path("runs") / "seq2seq"
DEFAULT_CHECKPOINT = DEFAULT_OUT / "best.pt"


def _setup(verbose: bool, threads: int) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if threads > 0:
        torch.set_num_threads(threads)


def _device(name: str) -> torch.device:
    """The device ``--device`` names, checked before any work: an unknown or unavailable one
    is one ``Error:`` line (nothing read, trained or written)."""
    from .core import resolve_device

    try:
        dev = resolve_device(name)
        if dev.type not in ("cpu", "cuda", "mps"):
            raise ValueError(f"unknown device {name!r}; use 'auto', 'cpu', 'cuda' or 'cuda:N'")
        if dev.type == "mps" and not (getattr(torch.backends, "mps", None) is not None
                                      and torch.backends.mps.is_available()):
            raise ValueError(f"device {name!r} requested but MPS is not available; use --device auto or cpu")
        if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {name!r} requested but there are {torch.cuda.device_count()} CUDA "
                             "devices (cuda:0 is the first); use --device auto, cuda or cpu")
    except ValueError as exc:
        raise click.ClickException(f"--device: {exc}") from exc
    return dev


def _load(checkpoint: Path, device: torch.device):
    return _load_ensemble((checkpoint,), device)[0]


def _load_ensemble(checkpoints: tuple[Path, ...], device: torch.device):
    from .checkpoint import CheckpointError, load_ensemble

    try:
        return load_ensemble(checkpoints, device)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc


def _checkpoint_option(f):
    """``-c``, repeatable: several checkpoints translate as one ensemble."""
    return click.option(
        "-c", "--checkpoint", "checkpoints", multiple=True, default=(DEFAULT_CHECKPOINT,), show_default=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="Model checkpoint. Repeat to decode with an ensemble of checkpoints that share their "
             "tokenizers (e.g. best.pt, averaged.pt and ema0.998.pt of one run): each step averages "
             "their probabilities.")(f)


def _decode_options(f):
    f = click.option("--max-len-extra", default=10, show_default=True, type=click.IntRange(min=0),
                     help="Output length limit: ratio * source tokens + this.")(f)
    f = click.option("--max-len-ratio", default=1.5, show_default=True, type=click.FloatRange(min=0),
                     help="Output length limit as a multiple of the source length (in tokens).")(f)
    f = click.option("--length-penalty", default=1.0, show_default=True, type=float,
                     help="Beam hypotheses are ranked by log-prob / length**penalty.")(f)
    f = click.option("--beam", default=5, show_default=True, type=click.IntRange(min=1),
                     help="Beam size (1 = greedy).")(f)
    return f


def _common_options(f):
    f = click.option("-v", "--verbose", is_flag=True, help="Debug logging.")(f)
    f = click.option("--threads", default=0, show_default=True, type=click.IntRange(min=0),
                     help="torch CPU threads (0 = torch's default).")(f)
    f = click.option("--device", default="auto", show_default=True,
                     help="auto (cuda if available, else cpu), cpu, cuda or cuda:N.")(f)
    return f


def _decode_config(beam, length_penalty, max_len_ratio, max_len_extra):
    from .decoding import DecodeConfig

    try:
        return DecodeConfig(beam, length_penalty, max_len_ratio, max_len_extra)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ashare-seq2seq-toolkit")
def main() -> None:
    """Train, run, score and inspect encoder-decoder translation models."""


# --------------------------------------------------------------------------------------- train


@main.command()
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
@_common_options
def train(**opts) -> None:
    """Train a translation model (no data options: the embedded toy German-English corpus)."""
    from .batching import ParallelDataset
    from .checkpoint import CheckpointError, load_checkpoint, model_from_payload
    from .decoding import DecodeConfig, translate_texts
    from .model import Transformer, TransformerConfig
    from .text import DataError, read_parallel, toy_corpus_paths
    from .tokenization import build_tokenizers
    from .training import TrainConfig, Trainer, ValidationSet

    _setup(opts["verbose"], opts["threads"])
    device = _device(opts["device"])
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
    from .core import OutputError, check_output

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


# ----------------------------------------------------------------------------------- translate


def _stdin_lines() -> list[str]:
    """Lines of stdin, split at ``\\n`` as files are (see :func:`seq2seq.text.read_lines`)."""
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.ClickException(f"<stdin>: not UTF-8 text ({exc})") from exc
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def _translate(loaded: list, sentences: list[str], decode, max_tokens: int, dev: torch.device,
               source: str | None) -> list[str]:
    """One translation per sentence, in order, by the model (or ensemble) ``loaded``; a sentence
    too long for the model stops with an error naming ``source`` (a file, ``<stdin>``) and the
    line, or the argument (``None``)."""
    from .decoding import InputTooLongError, translate_texts

    try:
        return translate_texts([m.model for m in loaded], loaded[0].src_tokenizer, loaded[0].tgt_tokenizer,
                               sentences, decode, max_tokens, dev)
    except InputTooLongError as exc:
        where = f"argument {exc.index + 1}: {exc.reason}" if source is None else f"{source}: {exc}"
        raise click.ClickException(where) from exc


def _warn_unknown(tokenizer, sentences: list[str], source: str | None, shown: int = 10) -> None:
    """Warn (stderr) about each sentence most of whose tokens (more than half) the model does
    not know: its translation is made up from context, not translated. Names the line (or
    argument) of ``source`` and the fraction; after ``shown`` such lines, one count."""
    from .tokenization import UNK_ID

    flagged = 0
    for i, ids in enumerate(tokenizer.encode_batch(sentences)):
        unknown = sum(t == UNK_ID for t in ids)
        if not ids or 2 * unknown <= len(ids):
            continue
        flagged += 1
        if flagged <= shown:
            where = f"argument {i + 1}" if source is None else f"{source}: line {i + 1}"
            click.echo(f"Warning: {where}: {unknown} of {len(ids)} tokens ({unknown / len(ids):.0%}) "
                       "are unknown to the model; its translation is unreliable", err=True)
    if flagged > shown:
        click.echo(f"Warning: {flagged - shown} more lines are mostly unknown tokens "
                   f"({flagged} of {len(sentences)} in all)", err=True)


def _write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@main.command()
@click.argument("text", nargs=-1)
@_checkpoint_option
@click.option("-i", "--input", "input_file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="File of sentences (one per line, plain or .gz; '-' = stdin). Without TEXT or "
                   "--input, sentences are read from stdin. One output line per input line, in "
                   "order; blank lines stay blank.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write translations here instead of stdout.")
@click.option("--max-tokens", default=4000, show_default=True, type=click.IntRange(min=1),
              help="Source tokens per decoding batch.")
@_decode_options
@_common_options
def translate(text, checkpoints, input_file, output, max_tokens, beam, length_penalty, max_len_ratio,
              max_len_extra, device, threads, verbose) -> None:
    """Translate TEXT arguments, a file, or stdin (one sentence per line).

    A line longer than the model's maximum length is an error naming its line number; a line
    whose tokens are mostly (more than half) unknown to the model gets a warning on stderr."""
    from .text import DataError, read_lines

    _setup(verbose, threads)
    dev = _device(device)
    decode = _decode_config(beam, length_penalty, max_len_ratio, max_len_extra)
    if text and input_file is not None:
        raise click.UsageError("give sentences as arguments or with --input, not both")
    source = None
    if text:
        sentences = list(text)
    elif input_file is not None and str(input_file) != "-":
        source = str(input_file)
        try:
            sentences = read_lines(input_file, allow_blank=True)
        except DataError as exc:
            raise click.ClickException(str(exc)) from exc
    else:
        source, sentences = "<stdin>", _stdin_lines()
    loaded = _load_ensemble(checkpoints, dev)
    _warn_unknown(loaded[0].src_tokenizer, sentences, source)
    outs = _translate(loaded, sentences, decode, max_tokens, dev, source) if sentences else []
    if output is not None:
        _write_lines(output, outs)
    else:
        for o in outs:
            click.echo(o)


# ------------------------------------------------------------------------------------ evaluate


def _test_sets(src: tuple[Path, ...], ref: tuple[Path, ...], outputs: tuple[Path, ...]):
    """``[(source, reference, ParallelText), ...]`` of the test sets given as repeated
    ``--src``/``--ref`` pairs (none: the toy corpus); checks the ``-o`` count."""
    from .text import DataError, read_parallel, toy_corpus_paths

    if len(src) != len(ref):
        raise click.UsageError(f"give one --ref per --src: got {len(src)} --src and {len(ref)} --ref")
    if outputs and len(outputs) != max(len(src), 1):
        raise click.UsageError(f"give one -o per test set: got {len(outputs)} -o for "
                               f"{max(len(src), 1)} test sets")
    try:
        pairs = list(zip(src, ref, strict=True)) or [toy_corpus_paths()]
        # skip_empty=False keeps file line i at index i - 1, so errors can name the line.
        return [(s, r, read_parallel(s, r, skip_empty=False)) for s, r in pairs]
    except DataError as exc:
        raise click.ClickException(str(exc)) from exc


class _Scored(NamedTuple):
    """The scores of one test set."""

    src: Path
    ref: Path
    n_sentences: int
    seconds: float
    scores: Scores


def _score_sets(loaded, sets, decode, max_tokens: int, dev: torch.device,
                outputs: tuple[Path, ...]) -> list[_Scored]:
    """Translate and score each test set in turn (writing the translations to ``outputs``)."""
    from .evaluation import score

    results = []
    for i, (src_path, ref_path, pairs) in enumerate(sets):
        start = time.perf_counter()
        hyps = _translate(loaded, pairs.src, decode, max_tokens, dev, str(src_path))
        seconds = time.perf_counter() - start
        results.append(_Scored(src_path, ref_path, len(hyps), seconds, score(hyps, pairs.tgt)))
        if outputs:
            _write_lines(outputs[i], hyps)
    return results


def _score_table(results: list[_Scored]) -> list[str]:
    """One line per test set (source file, sentences, BLEU, chrF, tokenized lower-cased BLEU,
    seconds) under a header, then what the columns mean."""
    width = max(len("test set"), *(len(str(r.src)) for r in results))
    lines = [f"{'test set':<{width}}  sentences    BLEU    chrF  tok-lc BLEU  seconds"]
    for r in results:
        s = r.scores
        lines.append(f"{str(r.src):<{width}}  {r.n_sentences:>9}  {s.bleu:6.2f}  {s.chrf:6.2f}  "
                     f"{s.tok_lc_bleu:11.2f}  {r.seconds:7.1f}")
    lines.append(f"BLEU: sacreBLEU, cased, detokenized ({results[0].scores.signature}); tok-lc BLEU: "
                 "lower-cased, split into words and punctuation, sacreBLEU tokenize=none")
    return lines


def _echo_scores(results: list[_Scored], beam: int) -> None:
    """One test set: the detailed lines; several: a table with one row per set."""
    if len(results) == 1:
        r = results[0]
        click.echo(f"{r.n_sentences} sentences from {r.src}, beam {beam}, {r.seconds:.1f} s")
        lines = r.scores.lines()
    else:
        click.echo(f"{len(results)} test sets, beam {beam}")
        lines = _score_table(results)
    for line in lines:
        click.echo(line)


def _json_report(results: list[_Scored], run: dict) -> dict:
    """One test set: its scores and the run settings in one flat dict; several: the settings
    and a list of per-set scores under ``"sets"``."""
    if len(results) == 1:
        r = results[0]
        return {**r.scores.to_dict(), **run, "seconds": r.seconds}
    return {**run, "sets": [{"src": str(r.src), "ref": str(r.ref), **r.scores.to_dict(),
                             "seconds": r.seconds} for r in results]}


@main.command()
@_checkpoint_option
@click.option("--src", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Source sentences (plain or .gz). Repeat with --ref for several test sets (one "
                   "row each). Default: the embedded toy corpus.")
@click.option("--ref", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Raw (untokenized) reference translations, line-aligned with the --src of the "
                   "same position.")
@click.option("-o", "--output", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the translations here (one -o per test set).")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the scores as JSON here (several sets: a list under 'sets').")
@click.option("--max-tokens", default=4000, show_default=True, type=click.IntRange(min=1),
              help="Source tokens per decoding batch.")
@_decode_options
@_common_options
def evaluate(checkpoints, src, ref, output, json_out, max_tokens, beam, length_penalty, max_len_ratio,
             max_len_extra, device, threads, verbose) -> None:
    """Translate --src and score against --ref: sacreBLEU BLEU and chrF, plus tokenized
    lower-cased BLEU. Several --src/--ref pairs give one row per test set."""
    _setup(verbose, threads)
    dev = _device(device)
    decode = _decode_config(beam, length_penalty, max_len_ratio, max_len_extra)
    sets = _test_sets(src, ref, output)
    results = _score_sets(_load_ensemble(checkpoints, dev), sets, decode, max_tokens, dev, output)
    _echo_scores(results, beam)
    if json_out is not None:
        # One checkpoint: its path; an ensemble: the paths joined by " + ".
        run = {"checkpoint": " + ".join(str(c) for c in checkpoints), "beam": beam,
               "length_penalty": length_penalty}
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(_json_report(results, run), indent=2))


# ----------------------------------------------------------------------------------- attention


@main.command()
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
@_common_options
def attention(sentence, checkpoint, target, out_dir, layer, self_attention, device, threads, verbose) -> None:
    """Plot attention heatmaps for SENTENCE: cross-attention (mean over heads and per head)
    and self-attention per layer and head, tokens on the axes."""
    from .batching import pad_sequences, source_tensor
    from .decoding import greedy_decode
    from .plots import plot_attention
    from .tokenization import BOS_ID, EOS_ID

    _setup(verbose, threads)
    dev = _device(device)
    loaded = _load(checkpoint, dev)
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


# ----------------------------------------------------------------------------------- positions


@main.command()
@click.option("--d-model", default=128, show_default=True, type=click.IntRange(min=2), help="Model width.")
@click.option("--max-len", default=100, show_default=True, type=click.IntRange(min=1),
              help="Positions to plot.")
@click.option("--dims", default="0,1,8,16,32,64", show_default=True,
              help="Comma-separated dimensions to draw as curves.")
@click.option("-o", "--output", default=Path("runs") / "positional_encoding.png", show_default=True,
              type=click.Path(dir_okay=False, path_type=Path), help="PNG file to write.")
def positions(d_model, max_len, dims, output) -> None:
    """Plot sinusoidal positional-encoding curves (chosen dimensions over positions) and the table."""
    from .plots import plot_positional_encoding

    try:
        chosen = [int(d) for d in dims.split(",") if d.strip()]
        path = plot_positional_encoding(d_model, max_len, chosen, output)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    click.echo(f"wrote {path}")


if __name__ == "__main__":
    main()
