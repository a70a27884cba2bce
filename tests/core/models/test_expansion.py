"""The activations' second-order expansion (bind_core/models/activations.py) and the polish's Hessians that use it:
the same value, gradient and Hessian at the point, and nothing changed once the Hessian is formed."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.func import grad, hessian

from bind_core.data.datasets import synthetic
from bind_core.models.activations import gelu_expansion
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.training.compgraph import objective_inputs
from bind_core.training.fit import TrainConfig, TrainedModel
from bind_core.training.hessian import dense_hessian_by_rows
from bind_core.training.objective import expanded_hessian, flat_objective


def test_the_gelu_expansion_has_gelus_value_and_first_two_derivatives_at_the_point() -> None:
    z = torch.linspace(-6, 6, 97, dtype=torch.float64)

    def exact(x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x).sum()

    def expanded(x: torch.Tensor) -> torch.Tensor:
        return gelu_expansion(x).sum()

    torch.testing.assert_close(gelu_expansion(z), F.gelu(z), rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(grad(expanded)(z), grad(exact)(z), rtol=1e-14, atol=1e-15)
    torch.testing.assert_close(hessian(expanded)(z), hessian(exact)(z), rtol=1e-13, atol=1e-15)
    # beyond the second derivative it is a polynomial's (zero), not GELU's: for Hessians at the point only
    third = grad(lambda x: hessian(expanded)(x).diagonal().sum())(z)
    assert (
        float(third.abs().max()) == 0.0
        and float(grad(lambda x: hessian(exact)(x).diagonal().sum())(z).abs().max()) > 0.1
    )


@pytest.mark.parametrize(("arch", "layers"), [("gcn", 2), ("sage", 2), ("gin", 2), ("gat", 1)])
def test_the_polishs_expanded_hessian_equals_the_exact_one_and_leaves_the_model_as_it_was(
    arch: str, layers: int
) -> None:
    graph = synthetic(200, seed=4)
    torch.manual_seed(0)
    config = ModelConfig(arch=arch, layers=layers, hidden=6)
    module = GNN(config, graph.num_features, graph.num_classes).double().eval()
    trained = TrainedModel(module, config, TrainConfig())
    inputs, rows = objective_inputs(module, trained.prepare(graph), graph)
    objective, theta, _ = flat_objective(module, inputs, rows, 1e-4)
    theta = theta + 0.3 * torch.randn_like(theta)  # a point where the pre-activations spread over GELU's curve
    exact = dense_hessian_by_rows(objective, theta)
    expanded = expanded_hessian(module)(objective, theta)
    assert not module.expand_activations and not any(getattr(c, "expand_activation", False) for c in module.convs)
    scale = float(exact.abs().max())
    assert float((expanded - exact).abs().max()) <= 1e-12 * scale
    value = objective(theta)
    torch.testing.assert_close(objective(theta), value, rtol=0, atol=0)  # the objective itself is untouched
