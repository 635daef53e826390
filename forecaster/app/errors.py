"""Which errors are the user's: the project's typed errors of input (a bad option, file, folder,
checkpoint, pickle or book) and the system's ``OSError``. The commands turn these, and only
these, into one ``Error: ...`` line; any other exception (a bare ``ValueError`` or
``TypeError`` included) is a bug and keeps its traceback."""

from __future__ import annotations

import click


def input_errors() -> tuple[type[BaseException], ...]:
    """The exception types a command reports as one line (imported here, when a command fails,
    so that starting the command imports none of the modules that define them)."""
    from forecaster.app.fields import ConfigError
    from forecaster.checks import NotEnoughData
    from forecaster.data.fetch import FetchError
    from forecaster.data.minute.bars import BarError
    from forecaster.data.sources import DataError
    from forecaster.evaluation.fold_store import ResumeError
    from forecaster.evaluation.safe_pickle import RefusedPickle  # UnsafePickle is one
    from forecaster.portfolio.orders import HoldingsError
    from seq2seq.core import CheckpointError, OutputError

    return (DataError, ConfigError, ResumeError, HoldingsError, BarError, NotEnoughData, OutputError,
            CheckpointError, RefusedPickle, FetchError, OSError)


def error_line(exc: BaseException) -> click.ClickException:
    """One ``Error: ...`` line of an input error (an ``OSError`` names its file)."""
    where = f"{exc.filename}: " if isinstance(exc, OSError) and exc.filename else ""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return click.ClickException(f"{where}{text}")
