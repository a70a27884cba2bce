"""bind_core's modules import one another without cycles (issue 18), counting every import: at the top, under
``TYPE_CHECKING`` and inside functions; and no bind_core module is imported inside a function or under
``TYPE_CHECKING`` (only optional or heavy third-party packages are loaded lazily)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "bind_core"


def _modules() -> dict[str, Path]:
    out = {}
    for path in (ROOT / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    return [base] + [f"{base}.{a.name}" for a in node.names]


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {m: set() for m in modules}
    nested: list[str] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported(node, module, is_package):
                target = resolve(name) if name.startswith(PACKAGE) else None
                while target is not None and target != module and not module.startswith(target + "."):
                    edges[module].add(target)  # the module and the packages above it are imported
                    target = target.rpartition(".")[0] or None
        lazy = [n for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) for n in ast.walk(f)]
        lazy += [
            n for f in ast.walk(tree) if isinstance(f, ast.If) and "TYPE_CHECKING" in ast.unparse(f.test)
            for n in ast.walk(f)
        ]  # fmt: skip
        for n in lazy:
            if isinstance(n, ast.Import | ast.ImportFrom) and any(
                x.startswith(PACKAGE) for x in _imported(n, module, is_package)
            ):
                nested.append(f"{module}:{n.lineno}")
    return edges, nested


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_bind_core_has_no_import_cycles() -> None:
    edges, _ = _graph()
    assert sum(map(len, edges.values())) > 100  # the graph was read
    assert _cycles(edges) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_bind_core_module_is_imported_lazily() -> None:
    _, nested = _graph()
    assert nested == []
