"""The layout's rules, checked on the source: each part of ``forecaster`` imports only the
parts below it, each room of ``forecaster/data`` only the rooms it may, the forecaster reaches
``seq2seq`` through its core only, no module is past 500 lines, reporting renders and never
computes, and one ``forecaster backtest`` builds its Panel once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from click.testing import CliRunner

import forecaster
from forecaster.app.cli import main
from forecaster.data import Panel, write_synthetic_panel

ROOT = Path(forecaster.__file__).parent

# What each sub-package may import from the package (besides itself). The arrows of
# ARCHITECTURE.md: data -> features -> models -> portfolio -> evaluation -> reporting -> app.
ALLOWED = {
    "data": set(),
    "metrics": set(),
    # The point-in-time risk model: exposures, factor covariance, specific risk, bias checks.
    "risk": {"data", "metrics"},
    "features": {"data"},
    "models": {"data", "metrics", "features"},
    "portfolio": {"data", "metrics", "risk"},
    "evaluation": {"data", "metrics", "features", "models", "portfolio", "risk"},
    # Renders what evaluation computed (with the metrics' pure functions for a figure's
    # caption figures): no models, features or backtests.
    "reporting": {"data", "metrics", "evaluation", "risk"},
    "app": {"data", "metrics", "features", "models", "portfolio", "evaluation", "reporting", "risk"},
}
# Top-level modules every part may use: the package's checks of option values.
SHARED = {"checks", "configs"}

# The rooms of forecaster/data (its sub-packages) and its loose modules, and what each may import
# of the others (ARCHITECTURE.md). ``sources`` decides what a path is (a Qlib folder, a folder of
# files, a file in one of the layouts it registers) for the readers of ``daily`` (one file, a
# folder; a minute file's rows are made bars by ``minute``) and ``qlib``; ``minute`` builds on the
# daily layouts' type and quality margins; ``market`` (exchange facts, universes) reads codes and
# errors only; generated data (``synthetic``) reads no file; ``panel`` aligns frames; nothing of
# data imports ``synthetic`` or ``fetch`` (only the package's ``__init__`` re-exports them), and
# no room imports ``forecaster.data`` itself.
DATA_ROOMS = {
    "sources": {"daily", "minute", "market"},
    "daily": {"sources", "minute", "market"},
    "minute": {"sources", "daily", "market"},
    "qlib": {"sources", "daily", "market", "panel"},
    "market": {"sources", "qlib"},
    "synthetic": {"market", "minute"},
    "panel": {"market", "minute"},
    "fetch": {"market"},
}
MAX_LOOSE_DATA_MODULES = 4  # modules of forecaster/data outside its rooms (__init__ aside)
MAX_LINES = 500  # no module of forecaster or seq2seq is longer


def _imports(path: Path, root: Path, package: str) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every import in ``path`` (nested ones included)."""
    module = ".".join((package, *path.relative_to(root).with_suffix("").parts))
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = module.split(".")[: -node.level if path.name != "__init__.py" else None]
                if path.name == "__init__.py" and node.level > 1:
                    base = base[: 1 - node.level]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
    return out


def violations(root: Path = ROOT, package: str = "forecaster") -> list[str]:
    """Every import that breaks the layout's rules, as ``file:line: what``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        part = parts[0] if len(parts) > 1 else None  # None: the package's own __init__
        for line, name in _imports(path, root, package):
            where = f"{path.relative_to(root)}:{line}"
            if name.split(".")[0] == "seq2seq" and name.split(".")[:2] != ["seq2seq", "core"]:
                found.append(f"{where}: imports {name} (only seq2seq.core is shared)")
            if part is None or not name.startswith(package + "."):
                continue
            target = name.split(".")[1]
            if target != part and target not in ALLOWED[part] and target not in SHARED:
                found.append(f"{where}: {part} imports {name} (allowed: {sorted(ALLOWED[part])})")
    return found


def data_violations(root: Path = ROOT / "data", package: str = "forecaster.data") -> list[str]:
    """Every import inside ``forecaster/data`` that breaks :data:`DATA_ROOMS`, as ``file:line: what``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if parts == ("__init__.py",):  # the package's public names, re-exported
            continue
        room = parts[0] if len(parts) > 1 else path.stem
        for line, name in _imports(path, root, package):
            where = f"data/{path.relative_to(root)}:{line}"
            if name == package:
                found.append(f"{where}: {room} imports {package} itself (import from the defining module)")
            if not name.startswith(package + "."):
                continue
            target = name.split(".")[2]
            if target != room and target not in DATA_ROOMS.get(room, ()):
                found.append(f"{where}: {room} imports {name} (allowed: {sorted(DATA_ROOMS.get(room, ()))})")
    return found


