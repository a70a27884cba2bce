"""The training rows' Jacobian of a two-layer GCN or SAGE formed by hand (:mod:`bind_core.influence.jacobian_by_hand`)
against forward-mode autograd's, and the damped curvature it gives against the one from ``jvp``."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor
from torch.func import jvp, vmap

from bind_core.data.datasets import synthetic
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.gaussnewton import gauss_newton
from bind_core.influence.jacobian_by_hand import training_jacobian
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def _model(
    arch: str,
    *,
    activation: str = "gelu",
    classes: int = 2,
    head: bool = True,
    layers: int = 2,
    norm: str = "",
    act_first: bool = False,
) -> FunctionalModel:
    """A briefly trained model whose training nodes' computation graph is a part of its graph (``norm``: batch
    normalised between its layers, held as given)."""
    graph = synthetic(600, num_features=5, avg_degree=4, seed=3, train_per_class=15, num_classes=classes)
    config = ModelConfig(
        arch=arch, layers=layers, hidden=6, activation=activation, head=head, norm=norm, act_first=act_first
    )
    return FunctionalModel.from_trained(train(graph, TrainConfig(epochs=40), config), graph)


def _by_jvp(fm: FunctionalModel) -> Tensor:
    """``[p, m, C]``: the training rows' logits' derivatives along every unit vector, by ``jvp``."""
    rows = fm.objective_rows()

    def logits(flat: Tensor) -> Tensor:
        return fm.logits(flat, rows.train, rows.inputs)

    units = torch.eye(fm.num_parameters, dtype=fm.theta.dtype)
    out: Tensor = vmap(lambda unit: jvp(logits, (fm.theta,), (unit,))[1])(units)
    return out


CASES = [
    ("gcn", "gelu", 2, True, ""),
    ("gcn", "relu", 3, True, ""),
    ("gcn", "tanh", 2, False, ""),
    ("sage", "gelu", 2, True, ""),
    ("sage", "elu", 3, False, ""),
    ("sage", "tanh", 3, True, ""),
    ("gcn", "relu", 2, False, "batch"),
    ("sage", "gelu", 3, True, "batch, act first"),
]


@pytest.mark.parametrize(("arch", "activation", "classes", "head", "norm"), CASES)
def test_the_jacobian_by_hand_is_forward_modes(arch: str, activation: str, classes: int, head: bool, norm: str) -> None:
    first = norm.endswith("act first")
    fm = _model(arch, activation=activation, classes=classes, head=head, norm=norm.split(",")[0], act_first=first)
    expected = _by_jvp(fm)
    for chunk in (1, 50, 2**24):  # one hidden unit at a time, a few, all at once
        got = training_jacobian(fm, chunk_elements=chunk)
        assert got is not None and got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("arch", ["gcn", "sage"])
def test_the_curvature_from_the_jacobian_by_hand_is_the_one_from_jvp(arch: str) -> None:
    fm = _model(arch, classes=3)
    assert training_jacobian(fm) is not None
    seen: list[float] = []
    by_hand = gauss_newton(fm, progress=seen.append)
    assert seen == [1.0]  # one step: the whole Jacobian at once
    reference = gauss_newton(fm, by_hand=False)
    assert by_hand is not None and reference is not None
    torch.testing.assert_close(by_hand, reference, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("arch", "layers"), [("gin", 2), ("gcn", 3), ("gcn", 1)])
def test_other_models_keep_forward_mode(arch: str, layers: int) -> None:
    assert training_jacobian(_model(arch, layers=layers)) is None
