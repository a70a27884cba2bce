"""The options bind_core's messages advise: every ``Option("name", ...)`` written in its source.

The command line and the HTTP API each test that they can say every one of them in their own terms.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bind_core


def advised_options() -> set[str]:
    """The names of every :class:`bind_core.errors.Option` built in bind_core's source (at least one: the scan
    fails loudly rather than find none)."""
    names: set[str] = set()
    for path in Path(bind_core.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Option":
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant) and isinstance(first.value, str), (path, ast.dump(node))
                names.add(first.value)
    assert names, "no Option(...) found in bind_core"
    return names
