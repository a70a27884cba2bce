"""The audit on a GPU gives the CPU's numbers (skipped without CUDA; CI has none, a lent device runs them:
docs/SCALE.md "GPU workers"). Each case estimates one model's influence on both devices from the same weights, so
the two results differ only by the order of floating-point sums."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence import estimate
from bind_core.influence.arguments import InfluenceArguments
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import run_audit
from bind_core.pipeline.config import AuditConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _graph() -> Graph:
    return synthetic(400, seed=2, train_per_class=40)


def _on_gpu(model: TrainedModel) -> TrainedModel:
    clone = TrainedModel.from_bytes(model.to_bytes(), model.config_dict())
    clone.module.to("cuda")
    return clone


def _same(cpu: torch.Tensor, gpu: torch.Tensor) -> None:
    scale = float(cpu.abs().max())
    assert float((cpu - gpu.cpu()).abs().max()) <= 1e-8 * scale


@pytest.mark.parametrize(
    ("arch", "layers", "kwargs"),
    [
        ("gcn", 1, {}),
        ("gcn", 2, {"method": "step"}),
        ("sage", 2, {"solver": "lanczos"}),  # the Lanczos operator's eigenpairs are made on the CPU
        ("sage", 2, {"method": "step", "solver": "lanczos"}),
    ],
)
def test_estimate_on_gpu_equals_cpu(arch: str, layers: int, kwargs: dict[str, Any]) -> None:
    graph = _graph()
    model = train(graph, TrainConfig(epochs=200), ModelConfig(arch=arch, layers=layers))
    cpu = estimate(model, graph, InfluenceArguments(**kwargs))
    gpu = estimate(_on_gpu(model), graph, InfluenceArguments(**kwargs))
    _same(cpu.delta, gpu.delta)


@pytest.mark.parametrize("layers", [1, 2])
def test_audit_on_gpu_runs_every_stage(layers: int) -> None:
    """Training, metrics, influence, debiasing and the self-check (re-optimisation at one layer, the proximal
    response at two), all on the GPU."""
    graph = _graph()
    config = AuditConfig(
        model=ModelConfig(layers=layers), training=TrainConfig(epochs=200), validation_sample=5, bootstrap=50
    )
    result = run_audit(graph, config, device="cuda")
    assert result.influence is not None and result.influence.delta.numel() == graph.train_idx.numel()
    assert result.validation is not None and result.debiasing is not None
    assert result.to_dict()["influence_summary"] is not None


def test_batched_deletions_on_gpu_equal_one_at_a_time() -> None:
    """The step estimate's deletions settled in batches (one block-diagonal product per layer) equal those settled
    one at a time on the GPU too, to 1e-10 of the largest."""
    from bind_core.influence.functional import FunctionalModel
    from bind_core.influence.step_nodes import step_estimate

    graph = synthetic(3000, avg_degree=3, seed=2, train_per_class=20)
    model = _on_gpu(train(graph, TrainConfig(epochs=100), ModelConfig(arch="gcn", layers=2, hidden=8)))
    fm = FunctionalModel.from_trained(model, graph)
    sequential = step_estimate(fm, keep_weights=True, batch_bytes=0)
    batched = step_estimate(fm, keep_weights=True)
    assert batched.solve.details["batch_size"] > 1
    assert torch.equal(batched.taken, sequential.taken)
    for got, expected in ((batched.delta, sequential.delta), (batched.weights, sequential.weights)):
        assert got is not None and expected is not None
        assert float((got - expected).abs().max()) <= 1e-10 * float(expected.abs().max())


def test_batched_edge_deletions_on_gpu_equal_one_at_a_time() -> None:
    """The settled edges of a two-layer GCN's audit (:func:`~bind_core.influence.deep_edges.estimate_edges_deep`) in
    batches (the device's default budget) equal those settled one at a time on the GPU too, to 1e-10 of the
    largest."""
    from bind_core.influence.batched import batch_size
    from bind_core.influence.deep_edges import estimate_edges_deep
    from bind_core.influence.edges import undirected_edges
    from bind_core.influence.functional import FunctionalModel
    from bind_core.influence.step import Stepper

    graph = synthetic(3000, avg_degree=3, seed=2, train_per_class=20)
    model = _on_gpu(train(graph, TrainConfig(epochs=100), ModelConfig(arch="gcn", layers=2, hidden=8)))
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    assert batch_size(stepper) > 1
    edges = undirected_edges(graph)
    train_mask = torch.zeros(graph.num_nodes, dtype=torch.bool)
    train_mask[graph.train_idx] = True
    edges = edges[train_mask[edges[:, 0]] | train_mask[edges[:, 1]]][:80]
    one = estimate_edges_deep(model, graph, edges=edges, settle=4, stepper=stepper, batch_bytes=0)
    many = estimate_edges_deep(model, graph, edges=edges, settle=4, stepper=stepper)
    assert one.settled is not None and many.settled is not None and torch.equal(one.settled, many.settled)
    assert float((many.delta - one.delta).abs().max()) <= 1e-10 * float(one.delta.abs().max())


def test_hessian_rows_in_blocks_on_gpu_equal_the_cpus() -> None:
    """The Newton finish's Hessian of a two-layer GCN on the GPU, formed in blocks of rows (the GPU's default), equals
    the CPU's, one row at a time (issue 36, item 2)."""
    from bind_core.training.hessian import dense_hessian_by_rows, row_batch
    from bind_core.training.objective import flat_objective

    graph = synthetic(500, seed=3)
    model = train(graph, TrainConfig(epochs=20, polish=False), ModelConfig(arch="gcn", layers=2, hidden=8))
    model.module.double()
    objective, theta, _ = flat_objective(model.module, model.prepare(graph), graph, model.train_config.weight_decay)
    cpu = dense_hessian_by_rows(objective, theta)
    model.module.cuda()
    objective, theta, _ = flat_objective(model.module, model.prepare(graph), graph, model.train_config.weight_decay)
    assert row_batch(theta.device) > 1
    gpu = dense_hessian_by_rows(objective, theta).cpu()
    assert torch.allclose(gpu, cpu, rtol=0.0, atol=1e-10 * float(cpu.abs().max()))


def test_deletion_threads_on_gpu_are_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU the deletions are batched, not threaded: asking for threads forks no stepper and changes nothing."""
    from bind_core.influence.functional import FunctionalModel
    from bind_core.influence.step import Stepper
    from bind_core.influence.step_nodes import step_estimate

    graph = synthetic(3000, avg_degree=3, seed=2, train_per_class=20)
    model = _on_gpu(train(graph, TrainConfig(epochs=100), ModelConfig(arch="gcn", layers=2, hidden=8)))
    fm = FunctionalModel.from_trained(model, graph)
    one = step_estimate(fm)
    monkeypatch.setattr(Stepper, "fork", lambda self: pytest.fail("forked on a GPU"))
    threaded = step_estimate(fm, threads=4)
    assert torch.equal(threaded.delta, one.delta)
