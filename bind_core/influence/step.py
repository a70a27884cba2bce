"""The estimate for multi-layer and attention models: one damped Newton step per node, Γ evaluated exactly there.

Why (docs/METHOD.md, "Multi-layer models"). For a two-layer GNN or a GAT the training objective is flat: at a
converged point about half the Hessian's eigenvalues lie below the weight decay, and re-optimising after a
deletion (leave-one-out retraining) travels far along those flat directions, to a point one Newton step does not
reach and along a path on which Γ is not linear. That question is ill-posed; the estimate answers a well-posed
one instead, the **proximal response** (the proximal Bregman response function, "PBRF", of Bae et al.,
NeurIPS 2022, with the exact loss in place of its Bregman term):

    θ_v^μ = argmin_θ  L(θ) − (1/m)·c_v(θ) + (μ/2)·‖θ − θ̂‖²,      ΔΓ_v = Γ(θ_v^μ; G − v) − Γ(θ̂; G),

i.e. retraining without ``v`` while staying near the trained weights, with ``c_v`` the deleted loss of
:mod:`bind_core.influence.estimate` (``v``'s loss and the change of the losses of the training nodes ``T(v)``
whose computation graph holds ``v``). The damping follows a rule, not a per-dataset constant:
``μ = DAMPING_RULE·λ_max(H)`` (:func:`damping_for`).

The estimate takes one damped Newton step per node from ``θ̂``,

    Δθ_v = (1/m)·(H + μI)⁻¹·∇c_v(θ̂),

and evaluates Γ **exactly** at ``θ̂ + Δθ_v`` on ``G − v`` (one forward pass of the test nodes per node, on the
graph without ``v``'s edges), rather than linearising Γ along the step: first-order estimates rank the proximal
response well but come out several times too large, because Γ stops being linear beyond moves of ~0.1. The
first-order value ``∇Γᵀ·Δθ_v`` plus the direct term (``Γ(θ̂; G − v) − Γ(θ̂; G)``, exact) is kept alongside in
``parts``; ``parts["step"]`` is the difference, so the parts add up to the estimate.

Cost: one dense Hessian and its eigendecomposition (hence at most
:data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS` parameters), and per training node two forward passes
and one backward pass of the model on the full graph.

The sign convention is the estimate's (:data:`bind_core.influence.SIGN_CONVENTION`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.errors import ConfigError
from bind_core.influence.functional import FunctionalModel, dloss_dlogits, forward_derivative, gammas_from_proba
from bind_core.influence.solvers import EXACT_MAX_PARAMETERS, SolveInfo, dense_hessian
from bind_core.models import GraphInputs, node_losses, probabilities
from bind_core.neighbourhood import Csr
from bind_core.sparse import Adjacency

DAMPING_RULE = 1e-3
"""``μ = DAMPING_RULE·λ_max``: the proximal damping relative to the largest Hessian eigenvalue (a condition
number of the damped Hessian of at most ~1000; docs/METHOD.md shows where this came from)."""


STEPS = 20
"""Damped Newton steps per node at most (the first, then chord steps with the Hessian at ``θ̂`` frozen) towards
the proximal optimum; each after the first costs one forward and one backward pass on ``G − v``."""


HALVINGS = 30
"""A step is halved up to this many times until the proximal objective decreases enough (Armijo); a damped Newton
direction descends, so a small enough step always does."""


def damping_for(eigenvalues: Tensor, rule: float = DAMPING_RULE) -> float:
    """The proximal damping ``μ = rule·λ_max`` for a Hessian with these eigenvalues."""
    return rule * float(eigenvalues.max().clamp(min=0.0))


def hops_affected(fm: FunctionalModel) -> int:
    """How far from a deleted node the outputs change: ``L`` hops, ``L + 1`` for GCN (whose normalisation
    changes at the deleted node's neighbours, so their neighbours' first-layer rows change too)."""
    layers = fm.module.config.layers
    return layers + 1 if fm.module.config.arch == "gcn" else layers


def inputs_without(fm: FunctionalModel, node: int) -> GraphInputs:
    """The model inputs of ``G − node`` in the full graph's numbering: ``node``'s edges removed (it keeps only a
    GCN self-loop, which touches no other node), GCN normalisation recomputed with the reduced degrees, and no
    precomputed aggregated rows (the forward pass runs the layers). Every node but ``node`` then has exactly its
    output on ``G − node``."""
    ei = fm.inputs.edge_index
    keep = ((ei[0] != node) & (ei[1] != node)) | (ei[0] == ei[1])
    ei = ei[:, keep]
    weight, adjacency = None, None
    if fm.inputs.edge_weight is not None:
        n = fm.graph.num_nodes
        deg = torch.bincount(ei[0], minlength=n).to(fm.theta.dtype)
        dinv = deg.pow(-0.5)
        weight = dinv[ei[0]] * dinv[ei[1]]
        if fm.inputs.adjacency is not None:  # removing a node's edges both ways keeps Â symmetric if it was
            symmetric = fm.inputs.adjacency.transposed is fm.inputs.adjacency.parts
            adjacency = Adjacency.from_edges(ei, weight, n, symmetric=symmetric)
    return GraphInputs(x=fm.inputs.x, edge_index=ei, edge_weight=weight, x_prop=None, adjacency=adjacency)


def full_inputs(fm: FunctionalModel) -> GraphInputs:
    """The full graph's inputs with the layers run (no precomputed aggregated rows), as :func:`inputs_without`."""
    i = fm.inputs
    adjacency = i.adjacency
    if adjacency is None and i.edge_weight is not None:  # a one-layer GCN prepared with aggregated rows instead
        adjacency = Adjacency.from_edges(i.edge_index, i.edge_weight, fm.graph.num_nodes)
    return GraphInputs(x=i.x, edge_index=i.edge_index, edge_weight=i.edge_weight, x_prop=None, adjacency=adjacency)


