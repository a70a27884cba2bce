"""Deletions settled in batches (:mod:`bind_core.influence.batched`) equal those settled one at a time."""

from __future__ import annotations

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.sparse import Adjacency, spmm
from bind_core.influence.batch_inputs import Structures
from bind_core.influence.batched import BATCH_BYTES, batch_size, batchable
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Deletion, Stepper
from bind_core.influence.step_nodes import StepEstimate, step_estimate, step_set_estimates
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def _model(arch: str = "gcn", device: str = "cpu", norm: str = "") -> FunctionalModel:
    """A two-layer model on a sparse graph, whose training nodes' computation graph is a small part of it (the
    batched path's case); ``norm``: batch-normalised (the batch's first layer rows, ``[members, rows, hidden]``,
    normalised along their channels)."""
    graph = synthetic(3000, avg_degree=3, seed=2, train_per_class=20)
    config = ModelConfig(arch=arch, layers=2, hidden=8, norm=norm)
    model = train(graph, TrainConfig(epochs=100, polish=True), config)
    if device != "cpu":
        model.module.to(device)
    return FunctionalModel.from_trained(model, graph)


def _close(got: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-10) -> None:
    """Equal to ``rtol`` relative to the largest entry (some entries are zero or ~10⁻¹⁷ of it)."""
    scale = float(expected.abs().max())
    assert scale > 0
    assert float((got.cpu() - expected.cpu()).abs().max()) <= rtol * scale


def _same_estimate(got: StepEstimate, expected: StepEstimate) -> None:
    assert torch.equal(got.taken, expected.taken) and int(expected.taken.max()) >= 2
    _close(got.delta, expected.delta)
    for name in ("iid", "non_iid", "direct", "step"):
        _close(got.parts[name], expected.parts[name])
    assert got.weights is not None and expected.weights is not None
    _close(got.weights, expected.weights)
    assert got.first_steps is not None and expected.first_steps is not None
    _close(got.first_steps, expected.first_steps)
    _close(got.residual, expected.residual, rtol=1e-6)  # gradients at the end: small, so rounding is larger there


@pytest.mark.parametrize(("arch", "norm"), [("gcn", ""), ("sage", ""), ("gcn", "batch")])
def test_batched_deletions_equal_one_at_a_time(arch: str, norm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fm = _model(arch, norm=norm)
    sequential = step_estimate(fm, keep_weights=True, batch_bytes=0)
    stepper = Stepper.build(fm)
    per_deletion = Structures.of(stepper).bytes_per_deletion()
    alone: list[list[int]] = []  # deletions the batch settled again alone (close calls, unsettled)
    delete = Stepper.delete

    def counted(self: Stepper, positions: list[int]) -> Deletion:
        alone.append(positions)
        return delete(self, positions)

    monkeypatch.setattr(Stepper, "delete", counted)
    batched = step_estimate(fm, keep_weights=True, batch_bytes=7 * per_deletion)  # 40 nodes: batches of 7, then 5
    assert sequential.solve.details["batch_size"] == 1 and batched.solve.details["batch_size"] == 7
    assert len(alone) <= 20  # most deletions were settled by the batch
    _same_estimate(batched, sequential)


def test_node_sets_in_a_batch_equal_one_at_a_time() -> None:
    fm = _model()
    stepper = Stepper.build(fm)
    sets = [[0], [3, 7, 11], [5, 6], list(range(10, 20))]
    sequential = [stepper.delete(positions) for positions in sets]
    batched = step_set_estimates(fm, sets, stepper=stepper)
    for got, expected in zip(batched, sequential, strict=True):
        assert got.taken == expected.taken
        _close(got.delta, expected.delta)
        _close(got.direct, expected.direct)
        _close(got.weights, expected.weights)


def test_the_batch_size_is_the_budget_over_a_deletions_bytes() -> None:
    fm = _model()
    stepper = Stepper.build(fm)
    per_deletion = Structures.of(stepper).bytes_per_deletion()
    assert per_deletion > 0 and batchable(stepper)
    assert batch_size(stepper, 0) == 1
    assert batch_size(stepper, per_deletion - 1) == 1
    assert batch_size(stepper, 5 * per_deletion + 1) == 5
    assert batch_size(stepper, 10**15) == stepper.m  # never more than the training nodes
    assert BATCH_BYTES["cpu"] == 0 and batch_size(stepper) == 1  # the CPU's default: one at a time (docs/SCALE.md)
    stepper.view = None  # the objective on the whole graph: not batched
    assert not batchable(stepper) and batch_size(stepper, 10**15) == 1


def test_a_product_with_a_matrix_per_member_is_each_members_own_product() -> None:
    """``spmm`` under ``vmap`` with each member's own values on one structure: its value and its gradients (in the
    features and the values) are those of each member's product alone."""
    generator = torch.Generator().manual_seed(0)
    n, members = 9, 4
    key = torch.unique(torch.randint(0, n * n, (30,), generator=generator))  # distinct entries
    weight = torch.rand(key.numel(), dtype=torch.float64, generator=generator)
    base = Adjacency.from_entries(key // n, key % n, weight, (n, n))
    crow, col, _ = base.parts
    crow_t, col_t, _ = base.transposed
    order = _transpose_order(base)
    values = torch.rand(members, col.numel(), dtype=torch.float64, generator=generator)
    x = torch.rand(members, n, 3, dtype=torch.float64, generator=generator, requires_grad=True)

    def one(v: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        return spmm(Adjacency((crow, col, v), (crow_t, col_t, v[order]), (n, n)), features)

    got = torch.func.vmap(one)(values, x)
    expected = torch.stack([one(values[k], x[k]) for k in range(members)])
    assert torch.equal(got, expected)
    weights = torch.rand(members, n, 3, dtype=torch.float64, generator=generator)
    (grad,) = torch.autograd.grad((got * weights).sum(), x)
    (grad_expected,) = torch.autograd.grad((expected * weights).sum(), x)
    assert torch.allclose(grad, grad_expected, rtol=1e-14, atol=0)
    dense = torch.zeros(members, n, n, dtype=torch.float64)
    for k in range(members):
        dense[k] = torch.sparse_csr_tensor(crow, col, values[k], (n, n)).to_dense()
    assert torch.allclose(got, dense @ x.detach(), rtol=1e-13, atol=1e-15)


def _transpose_order(adjacency: Adjacency) -> torch.Tensor:
    """For each entry of the transpose's CSR order, the position of the same entry in the matrix's."""
    crow, col, _ = adjacency.parts
    row = torch.repeat_interleave(torch.arange(crow.numel() - 1), crow.diff())
    n = adjacency.shape[1]
    return torch.argsort(col * n + row, stable=True)
