"""Edge deletions settled in batches (:func:`bind_core.influence.batched.settle_edge_batch`) equal those settled one
at a time (:meth:`Stepper.delete_edges`), and the reducer's ``G − e`` is the rebuilt graph's."""

from __future__ import annotations

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence.batch_inputs import Structures
from bind_core.influence.batched import batchable, settle_edge_batch
from bind_core.influence.deep_edges import estimate_edges_deep
from bind_core.influence.edges import undirected_edges
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Deletion, Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train


@pytest.fixture(scope="module")
def graph() -> Graph:
    """The batched node tests' sparse graph: the training nodes' computation graph is a small part of it."""
    return synthetic(3000, avg_degree=3, seed=2, train_per_class=20)


def _trained(graph: Graph, arch: str) -> TrainedModel:
    return train(graph, TrainConfig(epochs=100, polish=True), ModelConfig(arch=arch, layers=2, hidden=8))


def _near_training(graph: Graph, count: int) -> torch.Tensor:
    """The first ``count`` undirected edges with an endpoint among the training nodes (their deletions move the
    weights)."""
    edges = undirected_edges(graph)
    train = torch.zeros(graph.num_nodes, dtype=torch.bool)
    train[graph.train_idx] = True
    return edges[train[edges[:, 0]] | train[edges[:, 1]]][:count]


def _close(got: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-10) -> None:
    """Equal to ``rtol`` relative to the largest entry."""
    scale = float(expected.abs().max())
    assert scale > 0
    assert float((got.cpu() - expected.cpu()).abs().max()) <= rtol * scale


def _stack(outs: list[Deletion], name: str) -> torch.Tensor:
    values: list[torch.Tensor] = [getattr(out, name) for out in outs]
    return torch.stack(values)


@pytest.mark.parametrize("arch", ["gcn", "sage", "gin"])
def test_the_reducers_graph_without_an_edge_is_the_rebuilt_one(graph: Graph, arch: str) -> None:
    fm = FunctionalModel.from_trained(_trained(graph, arch), graph)
    stepper = Stepper.build(fm)
    pairs = _near_training(graph, 3)[1:]  # two edges deleted together
    reduced = stepper.reducer.reduce_edges(pairs).inputs
    rebuilt = fm.module.prepare(graph.without_edges(pairs), fm.theta.dtype, fm.device)
    assert reduced.x_prop is not None and rebuilt.x_prop is not None
    torch.testing.assert_close(reduced.x_prop, rebuilt.x_prop, rtol=1e-14, atol=1e-15)
    rows = stepper.test
    assert reduced.adjacency is not None and rebuilt.adjacency is not None
    got = reduced.adjacency.rows(rows)
    expected = rebuilt.adjacency.rows(rows)
    dense = [torch.sparse_csr_tensor(*b.parts, b.shape, check_invariants=True).to_dense() for b in (got, expected)]
    torch.testing.assert_close(dense[0], dense[1], rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_edge_deletions_in_a_batch_equal_one_at_a_time(
    graph: Graph, arch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fm = FunctionalModel.from_trained(_trained(graph, arch), graph)
    stepper = Stepper.build(fm)
    assert batchable(stepper)
    near = _near_training(graph, 14)
    sets = [near[k : k + 1] for k in range(12)] + [near[12:14]]  # twelve edges, then two together
    sequential = [stepper.delete_edges(pairs) for pairs in sets]
    alone: list[torch.Tensor] = []  # deletions the batch settled again alone (close calls, unsettled)
    delete_edges = Stepper.delete_edges

    def counted(self: Stepper, edges: torch.Tensor) -> Deletion:
        alone.append(edges)
        return delete_edges(self, edges)

    monkeypatch.setattr(Stepper, "delete_edges", counted)
    batched = settle_edge_batch(stepper, sets)
    assert len(alone) < len(sets)  # most were settled by the batch
    assert [out.taken for out in batched] == [out.taken for out in sequential]
    assert max(out.taken for out in sequential) >= 2
    for name in ("delta", "direct", "first_order", "first_step", "weights"):
        _close(_stack(batched, name), _stack(sequential, name))


def test_the_audits_settled_edges_in_batches_equal_one_at_a_time(graph: Graph) -> None:
    """:func:`estimate_edges_deep` with ``batch_bytes`` (batches of 3) against ``batch_bytes=0``: the same edges
    settled, the same values to 1e-10 of the largest."""
    model = _trained(graph, "gcn")
    stepper = Stepper.build(FunctionalModel.from_trained(model, graph))
    edges = _near_training(graph, 80)
    per_deletion = Structures.of(stepper).bytes_per_deletion()
    one = estimate_edges_deep(model, graph, edges=edges, settle=4, stepper=stepper, batch_bytes=0)
    many = estimate_edges_deep(model, graph, edges=edges, settle=4, stepper=stepper, batch_bytes=3 * per_deletion)
    assert one.settled is not None and many.settled is not None and int(one.settled.sum()) >= 8
    assert torch.equal(one.settled, many.settled)
    _close(many.delta, one.delta)
    for name in ("first_order", "step"):
        _close(many.parts[name], one.parts[name])
