"""The proximal objective with its gradient formed by hand (:mod:`bind_core.influence.fused`) against autograd's
(:func:`bind_core.influence.proximal.proximal_objective`): the same value and gradient to rounding, and the same
deletions."""

from __future__ import annotations

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.fused import FusedObjective, activated
from bind_core.influence.step import Stepper
from bind_core.influence.twolayer import activation_value
from bind_core.models.activations import ACTIVATION_FNS
from bind_core.models.gnn import ModelConfig
from bind_core.training.compgraph import MAX_FRACTION
from bind_core.training.fit import TrainConfig, train


def _stepper(
    arch: str,
    *,
    activation: str = "gelu",
    classes: int = 2,
    head: bool = True,
    layers: int = 2,
    settles: bool = False,
    norm: str = "",
) -> Stepper:
    """A briefly trained model whose training nodes' computation graph is a small part of its graph; ``settles``: one
    trained longer on more nodes, whose deletions have minima near its weights; ``norm``: batch normalised between
    its layers (``"batch, act first"``: after the activation)."""
    n, per_class, epochs = (2000, 100, 300) if settles else (1500, 15, 60)
    graph = synthetic(n, avg_degree=3, seed=2, train_per_class=per_class, num_classes=classes)
    kind, first = norm.split(",")[0], norm.endswith("act first")
    config = ModelConfig(
        arch=arch, layers=layers, hidden=8, activation=activation, head=head, norm=kind, act_first=first
    )
    model = train(graph, TrainConfig(epochs=epochs), config)
    return Stepper.build(FunctionalModel.from_trained(model, graph))


def _objectives(stepper: Stepper, positions: list[int]):  # type: ignore[no-untyped-def]
    """The deletion of ``positions``' objective, fused and by autograd."""
    nodes = stepper.train[torch.tensor(positions)]
    gone = torch.zeros(stepper.m, dtype=torch.bool)
    gone[torch.tensor(positions)] = True
    reduction = stepper.reducer.reduce(nodes)
    assert stepper.view is not None
    part = stepper.view(reduction)
    fused = stepper._objective(reduction.inputs, ~gone, part, reduction.changed)
    kept, stepper.fused = stepper.fused, None
    try:
        plain = stepper._objective(reduction.inputs, ~gone, part, reduction.changed)
    finally:
        stepper.fused = kept
    return fused, plain, reduction


CASES = [
    ("gcn", "gelu", 2, True, ""),
    ("gcn", "relu", 2, True, ""),
    ("gcn", "tanh", 3, True, ""),
    ("gcn", "elu", 2, False, ""),
    ("sage", "gelu", 2, True, ""),
    ("sage", "relu", 3, True, ""),
    ("sage", "gelu", 2, False, ""),
    ("gcn", "gelu", 2, True, "batch"),
    ("sage", "relu", 2, False, "batch, act first"),
]


