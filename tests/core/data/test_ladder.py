"""The ladder of row sets (bind_core/data/ladder.py): a model with middle layers computes each on the rows the next
reads, with the same outputs and gradients as on every row, on a reduced graph's values as on the whole graph's."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, grad

from bind_core.data.datasets import synthetic
from bind_core.data.kept import KeptByIdentity
from bind_core.data.ladder import ladder, reach
from bind_core.models.gnn import GNN, ModelConfig


def _model(arch: str, layers: int, norm: str, features: int = 8) -> GNN:
    torch.manual_seed(0)
    config = ModelConfig(arch=arch, layers=layers, hidden=5, norm=norm, dropout=0.5)
    module = GNN(config, features, 2).double()
    for bn in module.norms:  # running statistics of their own, not the identity map
        if bn is not None:
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    return module.eval()


def _every_row(module: GNN, inputs: object, rows: torch.Tensor) -> torch.Tensor:
    """The logits of ``rows`` with every layer on every row (the path before the ladder)."""
    return module(inputs)[rows]


@pytest.mark.parametrize(
    ("arch", "layers", "norm"),
    [("gcn", 3, ""), ("sage", 3, ""), ("gin", 3, ""), ("gcn", 4, ""), ("gcn", 3, "batch"),
     ("sage", 4, "batch")],
)  # fmt: skip
def test_middle_layers_on_the_rows_read_give_every_rows_outputs_and_gradients(
    arch: str, layers: int, norm: str
) -> None:
    graph = synthetic(300, seed=2)
    module = _model(arch, layers, norm)
    inputs = module.prepare(graph, torch.float64, torch.device("cpu"))
    rows = graph.train_idx
    torch.testing.assert_close(module(inputs, rows), _every_row(module, inputs, rows), rtol=1e-13, atol=1e-14)
    params = {k: v.detach() for k, v in module.named_parameters()}

    def loss(p: dict[str, torch.Tensor], laddered: bool) -> torch.Tensor:
        out = functional_call(module, p, (inputs, rows)) if laddered else functional_call(module, p, (inputs,))[rows]
        return (out.log_softmax(1)[:, 0] * torch.linspace(-1, 1, rows.numel(), dtype=out.dtype)).sum()

    laddered, whole = grad(loss)(params, True), grad(loss)(params, False)
    for name in params:
        torch.testing.assert_close(laddered[name], whole[name], rtol=1e-12, atol=1e-14)


def test_the_rungs_hold_the_rows_within_each_layers_reach_and_a_reduced_graphs_own_values() -> None:
    graph = synthetic(300, seed=2)
    module = _model("gcn", 4, "")
    inputs = module.prepare(graph, torch.float64, torch.device("cpu"))
    adjacency = inputs.adjacency
    assert adjacency is not None
    rows = graph.test_idx
    rungs = ladder(adjacency, rows, 2)
    assert [r.block.shape[0] for r in rungs] == [reach(adjacency, rows, 2).numel(), reach(adjacency, rows, 1).numel(),
                                                 rows.numel()]  # fmt: skip
    assert rungs[0].block.shape[1] == graph.num_nodes and rungs[1].block.shape[1] == rungs[0].block.shape[0]
    assert ladder(adjacency, rows, 2) is rungs  # kept for the same rows tensor
    # A deletion's reduced graph keeps the structure with other values: its rungs carry its values, not the first's.
    crow, col, values = adjacency.parts
    scaled = type(adjacency)((crow, col, 0.5 * values), (crow, col, 0.5 * values), adjacency.shape)
    again = ladder(scaled, rows, 2)
    assert again is not rungs
    torch.testing.assert_close(again[1].block.parts[2], 0.5 * rungs[1].block.parts[2], rtol=0, atol=0)
    halved = type(inputs)(inputs.x, inputs.edge_index, None, inputs.x_prop, scaled)
    torch.testing.assert_close(module(halved, rows), module(halved)[rows], rtol=1e-13, atol=1e-14)


def test_a_two_layer_model_and_dropout_in_training_compute_every_row_as_before() -> None:
    graph = synthetic(200, seed=1)
    module = _model("gcn", 2, "")
    inputs = module.prepare(graph, torch.float64, torch.device("cpu"))
    assert inputs.adjacency is not None
    module(inputs, graph.train_idx)
    assert not inputs.adjacency.ladders  # no middle layer: nothing laddered
    deep = _model("gcn", 3, "")
    deep_inputs = deep.prepare(graph, torch.float64, torch.device("cpu"))
    assert deep_inputs.adjacency is not None
    deep.train()
    deep(deep_inputs, graph.train_idx)
    assert not deep_inputs.adjacency.ladders  # a training pass with dropout draws its masks over every row
    deep.eval()
    deep(deep_inputs, graph.train_idx)
    assert deep_inputs.adjacency.ladders


def test_kept_values_are_found_by_their_tensors_identity_and_go_with_them() -> None:
    kept: KeptByIdentity[int] = KeptByIdentity(2)
    a, equal = torch.arange(3), torch.arange(3)
    kept.put((a,), 1)
    assert kept.get((a,)) == 1 and kept.get((equal,)) is None  # the tensor itself, not its values
    kept.put((a,), 2, "deep")
    assert kept.get((a,), "deep") == 2 and kept.get((a,)) == 1
    other = torch.arange(2)
    kept.put((other,), 3)  # at most two: the oldest goes
    assert len(kept) == 2 and kept.get((a,)) is None and kept.get((other,)) == 3
    del other
    kept.put((equal,), 4)  # an entry whose tensor is gone is dropped first
    assert len(kept) == 2 and kept.get((a,), "deep") == 2 and kept.get((equal,)) == 4
