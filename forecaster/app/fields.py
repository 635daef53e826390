"""What the options are and how a value is checked: the descriptions of config fields (their
metadata, :func:`forecaster.configs.option`) and of the Transformer's parameters (its
docstring's ``Args:``, as scikit-learn documents an estimator), their types (resolved type
hints), and the checks that name the file, section and key of a bad value."""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import re
import types
import typing
from collections.abc import Mapping

import pandas as pd

from forecaster.checks import ConfigError  # defined there, where every part may raise it
from forecaster.configs import option_help

# Transformer parameters the experiment sets from other sections.
MODEL_DERIVED = ("horizon", "execution", "features", "blend_features", "progress")
OPTIONS = "<options>"  # the source of values typed on the command line
# CLI spellings of a few fields (the field names are the config file's keys).
ALIASES = {"n_jobs": "jobs", "commission_rate": "commission", "transfer_fee_rate": "transfer-fee",
           "random_state": "seed", "n_heads": "heads", "n_layers": "layers", "max_epochs": "epochs",
           "names": "features", "blend": "blend-features", "name": "model"}


def option_flag(name: str) -> str:
    """The command-line option of a config field (``max_epochs`` -> ``--epochs``)."""
    return "--" + ALIASES.get(name, name.replace("_", "-"))


def config_error(source: str, section: str, text: str, fields=()) -> ConfigError:
    """A bad value, named as the user typed it: ``FILE: [section] key ...`` for an experiment
    file; for the command line the option itself (``--epochs must be ...``, not the field
    ``max_epochs``), every field of ``fields`` named in ``text`` replaced by its option."""
    if source != OPTIONS:
        return ConfigError(f"{source}: [{section}] {text}")
    return ConfigError(options_named(text, fields))


def options_named(text: str, fields) -> str:
    """``text`` with each field of ``fields`` it names written as its option (``max_epochs`` ->
    ``--epochs``); a quoted word is a value (``"top_k"``), left as it is."""
    known = set(fields)
    return re.sub(r"(?<![-\w\"'])[a-z][a-z0-9_]*\b(?![\"'])",
                  lambda m: option_flag(m.group()) if m.group() in known else m.group(), text)


def model_fields() -> set[str]:
    """Every Transformer parameter an option can set (panel and one stock)."""
    return set(model_params(True)) | set(model_params(False))


