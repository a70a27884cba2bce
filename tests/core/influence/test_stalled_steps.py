"""Chord steps that stall on a ReLU model's kinks stop early (:data:`bind_core.influence.step.STALL_HALVINGS`): on an
early-stopped PyG ReLU GCN the minimum of a deletion's objective lies on kinks, where no gradient vanishes, and the
steps zigzag across it in ever smaller, ever more halved steps. Stopping there changes the values little, the
batched path stops where the sequential one does, and the audit says how many stalled."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from pyg_models import early_stopped
from safetensors.torch import save

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence import step
from bind_core.influence.batch_inputs import Structures
from bind_core.influence.batched import batchable
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.influence.step_nodes import step_estimate
from bind_core.pipeline.audit import AuditConfig
from bind_core.pipeline.caveats import _question_warnings, _self_check_causes
from bind_core.pipeline.reference import prepare_for_audit

POSITIONS = range(10)


@pytest.fixture(scope="module")
def relu_gcn() -> FunctionalModel:
    return _relu_gcn(synthetic(160, seed=4, train_per_class=25))


@pytest.fixture(scope="module")
def sparse_relu_gcn() -> FunctionalModel:
    """On a sparse graph, whose training nodes' computation graph is a small part of it (the batched path's case)."""
    return _relu_gcn(synthetic(3000, avg_degree=3, seed=2, train_per_class=20))


def _relu_gcn(graph: Graph) -> FunctionalModel:
    """A two-layer PyG GCN (ReLU, PyG's default) trained as PyG users train: Adam, the best validation loss kept."""
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    kept = early_stopped("GCN", args, graph).state_dict()
    config = {"format": "torch_geometric", "class": "GCN", "args": args, "training": {"loss": "cross_entropy"}}
    config["training"]["weight_decay"] = 5e-4
    model, _ = prepare_for_audit(save({k: v.contiguous() for k, v in kept.items()}), config, graph, AuditConfig())
    return FunctionalModel.from_trained(model, graph)


@pytest.mark.heavy  # ~10 s here
def test_stalled_steps_stop_early_with_nearly_the_same_values(
    relu_gcn: FunctionalModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    stepper = Stepper.build(relu_gcn)
    monkeypatch.setattr(step, "FINISH_EVALUATIONS", 0)  # the chord steps alone: the stall rule's own effect
    stopping = [stepper.delete([p]) for p in POSITIONS]
    monkeypatch.setattr(step, "STALL_HALVINGS", 10**9)  # never stalls: every step until tol or STEPS
    going_on = [stepper.delete([p]) for p in POSITIONS]
    stalled = [a for a, b in zip(stopping, going_on, strict=True) if a.taken < b.taken]
    assert len(stalled) >= 3  # the rule fired, on deletions that did not settle
    assert all(a.residual > stepper.tol and a.taken < step.STEPS for a in stalled)
    scale = max(float(b.delta.abs().max()) for b in going_on)
    for a, b in zip(stopping, going_on, strict=True):
        assert a.taken <= b.taken
        if a.taken == b.taken:  # the same path to the end: the same values
            assert torch.equal(a.delta, b.delta)
        assert float((a.delta - b.delta).abs().max()) <= 0.02 * scale  # measured: 0.6% of the largest


@pytest.mark.heavy  # ~20 s here
def test_the_batched_path_stalls_where_the_sequential_one_does(sparse_relu_gcn: FunctionalModel) -> None:
    stepper = Stepper.build(sparse_relu_gcn)
    assert batchable(stepper)
    sequential = step_estimate(sparse_relu_gcn, batch_bytes=0)
    per_deletion = Structures.of(stepper).bytes_per_deletion()
    batched = step_estimate(sparse_relu_gcn, batch_bytes=5 * per_deletion)
    assert batched.solve.details["batch_size"] == 5
    assert torch.equal(batched.taken, sequential.taken)
    valued = ~sequential.delta.isnan()  # a deletion without a minimum near θ̂ (the finish tells it) has no value
    assert torch.equal(batched.delta.isnan(), ~valued) and torch.equal(~valued.any(dim=1), sequential.far)
    scale = float(sequential.delta[valued].abs().max())
    assert float((batched.delta - sequential.delta)[valued].abs().max()) <= 1e-10 * scale
    details = sequential.solve.details
    short = (sequential.residual > details["tol"]) & (sequential.taken < details["steps_max"])
    stalled = int((short & ~sequential.far).sum())
    assert details["stalled"] == stalled >= 10 and details["unsettled"] >= stalled


def test_the_warning_tells_stalled_deletions_from_those_out_of_steps() -> None:
    details = {"method": "step", "damping": 1e-3, "unsettled": 5, "stalled": 3, "steps_max": 20, "max_residual": 2e-3}
    influence = SimpleNamespace(solve=SimpleNamespace(details=details), delta=torch.zeros(40))
    (said,) = [w for w in _question_warnings(influence) if "did not settle" in w]  # type: ignore[arg-type]
    assert said.startswith("5 of 40 nodes' steps did not settle (largest remaining gradient entry 2.0e-03): on a")
    assert "model with kinks the objective's minimum lies on its kinks, where no gradient vanishes" in said
    assert "then L-BFGS stopped at the lowest objective they found (once 10 evaluations in a row lowered it" in said
    assert "; their values are approximate (their rows say settled: false" in said and "stalled" not in said
    details |= {"mixed": True}  # a smooth model: the rule itself, not kinks
    (said,) = [w for w in _question_warnings(influence) if "did not settle" in w]  # type: ignore[arg-type]
    assert "kinks" not in said
    assert "3 stalled before their 20 steps (they stopped making progress, each step had to be halved at least" in said
    assert "least 4 times and moved the weights by at most 1% of their way from the given weights)" in said
    details |= {"stalled": 0}
    (said,) = [w for w in _question_warnings(influence) if "did not settle" in w]  # type: ignore[arg-type]
    assert "stalled" not in said and ": 5 ran out of their 20 steps and the L-BFGS finish's 300 evaluations;" in said
    details |= {"no_minimum": 2}  # told apart: their own warning, and not among the approximate ones
    said = " ".join(_question_warnings(influence))  # type: ignore[arg-type]
    assert "2 of 40 nodes' deletions have no minimum near the given weights" in said and "its ΔΓ is null" in said
    assert "3 of 40 nodes' steps did not settle" in said and ": 3 ran out of their 20 steps" in said


def test_a_low_self_checks_causes_count_the_unsettled_nodes_with_a_value_and_fit_the_estimate() -> None:
    details = {"method": "step", "unsettled": 100, "no_minimum": 19, "stalled": 70, "steps_max": 20}
    influence = SimpleNamespace(solve=SimpleNamespace(details=details), delta=torch.zeros(100))
    validation = SimpleNamespace(clear_of_noise=None)
    said = " ".join(_self_check_causes(influence, validation, None, None))  # type: ignore[arg-type]
    assert "81 nodes' steps did not settle (their values are the lowest objective found on this model's kinks)" in said
    assert "refine_steps" not in said  # it re-optimises without the damping: another question than the step estimate's
    details |= {"mixed": True}
    said = " ".join(_self_check_causes(influence, validation, None, None))  # type: ignore[arg-type]
    assert "(their values are where the steps and the L-BFGS finish stopped)" in said
