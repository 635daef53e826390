"""The ``seq2seq`` command."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ashare-seq2seq-toolkit")
def main() -> None:
    """Train, run, score and inspect encoder-decoder translation models."""


if __name__ == "__main__":
    main()