@pytest.mark.parametrize(("arch", "activation", "classes", "head", "norm"), CASES)
def test_the_fused_objective_is_autograds(arch: str, activation: str, classes: int, head: bool, norm: str) -> None:
    stepper = _stepper(arch, activation=activation, classes=classes, head=head, norm=norm)
    assert stepper.fused is not None
    theta = stepper.fm.theta
    noise = torch.randn(theta.shape, generator=torch.Generator().manual_seed(1), dtype=theta.dtype)
    for positions in ([0], [1, 4]):
        fused, plain, reduction = _objectives(stepper, positions)
        # Γ's direct term: the test rows at θ̂ on G − S
        direct = stepper._proba_at_hat(reduction.inputs, reduction.changed)
        kept, stepper.fused = stepper.fused, None
        direct_ref = stepper._proba_at_hat(reduction.inputs, reduction.changed)
        stepper.fused = kept
        assert torch.allclose(direct, direct_ref, rtol=1e-13, atol=1e-15)
        # θ̂ itself (the first layer reused there), a point near it, and one further away
        for at in (theta, theta + 1e-3 * noise, theta + 1e-1 * noise):
            value, grad, proba = fused(at)
            value_ref, grad_ref, _ = plain(at)
            assert proba is None
            assert abs(value - value_ref) <= 1e-13 * max(1.0, abs(value_ref))
            assert float((grad - grad_ref).abs().max()) <= 1e-13 * max(1.0, float(grad_ref.abs().max()))
            # Γ's read at the weights reached: from the first layer the evaluation left, projected before the product
            assert stepper.first is not None and stepper.first.last is not None
            assert stepper.first.last[0] is at
            assert stepper.fused is not None
            assert stepper.fused.test_logits(at, stepper.first, reduction.inputs, stepper.test) is not None
            moved = stepper._test_proba(at, reduction.inputs)
            stepper.first.last = None  # the whole forward pass on G − S, as Γ is read where no evaluation was
            moved_ref = stepper._test_proba(at, reduction.inputs)
            assert torch.allclose(moved, moved_ref, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_deletions_settled_on_the_fused_objective_are_autograds(arch: str) -> None:
    stepper = _stepper(arch, settles=True)
    fused = [stepper.delete([k]) for k in range(6)]
    fused.append(stepper.delete([2, 7]))
    stepper.fused = None
    plain = [stepper.delete([k]) for k in range(6)]
    plain.append(stepper.delete([2, 7]))
    settled = 0
    for a, b in zip(fused, plain, strict=True):
        # the finish stops on a gradient within 1e-7, which rounding can cross an evaluation earlier or later
        assert a.taken == b.taken and abs(a.finished - b.finished) <= 2 and a.far == b.far
        assert torch.allclose(a.direct, b.direct, rtol=1e-12, atol=1e-15)
        if b.far is not None:  # no minimum near θ̂ either way: no value
            assert bool(a.delta.isnan().all())
            continue
        settled += 1
        scale = float(b.delta.abs().max())
        # rounding, carried through up to 20 chord steps and an L-BFGS finish (the finished ones: ~3e-10); a finish
        # that stopped an evaluation apart stopped at another point within its tolerance (1.6e-6 of it, seen)
        bound = 1e-9 if a.finished == b.finished else 1e-5
        assert float((a.delta - b.delta).abs().max()) <= bound * scale
    assert settled >= 4


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_on_a_graph_its_training_nodes_reach_whole_the_fused_objective_runs_and_settles_as_autograds(
    arch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the computation graph is (nearly) all of the graph, the objective runs on it all the same: the fused
    objective lives only there. The deletions equal autograd's on the whole graph, the rule before."""
    graph = synthetic(300, seed=1)
    model = train(graph, TrainConfig(epochs=1000), ModelConfig(arch=arch, layers=2, hidden=8))
    fm = FunctionalModel.from_trained(model, graph)
    nodes = fm.objective_rows().nodes
    assert nodes is not None and nodes.numel() > MAX_FRACTION * graph.num_nodes
    stepper = Stepper.build(fm)
    assert stepper.fused is not None and stepper.view is not None
    monkeypatch.setattr(FunctionalModel, "_max_fraction", lambda self: MAX_FRACTION)
    whole = Stepper.build(FunctionalModel.from_trained(model, graph))
    assert whole.fm.objective_rows().nodes is None and whole.fused is None
    settled = 0
    for positions in ([0], [3], [1, 5], [7], [10]):
        a, b = stepper.delete(positions), whole.delete(positions)
        assert a.taken == b.taken and a.finished == b.finished and (a.far is None) == (b.far is None)
        assert torch.allclose(a.direct, b.direct, rtol=1e-12, atol=1e-15)
        if b.far is not None:  # no minimum near θ̂ either way: no value
            assert bool(a.delta.isnan().all())
            continue
        settled += 1
        assert float((a.delta - b.delta).abs().max()) <= 1e-9 * float(b.delta.abs().max())
    assert settled >= 4


def test_a_model_without_the_fused_objective_keeps_the_whole_graph_where_its_reach_is_most_of_it() -> None:
    graph = synthetic(300, seed=1)
    model = train(graph, TrainConfig(epochs=20), ModelConfig(arch="gin", layers=2, hidden=8))
    assert FunctionalModel.from_trained(model, graph).objective_rows().nodes is None


def test_the_fused_objective_applies_to_two_layer_gcn_and_sage_only() -> None:
    assert _stepper("gin").fused is None
    assert _stepper("gcn", layers=3).fused is None


@pytest.mark.parametrize("name", sorted(ACTIVATION_FNS))
def test_the_activation_and_its_derivative_in_one_pass(name: str) -> None:
    pre = torch.linspace(-4.0, 4.0, 81, dtype=torch.float64)  # 0 among them: ReLU's derivative there is torch's 0
    probe = pre.clone().requires_grad_(True)
    out = ACTIVATION_FNS[name](probe)
    (slope,) = torch.autograd.grad(out.sum(), probe)
    value, derivative = activated(name, pre)
    assert torch.allclose(value, out.detach(), rtol=1e-14, atol=1e-15)
    assert torch.allclose(derivative, slope, rtol=1e-14, atol=1e-15)
    assert torch.equal(activation_value(name, pre), value)  # Γ's reads: the value alone, bit for bit


def test_an_activation_without_a_derivative_is_refused() -> None:
    with pytest.raises(ValueError, match="softplus"):
        activated("softplus", torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="softplus"):
        activation_value("softplus", torch.zeros(2, dtype=torch.float64))


def test_the_fused_objective_is_none_without_a_first_layer_cache() -> None:
    stepper = _stepper("gcn")
    rows = stepper.fm.objective_rows()
    assert FusedObjective.of(stepper.fm, None, rows.inputs, rows.train) is None
