"""``seq2seq translate``: translate arguments, a file or stdin, one line per sentence."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import torch

from .options import (
    checkpoint_option,
    common_options,
    decode_config,
    decode_options,
    load_models,
    pick_device,
    setup,
)


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


def translate_sentences(loaded: list, sentences: list[str], decode, max_tokens: int, dev: torch.device,
               source: str | None) -> list[str]:
    """One translation per sentence, in order, by the model (or ensemble) ``loaded``; a sentence
    too long for the model stops with an error naming ``source`` (a file, ``<stdin>``) and the
    line, or the argument (``None``)."""
    from ..decoding import InputTooLongError, translate_texts

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
    from ..tokenization import UNK_ID

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


def write_lines(path: Path, lines: list[str]) -> None:
    """Atomically, and recorded in a run folder's manifest when written into one."""
    from seq2seq.core import atomic_write

    with atomic_write(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))


@click.command()
@click.argument("text", nargs=-1)
@checkpoint_option
@click.option("-i", "--input", "input_file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
              help="File of sentences (one per line, plain or .gz; '-' = stdin). Without TEXT or "
                   "--input, sentences are read from stdin. One output line per input line, in "
                   "order; blank lines stay blank.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write translations here instead of stdout.")
@click.option("--max-tokens", default=4000, show_default=True, type=click.IntRange(min=1),
              help="Source tokens per decoding batch.")
@decode_options
@common_options
def translate(text, checkpoints, input_file, output, max_tokens, beam, length_penalty, max_len_ratio,
              max_len_extra, device, threads, verbose) -> None:
    """Translate TEXT arguments, a file, or stdin (one sentence per line).

    A line longer than the model's maximum length is an error naming its line number; a line
    whose tokens are mostly (more than half) unknown to the model gets a warning on stderr."""
    from ..text import DataError, read_lines

    setup(verbose, threads)
    dev = pick_device(device)
    decode = decode_config(beam, length_penalty, max_len_ratio, max_len_extra)
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
    loaded = load_models(checkpoints, dev)
    _warn_unknown(loaded[0].src_tokenizer, sentences, source)
    outs = translate_sentences(loaded, sentences, decode, max_tokens, dev, source) if sentences else []
    if output is not None:
        write_lines(output, outs)
    else:
        for o in outs:
            click.echo(o)
