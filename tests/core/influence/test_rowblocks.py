"""The full-graph passes with the first layer in blocks of rows (:mod:`bind_core.influence.rowblocks`) equal the whole
passes: the test probabilities, ``∇Γ``, the incremental path's rows with their tangents, and a whole estimate."""

from __future__ import annotations

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.influence import estimate, incremental
from bind_core.influence import rowblocks as rb
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.functional import FunctionalModel, forward_derivative
from bind_core.influence.incremental import FullGraphRows, _activated
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train

BUDGET = 100
"""Elements a block: six to twelve rows of these models' 8- to 16-wide arrays, so ~50–100 blocks."""


def _trained(arch: str, layers: int) -> tuple[TrainedModel, FunctionalModel]:
    graph = synthetic(600, avg_degree=4, seed=3, train_per_class=20)
    model = train(graph, TrainConfig(epochs=60), ModelConfig(arch=arch, layers=layers, hidden=8))
    return model, FunctionalModel.from_trained(model, graph)


def _close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-12) -> bool:
    return float((a - b).abs().max()) <= rel * max(float(b.abs().max()), 1e-300)


@pytest.mark.parametrize(("arch", "layers"), [("gcn", 2), ("sage", 2), ("gin", 2), ("gcn", 3)])
def test_blocks_equal_the_whole_pass(arch: str, layers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _, fm = _trained(arch, layers)
    theta = fm.theta
    assert rb.blocked(fm)
    assert fm.inputs.x_prop is not None
    assert len(rb.row_blocks(int(fm.inputs.x_prop.shape[0]), rb._width(fm), BUDGET)) > 40

    with torch.no_grad():
        whole_proba = fm.test_proba(theta)
    assert _close(rb.test_probabilities(fm, theta, budget=BUDGET), whole_proba)

    probe = theta.clone().requires_grad_(True)
    values = fm.gammas(probe)
    whole_grad = torch.stack([torch.autograd.grad(values[i], probe, retain_graph=i == 0)[0] for i in range(2)])
    blocked_values, blocked_grad = rb.gamma_gradients(fm, theta, budget=BUDGET)
    assert _close(blocked_values, values.detach())
    assert float(whole_grad.abs().max()) > 0
    assert _close(blocked_grad, whole_grad)

    s = torch.randn(fm.num_parameters, 2, generator=torch.Generator().manual_seed(1), dtype=theta.dtype)
    whole_values, whole_tangents = forward_derivative(lambda f: tuple(_activated(fm, f)), (theta,), (s[:, 1],))
    value, tangent = rb.activated_first_jvp(fm, s[:, 1], budget=BUDGET)
    assert _close(value, whole_values[0]) and _close(tangent, whole_tangents[0])

    monkeypatch.setattr(rb, "ROW_BLOCK_ELEMENTS", BUDGET)  # what FullGraphRows reads
    calls: list[int] = []

    def spied(fm: FunctionalModel, direction: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(1)
        return rb.activated_first_jvp(fm, direction)

    monkeypatch.setattr(incremental, "activated_first_jvp", spied)
    rows = FullGraphRows(fm)
    assert len(rows.values()) == layers - 1
    for got, want in zip(rows.values(), whole_values, strict=True):
        assert _close(got, want)
    for got, want in zip(rows.tangents(s, 1), whole_tangents, strict=True):
        assert _close(got, want)
    assert calls == [1]  # the tangents came block by block


def test_a_graph_that_fits_takes_one_block() -> None:
    _, fm = _trained("sage", 2)
    assert fm.inputs.x_prop is not None
    assert len(rb.row_blocks(int(fm.inputs.x_prop.shape[0]), rb._width(fm))) == 1
    with torch.no_grad():
        assert torch.equal(rb.test_probabilities(fm, fm.theta), fm.test_proba(fm.theta))


@pytest.mark.parametrize(("arch", "layers"), [("sage", 2), ("gcn", 2), ("gin", 2), ("gcn", 3)])
def test_the_linear_estimate_is_the_same_in_blocks(arch: str, layers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    model, fm = _trained(arch, layers)
    arguments = InfluenceArguments(method="linear")
    whole = estimate(model, fm.graph, arguments)
    monkeypatch.setattr(rb, "ROW_BLOCK_ELEMENTS", BUDGET)
    monkeypatch.setattr(rb, "TANGENT_ROWS_ELEMENTS", BUDGET)
    per_batch, full_graph = [0], [0]
    rows_jvp, tangents = incremental.activated_first_rows_jvp, FullGraphRows.tangents

    def counted_rows(*args: object) -> tuple[torch.Tensor, torch.Tensor]:
        per_batch[0] += 1
        return rows_jvp(*args)  # type: ignore[arg-type]

    def counted_tangents(self: FullGraphRows, *args: object) -> list[torch.Tensor]:
        full_graph[0] += 1
        return tangents(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(incremental, "activated_first_rows_jvp", counted_rows)
    monkeypatch.setattr(FullGraphRows, "tangents", counted_tangents)
    in_blocks = estimate(model, fm.graph, arguments)
    # a two-layer model forms each batch's rows and tangents itself; a deeper one keeps the full graph's tangents
    assert (per_batch[0] > 0, full_graph[0] > 0) == ((True, False) if layers == 2 else (False, True))
    assert float(whole.delta.abs().max()) > 0
    assert _close(in_blocks.delta, whole.delta, 1e-10)
    assert in_blocks.gamma.keys() == whole.gamma.keys()
    assert all(abs(in_blocks.gamma[k] - whole.gamma[k]) <= 1e-12 * abs(whole.gamma[k]) for k in whole.gamma)


def test_only_a_large_graph_forms_its_tangent_rows_by_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    _, fm = _trained("sage", 2)
    assert fm.inputs.x_prop is not None
    elements = int(fm.inputs.x_prop.shape[0]) * rb._width(fm)
    assert not rb.tangents_by_batch(fm)
    monkeypatch.setattr(rb, "TANGENT_ROWS_ELEMENTS", elements)
    assert not rb.tangents_by_batch(fm)
    monkeypatch.setattr(rb, "TANGENT_ROWS_ELEMENTS", elements - 1)
    assert rb.tangents_by_batch(fm)


def test_row_blocks_cover_every_row_once() -> None:
    blocks = rb.row_blocks(1000, 16, 16 * 300)
    assert [(b.start, b.stop) for b in blocks] == [(0, 300), (300, 600), (600, 900), (900, 1000)]
    assert rb.row_blocks(5, 16, 1) == [slice(i, i + 1) for i in range(5)]  # at least one row a block