@dataclass
class StepEstimate:
    """What :func:`step_estimate` computed, aligned with ``train_idx``."""

    delta: Tensor
    """``[m, 2]``: ΔΓ_SP, ΔΓ_EO at the weights reached on ``G − v``."""
    parts: dict[str, Tensor]
    """``iid``, ``non_iid``, ``direct``: the first-order estimate's terms (damped solve); ``step``: the rest."""
    solve: SolveInfo
    timings: dict[str, float]
    first_steps: Tensor
    """``[m, p]``: the damped Newton step ``(1/m)·(H + μI)⁻¹·∇c_v`` of every node."""
    residual: Tensor
    """``[m]``: the largest entry of the proximal objective's gradient where each node stopped."""
    taken: Tensor
    """``[m]``: damped Newton steps taken per node."""
    weights: Tensor | None = None
    """``[m, p]``: the weights reached per node (``keep_weights=True`` only)."""


def step_estimate(
    fm: FunctionalModel,
    *,
    rule: float = DAMPING_RULE,
    rtol: float = 1e-9,
    steps: int = STEPS,
    tol: float = 1e-9,
    keep_weights: bool = False,
    progress: Callable[[float], None] | None = None,
) -> StepEstimate:
    """ΔΓ of every training node: damped Newton steps towards the proximal optimum on ``G − v``, Γ exactly there.

    The first step is ``Δθ_v = (1/m)·(H + μI)⁻¹·∇c_v`` (the module docstring); up to ``steps − 1`` more use the
    same frozen ``(H + μI)⁻¹`` on the exact gradient of the proximal objective on ``G − v`` (a chord method), each
    halved up to :data:`HALVINGS` times until that gradient's norm decreases, until its largest entry is at most
    ``tol``. ``solve.details`` records the spectrum, the damping and how many nodes did not settle.

    Raises:
        ConfigError: more than :data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS` parameters.
    """
    p = fm.num_parameters
    if p > EXACT_MAX_PARAMETERS:
        raise ConfigError(
            f"the per-node step estimate needs a dense Hessian, and this model has {p} parameters (at most "
            f"{EXACT_MAX_PARAMETERS})"
        )
    if steps < 1:
        raise ConfigError(f"steps: {steps!r} must be >= 1")
    timings: dict[str, float] = {}
    theta = fm.theta
    g = fm.graph
    m = int(g.train_idx.numel())
    train, test = g.train_idx.to(fm.device), g.test_idx.to(fm.device)
    y = g.y.to(fm.device)

    t0 = time.perf_counter()
    evals, evecs = torch.linalg.eigh(dense_hessian(fm.objective, theta, _hessian_chunk(fm)))
    scale = float(evals.abs().max())
    kept = evals.abs() > rtol * scale
    mu = damping_for(evals, rule)
    inv = torch.where(kept, 1.0 / (evals.abs() + mu), torch.zeros_like(evals))

    def solve_damped(vec: Tensor) -> Tensor:
        return evecs @ (inv * (evecs.T @ vec))

    solve = SolveInfo(
        "exact",
        seconds=time.perf_counter() - t0,
        details={
            "parameters": p,
            "max_eigenvalue": float(evals.max()),
            "min_eigenvalue": float(evals.min()),
            "dropped_eigenvalues": int((~kept).sum()),
            "negative_eigenvalues_flipped": int((evals < -rtol * scale).sum()),
            "below_weight_decay": int((evals.abs() < fm.weight_decay).sum()),
            "rtol": rtol,
            "damping": mu,
            "damping_rule": rule,
            "method": "step",
        },
    )
    timings["solve"] = solve.seconds
    if progress is not None:
        progress(0.1)

    t0 = time.perf_counter()
    probe = theta.detach().clone().requires_grad_(True)
    full = full_inputs(fm)
    base_logits = fm.logits(probe, None, full)
    base_losses = node_losses(base_logits[train], y[train])  # [m], graph retained for every node's backward
    base_proba = probabilities(base_logits[test].detach())
    base_gamma = gammas_from_proba(base_proba, g, fm.groups).detach()
    grad_gamma = _gamma_gradients(fm, theta, full)  # [2, p]
    grad_objective = torch.func.grad(fm.objective)(theta).detach()  # ≈ 0 at a stationary point
    objective_hat = float(fm.objective(theta))

    def objective_value_at_hat(pos: int, deleted: Tensor) -> float:
        """F(θ̂) = L(θ̂) − c_v(θ̂)/m (the proximal term vanishes at θ̂)."""
        return objective_hat - float(deleted.detach()) / m

    train_pos = torch.full((g.num_nodes,), -1, dtype=torch.long)
    train_pos[g.train_idx] = torch.arange(m)
    csr = Csr.of_degrees(g.edge_index, g.degree)
    hops = hops_affected(fm)

    s_damped = evecs @ (inv.unsqueeze(1) * (evecs.T @ grad_gamma.T))  # (H + μI)⁻¹·∇Γ, [p, 2]
    iid = _loss_derivatives(fm, theta, s_damped, full).cpu() / m  # (1/m)·∇ℓ_vᵀ·s, the first-order i.i.d. term
    first = torch.zeros(m, 2, dtype=torch.float64)
    direct = torch.zeros(m, 2, dtype=torch.float64)
    exact = torch.zeros(m, 2, dtype=torch.float64)
    taken = torch.zeros(m, dtype=torch.long)
    residual = torch.zeros(m, dtype=torch.float64)
    first_steps = torch.zeros(m, p, dtype=torch.float64)
    weights = torch.zeros(m, p, dtype=torch.float64) if keep_weights else None
    for pos in range(m):
        v = int(g.train_idx[pos])
        near = csr.k_hop(torch.tensor([v]), hops)
        others = train_pos[near[(near != v) & (train_pos[near] >= 0)]]  # T(v) ⊇ the truly affected ones
        reduced = inputs_without(fm, v)
        logits_v = fm.logits(probe, None, reduced)
        kept_loss = node_losses(logits_v[train[others]], y[train[others]]).sum()
        deleted = base_losses[others].sum() + base_losses[pos] - kept_loss  # c_v(θ) around θ̂
        (grad_c,) = torch.autograd.grad(deleted, probe, retain_graph=True)
        first_steps[pos] = (solve_damped(grad_c) / m).cpu()
        rest = torch.ones(m, dtype=torch.bool, device=fm.device)
        rest[pos] = False
        objective = _proximal_objective(fm, reduced, train[rest], y[train[rest]], m, mu)
        at, moved = theta, base_proba
        value, grad_f = objective_value_at_hat(pos, deleted), grad_objective - grad_c / m  # F and ∇F at θ̂
        while int(taken[pos]) < steps and float(grad_f.abs().max()) > tol:
            direction = solve_damped(grad_f)
            slope = float(grad_f @ direction)  # > 0: −direction descends F ((H + μI)⁻¹ is positive definite)
            for _ in range(HALVINGS):  # a frozen Hessian may overshoot: halve until F decreases enough (Armijo)
                candidate = at - direction
                value_new, grad_new, moved_new = objective(candidate)
                if value_new <= value - 1e-4 * slope:
                    break
                direction, slope = 0.5 * direction, 0.5 * slope
            else:
                break  # no progress along the chord direction: keep the best point reached
            at, value, grad_f, moved = candidate, value_new, grad_new, moved_new
            taken[pos] += 1
        residual[pos] = float(grad_f.abs().max())
        if weights is not None:
            weights[pos] = at.detach().cpu()
        with torch.no_grad():
            direct[pos] = (gammas_from_proba(probabilities(logits_v[test]), g, fm.groups) - base_gamma).cpu()
            exact[pos] = (gammas_from_proba(moved, g, fm.groups) - base_gamma).cpu()
            first[pos] = (grad_gamma.cpu() @ first_steps[pos]).cpu()
        if progress is not None and (pos + 1) % 25 == 0:
            progress(0.1 + 0.9 * (pos + 1) / m)
    timings["per_node_terms"] = time.perf_counter() - t0
    solve.details |= {
        "steps_max": steps,
        "steps_median": float(taken.double().median()),
        "tol": tol,
        "unsettled": int((residual > tol).sum()),
        "max_residual": float(residual.max()),
    }
    parts = {"iid": iid, "non_iid": first - iid, "direct": direct, "step": exact - first - direct}
    return StepEstimate(exact, parts, solve, timings, first_steps, residual, taken, weights)


