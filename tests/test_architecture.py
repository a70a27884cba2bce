"""The architecture holds: no import cycles, no imports hidden in functions, the arrows pointing one way, and
docs/ARCHITECTURE.md naming files that exist.

An independent check of what ``lint-imports`` enforces (the contracts in pyproject.toml), on the source with
``ast``: every import counts, including those under ``TYPE_CHECKING`` and inside functions.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bind_core", "app", "worker")
FORBIDDEN = {
    "bind_core": {"app", "worker", "fastapi", "starlette", "sqlalchemy", "celery", "kombu", "redis", "alembic"},
    "app": {"worker"},
}
LAZY = {
    "app/cli.py": "one command line for several programs: each subcommand imports what it runs, so that "
    "`bind-audit submit` (the API client, run from cron jobs) starts without loading torch or the database",
}
"""Modules allowed to import first-party code inside functions, and why (never to break a cycle)."""
OPTIONAL = {"mlflow", "zstandard", "playwright"}
"""Third-party packages that are optional extras: importing them inside the function that needs them is the
point (the module works without them), not a way around a cycle."""


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> Iterator[tuple[str, bool, int]]:
    """(imported module, inside a function?, line) for every import of a first-party module or package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    in_function: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            in_function |= {id(n) for n in ast.walk(node) if n is not node}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        for name in names:
            while name and name not in known and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in known or name.split(".")[0] in OPTIONAL | {"torch"}:
                yield name, id(node) in in_function, node.lineno


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    for module, path in known.items():
        for target, _, _ in imports(path, known):
            if target in known and target != module and not module.startswith(target + "."):
                edges[module].add(target)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check itself: a planted cycle and a planted self-contained chain."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_function_level_imports_of_first_party_code() -> None:
    """Imports inside functions are for optional third-party extras (and torch in start-up code) only."""
    known = modules()
    hidden = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for module, path in known.items()
        for target, inside, line in imports(path, known)
        if inside and target.split(".")[0] in PACKAGES and str(path.relative_to(ROOT)) not in LAZY
    ]
    assert hidden == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_import_direction(package: str) -> None:
    """bind_core <- app <- worker: bind_core imports no service code and no web, database or queue library;
    app never imports worker (it sends tasks by name)."""
    offenders = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        roots = {
            name.split(".")[0]
            for node in ast.walk(tree)
            for name in (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                else []
            )
        }
        if roots & FORBIDDEN[package]:
            offenders[str(path.relative_to(ROOT))] = sorted(roots & FORBIDDEN[package])
    assert offenders == {}


def test_architecture_doc_names_files_that_exist() -> None:
    """Every path docs/ARCHITECTURE.md names in backticks (``app/…``, ``worker/…``, ``bind_core/…``) exists."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:app|worker|bind_core|migrations|tests)/[\w/.]*)`", text))
    assert len(named) >= 20
    missing = sorted(p for p in named if not (ROOT / p.rstrip("/")).exists())
    assert missing == []


SERVICE_FACING = (
    "bind_core",
    "bind_core.cli",
    "bind_core.codec",
    "bind_core.data.datasets",
    "bind_core.influence.distributed",
    "bind_core.pipeline",
    "bind_core.pipeline.results",
    "bind_core.reporting",
)
"""What app/ and worker/ may import from bind_core: the public face and the named service-facing modules (the same
list as the import contract in pyproject.toml and docs/ARCHITECTURE.md)."""


def test_the_service_imports_bind_core_through_its_faces() -> None:
    """Every bind_core module app/ and worker/ import (at any level, including under TYPE_CHECKING and in
    functions) is one of :data:`SERVICE_FACING`."""
    known = modules()
    reached = {
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for module, path in known.items()
        if module.split(".")[0] in {"app", "worker"}
        for target, _, line in imports(path, known)
        if target.split(".")[0] == "bind_core" and target not in SERVICE_FACING
    }
    assert reached == set()


def test_the_contract_and_this_check_name_the_same_modules() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    allowed = set(re.findall(r'"(?:app|worker)\.\*\* -> ([\w.]+)"', text))
    assert allowed == set(SERVICE_FACING) - {"bind_core"}
