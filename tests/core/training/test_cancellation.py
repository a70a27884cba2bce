"""Cancellation reaches every long loop: a progress callback that says stop (returns ``False``) ends
`run_audit` with `AuditCancelled` from inside the loop that was running, and the lower-level loops stop at
their first report when it raises."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.errors import AuditCancelled
from bind_core.influence.solvers import make_hvp, solve_cg, solve_lissa
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.training.hessian import dense_hessian, dense_hessian_by_rows
from bind_core.training.newton import newton_finish


class Stop(Exception):
    pass


def _frames(exc: BaseException) -> list[str]:
    names, tb = [], exc.__traceback__
    while tb is not None:
        names.append(tb.tb_frame.f_code.co_name)
        tb = tb.tb_next
    return names


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(160, seed=4, train_per_class=30)


def _cancel_when(
    predicate: Callable[[str, float, int], bool],
) -> tuple[Callable[[str, float], bool], dict[str, Any]]:
    """A progress callback that answers ``False`` from the first report matching ``predicate(stage, fraction,
    calls so far in that stage)``, and records when it first did."""
    seen: dict[str, Any] = {"calls": {}, "at": None}

    def progress(stage: str, fraction: float) -> bool:
        count = seen["calls"][stage] = seen["calls"].get(stage, 0) + 1
        if seen["at"] is None and predicate(stage, fraction, count):
            seen["at"] = time.perf_counter()
        return seen["at"] is None

    return progress, seen


def _chance(start: float) -> Callable[[str, float, int], bool]:
    """Stop a few reports into the check against chance: the debiasing reports from ``start`` of its parts on once its
    own retrainings (the budget's graph, and the unchanged graph with ``debias_retrain``) are done; the check's
    retrainings then report at that fraction until their first group ends."""
    count = [0]

    def when(stage: str, fraction: float, _calls: int) -> bool:
        if stage == "debiasing" and fraction >= start - 1e-12:
            count[0] += 1
        return count[0] > 3

    return when


BASE: dict[str, Any] = {
    "training": {"epochs": 30, "lr": 0.01},
    "bootstrap": 0,
    "budgets": [2],
    "validation_sample": 3,
}

CASES: list[tuple[str, dict[str, Any], Callable[[str, float, int], bool], str]] = [
    # (name, config overrides, when to say stop, a function the stop must come from)
    ("training epochs", {"training": {"epochs": 5000, "polish": False}}, lambda s, f, n: s == "training" and n > 3,
     "_adam"),
    ("L-BFGS polish", {}, lambda s, f, n: s == "training" and f > 0.8, "closure"),
    ("Hessian rows", {"model": {"layers": 2, "hidden": 8}, "estimator": "linear", "solver": "exact"},
     lambda s, f, n: s == "influence" and 0.1 < f < 0.4, "dense_hessian_by_rows"),
    ("curvature's Jacobian", {"model": {"layers": 2, "hidden": 8}, "estimator": "step"},
     lambda s, f, n: s == "influence" and 0 < f <= 0.1, "gauss_newton"),
    ("CG iterations", {"solver": "cg"}, lambda s, f, n: s == "influence" and 0.1 < f < 0.4, "solve_cg"),
    ("per-node terms", {"model": {"layers": 2, "hidden": 8}, "estimator": "linear", "solver": "cg"},
     lambda s, f, n: s == "influence" and f > 0.5, "deletion_terms"),
    ("step estimate, per node", {"model": {"layers": 2, "hidden": 8}, "estimator": "step"},
     lambda s, f, n: s == "influence" and 0.2 < f < 1.0, "step_estimate"),
    ("debiasing retrain", {}, lambda s, f, n: s == "debiasing" and n > 3, "_adam"),
    ("chance retrains", {"debias_seeds": [1, 2, 3], "debias_random_sets": 1}, _chance(1 / 3), "_retrain"),
    ("Adam-only retrains", {"debias_retrain": "adam"}, lambda s, f, n: s == "debiasing" and n > 3, "_adam"),
    ("Adam-only chance retrains", {"debias_retrain": "adam", "debias_seeds": [1, 2, 3], "debias_random_sets": 1},
     _chance(2 / 4), "_retrain"),  # the unchanged graph and the budget retrained first
    ("validation re-optimisation", {}, lambda s, f, n: s == "validation" and n > 3, "closure"),
]  # fmt: skip


@pytest.mark.heavy  # 6 s here
@pytest.mark.parametrize(("name", "overrides", "when", "inside"), CASES, ids=[c[0] for c in CASES])
def test_run_audit_stops_inside_the_running_loop(
    graph: Graph, name: str, overrides: dict[str, Any], when: Callable[[str, float, int], bool], inside: str
) -> None:
    settings = {**BASE, **overrides}
    settings["training"] = {**BASE["training"], **overrides.get("training", {})}
    progress, seen = _cancel_when(when)
    with pytest.raises(AuditCancelled) as caught:
        run_audit(graph, AuditConfig.from_dict(settings), progress=progress)
    stopped = time.perf_counter()
    assert seen["at"] is not None, name
    assert caught.value.stage in {"training", "influence", "debiasing", "validation"}
    assert inside in _frames(caught.value), f"{name}: stopped in {_frames(caught.value)}"
    assert stopped - seen["at"] < 2.0, name


def test_a_callback_that_never_says_stop_runs_the_audit(graph: Graph) -> None:
    progress, seen = _cancel_when(lambda s, f, n: False)
    result = run_audit(graph, AuditConfig.from_dict(BASE), progress=progress)
    assert result.validation is not None and seen["at"] is None
    assert set(seen["calls"]) >= {"training", "metrics", "influence", "debiasing", "validation"}


def _quadratic(p: int) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
    a = torch.randn(p, p, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    h = a @ a.T + p * torch.eye(p, dtype=torch.float64)

    def objective(theta: torch.Tensor) -> torch.Tensor:
        return 0.5 * theta @ h @ theta + torch.sin(theta).sum()

    return objective, torch.ones(p, dtype=torch.float64)


def _raise(_fraction: float) -> None:
    raise Stop


@pytest.mark.parametrize(
    "run",
    [
        lambda f, t: dense_hessian(f, t, chunk=4, progress=_raise),
        lambda f, t: dense_hessian_by_rows(f, t, progress=_raise),
        lambda f, t: solve_cg(make_hvp(f, t), t.unsqueeze(1), progress=_raise),
        lambda f, t: solve_lissa(make_hvp(f, t), t.unsqueeze(1), progress=_raise),
        lambda f, t: newton_finish(f, t, tol=1e-300, progress=_raise),
    ],
    ids=["hessian columns", "hessian rows", "cg", "lissa", "newton (while forming its Hessian)"],
)
def test_each_loop_stops_at_its_first_report(run: Callable[[Any, torch.Tensor], Any]) -> None:
    objective, theta = _quadratic(12)
    with pytest.raises(Stop):
        run(objective, theta)