def _proximal_objective(
    fm: FunctionalModel, reduced: GraphInputs, rows: Tensor, y: Tensor, m: int, mu: float
) -> Callable[[Tensor], tuple[float, Tensor, Tensor]]:
    """``θ ↦ (F(θ), ∇F(θ), test probabilities at θ)`` for the proximal objective on ``G − v``:
    ``F(θ) = (1/m)·Σ_{rows} ℓ_j(θ; G − v) + (λ/2)·‖θ‖² + (μ/2)·‖θ − θ̂‖²``."""
    theta_hat = fm.theta
    test = fm.graph.test_idx.to(fm.device)

    def evaluate(at: Tensor) -> tuple[float, Tensor, Tensor]:
        probe = at.detach().clone().requires_grad_(True)
        logits = fm.logits(probe, None, reduced)
        move = probe - theta_hat
        value = (
            node_losses(logits[rows], y).sum() / m
            + 0.5 * fm.weight_decay * (probe * probe).sum()
            + 0.5 * mu * (move * move).sum()
        )
        (grad_f,) = torch.autograd.grad(value, probe)
        return float(value.detach()), grad_f, probabilities(logits[test].detach())

    return evaluate


def _hessian_chunk(fm: FunctionalModel) -> int | None:
    """Row-separable models form the Hessian by columns (all at once); others row by row (see
    :func:`bind_core.influence.estimate.hessian_columns`)."""
    return None if fm.module.row_separable else 0


