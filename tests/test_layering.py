"""DESIGN.md's one-way imports: api <- fleet <- propagator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"api": {"fleet", "propagator"}, "fleet": {"propagator"}, "propagator": set()}


def _imported_top_levels(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_downstream(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_top_levels(path) & FORBIDDEN[package])
        for path in (ROOT / package).rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_api_does_no_io() -> None:
    io_modules = {"kubernetes", "subprocess", "socket", "urllib", "http", "requests", "anyio"}
    used = {
        str(path.relative_to(ROOT)): sorted(_imported_top_levels(path) & io_modules)
        for path in (ROOT / "api").rglob("*.py")
    }
    assert {k: v for k, v in used.items() if v} == {}
