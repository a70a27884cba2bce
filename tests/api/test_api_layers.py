"""The arrows between the layers point one way: bind_core <- app <- worker.

``bind_core`` imports neither ``app`` nor ``worker``; ``app`` never imports ``worker`` (it sends jobs by
task name). Checked on the source, so an import hidden inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"bind_core": {"app", "worker", "fastapi", "sqlalchemy", "celery"}, "app": {"worker"}}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[package])
        for path in sorted((ROOT / package).rglob("*.py"))
        if imported_packages(path) & FORBIDDEN[package]
    }
    assert offenders == {}, f"{package} must not import {sorted(FORBIDDEN[package])}: {offenders}"
