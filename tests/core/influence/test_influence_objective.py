"""The influence code's training objective (:meth:`FunctionalModel.objective`) on the training nodes' computation
graph: the whole graph's objective, its gradient and its Hessian-vector products, at a fraction of the cost."""

from __future__ import annotations

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.solvers import make_hvp, retained_hvp
from bind_core.models.gnn import ModelConfig, node_losses
from bind_core.training.fit import TrainConfig, train


@pytest.fixture(scope="module")
def sparse_graph() -> Graph:
    """Few training nodes of a sparse graph: their computation graph is a small part of it."""
    return synthetic(3000, avg_degree=3, seed=2, train_per_class=20)


@pytest.mark.parametrize("arch", ["gcn", "sage", "gin"])
def test_objective_on_the_computation_graph_equals_the_whole_graphs(sparse_graph: Graph, arch: str) -> None:
    model = train(sparse_graph, TrainConfig(epochs=20, polish=False), ModelConfig(arch=arch, layers=2, hidden=8))
    fm = FunctionalModel.from_trained(model, sparse_graph)
    inputs = fm.objective_rows().inputs
    assert inputs is not fm.inputs and inputs.x.shape[0] < sparse_graph.num_nodes / 2  # the computation graph

    train_idx = sparse_graph.train_idx

    def whole(flat: torch.Tensor) -> torch.Tensor:
        losses = node_losses(fm.logits(flat, train_idx, fm.inputs), sparse_graph.y[train_idx])
        return losses.mean() + 0.5 * fm.weight_decay * (flat * flat).sum()

    theta = fm.theta
    assert abs(float(fm.objective(theta) - whole(theta))) <= 1e-12
    assert float((torch.func.grad(fm.objective)(theta) - torch.func.grad(whole)(theta)).abs().max()) <= 1e-12
    vector = torch.randn(theta.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = make_hvp(whole, theta)(vector)
    assert float(expected.abs().max()) > 1e-4
    for product in (make_hvp(fm.objective, theta), retained_hvp(fm.objective, theta)):
        assert float((product(vector) - expected).abs().max()) <= 1e-10 * float(expected.abs().max())


def test_one_layer_objective_keeps_the_training_rows(sparse_graph: Graph) -> None:
    """A one-layer model has no computation graph to cut: its objective reads the training rows directly."""
    model = train(sparse_graph, TrainConfig(epochs=5, polish=False), ModelConfig(arch="gcn", layers=1, hidden=8))
    fm = FunctionalModel.from_trained(model, sparse_graph)
    assert fm.objective_rows().inputs is fm.inputs and fm.objective_rows().nodes is None
