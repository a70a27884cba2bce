"""The proximal objective of one deletion and the L-BFGS finish of a settle that the chord steps leave short
(:class:`bind_core.influence.step.Stepper`): ``F(θ) = (1/m)·Σ_{kept} ℓ_j(θ; G − S) + (λ/2)·‖θ‖² + (μ/2)·‖θ − θ̂‖²``."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from bind_core.influence.functional import FunctionalModel
from bind_core.models.gnn import node_losses, probabilities
from bind_core.models.propagation import GraphInputs

FINISH_ITERATIONS = 1000
"""L-BFGS iterations at most when a settle is finished that way (:meth:`Stepper.delete_edges`)."""


def lbfgs_finish(
    objective: Callable[[Tensor], tuple[float, Tensor, Tensor]], start: Tensor, tol: float
) -> tuple[Tensor, Tensor, Tensor]:
    """Minimise the proximal objective from ``start`` by float64 L-BFGS until its gradient's largest entry is at most
    ``tol``: ``(weights, gradient, test probabilities)`` there."""
    flat = start.detach().clone().requires_grad_(True)
    optimizer = torch.optim.LBFGS(
        [flat], lr=1.0, max_iter=FINISH_ITERATIONS, tolerance_grad=tol, tolerance_change=1e-18, history_size=50,
        line_search_fn="strong_wolfe",
    )  # fmt: skip

    def closure() -> Tensor:
        value, grad, _ = objective(flat.detach())
        flat.grad = grad
        return torch.tensor(value, dtype=flat.dtype)

    optimizer.step(closure)  # type: ignore[no-untyped-call]
    _, grad, moved = objective(flat.detach())
    return flat.detach(), grad, moved


def proximal_objective(
    fm: FunctionalModel, reduced: GraphInputs, wanted: Tensor, rest: Tensor, y: Tensor, m: int, mu: float
) -> Callable[[Tensor], tuple[float, Tensor, Tensor]]:
    """``θ ↦ (F(θ), ∇F(θ), test probabilities at θ)`` for the proximal objective on ``G − v``:
    ``F(θ) = (1/m)·Σ_{rest} ℓ_j(θ; G − v) + (λ/2)·‖θ‖² + (μ/2)·‖θ − θ̂‖²``; ``wanted``: the training rows (the
    first ``m``) then the test rows, ``rest``: the training positions kept (a mask over the first ``m``)."""
    theta_hat = fm.theta

    def evaluate(at: Tensor) -> tuple[float, Tensor, Tensor]:
        probe = at.detach().clone().requires_grad_(True)
        logits = fm.logits(probe, wanted, reduced)
        move = probe - theta_hat
        value = (
            node_losses(logits[:m][rest], y).sum() / m
            + 0.5 * fm.weight_decay * (probe * probe).sum()
            + 0.5 * mu * (move * move).sum()
        )
        (grad_f,) = torch.autograd.grad(value, probe)
        return float(value.detach()), grad_f, probabilities(logits[m:].detach())

    return evaluate
