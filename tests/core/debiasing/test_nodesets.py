"""Node sets with non-overlapping computation graphs, budgets, and debiasing by deletion."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.utils import k_hop_subgraph

from bind_core.data.graph import Graph
from bind_core.debiasing.debias import debias
from bind_core.debiasing.nodesets import resolve_budget, select
from bind_core.errors import ConfigError
from bind_core.training.fit import TrainedModel


@pytest.mark.parametrize(("budget", "m", "expected"), [(0.1, 200, 20), (0.01, 200, 2), (5, 200, 5), (200, 200, 200)])
def test_budget_as_fraction_or_count(budget: float, m: int, expected: int) -> None:
    assert resolve_budget(budget, m) == expected


def test_budget_must_be_positive() -> None:
    with pytest.raises(ConfigError):
        resolve_budget(0, 10)


@pytest.mark.parametrize("hops", [1, 2])
@pytest.mark.parametrize("direction", ["harmful", "helpful"])
def test_selected_sets_never_overlap(small_graph: Graph, hops: int, direction: str) -> None:
    gen = torch.Generator().manual_seed(hops)
    influence = torch.randn(small_graph.train_idx.numel(), generator=gen, dtype=torch.float64)
    nodes = select(influence, small_graph, 0.5, direction, hops=hops)
    assert 0 < nodes.numel() <= resolve_budget(0.5, small_graph.train_idx.numel())
    balls = [set(k_hop_subgraph(int(v), hops, small_graph.edge_index)[0].tolist()) for v in nodes]
    for i in range(len(balls)):
        for j in range(i + 1, len(balls)):
            assert not balls[i] & balls[j]
    pos = {int(v): i for i, v in enumerate(small_graph.train_idx.tolist())}
    values = torch.stack([influence[pos[int(v)]] for v in nodes])
    assert bool((values < 0).all()) if direction == "harmful" else bool((values > 0).all())


def test_the_first_pick_is_the_extreme_node(small_graph: Graph) -> None:
    influence = torch.linspace(-1, 1, small_graph.train_idx.numel(), dtype=torch.float64)
    assert int(select(influence, small_graph, 3)[0]) == int(small_graph.train_idx[0])
    assert int(select(influence, small_graph, 3, "helpful")[0]) == int(small_graph.train_idx[-1])


def test_debiasing_reports_before_and_after(small_graph: Graph, small_model: TrainedModel) -> None:
    from bind_core.influence import estimate

    influence = estimate(small_model, small_graph)
    rows = debias(small_model, small_graph, influence.delta, budgets=(0.1,))
    (row,) = rows
    assert 0 < row.deleted <= row.requested == 20
    assert row.estimated_delta < 0
    for key in ("accuracy", "auc", "f1", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo"):
        assert getattr(row.before, key) is not None and getattr(row.after, key) is not None
    # Deleting the most harmful tenth lowers the bias it targets on this graph (seeded, deterministic).
    assert row.after.gamma is not None and row.before.gamma is not None and row.after.gamma < row.before.gamma
