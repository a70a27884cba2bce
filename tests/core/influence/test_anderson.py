"""Anderson mixing of the chord steps (:mod:`bind_core.influence.anderson`): exact on a linear problem where the plain
chord oscillates; back to the chord where mixing does not descend; on a smooth two-layer model as Adam leaves it,
more deletions settle, at the proximal optimum itself; the batched path mixes as the sequential one does; a model
with kinks is not mixed."""

from __future__ import annotations

import pytest
import torch
from proximal_truths import proximal_truth

from bind_core.data.datasets import synthetic
from bind_core.influence import step
from bind_core.influence.anderson import WINDOW, Mixing
from bind_core.influence.batch_inputs import Structures
from bind_core.influence.batched import batchable
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Deletion, Stepper
from bind_core.influence.step_nodes import step_estimate
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train

ONLY = torch.zeros(1, dtype=torch.long)


def _iterate(curvature: torch.Tensor, start: torch.Tensor, steps: int, *, mixed: bool) -> torch.Tensor:
    """``steps`` chord steps on ``F = ½·xᵀAx`` with the frozen inverse ``I`` (the direction is ``A·x``)."""
    mixing, x = Mixing.of(1, start.numel(), start), start.clone()
    for _ in range(steps):
        grad = curvature @ x
        step = mixing.step(ONLY, x.unsqueeze(0), grad.unsqueeze(0), grad.unsqueeze(0))[0][0] if mixed else grad
        x = x - step
    return x


def test_mixing_solves_a_linear_problem_where_the_chord_oscillates() -> None:
    curvature = torch.diag(torch.tensor([1.8, 0.5, 0.9], dtype=torch.float64))  # 1.8: the chord overshoots by 0.8
    start = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    plain = _iterate(curvature, start, WINDOW + 1, mixed=False)
    mixed = _iterate(curvature, start, WINDOW + 1, mixed=True)
    assert float(plain.norm()) >= 0.8 ** (WINDOW + 1) * 0.9  # the overshooting direction: −0.8 a step
    assert float(mixed.norm()) <= 1e-10 * float(start.norm())  # GMRES on 3 dimensions: exact by the 4th step


def test_the_one_dimensional_oscillation_is_exact_at_the_second_step() -> None:
    x = _iterate(torch.tensor([[1.8]], dtype=torch.float64), torch.tensor([1.0], dtype=torch.float64), 2, mixed=True)
    assert abs(float(x)) <= 1e-11  # the ridge (RIDGE, 1e-12) leaves 6·10⁻¹³


def test_a_mixed_step_that_does_not_descend_is_the_chord_step_and_the_history_is_cleared() -> None:
    mixing = Mixing.of(1, 2, torch.zeros(1, dtype=torch.float64))
    x0, d0 = torch.zeros(1, 2, dtype=torch.float64), torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    step, slope = mixing.step(ONLY, x0, d0, d0)
    assert torch.equal(step, d0) and float(slope) == 1.0  # no history: the chord step itself
    # the direction doubled over the step (negative curvature along it): mixing would step back, γ = 2
    d1 = torch.tensor([[2.0, 0.0]], dtype=torch.float64)
    step, slope = mixing.step(ONLY, x0 - d0, d1, d1)
    assert torch.equal(step, d1) and float(slope) == 4.0
    assert int(mixing.count[0]) == 0


def test_members_keep_their_own_histories() -> None:
    """Two members stepped together mix as each alone (the batched path's state)."""
    curvatures = [torch.diag(torch.tensor(v, dtype=torch.float64)) for v in ([1.8, 0.5], [0.3, 1.2])]
    starts = [torch.tensor(v, dtype=torch.float64) for v in ([1.0, -1.0], [2.0, 0.5])]
    alone = [_iterate(a, s, 2, mixed=True) for a, s in zip(curvatures, starts, strict=True)]
    mixing, x = Mixing.of(2, 2, starts[0]), torch.stack(starts)
    members = torch.arange(2)
    for _ in range(2):
        grad = torch.stack([a @ xi for a, xi in zip(curvatures, x, strict=True)])
        x = x - mixing.step(members, x, grad, grad)[0]
    for k in range(2):
        assert torch.allclose(x[k], alone[k], rtol=0, atol=1e-15)


