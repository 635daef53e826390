"""Options are described by their fields' metadata and typed by their resolved type hints."""

import dataclasses
import datetime

import pandas as pd
import pytest

from forecaster.app.experiment import SECTIONS, build_section, option_fields
from forecaster.app.fields import ConfigError, type_hints, type_name, type_ok
from forecaster.configs import HELP, documented, option, option_help, same_option


def test_every_option_is_described_by_its_field():
    for section, cls in SECTIONS.items():
        meta = {f.name: f.metadata.get(HELP, "") for f in dataclasses.fields(cls)}
        for name, _, _, text in option_fields(section):
            assert meta[name], f"[{section}] {name} has no description in its field's metadata"
            assert text.startswith(meta[name][:20].replace("``", "")), (section, name)


def test_docstring_and_help_come_from_the_metadata():
    @documented
    @dataclasses.dataclass
    class Toy:
        """A toy config."""

        depth: int | None = option(None, "how deep; none: unbounded.")
        names: tuple[str, ...] = option(factory=tuple, help="the names.")

    assert "Attributes:\n    depth: how deep; none: unbounded." in Toy.__doc__.replace("        ", "    ")
    assert Toy().names == () and Toy(depth=3).depth == 3
    hints = type_hints(Toy)
    assert type_name(hints["depth"]) == "int | None" and type_name(hints["names"]) == "tuple[str, ...]"


def test_an_option_carried_on_is_declared_once():
    """[run]'s options are the walk-forward's: the same default and description, not a copy."""
    from forecaster.app.experiment import RunConfig
    from forecaster.evaluation.folds import WalkForwardConfig

    run, walk = option_help(RunConfig), option_help(WalkForwardConfig)
    assert run and all(run[k] == walk[k] != "" for k in run)
    defaults = {f.name: f.default for f in dataclasses.fields(WalkForwardConfig)}
    assert dataclasses.asdict(RunConfig()) == {k: defaults[k] for k in run}

    toy = dataclasses.make_dataclass("Toy", [("names", tuple, option(factory=lambda: ("a",), help="names."))])

    @dataclasses.dataclass
    class Carrier:
        names: tuple = same_option(toy, "names")

    assert Carrier().names == ("a",) and option_help(Carrier) == option_help(toy)


@pytest.mark.parametrize(("hint", "good", "bad"), [
    (int | None, [None, 3], ["3", True, 2.5]),
    (float, [1, 2.5], ["x", None, False]),
    (bool, [True], [1, "yes"]),
    (pd.Timestamp | None, ["2020-01-02", datetime.date(2020, 1, 2), None], [20200102]),
    (tuple[str, ...], [["a"], ("a", "b")], ["a"]),
])
def test_type_ok_reads_resolved_hints(hint, good, bad):
    assert all(type_ok(v, hint) for v in good)
    assert not any(type_ok(v, hint) for v in bad)


def test_a_bad_type_is_named_with_its_hint():
    with pytest.raises(ConfigError, match=r"x\.toml: \[walk_forward\] purge = 'x': expected int \| None"):
        build_section("walk_forward", {"purge": "x"}, "x.toml")
    with pytest.raises(ConfigError, match=r"start = 3: expected date \| None"):
        build_section("walk_forward", {"start": 3}, "x.toml")
    assert build_section("walk_forward", {"purge": 2, "start": datetime.date(2020, 1, 2)}).purge == 2
