"""Output folders are never silently overwritten or mixed: the rule is
:mod:`seq2seq.core.outputs` (one implementation for ``forecaster`` and ``seq2seq``),
re-exported here under its earlier name."""

from seq2seq.core.outputs import (
    OutputError,
    OutputFolder,
    check_output,
    check_output_file,
    is_own_file,
    remove_own_file,
)

__all__ = ["OutputError", "OutputFolder", "check_apart", "check_output", "check_output_file",
           "is_own_file", "remove_own_file"]


def check_apart(outputs, inputs, option: str = "--out") -> None:
    """No command writes over one of its own inputs: refuse when an output file or folder is
    an input, lies inside an input folder (a CSV written into the data folder would be read as
    a stock next time), or holds an input (an overwrite would delete it). Empty entries are
    ignored."""
    from pathlib import Path

    ins = [Path(p).resolve() for p in inputs if p]
    for out in (Path(p).resolve() for p in outputs if p):
        for inp in ins:
            if out == inp or inp in out.parents or out in inp.parents:
                raise OutputError(f"{option} {out}: would write over or inside the input {inp}; choose "
                                  "an output outside the inputs")
