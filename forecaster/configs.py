"""How a configuration dataclass declares an option: its default and its description in one
place, the field itself (``option(default, help)``). The command line's help, an experiment
file's checks and the class's own docstring (:func:`documented`) all read that field."""

from __future__ import annotations

import dataclasses
import textwrap

HELP = "help"  # the metadata key of a field's description


def option(default=dataclasses.MISSING, help: str = "", *, factory=dataclasses.MISSING):
    """A dataclass field with ``default`` (or ``factory``) described by ``help``."""
    return dataclasses.field(default=default, default_factory=factory, metadata={HELP: help})


def same_option(cls, name: str):
    """A field declared as ``cls``'s field ``name`` is (its default and description), for a
    dataclass that carries an option on to ``cls``."""
    (f,) = [f for f in dataclasses.fields(cls) if f.name == name]
    return option(f.default, f.metadata.get(HELP, ""), factory=f.default_factory)


def option_help(cls) -> dict[str, str]:
    """``{field: description}`` of a dataclass (``""`` for a field without one)."""
    return {f.name: f.metadata.get(HELP, "") for f in dataclasses.fields(cls)}


def documented(cls):
    """``cls`` (a dataclass) with an ``Attributes:`` section appended to its docstring, built
    from its fields' descriptions, so ``help(cls)`` shows what the command line shows."""
    lines = []
    for name, text in option_help(cls).items():
        if text:
            lines.extend(textwrap.wrap(f"{name}: {text}", 92, initial_indent=" " * 8,
                                       subsequent_indent=" " * 12))
    if lines:
        head = (cls.__doc__ or cls.__name__).rstrip()
        cls.__doc__ = head + "\n\n    Attributes:\n" + "\n".join(lines) + "\n"
    return cls