def plain_text(text: str) -> str:
    """Docstring markup as a help text shows it: ``:mod:`~a.b.c``` -> ``c``, ``:func:`f``` ->
    ``f``, double backquotes -> none."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", lambda m: m.group(1).rsplit(".", 1)[-1]
                  if m.group(0)[m.group(0).index("`") + 1] == "~" else m.group(1), text)
    return text.replace("``", "")


def field_help(cls) -> dict[str, str]:
    """``{field: description}``: a config dataclass's field metadata; for an estimator, the
    ``Args:`` (or ``Attributes:``) section of its docstring."""
    if dataclasses.is_dataclass(cls):
        return {name: plain_text(text) for name, text in option_help(cls).items() if text}
    doc = inspect.getdoc(cls) or ""
    out, current, inside = {}, None, False
    for line in doc.splitlines():
        if line.strip() in ("Attributes:", "Args:"):
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):
            break
        stripped = line.strip()
        head, sep, text = stripped.partition(": ")
        if sep and line.startswith("    ") and not line.startswith("     ") and all(
                part.strip().isidentifier() for part in head.split(",")):
            current = [part.strip() for part in head.split(",")]
            for name in current:
                out[name] = text
        elif current and stripped:
            for name in current:
                out[name] += " " + stripped
    return {name: plain_text(text) for name, text in out.items()}


def type_hints(target) -> dict[str, object]:
    """The resolved type hints of a dataclass's fields, or of a callable's parameters (a
    class: its constructor's); ``{}`` where they cannot be resolved."""
    if not dataclasses.is_dataclass(target):
        target = target.__init__ if inspect.isclass(target) else target
    try:
        return typing.get_type_hints(target)
    except (NameError, TypeError):
        return {}


def type_parts(hint) -> tuple:
    """The members of a union hint (``int | None`` -> ``(int, NoneType)``), else ``(hint,)``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def type_name(hint) -> str:
    """A hint as an error message names it: ``int | None``, ``date``, ``tuple[str, ...]``."""
    def one(t):
        if t is type(None):
            return "None"
        if t is pd.Timestamp:
            return "date"
        return t.__name__ if isinstance(t, type) else str(t).replace("typing.", "")
    return " | ".join(one(t) for t in type_parts(hint))


def type_ok(value, hint) -> bool:
    """Whether ``value`` (as TOML or the command line gives it) fits a type hint."""
    for t in type_parts(hint):
        origin = typing.get_origin(t) or t
        if t is type(None):
            ok = value is None
        elif t is bool:
            ok = isinstance(value, bool)
        elif t is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif t is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif t is pd.Timestamp:  # TOML dates, or a date as text
            ok = isinstance(value, (str, datetime.date))
        elif origin in (tuple, list):
            ok = isinstance(value, (list, tuple))
        else:
            ok = isinstance(value, origin) if isinstance(origin, type) else True
        if ok:
            return True
    return False


def model_class(panel: bool):
    from forecaster.models.panel.model import PanelTransformer
    from forecaster.models.stock.estimator import CausalTransformerForecaster

    return PanelTransformer if panel else CausalTransformerForecaster


def model_params(panel: bool) -> dict[str, object]:
    """``{parameter: default}`` of the Transformer for a panel or one stock (the walk-forward
    preset's defaults for one stock), without the parameters other sections set."""
    from forecaster.models.presets import single_stock_transformer

    params = {k: p.default for k, p in inspect.signature(model_class(panel).__init__).parameters.items()
              if k != "self"}
    if not panel:
        params.update(single_stock_transformer().get_params())
    return {k: v for k, v in params.items() if k not in MODEL_DERIVED}


def model_annotation(name: str):
    """The type hint of a Transformer parameter whose default is ``None``, from either
    estimator's constructor; ``None`` when not annotated."""
    for panel in (True, False):
        hint = type_hints(model_class(panel)).get(name)
        if hint is not None:
            return hint
    return None


def check_model_params(values: Mapping, panel: bool, source: str = "<options>") -> dict:
    """``values`` checked against the Transformer's parameters for a panel or one stock
    (unknown keys and wrong types name the key); lists become tuples."""
    params = model_params(panel)
    kind = "a panel (PanelTransformer)" if panel else "one stock (CausalTransformerForecaster)"
    out = {}
    for key, value in values.items():
        if key not in params and key in model_params(not panel):
            # a parameter of the other model: named as typed (--n-seeds), with where it applies
            where = "a folder of stocks (the panel model)" if not panel else "one stock's file"
            raise config_error(source, "model", f"{key} applies to {where}, not to {kind}",
                               model_fields())
        if key not in params:
            raise config_error(source, "model", f"unknown key {key!r} for {kind}; expected one of: "
                               f"{', '.join(sorted(params))}")
        default = params[key]
        hint = type(default) if default is not None else model_annotation(key)
        if hint is not None and not type_ok(value, hint):
            raise config_error(source, "model", f"{key} = {value!r}: expected {type_name(hint)}"
                               + (f" like the default {default!r}" if default is not None else ""),
                               model_fields())
        out[key] = tuple(value) if isinstance(value, list) else value
    return out


def check_named_model(name, values: Mapping, panel: bool, source: str = OPTIONS) -> dict:
    """``[model] name`` other than the Transformer, with ``values`` as its keyword parameters:
    ``{parameter: value}`` with every default filled in (unknown keys and wrong types name the
    key; lists become tuples)."""
    from forecaster.models.registry import registered

    if not isinstance(name, str):
        raise config_error(source, "model", f"name = {name!r}: expected a model's name (a string)", ("name",))
    try:
        entry = registered(name, panel)
    except ValueError as exc:
        raise config_error(source, "model", f"name = {name!r}: {exc}", ("name",)) from None
    params = entry.parameters(panel)
    for key, value in values.items():
        if key not in params:
            theirs = ("; the Transformer's parameters apply when it is the model under test"
                      if key in model_fields() else "")
            raise config_error(source, "model", f"unknown key {key!r} for {name}; expected one of: "
                               f"{', '.join(sorted(params)) or 'none (it takes no parameters)'}{theirs}")
        default = params[key]
        hint = type(default) if default is not None else type_hints(entry.factory(panel)).get(key)
        if hint is not None and not type_ok(value, hint):
            raise config_error(source, "model", f"{key} = {value!r}: expected {type_name(hint)}"
                               + (f" like the default {default!r}" if default is not None else ""))
    given = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    try:
        entry.build(panel, **given)
    except (ValueError, TypeError) as exc:
        raise config_error(source, "model", f"{name}: {exc}") from None
    return {**params, **given}


def baseline_keys(name: str, values: Mapping, panel: bool) -> list[str]:
    """The keys of ``[model]`` (``values``) that set the Transformer baseline when ``name`` is
    under test: the Transformer's parameters that model does not take (``--model gbm --epochs
    1`` shortens the baseline; a key both take is the model under test's, but for ``preset``,
    the run's regime, which sets both)."""
    from forecaster.models.registry import MODELS

    entry = MODELS.get(name)
    try:
        own = entry.parameters(panel) if entry is not None else {}
    except ConfigError:  # not a model for this data: check_named_model says so
        own = {}
    return [k for k in values if (k not in own or k == "preset") and k in model_params(panel)]


def check_features(names, panel: bool, source: str = "<options>", key: str = "names") -> None:
    """``[features] names`` (or ``blend``) against the features the model knows (an error
    names that key, not ``[model]``)."""
    if not names:
        return
    try:
        model_class(panel)(features=tuple(names))._validate_params()
    except ValueError as exc:
        raise config_error(source, "features", f"{key}: {exc}", (key,)) from exc


def check_device(device, source: str = "<options>") -> None:
    """An unknown or unavailable device is refused before any work (otherwise every fold's
    Transformer would fail and the run would go on without it)."""
    from seq2seq.core import resolve_device

    try:
        resolve_device(device)
    except ValueError as exc:
        where = f"--device {device}: " if source == OPTIONS else f"{source}: [model] device: "
        raise ConfigError(f"{where}{exc}") from exc
