"""Command-line options generated from the config dataclasses: each option is defined once
(name, default, description) on the class the config file and the Python API use."""

from __future__ import annotations

import datetime

import click
import pandas as pd

from forecaster.app.fields import option_flag

# Second spellings: the rule of the book is also asked for as --strategy (--strategy enhanced).
_ALSO = {"rule": ("strategy",)}


# Sections whose fields are ``backtest`` options, in help order; DATA is the argument.
_OPTION_SECTIONS = ("features", "model", "models", "walk_forward", "strategy", "costs", "market",
                    "backtest", "data", "run")
_SKIP = {"data": ("path",)}


def _model_option_fields():
    """``(name, default, hint, help)`` of the Transformer's parameters: the panel model's and
    the single-stock model's, with both defaults in the help where they differ."""
    from forecaster.app.fields import field_help, model_annotation, model_class, model_params

    def annotation(name):
        return model_annotation(name) or str

    from forecaster.models.registry import DEFAULT_MODEL, model_names

    panel, single = model_params(True), model_params(False)
    helps = {**field_help(model_class(False)), **field_help(model_class(True))}
    out = [("name", None, "str", f"the model under test, by name: {', '.join(model_names(True))} "
            f"(one stock: {', '.join(model_names(False))}); the others run beside it as baselines. "
            "Another model than the Transformer takes its keyword parameters from [model] of an "
            "experiment file; the options below are the Transformer's, for when it is under test "
            f"[{DEFAULT_MODEL}]")]
    for name in [*panel, *(k for k in single if k not in panel)]:
        p, s1 = panel.get(name, "-"), single.get(name, "-")
        value = next((v for v in (p, s1) if v not in (None, "-")), None)
        if isinstance(value, (tuple, list)):  # e.g. quantiles: set them in a config file
            continue
        hint = type(value) if value is not None else annotation(name)
        if p == "-" or s1 == "-":
            default = f"panel only; {p}" if s1 == "-" else f"one stock only; {s1}"
        else:
            default = f"panel {p}, one stock {s1}" if p != s1 else f"{p}"
        out.append((name, None, hint, f"{helps.get(name, '')} [{default}]"))
    return out


class DateType(click.ParamType):
    """A ``YYYY-MM-DD`` date, parsed (and refused with the option's name) when options are
    read; the config receives a ``pd.Timestamp``."""

    name = "YYYY-MM-DD"

    def convert(self, value, param, ctx):
        from forecaster.checks import check_date

        try:
            return check_date(param.opts[0] if param else "date", value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DATE = DateType()


def _click_type(hint):
    """The click type of a field's type hint (``None`` left out of a union)."""
    from forecaster.app.fields import type_parts

    parts = set(type_parts(hint)) - {type(None)}
    if pd.Timestamp in parts or datetime.date in parts:
        return DATE
    if parts in ({bool}, {int}):
        return parts.pop()
    if float in parts:
        return float
    return str


def experiment_options(sections=_OPTION_SECTIONS, only: dict | None = None):
    """A decorator adding one option per field of the experiment's ``sections``
    (:mod:`forecaster.app.experiment`; ``only``: ``{section: names}`` to take some fields of a
    section): the config file and the CLI read the same definitions, defaults and
    descriptions. Values arrive as ``section__field`` keywords (``None``: not given)."""
    from forecaster.app.experiment import option_fields
    from forecaster.app.fields import options_named

    of = {section: _model_option_fields() if section == "model" else option_fields(section)
          for section in _OPTION_SECTIONS}
    # a help text names another field as the option a user types (days_per_batch -> --days-per-batch);
    # only names with an underscore, as a plain word (horizon, start) is also English
    named = {name for fields in of.values() for name, *_ in fields if "_" in name}
    params, seen = [], {}
    for section in sections:
        for name, default, hint, text in of[section]:
            text = options_named(text, named)
            if name in _SKIP.get(section, ()) or (only and section in only and name not in only[section]):
                continue
            flag = option_flag(name)[2:]
            if flag in seen:
                raise RuntimeError(f"option --{flag} defined by [{seen[flag]}] and [{section}]")
            seen[flag] = section
            kind = _click_type(hint)
            if section == "features":
                kind = str
                text += " (comma-separated)"
            # where it goes in an experiment file, and its default
            value = "" if default is None else default
            shown = f" [{section}]" if section == "model" else f" [{section}: {value}]"
            decl = f"--{flag}/--no-{flag}" if kind is bool else f"--{flag}"
            more = [f"--{other}" for other in _ALSO.get(name, ())]  # a second spelling of the same option
            params.append(click.option(decl, *more, f"{section}__{name}", type=None if kind is bool else kind,
                                       default=None, help=f"{text}{shown}"))
    def decorate(command):
        for option in reversed(params):  # decorators apply bottom-up
            command = option(command)
        return command

    return decorate


# --help shows a command's options in these sections, in this order (its own options first):
# what a person looks for, not the experiment file's tables (each option's help ends with its
# [table: default]).
ENHANCED = ("tracking_error", "active_bound", "style_bound", "max_turnover", "alpha_ic", "risk_aversion",
            "alpha_shape", "alpha_halflife", "trade_aversion")
UNIVERSE = ("universe", "train_universe", "train_outside_weight", "index_constituents")
HELP_SECTIONS = ("Options", "Data", "Universe", "Model", "Walk-forward", "Book", "Enhanced index", "Costs",
                 "Run")


def help_section(name: str) -> str:
    """The --help section of the option whose keyword is ``name`` (``section__field`` for the
    generated ones; a command's own options are ``"Options"``)."""
    section, _, field = name.partition("__")
    if not field:
        return "Options"
    if section == "data":
        return "Universe" if field in UNIVERSE else "Data"
    if section in ("features", "model", "models"):
        return "Model"
    if (section, field) == ("backtest", "benchmark_weights") or (section == "strategy" and field in ENHANCED):
        return "Enhanced index"
    return {"walk_forward": "Walk-forward", "costs": "Costs", "run": "Run"}.get(section, "Book")


class SectionedCommand(click.Command):
    """A command whose --help lists its options in :data:`HELP_SECTIONS` (click's own
    formatter, one definition list a section), so a hundred options read as a few groups."""

    def format_options(self, ctx, formatter):
        groups: dict[str, list] = {name: [] for name in HELP_SECTIONS}
        for param in self.get_params(ctx):
            if isinstance(param, click.Argument):  # named in the usage line and the text above
                continue
            record = param.get_help_record(ctx)
            if record is not None:
                groups[help_section(param.name or "")].append(record)
        for name, records in groups.items():
            if records:
                with formatter.section(name):
                    formatter.write_dl(records)


def raw_sections(options: dict) -> dict[str, dict]:
    """``{section: {key: value}}`` of the options given (``None`` = not given)."""
    raw: dict[str, dict] = {}
    for key, value in options.items():
        if value is None or "__" not in key:
            continue
        section, name = key.split("__", 1)
        if section == "features":
            value = tuple(v.strip() for v in value.split(",") if v.strip())
        raw.setdefault(section, {})[name] = value
    return raw
