"""The matrix-free damped inverse (Lanczos eigenpairs plus damping, preconditioned CG) against dense algebra.

Error bound used below: CG stops at a relative residual ``tol``; the relative error of the solution is then at most
``κ·tol`` with ``κ ≤ 1 + λ_max/μ = 1 + 1/rule`` the damped system's condition number (1001 for the default rule), so
``tol = 1e-10`` bounds it by 1.001e-7.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.influence.curvature import DAMPING_RULE
from bind_core.influence.estimate import solve_hessian
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.lowrank import damped_inverse
from bind_core.influence.solvers import dense_hessian
from bind_core.influence.step_nodes import step_estimate
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, train

BOUND = (1 + 1 / DAMPING_RULE) * 1e-10


def _flat_spectrum(p: int = 300) -> torch.Tensor:
    """A symmetric matrix shaped like a trained GNN's Hessian: a few large eigenvalues over a flat bulk, some ≈ 0."""
    gen = torch.Generator().manual_seed(1)
    q, _ = torch.linalg.qr(torch.randn(p, p, generator=gen, dtype=torch.float64))
    evals = torch.cat([
        torch.logspace(3, 0, 12, dtype=torch.float64),  # the top
        torch.rand(p - 20, generator=gen, dtype=torch.float64) * 1e-3,  # the bulk, below μ = 1
        torch.zeros(8, dtype=torch.float64),  # symmetry directions
    ])  # fmt: skip
    return (q * evals) @ q.T


def test_the_operator_finds_the_top_of_the_spectrum_and_solves_the_damped_system() -> None:
    h = _flat_spectrum()
    op = damped_inverse(lambda v: h @ v, h.shape[0], rule=DAMPING_RULE)
    true = torch.linalg.eigvalsh(h)
    assert op.details["max_eigenvalue"] == pytest.approx(float(true.max()), rel=1e-10)
    assert op.mu == pytest.approx(DAMPING_RULE * float(true.max()), rel=1e-10)
    assert op.details["lanczos_iterations"] < h.shape[0]  # stopped once past μ, not at the dimension
    b = torch.randn(h.shape[0], 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    exact = torch.linalg.solve(h + op.mu * torch.eye(h.shape[0], dtype=h.dtype), b)
    x, record = op.solve(b, tol=1e-10)
    assert float((x - exact).norm() / exact.norm()) <= BOUND
    assert all(k < 60 for k in record.cg_iterations)  # the preconditioner removed the top of the spectrum
    assert record.cg_tol == 1e-10 and len(record.cg_relative_residuals) == 3
    # The approximation alone errs on the unresolved bulk by about λ/(λ + μ) ≤ 1e-3 here (bulk ≤ 1e-3, μ = 1).
    assert op.mu == pytest.approx(1.0)
    rough = op.apply(b)
    assert float((rough - exact).norm() / exact.norm()) < 2e-3


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(300, seed=2, train_per_class=40)


def test_the_damped_solve_of_a_two_layer_model_equals_the_dense_one(graph: Graph) -> None:
    model = train(graph, TrainConfig(epochs=100, lr=0.01, polish=True), ModelConfig(arch="sage", layers=2, hidden=4))
    fm = FunctionalModel.from_trained(model, graph)
    rhs = torch.randn(fm.num_parameters, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    x, info = solve_hessian(fm, rhs, solver="lanczos")
    h = dense_hessian(fm.objective, fm.theta, 0)
    mu = info.details["damping"]
    assert mu == pytest.approx(DAMPING_RULE * float(torch.linalg.eigvalsh(h).max()), rel=1e-8)
    exact = torch.linalg.solve(h + mu * torch.eye(h.shape[0], dtype=h.dtype), rhs)
    assert float((x - exact).norm() / exact.norm()) <= BOUND


@pytest.mark.heavy  # 6 s here
def test_the_step_estimate_with_the_lanczos_operator_settles_where_the_dense_one_does(graph: Graph) -> None:
    model = train(graph, TrainConfig(epochs=100, lr=0.01, polish=True), ModelConfig(arch="gcn", layers=2, hidden=4))
    fm = FunctionalModel.from_trained(model, graph)
    dense = step_estimate(fm, operator="dense")
    lanczos = step_estimate(fm, operator="lanczos")
    assert lanczos.solve.solver == "lanczos" and lanczos.solve.details["damping"] == pytest.approx(
        dense.solve.details["damping"], rel=1e-8
    )
    settled = ((dense.residual <= 1e-7) & (lanczos.residual <= 1e-7)).nonzero().flatten()
    assert settled.numel() >= 0.8 * dense.residual.numel()
    a, b = dense.delta[settled].numpy(), lanczos.delta[settled].numpy()
    # Both settle on the same proximal optimum (to the step tolerance): the frozen inverse only changes the path.
    assert np.abs(a - b).max() <= 1e-4 * np.abs(a).max()
    # The solve for ∇Γ is exact either way, so the first-order i.i.d. parts agree to the CG bound.
    assert torch.allclose(dense.parts["iid"], lanczos.parts["iid"], rtol=1e-5, atol=1e-12)