def test_every_part_imports_only_the_parts_below_it():
    assert set(ALLOWED) == {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert violations() == []


def test_the_checker_catches_a_broken_rule(tmp_path):
    pkg = tmp_path / "forecaster"
    for part in ("data", "reporting", "models"):
        (pkg / part).mkdir(parents=True)
        (pkg / part / "__init__.py").write_text("")
    (pkg / "data" / "loading.py").write_text("from forecaster.models.panel import model\n")
    (pkg / "reporting" / "report.py").write_text("import seq2seq.plots\nfrom ..models import x\n")
    (pkg / "models" / "net.py").write_text("from seq2seq.core import Encoder\n"
                                           "from forecaster.data import Panel\n")
    found = violations(pkg)
    assert len(found) == 3
    assert any("data/loading.py:1: data imports forecaster.models" in v for v in found)
    assert any("reporting/report.py:1: imports seq2seq.plots" in v for v in found)
    assert any("reporting/report.py:2: reporting imports forecaster.models" in v for v in found)


def import_cycles(root: Path = ROOT, package: str = "forecaster") -> list[list[str]]:
    """Circles of imports between the package's modules (imports inside functions included:
    an import moved into a function to dodge a circle is still one), each as its modules in
    order; a package's ``__init__`` (which re-exports) is left out."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        if path.name != "__init__.py":
            modules[".".join((package, *path.relative_to(root).with_suffix("").parts))] = path
    edges = {name: set() for name in modules}
    for name, path in modules.items():
        names = [target for _, target in _imports(path, root, package)]
        names += [f"{node.module}.{alias.name}" for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.ImportFrom) and node.module and not node.level
                  for alias in node.names]  # ``from a.b import c``: the module a.b.c, if it is one
        edges[name] = {target for target in names if target in modules and target != name}
    cycles, state, stack = [], {}, []

    def visit(node):  # depth-first search: a back edge closes a circle
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return cycles


def test_no_module_imports_itself_round_a_circle():
    assert import_cycles() == []


def test_the_circle_checker_finds_a_circle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "forecaster"
    (pkg / "app").mkdir(parents=True)
    (pkg / "app" / "__init__.py").write_text("")
    (pkg / "app" / "cli.py").write_text("from forecaster.app.score import score\n")
    (pkg / "app" / "score.py").write_text("def score():\n    from forecaster.app.cli import echo\n")
    (pkg / "app" / "alone.py").write_text("from forecaster.app import cli\n")
    assert import_cycles(pkg) == [["forecaster.app.cli", "forecaster.app.score"]]


def test_each_room_of_data_imports_only_the_rooms_it_may():
    data = ROOT / "data"
    rooms = {p.name for p in data.iterdir() if (p / "__init__.py").is_file()}
    loose = {p.stem for p in data.glob("*.py") if p.name != "__init__.py"}
    assert set(DATA_ROOMS) == rooms | loose
    assert data_violations() == []


def test_the_data_checker_catches_a_broken_rule(tmp_path):
    data = tmp_path / "data"
    for room in ("market", "synthetic"):
        (data / room).mkdir(parents=True)
        (data / room / "__init__.py").write_text("")
    (data / "__init__.py").write_text("from forecaster.data.synthetic.daily import synthetic_panel\n")
    (data / "market" / "exchange.py").write_text("from forecaster.data.synthetic.daily import x\n"
                                                 "from forecaster.data import Panel\n")
    (data / "synthetic" / "daily.py").write_text("from forecaster.data.market.exchange import board\n")
    (data / "sources.py").write_text("from .market import exchange\n")  # relative: allowed
    found = data_violations(data)
    assert len(found) == 2
    assert any("market/exchange.py:1: market imports forecaster.data.synthetic.daily" in v for v in found)
    assert any("market/exchange.py:2: market imports forecaster.data itself" in v for v in found)


def test_data_keeps_at_most_four_loose_modules():
    loose = sorted(p.name for p in (ROOT / "data").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE_DATA_MODULES, loose


def test_no_module_is_past_500_lines():
    files = [*ROOT.rglob("*.py"), *(ROOT.parent / "seq2seq").rglob("*.py")]
    long = {str(p.relative_to(ROOT.parent)): n for p in sorted(files)
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"modules past {MAX_LINES} lines: {long}"


def test_public_names_resolve():
    from forecaster import (  # noqa: F401
        CausalTransformerForecaster,
        Panel,
        PanelTransformer,
        WalkForwardConfig,
        load_csv,
        load_dir,
        synthetic_panel,
        walk_forward,
    )
    from forecaster.data import load_csv as data_load_csv
    from forecaster.data import load_dir as data_load_dir
    from forecaster.data import synthetic_panel as data_synthetic_panel

    assert (load_csv, load_dir, synthetic_panel) == (data_load_csv, data_load_dir, data_synthetic_panel)
    assert PanelTransformer.__module__ == "forecaster.models.panel.model"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        forecaster.nope  # noqa: B018


def test_a_backtest_builds_its_panel_once(tmp_path, monkeypatch):
    """The pipeline aligns the frames once and hands the Panel to the walk-forward, the
    scoring and every backtest."""
    write_synthetic_panel(tmp_path / "syn", n_stocks=8, n_days=260, signal_ic=0.05, seed=1)
    built = []
    original = Panel.from_frames.__func__

    def counting(cls, frames):
        built.append(len(frames))
        return original(cls, frames)

    monkeypatch.setattr(Panel, "from_frames", classmethod(counting))
    result = CliRunner().invoke(main, [
        "backtest", str(tmp_path / "syn"), "--out", str(tmp_path / "r"), "--window", "8",
        "--d-model", "8", "--heads", "2", "--layers", "1", "--epochs", "1", "--train-days", "150",
        "--retrain-every", "40", "--jobs", "1", "--no-seed-recipe"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "report.html").is_file()
    assert built == [8]
