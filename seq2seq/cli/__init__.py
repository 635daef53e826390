"""The ``seq2seq`` command: ``train``, ``translate``, ``evaluate``, ``attention``, ``positions``.

One module per command (``figures`` holds ``attention`` and ``positions``); the options and
helpers they share are in :mod:`seq2seq.cli.options`.
"""

from __future__ import annotations

import click

from .evaluate import evaluate
from .figures import attention, positions
from .train import train
from .translate import translate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ashare-seq2seq-toolkit")
def main() -> None:
    """Train, run, score and inspect encoder-decoder translation models."""


for _command in (train, translate, evaluate, attention, positions):
    main.add_command(_command)
