"""The damped curvature's matrix from the training rows' Jacobian (:mod:`bind_core.influence.gaussnewton`) against
the Bregman objective's Hessian formed row by row, which it replaces where the model allows."""

from __future__ import annotations

import pytest
import torch

import bind_core.influence.gaussnewton as gaussnewton
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence.curvature import DampedCurvature
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.solvers import dense_hessian, hessian_columns
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train


def _fm(graph: Graph, **arch: object) -> FunctionalModel:
    model = train(graph, TrainConfig(epochs=30, lr=0.01), ModelConfig(hidden=6, **arch))  # type: ignore[arg-type]
    return FunctionalModel.from_trained(model, graph)


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


@pytest.fixture(scope="module")
def binary() -> Graph:
    return synthetic(400, num_features=6, avg_degree=6, seed=3, train_per_class=40)


@pytest.mark.parametrize(
    "arch",
    [
        {"arch": "gcn", "layers": 2},
        {"arch": "sage", "layers": 2},
        {"arch": "gin", "layers": 2},
        {"arch": "gcn", "layers": 3},
        {"arch": "gcn", "layers": 1},
        {"arch": "gcn", "layers": 2, "outputs": 2},  # a softmax over two logits
    ],
    ids=["gcn2", "sage2", "gin2", "gcn3", "gcn1", "gcn2-softmax"],
)
def test_the_jacobian_form_is_the_bregman_hessian(binary: Graph, arch: dict[str, object]) -> None:
    fm = _fm(binary, **arch)
    rows = dense_hessian(fm.bregman, fm.theta, hessian_columns(fm))
    jacobian = gaussnewton.gauss_newton(fm)
    assert jacobian is not None
    assert _relative(jacobian, rows) < 1e-12
    assert torch.equal(jacobian, jacobian.T)


def test_several_classes_whiten_by_the_softmax_hessian() -> None:
    graph = synthetic(300, num_features=6, avg_degree=6, num_classes=3, seed=5, train_per_class=30)
    fm = _fm(graph, arch="sage", layers=2)
    jacobian = gaussnewton.gauss_newton(fm)
    assert jacobian is not None
    assert _relative(jacobian, dense_hessian(fm.bregman, fm.theta, hessian_columns(fm))) < 1e-12


def test_blocks_threads_and_progress_give_the_same_matrix(binary: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    fm = _fm(binary, arch="gcn", layers=2)
    whole = gaussnewton.gauss_newton(fm, by_hand=False)  # forward mode's blocks (a two-layer GCN's J is formed by hand)
    seen: list[float] = []
    monkeypatch.setattr(gaussnewton, "hessian_chunk", lambda _elements, _p: 7)  # many small blocks
    blocks = gaussnewton.gauss_newton(fm, progress=seen.append, threads=2, by_hand=False)
    assert whole is not None and blocks is not None
    assert _relative(blocks, whole) < 1e-13
    assert len(seen) == -(-fm.num_parameters // 7) and seen[-1] == 1.0 and seen == sorted(seen)


def test_a_gat_and_an_oversized_jacobian_keep_the_hessian_rows(binary: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    gat = _fm(binary, arch="gat", layers=2)
    assert gaussnewton.gauss_newton(gat) is None
    assert DampedCurvature.build(gat).solve.details["formed"] == "hessian"
    gcn = _fm(binary, arch="gcn", layers=2)
    assert DampedCurvature.build(gcn).solve.details["formed"] == "jacobian"
    monkeypatch.setattr(gaussnewton, "JACOBIAN_ELEMENTS", int(binary.train_idx.numel()) * gcn.num_parameters - 1)
    fallback = DampedCurvature.build(gcn)
    assert fallback.solve.details["formed"] == "hessian"
    monkeypatch.undo()
    formed = DampedCurvature.build(gcn)
    assert formed.mu == pytest.approx(fallback.mu, rel=1e-12)
    vec = torch.linspace(-1, 1, gcn.num_parameters, dtype=torch.float64)
    assert _relative(formed.apply(vec), fallback.apply(vec)) < 1e-9
