"""``python -m seq2seq.cli``: the ``seq2seq`` command."""

from seq2seq.cli import main

main()
