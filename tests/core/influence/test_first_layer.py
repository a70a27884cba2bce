"""The first layer of a deletion's evaluation at θ̂ (:mod:`bind_core.influence.firstlayer`): without its forward
product over every row (a linear first layer) it is the same as with it, in value and gradient."""

from __future__ import annotations

import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.step import Stepper
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def _model(arch: str) -> FunctionalModel:
    """A two-layer model whose training nodes' computation graph is a small part of its graph."""
    graph = synthetic(3000, avg_degree=3, seed=2, train_per_class=20)
    model = train(graph, TrainConfig(epochs=100), ModelConfig(arch=arch, layers=2, hidden=8))
    return FunctionalModel.from_trained(model, graph)


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_the_first_layer_at_theta_hat_needs_no_forward_product(arch: str) -> None:
    fm = _model(arch)
    stepper = Stepper.build(fm)
    first = stepper.first
    assert first is not None and first.linear is not None and stepper.view is not None
    reduction = stepper.reducer.reduce(stepper.train[:2])
    z = stepper.view(reduction).x_prop
    assert z is not None and reduction.changed is not None
    changed = first.changed_positions(reduction.changed)
    assert changed.numel() > 0
    weights = torch.randn(first.act0.shape, generator=torch.Generator().manual_seed(0), dtype=fm.theta.dtype)

    def value_and_gradient() -> tuple[torch.Tensor, torch.Tensor]:
        probe = fm.theta.detach().clone().requires_grad_(True)
        h = first.rows(fm.theta, probe, z, changed)
        (grad,) = torch.autograd.grad((h * weights).sum(), probe)
        return h.detach(), grad

    linear = first.linear
    h, grad = value_and_gradient()
    first.linear = None  # the forward product over every row, linearised about θ̂ (FirstLayerCache.activate)
    h_full, grad_full = value_and_gradient()
    first.linear = linear
    assert torch.equal(h, h_full)
    assert float((grad - grad_full).abs().max()) <= 1e-12 * float(grad_full.abs().max())
    assert float(grad_full.abs().max()) > 0