@pytest.fixture(scope="module")
def as_adam_left() -> tuple[TrainedModel, FunctionalModel]:
    """A smooth (GELU) two-layer GCN as Adam leaves it, 300 epochs, no polish: far from the deletions' optima in the
    frozen curvature's terms, so the plain chord steps converge slowly."""
    graph = synthetic(300, seed=3)
    model = train(graph, TrainConfig(epochs=300, polish=False), ModelConfig(arch="gcn", layers=2))
    return model, FunctionalModel.from_trained(model, graph)


def _deletions(stepper: Stepper, count: int) -> list[Deletion]:
    return [stepper.delete([p]) for p in range(count)]


@pytest.mark.heavy  # ~8 s here
def test_mixing_settles_more_deletions_at_the_proximal_optimum(
    as_adam_left: tuple[TrainedModel, FunctionalModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, fm = as_adam_left
    stepper = Stepper.build(fm)
    assert stepper.mixes
    monkeypatch.setattr(step, "FINISH_EVALUATIONS", 0)  # the chord steps alone: no L-BFGS finish after them
    mixed = _deletions(stepper, 30)
    monkeypatch.setattr(Stepper, "mixes", property(lambda _: False))
    plain = _deletions(stepper, 30)
    settled_mixed = [d.residual <= stepper.tol for d in mixed]
    settled_plain = [d.residual <= stepper.tol for d in plain]
    assert sum(settled_mixed) >= sum(settled_plain) + 10  # measured: 24 against 11 (337 steps against 468)
    assert sum(d.taken for d in mixed) < sum(d.taken for d in plain)
    scale = max(float(d.delta.abs().max()) for d in mixed)
    for a, b, sa, sb in zip(mixed, plain, settled_mixed, settled_plain, strict=True):
        if sa and sb:  # both at the optimum, within tol
            assert float((a.delta - b.delta).abs().max()) <= 1e-4 * scale
    # a deletion only mixing settled: its value is the proximal optimum's, where the chord's was off
    only = next(p for p, (sa, sb) in enumerate(zip(settled_mixed, settled_plain, strict=True)) if sa and not sb)
    truth = proximal_truth(model, fm, stepper, only)
    assert float((mixed[only].delta - truth).abs().max()) <= 1e-4 * scale
    assert float((plain[only].delta - truth).abs().max()) > float((mixed[only].delta - truth).abs().max())


@pytest.mark.heavy  # ~15 s here
def test_the_batched_path_mixes_as_the_sequential_one_does(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = synthetic(3000, avg_degree=3, seed=2, train_per_class=20)
    model = train(graph, TrainConfig(epochs=100, polish=False), ModelConfig(arch="gcn", layers=2, hidden=8))
    fm = FunctionalModel.from_trained(model, graph)
    # the chord steps only: most of these deletions have no minimum near θ̂ (36 of 40), and the L-BFGS finish that
    # tells them runs on each alone, after the batch (tests/core/influence/test_finish.py)
    monkeypatch.setattr(step, "FINISH_EVALUATIONS", 0)
    stepper = Stepper.build(fm)
    assert batchable(stepper) and stepper.mixes
    sequential = step_estimate(fm, batch_bytes=0)
    batched = step_estimate(fm, batch_bytes=7 * Structures.of(stepper).bytes_per_deletion())
    assert batched.solve.details["batch_size"] == 7
    assert int((sequential.taken >= WINDOW + 1).sum()) >= 5  # mixing took part, with a full history
    assert torch.equal(batched.taken, sequential.taken)
    scale = float(sequential.delta.abs().max())
    assert float((batched.delta - sequential.delta).abs().max()) <= 1e-10 * scale


def test_a_model_with_kinks_is_not_mixed() -> None:
    graph = synthetic(120, seed=1)
    config = ModelConfig(arch="gcn", layers=2, activation="relu")
    relu = train(graph, TrainConfig(epochs=20, polish=False), config)
    assert config.kinks() == ["ReLU between layers"]
    assert not Stepper.build(FunctionalModel.from_trained(relu, graph)).mixes
