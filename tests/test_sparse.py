"""The CSR adjacency product against dense algebra and PyG, under every transform the influence code uses."""

from __future__ import annotations

import dataclasses

import torch

from bind_core.datasets import synthetic
from bind_core.models import GNN, ModelConfig
from bind_core.sparse import Adjacency, is_symmetric, spmm


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


def test_a_two_layer_gcn_gives_pygs_outputs() -> None:
    g = synthetic(200, seed=1)
    torch.manual_seed(0)
    model = GNN(ModelConfig(layers=2, hidden=8), g.num_features, g.num_classes).double().eval()
    inputs = model.prepare(g)
    assert inputs.adjacency is not None and inputs.adjacency.transposed is inputs.adjacency.parts
    pyg = dataclasses.replace(inputs, adjacency=None)  # GCNConv's own scatter
    assert torch.allclose(model(inputs), model(pyg), rtol=1e-12, atol=1e-12)