def _loss_derivatives(fm: FunctionalModel, theta: Tensor, s: Tensor, inputs: GraphInputs) -> Tensor:
    """``∇ℓ_jᵀ·s[:, c]`` for every training node ``j`` and column ``c``, by forward-mode AD: ``[m, k]``."""
    train = fm.graph.train_idx.to(fm.device)
    y = fm.graph.y.to(fm.device)[train]
    cols = []
    for c in range(s.shape[1]):
        z, dz = forward_derivative(lambda f: fm.logits(f, train, inputs), (theta,), (s[:, c],))
        cols.append((dloss_dlogits(z, y) * dz).sum(dim=1))
    return torch.stack(cols, dim=1).detach()


def _gamma_gradients(fm: FunctionalModel, theta: Tensor, inputs: GraphInputs) -> Tensor:
    """``[∇Γ_SP, ∇Γ_EO]`` at ``theta`` by reverse-mode autograd, ``[2, p]``."""
    probe = theta.detach().clone().requires_grad_(True)
    test = fm.graph.test_idx.to(fm.device)
    values = gammas_from_proba(probabilities(fm.logits(probe, test, inputs)), fm.graph, fm.groups)
    rows = [torch.autograd.grad(values[i], probe, retain_graph=i == 0)[0] for i in range(2)]
    return torch.stack(rows).detach()
