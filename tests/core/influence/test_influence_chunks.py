"""Splitting an influence estimate into a shared plan and per-node chunks changes nothing; CSR neighbourhoods."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.utils import k_hop_subgraph, subgraph

from bind_core import ConfigError, Graph
from bind_core.influence import estimate
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.deletion import _subgraph_batches
from bind_core.influence.distributed import combine, estimate_chunk
from bind_core.influence.distributed.plan import InfluenceChunk, InfluencePlan, chunk_bounds
from bind_core.influence.estimate import plan
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.incremental import incremental_batches
from bind_core.influence.neighbourhood import Csr
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train


def test_chunks_spread_over_processes_give_the_single_run(small_model: TrainedModel, small_graph: Graph) -> None:
    whole = estimate(small_model, small_graph)
    the_plan = InfluencePlan.from_bytes(plan(small_model, small_graph).to_bytes())
    m = int(small_graph.train_idx.numel())
    bounds = chunk_bounds(m, 3)
    # as if on other workers: each chunk is serialised and read back, and arrives out of order
    chunks = [
        InfluenceChunk.from_bytes(estimate_chunk(the_plan, small_model, small_graph, a, b).to_bytes())
        for a, b in reversed(bounds)
    ]
    split = combine(the_plan, small_graph, chunks)
    assert torch.allclose(split.delta, whole.delta, rtol=1e-9, atol=1e-12)
    for key in ("iid", "non_iid", "direct"):
        assert torch.allclose(split.parts[key], whole.parts[key], rtol=1e-9, atol=1e-12)
    assert split.grad_norm == whole.grad_norm and split.solve.solver == whole.solve.solver


def test_chunk_runner_hook_is_used(small_model: TrainedModel, small_graph: Graph) -> None:
    seen: list[tuple[int, int]] = []

    def runner(p: InfluencePlan, model: TrainedModel) -> list[InfluenceChunk]:
        assert model is small_model
        bounds = chunk_bounds(p.num_train, chunk_size=37)
        seen.extend(bounds)
        return [estimate_chunk(p, model, small_graph, a, b) for a, b in bounds]

    result = estimate(small_model, small_graph, chunk_runner=runner)
    assert len(seen) == -(-int(small_graph.train_idx.numel()) // 37)
    assert torch.allclose(result.delta, estimate(small_model, small_graph).delta, rtol=1e-9, atol=1e-12)


def test_missing_or_repeated_chunks_are_refused(small_model: TrainedModel, small_graph: Graph) -> None:
    p = plan(small_model, small_graph)
    m = p.num_train
    half = estimate_chunk(p, small_model, small_graph, 0, m // 2)
    with pytest.raises(ConfigError, match="missing"):
        combine(p, small_graph, [half])
    with pytest.raises(ConfigError, match="repeated"):
        combine(p, small_graph, [half, half, estimate_chunk(p, small_model, small_graph, m // 2, m)])


def test_a_plan_refuses_other_weights(small_model: TrainedModel, small_graph: Graph) -> None:
    p = plan(small_model, small_graph)
    other = train(small_graph, TrainConfig(epochs=5, seed=99, polish=False))
    with pytest.raises(ConfigError, match="weights"):
        estimate_chunk(p, other, small_graph, 0, 4)


def test_plan_bytes_are_checked() -> None:
    with pytest.raises(ConfigError):
        InfluencePlan.from_bytes(b"not safetensors at all")


def test_chunk_bounds_cover_everything_once() -> None:
    for m, k in [(10, 3), (7, 7), (3, 8), (1000, 16)]:
        bounds = chunk_bounds(m, k)
        covered = [i for a, b in bounds for i in range(a, b)]
        assert covered == list(range(m))
    assert chunk_bounds(10, chunk_size=4) == [(0, 4), (4, 8), (8, 10)]
    with pytest.raises(ConfigError):
        chunk_bounds(10, 0)


def test_two_layer_chunks_match(small_graph: Graph) -> None:
    model = train(small_graph, TrainConfig(epochs=60, polish_max_iter=300), ModelConfig(arch="gcn", layers=2, hidden=8))
    whole = estimate(model, small_graph, InfluenceArguments(method="linear"))
    p = plan(model, small_graph)
    m = p.num_train
    split = combine(p, small_graph, [estimate_chunk(p, model, small_graph, a, b) for a, b in chunk_bounds(m, 2)])
    assert torch.allclose(split.delta, whole.delta, rtol=1e-9, atol=1e-12)


def test_csr_neighbourhoods_match_pyg(small_graph: Graph) -> None:
    g = small_graph
    csr = Csr.from_edge_index(g.edge_index, g.num_nodes)
    for v in g.train_idx[:20].tolist():
        for hops in (1, 2, 3):
            ours = csr.k_hop(torch.tensor([v]), hops)
            theirs = k_hop_subgraph(v, hops, g.edge_index, num_nodes=g.num_nodes)[0]
            assert torch.equal(ours, theirs)
            ei = csr.induced(ours)
            ref, _ = subgraph(ours, g.edge_index, relabel_nodes=True, num_nodes=g.num_nodes)
            as_set = {tuple(e) for e in ei.t().tolist()}
            assert as_set == {tuple(e) for e in ref.t().tolist()} and len(as_set) == ei.shape[1]


@pytest.mark.heavy  # 7 s here
@pytest.mark.parametrize(("arch", "layers"), [("gcn", 2), ("gin", 2), ("sage", 3), ("gat", 2), ("gat", 1)])
def test_incremental_path_equals_whole_subgraph_recomputation(small_graph: Graph, arch: str, layers: int) -> None:
    """Recomputing only the changed rows gives the logits, and their derivative along s, of running the whole
    model on each 2L-hop subgraph of G − v (itself checked against G − v in test_influence)."""
    model = train(small_graph, TrainConfig(epochs=5, polish=False), ModelConfig(arch=arch, layers=layers, hidden=8))
    fm = FunctionalModel.from_trained(model, small_graph)
    s = torch.randn(fm.num_parameters, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    m = int(small_graph.train_idx.numel())

    def collect(batches) -> dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]]:  # type: ignore[no-untyped-def]
        out = {}
        for b in batches:
            z, dz = b.jvp(fm.theta, s, 1)
            assert torch.allclose(z, b.logits(fm.theta), atol=1e-12)
            for v, j, zz, dd in zip(b.v_pos.tolist(), b.node.tolist(), z, dz, strict=True):
                out[(v, j)] = (zz, dd)
        return out

    ref = collect(_subgraph_batches(fm, 10_000, 0, m))
    inc = collect(incremental_batches(fm, 3_000, 0, m))  # several batches
    assert ref.keys() == inc.keys() and len(ref) > 0
    for key, (z, dz) in ref.items():
        assert torch.allclose(inc[key][0], z, atol=1e-10) and torch.allclose(inc[key][1], dz, atol=1e-10)


def test_dense_hessian_by_rows_matches_forward_over_reverse(small_graph: Graph) -> None:
    from bind_core.influence.solvers import dense_hessian

    model = train(small_graph, TrainConfig(epochs=5, polish=False), ModelConfig(arch="gcn", layers=2, hidden=4))
    fm = FunctionalModel.from_trained(model, small_graph)
    rows = dense_hessian(fm.objective, fm.theta, 0)
    cols = dense_hessian(fm.objective, fm.theta, 16)
    assert torch.allclose(rows, cols, atol=1e-10) and rows.abs().max() > 0
