"""The public face of bind_core: the README's six-line example runs as written, and the names it promises exist."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import torch

import bind_core as bc
from bind_core.influence.result import InfluenceResult

ROOT = Path(__file__).resolve().parents[2]


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## The library in six lines", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the README's library section has no python block"
    return match.group(1)


def test_the_readme_example_runs_and_debiases(capsys: pytest.CaptureFixture[str]) -> None:
    code = _readme_example()
    statements = [line for line in code.splitlines() if line.strip() and not line.startswith("#")]
    assert len(statements) <= 6, statements  # the section's title is a promise
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)  # the project's own README
    rows = scope["rows"]
    assert isinstance(rows, list) and len(rows) == 1
    row = rows[0]
    assert isinstance(row, bc.DebiasingRow) and row.deleted >= 1 and row.budget == 0.05
    assert row.before.delta_sp is not None and row.after.delta_sp is not None
    assert "->" in capsys.readouterr().out
    assert isinstance(scope["influence"], InfluenceResult)


def test_the_public_face_lists_what_a_user_needs() -> None:
    names = set(bc.__all__)
    assert {
        "load_dataset", "synthetic", "from_files", "Graph", "ModelConfig", "TrainConfig", "train",
        "estimate_influence", "InfluenceArguments", "debias", "run_audit", "AuditConfig", "AuditResult",
        "SIGN_CONVENTION", "BindError",
    } <= names  # fmt: skip
    assert all(hasattr(bc, name) for name in names)
    assert 15 <= len(names) <= 30


def test_debias_takes_the_estimate_or_its_delta(small_model: bc.TrainedModel, small_graph: bc.Graph) -> None:
    influence = bc.estimate_influence(small_model, small_graph)
    whole = bc.debias(small_model, small_graph, influence, budgets=(3,))
    bare = bc.debias(small_model, small_graph, influence.delta, budgets=(3,), lam=influence.lam)
    assert whole[0].nodes == bare[0].nodes
    assert whole[0].after == bare[0].after


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"solver": "cgg"}, "solver: 'cgg' is not one of auto, exact, cg, lissa, lanczos"),
        ({"method": "newton"}, "method: 'newton' is not one of auto, linear, step"),
        ({"lam": 1.5}, "lam: 1.5 must be in [0, 1]"),
        ({"cg_tol": -1.0}, "cg_tol: -1.0 must be a finite number >= 0"),
        ({"lissa_depth": 0}, "lissa_depth: 0 must be >= 1"),
    ],
)
def test_influence_arguments_quote_a_bad_value(changes: dict[str, object], message: str) -> None:
    with pytest.raises(bc.ConfigError) as caught:
        bc.InfluenceArguments(**changes)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_influence_arguments_choose_the_estimate(small_model: bc.TrainedModel, small_graph: bc.Graph) -> None:
    exact = bc.estimate_influence(small_model, small_graph, bc.InfluenceArguments(solver="exact"))
    cg = bc.estimate_influence(small_model, small_graph, bc.InfluenceArguments(solver="cg"))
    assert exact.solve.solver == "exact" and cg.solve.solver == "cg"
    assert torch.allclose(exact.delta, cg.delta, rtol=1e-4, atol=1e-9)
    assert bc.InfluenceArguments().but(solver="cg") == bc.InfluenceArguments(solver="cg")
    assert bc.InfluenceArguments.from_dict({"solver": "cg", "lam": 0.3}).lam == 0.3


# ---------------------------------------------------------------------- the reference's docstrings
SECTION = re.compile(r"^\s*([A-Z][a-z]+):\s*$")
ENTRY = re.compile(r"^\s*(\**[A-Za-z_][\w, *]*?)(?: \([^)]*\))?:(?:\s|$)")


def _documented(doc: str, sections: tuple[str, ...]) -> set[str] | None:
    """The names listed under the docstring's ``sections`` (Google style), ``None`` when it has none of them."""
    names: set[str] | None = None
    inside = False
    for line in doc.splitlines():
        heading = SECTION.match(line)
        if heading:
            inside = heading.group(1) in sections
            names = set() if inside and names is None else names
            continue
        entry = ENTRY.match(line) if inside else None
        if entry and names is not None:
            names |= {n.strip().lstrip("*") for n in entry.group(1).split(",")}
    return names


def _gaps(label: str, obj: Any, doc: str | None, *, bound: bool, sections: tuple[str, ...] = ("Args",)) -> list[str]:
    """What ``obj``'s docstring lacks: the docstring, an ``Args:`` entry per parameter, ``Returns:``."""
    if not doc:
        return [f"{label}: no docstring"]
    signature = inspect.signature(obj)
    params = [n for n in signature.parameters if not (bound and n in ("self", "cls"))]
    gaps = []
    listed = _documented(doc, sections) or set()
    missing = [n for n in params if n not in listed]
    if missing:
        gaps.append(f"{label}: {'/'.join(sections)} lacks {missing}")
    returns = signature.return_annotation
    if returns not in (inspect.Signature.empty, None, "None") and "Returns:" not in doc and "Yields:" not in doc:
        gaps.append(f"{label}: no Returns:")
    return gaps


def _public_methods(cls: type) -> list[tuple[str, Any]]:
    """The class's public methods (not properties), its own and those it inherits from bind_core's bases, as plain
    functions."""
    out: dict[str, Any] = {}
    for owner in reversed([k for k in cls.__mro__ if k.__module__.startswith("bind_core")]):
        for name, member in vars(owner).items():
            function = member.__func__ if isinstance(member, classmethod | staticmethod) else member
            if not name.startswith("_") and inspect.isfunction(function):
                out[name] = function
    return sorted(out.items())


def test_every_public_name_documents_its_arguments_and_returns() -> None:
    """What the library reference (docs/library.md, mkdocstrings) renders: every exported function and every public
    method of an exported class lists each argument under ``Args:`` and has ``Returns:`` when it returns a value;
    every exported class lists its constructor's arguments under ``Args:`` or ``Attributes:``."""
    gaps: list[str] = []
    for name in bc.__all__:
        obj = getattr(bc, name)
        if inspect.isclass(obj):
            own_init = not issubclass(obj, BaseException) or "__init__" in vars(obj)
            if own_init:
                gaps += _gaps(name, obj, obj.__doc__, bound=True, sections=("Args", "Attributes"))
            for method, function in _public_methods(obj):
                gaps += _gaps(f"{name}.{method}", function, function.__doc__, bound=True)
        elif callable(obj):
            gaps += _gaps(name, obj, obj.__doc__, bound=False)
    assert gaps == [], "\n".join(gaps)


def test_the_docstring_check_sees_a_missing_argument() -> None:
    def documented(graph: bc.Graph, seed: int) -> int:
        """Something.

        Args:
            graph: the graph.

        Returns:
            A number.
        """
        return seed

    assert _gaps("f", documented, documented.__doc__, bound=False) == ["f: Args lacks ['seed']"]
    bare = "Something.\n\nArgs:\n    graph: the graph.\n    seed: a seed.\n"
    assert _gaps("f", documented, bare, bound=False) == ["f: no Returns:"]
