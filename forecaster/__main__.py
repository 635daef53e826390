"""``python -m forecaster``: the ``forecaster`` command, where its script is not installed."""

from forecaster.app.cli import main

main(prog_name="forecaster")
