"""A GAT's training nodes' computation graph (:func:`~bind_core.training.compgraph.attention_graph`): each layer only
the edges into the rows the next one reads. The training rows' logits equal the whole graph's; the step estimate's
deletions, evaluated there and with Γ's test rows read the same way, equal those on the whole graph."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.compgraph import attention_graph
from bind_core.training.fit import TrainConfig, train


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(300, seed=3, train_per_class=20)


@pytest.mark.parametrize(("layers", "v2"), [(1, False), (2, True), (3, False)])
def test_the_training_rows_on_the_attention_graph_are_the_whole_graphs(graph: Graph, layers: int, v2: bool) -> None:
    model = train(graph, TrainConfig(epochs=5, polish=False), ModelConfig(arch="gat", layers=layers, heads=2, v2=v2))
    fm = FunctionalModel.from_trained(model, graph)
    sub = attention_graph(fm.module, fm.inputs, graph)
    assert sub.inputs.layer_edges is not None and len(sub.inputs.layer_edges) == layers
    sizes = [int(e.shape[1]) for e in sub.inputs.layer_edges]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < graph.edge_index.shape[1]  # fewer edges, layer by layer
    assert torch.equal(sub.nodes[sub.train_idx], graph.train_idx)
    whole = fm.logits(fm.theta, graph.train_idx.to(fm.device), fm.inputs)
    assert torch.allclose(fm.logits(fm.theta, sub.train_idx, sub.inputs), whole, rtol=0.0, atol=1e-12)
    rows = fm.objective_rows()  # the estimate's objective lives there
    assert rows.nodes is not None and torch.equal(rows.nodes, sub.nodes)


@pytest.mark.parametrize("layers", [1, 2])
def test_a_gats_deletions_there_equal_those_on_the_whole_graph(graph: Graph, layers: int) -> None:
    recipe = TrainConfig(epochs=50, lr=0.01, weight_decay=5e-3, polish=True)  # a minimum: every deletion has one near
    model = train(graph, recipe, ModelConfig(arch="gat", layers=layers, heads=2))
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    assert stepper.view is not None and stepper.test_view is not None
    whole = dataclasses.replace(stepper, view=None, test_view=None)  # the objective and Γ on all of G − S
    for position in (0, 7, 23):
        fast, slow = stepper.delete([position]), whole.delete([position])
        assert fast.far is None and slow.far is None
        assert torch.allclose(fast.delta, slow.delta, rtol=1e-8, atol=1e-12), (fast.delta, slow.delta)
        assert torch.allclose(fast.direct, slow.direct, rtol=1e-8, atol=1e-12)
        assert torch.allclose(fast.weights, slow.weights, rtol=1e-8, atol=1e-10)
        assert (fast.taken, fast.finished) == (slow.taken, slow.finished)
