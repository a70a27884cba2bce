"""The public face of bind_core: the README's six-line example runs as written, and the names it promises exist."""

from __future__ import annotations

import re
from pathlib import Path

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
    assert row["deleted"] >= 1 and row["budget"] == 0.05
    assert set(row["before"]) >= {"accuracy", "delta_sp", "delta_eo", "gamma"}
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
    assert whole[0]["nodes"] == bare[0]["nodes"]
    assert whole[0]["after"] == pytest.approx(bare[0]["after"])


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
