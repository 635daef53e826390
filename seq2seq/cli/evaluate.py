"""``seq2seq evaluate``: translate test sets and score them (sacreBLEU BLEU and chrF, tokenized
lower-cased BLEU), one row per set."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

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
from .translate import translate_sentences, write_lines

if TYPE_CHECKING:
    from ..evaluation import Scores


def _test_sets(src: tuple[Path, ...], ref: tuple[Path, ...], outputs: tuple[Path, ...]):
    """``[(source, reference, ParallelText), ...]`` of the test sets given as repeated
    ``--src``/``--ref`` pairs (none: the toy corpus); checks the ``-o`` count."""
    from ..text import DataError, read_parallel, toy_corpus_paths

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
    from ..evaluation import score

    results = []
    for i, (src_path, ref_path, pairs) in enumerate(sets):
        start = time.perf_counter()
        hyps = translate_sentences(loaded, pairs.src, decode, max_tokens, dev, str(src_path))
        seconds = time.perf_counter() - start
        results.append(_Scored(src_path, ref_path, len(hyps), seconds, score(hyps, pairs.tgt)))
        if outputs:
            write_lines(outputs[i], hyps)
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


@click.command()
@checkpoint_option
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
@decode_options
@common_options
def evaluate(checkpoints, src, ref, output, json_out, max_tokens, beam, length_penalty, max_len_ratio,
             max_len_extra, device, threads, verbose) -> None:
    """Translate --src and score against --ref: sacreBLEU BLEU and chrF, plus tokenized
    lower-cased BLEU. Several --src/--ref pairs give one row per test set."""
    setup(verbose, threads)
    dev = pick_device(device)
    decode = decode_config(beam, length_penalty, max_len_ratio, max_len_extra)
    sets = _test_sets(src, ref, output)
    results = _score_sets(load_models(checkpoints, dev), sets, decode, max_tokens, dev, output)
    _echo_scores(results, beam)
    if json_out is not None:
        # One checkpoint: its path; an ensemble: the paths joined by " + ".
        run = {"checkpoint": " + ".join(str(c) for c in checkpoints), "beam": beam,
               "length_penalty": length_penalty}
        from seq2seq.core import atomic_write

        with atomic_write(json_out, "w") as f:
            f.write(json.dumps(_json_report(results, run), indent=2))
