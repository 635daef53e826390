"""The layout's rules, checked on the source: each part of ``forecaster`` imports only the
parts below it, the forecaster reaches ``seq2seq`` through its core only, reporting renders and
never computes, and one ``forecaster backtest`` builds its Panel once."""

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
    "features": {"data"},
    "models": {"data", "metrics", "features"},
    "portfolio": {"data", "metrics"},
    "evaluation": {"data", "metrics", "features", "models", "portfolio"},
    # Renders what evaluation computed (with the metrics' pure functions for a figure's
    # caption figures): no models, features or backtests.
    "reporting": {"data", "metrics", "evaluation"},
    "app": {"data", "metrics", "features", "models", "portfolio", "evaluation", "reporting"},
}
# Top-level modules every part may use: the package's checks of option values.
SHARED = {"checks"}


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
