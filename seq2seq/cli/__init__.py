"""The ``seq2seq`` command: ``train``, ``translate``, ``evaluate``, ``attention``, ``positions``.

One module per command (``figures`` holds ``attention`` and ``positions``); the options and
helpers they share are in :mod:`seq2seq.cli.options`.
"""

from __future__ import annotations

import click

from ..core.outputs import release_locks
from .evaluate import evaluate
from .figures import attention, positions
from .train import train
from .translate import translate


class _Commands(click.Group):
    """A command's claimed output folder is free again once the command ends."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        finally:
            release_locks()


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ashare-seq2seq-toolkit")
def main() -> None:
    """Train, run, score and inspect encoder-decoder translation models."""


for _command in (train, translate, evaluate, attention, positions):
    main.add_command(_command)
