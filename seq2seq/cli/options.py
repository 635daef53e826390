"""What the ``seq2seq`` commands share: their common options (device, threads, logging), the
checkpoint and decoding options, and loading checkpoints onto the chosen device."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click
import torch

DEFAULT_OUT = Path("runs") / "seq2seq"
DEFAULT_CHECKPOINT = DEFAULT_OUT / "best.pt"


def setup(verbose: bool, threads: int) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if threads > 0:
        torch.set_num_threads(threads)


def pick_device(name: str) -> torch.device:
    """The device ``--device`` names, checked before any work: an unknown or unavailable one
    is one ``Error:`` line (nothing read, trained or written)."""
    from ..core import resolve_device

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


def load_model(checkpoint: Path, device: torch.device):
    return load_models((checkpoint,), device)[0]


def load_models(checkpoints: tuple[Path, ...], device: torch.device):
    from ..checkpoint import CheckpointError, load_ensemble

    try:
        return load_ensemble(checkpoints, device)
    except CheckpointError as exc:
        raise click.ClickException(str(exc)) from exc


def checkpoint_option(f):
    """``-c``, repeatable: several checkpoints translate as one ensemble."""
    return click.option(
        "-c", "--checkpoint", "checkpoints", multiple=True, default=(DEFAULT_CHECKPOINT,), show_default=True,
        type=click.Path(dir_okay=False, path_type=Path),
        help="Model checkpoint. Repeat to decode with an ensemble of checkpoints that share their "
             "tokenizers (e.g. best.pt, averaged.pt and ema0.998.pt of one run): each step averages "
             "their probabilities.")(f)


def decode_options(f):
    f = click.option("--max-len-extra", default=10, show_default=True, type=click.IntRange(min=0),
                     help="Output length limit: ratio * source tokens + this.")(f)
    f = click.option("--max-len-ratio", default=1.5, show_default=True, type=click.FloatRange(min=0),
                     help="Output length limit as a multiple of the source length (in tokens).")(f)
    f = click.option("--length-penalty", default=1.0, show_default=True, type=float,
                     help="Beam hypotheses are ranked by log-prob / length**penalty.")(f)
    f = click.option("--beam", default=5, show_default=True, type=click.IntRange(min=1),
                     help="Beam size (1 = greedy).")(f)
    return f


def common_options(f):
    f = click.option("-v", "--verbose", is_flag=True, help="Debug logging.")(f)
    f = click.option("--threads", default=0, show_default=True, type=click.IntRange(min=0),
                     help="torch CPU threads (0 = torch's default).")(f)
    f = click.option("--device", default="auto", show_default=True,
                     help="auto (cuda if available, else cpu), cpu, cuda or cuda:N.")(f)
    return f


def decode_config(beam, length_penalty, max_len_ratio, max_len_extra):
    from ..decoding import DecodeConfig

    try:
        return DecodeConfig(beam, length_penalty, max_len_ratio, max_len_extra)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
