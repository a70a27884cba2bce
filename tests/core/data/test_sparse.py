"""The CSR adjacency product against dense algebra and PyG, under every transform the influence code uses."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.sparse import Adjacency, is_symmetric, spmm
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.models.layers import dropout


def _random(n: int = 30, e: int = 90) -> tuple[Adjacency, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    ei = torch.randint(0, n, (2, e), generator=gen)
    ei = torch.unique(ei, dim=1)
    w = torch.rand(ei.shape[1], generator=gen, dtype=torch.float64)
    dense = torch.zeros(n, n, dtype=torch.float64)
    dense[ei[0], ei[1]] = w
    return Adjacency.from_edges(ei, w, n), dense


def test_product_gradients_forward_derivatives_and_batches_match_dense_algebra() -> None:
    adj, dense = _random()
    x = torch.randn(30, 3, dtype=torch.float64)
    w = torch.randn(3, 2, dtype=torch.float64)

    def ours(weights: torch.Tensor) -> torch.Tensor:
        return torch.tanh(spmm(adj, x @ weights)).sum()

    def theirs(weights: torch.Tensor) -> torch.Tensor:
        return torch.tanh(dense @ (x @ weights)).sum()

    assert torch.allclose(ours(w), theirs(w))
    assert torch.allclose(torch.func.grad(ours)(w), torch.func.grad(theirs)(w))
    t = torch.randn_like(w)
    assert torch.allclose(torch.func.jvp(ours, (w,), (t,))[1], torch.func.jvp(theirs, (w,), (t,))[1])
    hvp = torch.func.jvp(torch.func.grad(ours), (w,), (t,))[1]
    assert torch.allclose(hvp, torch.func.jvp(torch.func.grad(theirs), (w,), (t,))[1])
    batch = torch.stack([w, 2 * w, -w])
    assert torch.allclose(torch.vmap(ours)(batch), torch.vmap(theirs)(batch))
    probe = w.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(ours(probe), probe, create_graph=True)  # reverse over reverse (Hessian rows)
    (row,) = torch.autograd.grad(g[0, 0], probe)
    assert torch.allclose(row, torch.autograd.functional.hessian(theirs, w)[0, 0])


def test_symmetry_check() -> None:
    ei = torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]])
    assert is_symmetric(ei, torch.tensor([1.0, 1.0, 2.0, 2.0]), 3)
    assert not is_symmetric(ei, torch.tensor([1.0, 1.0, 2.0, 3.0]), 3)
    assert not is_symmetric(ei[:, :3], torch.ones(3), 3)


def test_a_block_of_rows_is_the_dense_rows_under_every_transform() -> None:
    adj, dense = _random()
    rows = torch.tensor([4, 0, 17, 4, 29])  # unsorted, repeated
    block = adj.rows(rows)
    assert block.shape == (5, 30) and adj.rows(rows) is block  # cut once per index tensor
    x = torch.randn(30, 3, dtype=torch.float64)
    w = torch.randn(3, 2, dtype=torch.float64)

    def ours(weights: torch.Tensor) -> torch.Tensor:
        return torch.tanh(spmm(block, x @ weights)).sum()

    def theirs(weights: torch.Tensor) -> torch.Tensor:
        return torch.tanh(dense[rows] @ (x @ weights)).sum()

    assert torch.allclose(ours(w), theirs(w))
    assert torch.allclose(torch.func.grad(ours)(w), torch.func.grad(theirs)(w))
    t = torch.randn_like(w)
    hvp = torch.func.jvp(torch.func.grad(ours), (w,), (t,))[1]
    assert torch.allclose(hvp, torch.func.jvp(torch.func.grad(theirs), (w,), (t,))[1])
    batch = torch.stack([w, 2 * w, -w])
    assert torch.allclose(torch.vmap(ours)(batch), torch.vmap(theirs)(batch))
    empty = adj.rows(torch.tensor([], dtype=torch.long))
    assert spmm(empty, x).shape == (0, 3)


@pytest.mark.parametrize("arch", ["gcn", "sage", "gin"])
def test_two_layer_models_give_pygs_outputs_on_all_rows_and_on_some(arch: str) -> None:
    g = synthetic(200, seed=1)
    torch.manual_seed(0)
    model = GNN(ModelConfig(arch=arch, layers=2, hidden=8), g.num_features, g.num_classes).double().eval()
    inputs = model.prepare(g)
    assert inputs.adjacency is not None
    assert (inputs.adjacency.transposed is inputs.adjacency.parts) == (arch != "sage")  # a mean is not symmetric
    pyg = dataclasses.replace(inputs, adjacency=None)  # the PyG layers' own gather and scatter
    full = model(pyg)
    assert torch.allclose(model(inputs), full, rtol=1e-12, atol=1e-12)
    rows = g.train_idx  # the last layer runs on a block of these rows only
    assert torch.allclose(model(inputs, rows), full[rows], rtol=1e-12, atol=1e-12)
    weights = [p for p in model.parameters()]
    ours = torch.autograd.grad(model(inputs, rows).sum(), weights)
    theirs = torch.autograd.grad(model(pyg, rows).sum(), weights)
    assert all(torch.allclose(a, b, rtol=1e-10, atol=1e-12) for a, b in zip(ours, theirs, strict=True))


def test_dropout_keeps_its_rate_scales_the_kept_entries_and_follows_the_seed() -> None:
    x = torch.ones(400, 500)
    torch.manual_seed(3)
    a = dropout(x, 0.3, True)
    torch.manual_seed(3)
    assert torch.equal(a, dropout(x, 0.3, True))
    kept = a != 0
    assert abs(float(kept.float().mean()) - 0.7) < 0.005  # 200,000 draws: a standard error of 0.001
    assert torch.allclose(a[kept], torch.full_like(a[kept], 32768 / (32768 - round(0.3 * 32768))))
    assert abs(float(a.mean()) - 1.0) < 0.01  # unbiased
    assert dropout(x, 0.3, False) is x and dropout(x, 0.0, True) is x
