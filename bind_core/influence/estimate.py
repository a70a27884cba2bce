"""BIND's estimate of how deleting each training node would change the model's bias Γ.

Derivation (the sign matters; the paper's Eq. 8, its Theorem 1 and its code disagree). Training minimises
``L(θ) = (1/m)·Σ_{j∈train} ℓ_j(θ) + (λ/2)·‖θ‖²`` and stops at ``θ̂`` with ``∇L(θ̂) = 0``. Deleting training node
``v`` from the graph removes its loss and changes the losses of the training nodes ``T(v)`` whose computation
graph contains ``v``: ``L₋ᵥ(θ) = L(θ) − (1/m)·c_v(θ)`` with
``c_v = ℓ_v + Σ_{j∈T(v)} (ℓ_j on G − ℓ_j on G−v)``. At the new optimum ``∇L(θ') = (1/m)·∇c_v(θ')``; one Newton
step from ``θ̂`` gives ``Δθ = θ' − θ̂ ≈ (1/m)·H⁻¹·∇c_v`` (``H = ∇²L(θ̂)``), hence

    ΔΓ_v ≈ (1/m)·∇c_vᵀ·s + [Γ(θ̂; G−v) − Γ(θ̂; G)],      s = H⁻¹·∇Γ(θ̂)  (solved once).

The bracket is the *direct* effect: test nodes whose computation graph contains ``v`` change their output
even with fixed weights. By default it is linearised in those probabilities, ``Σ_t ∂Γ/∂p_t·(p'_t − p_t)``
(exact while the sorted order of the probabilities does not change, since the 1-D W1 is piecewise linear in
them); ``direct_exact=True`` recomputes Γ with the patched probabilities for every ``v`` instead.

**Sign convention**: ``delta = Γ(after deleting v and retraining) − Γ(now)``. Positive: deleting ``v`` would
make the model *more* biased (``v`` helps fairness). Negative: ``v`` is *harmful*; deleting it reduces bias.

Cost: one Hessian solve with two right-hand sides (Γ_SP and Γ_EO), one forward-mode pass (``jvp``) over the
training nodes for the i.i.d. term (``∇ℓ_jᵀ·s`` for all ``j`` at once: no per-node gradients are formed), and
one batched ``jvp`` over the affected pairs for the non-i.i.d. and direct terms.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from bind_core.errors import ConfigError
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.lowrank import RESOLVE_FOR_SOLVE, damped_inverse
from bind_core.influence.plan import InfluenceChunk, InfluencePlan, stack_chunks
from bind_core.influence.solvers import (
    EXACT_MAX_PARAMETERS,
    SolveInfo,
    choose,
    hessian_columns,
    make_hvp,
    retained_hvp,
    solve_cg,
    solve_exact,
    solve_lissa,
)
from bind_core.influence.step import DAMPING_RULE, Stepper, step_estimate
from bind_core.influence.terms import deletion_terms, directional_loss_derivatives
from bind_core.training.fit import ProgressCallback, TrainedModel

ChunkRunner = Callable[[InfluencePlan, TrainedModel], list[InfluenceChunk]]
"""Computes the per-node terms of a plan for the model it was made for, e.g. as chunks on several workers (see
``plan.chunk_bounds`` and :func:`estimate_chunk`)."""

SIGN_CONVENTION = (
    "delta = Γ(model retrained without node v) − Γ(current model); positive: deleting v increases bias "
    "(v helps fairness); negative: v is harmful (deleting it reduces bias)."
)


@dataclass
class InfluenceResult:
    """Estimated ΔΓ for every training node, aligned with ``train_idx``.

    ``delta_sp``/``delta_eo`` are the Γ_SP and Γ_EO parts; ``delta = lam·delta_sp + (1 − lam)·delta_eo``.
    ``parts`` splits each into ``iid``, ``non_iid`` and ``direct`` (each ``[m, 2]``: SP, EO columns).
    """

    train_idx: Tensor
    delta: Tensor
    delta_sp: Tensor
    delta_eo: Tensor
    parts: dict[str, Tensor]
    lam: float
    gamma: dict[str, float]
    solve: SolveInfo
    grad_norm: float
    timings: dict[str, float] = field(default_factory=dict)
    sign_convention: str = SIGN_CONVENTION

    @classmethod
    def of_columns(
        cls,
        train_idx: Tensor,
        total: Tensor,
        parts: dict[str, Tensor],
        lam: float,
        gamma: Tensor,
        solve: SolveInfo,
        grad_norm: float,
        timings: dict[str, float],
    ) -> InfluenceResult:
        """From ``total`` (``[m, 2]``: ΔΓ_SP, ΔΓ_EO) and ``gamma`` (``[Γ_SP, Γ_EO]`` now)."""
        return cls(
            train_idx=train_idx.clone(),
            delta=lam * total[:, 0] + (1 - lam) * total[:, 1],
            delta_sp=total[:, 0],
            delta_eo=total[:, 1],
            parts=parts,
            lam=lam,
            gamma={"sp": float(gamma[0]), "eo": float(gamma[1]), "total": float(lam * gamma[0] + (1 - lam) * gamma[1])},
            solve=solve,
            grad_norm=grad_norm,
            timings=timings,
        )

    def summary(self) -> dict[str, Any]:
        """The distribution of the estimates, for reports and the API."""
        d = self.delta.double()
        q = torch.quantile(d, torch.tensor([0.01, 0.1, 0.5, 0.9, 0.99], dtype=torch.float64)).tolist()
        return {
            "count": int(d.numel()),
            "harmful": int((d < 0).sum()),
            "helpful": int((d > 0).sum()),
            "sum": float(d.sum()),
            "mean": float(d.mean()),
            "std": float(d.std()) if d.numel() > 1 else 0.0,
            "min": float(d.min()),
            "max": float(d.max()),
            "quantiles": dict(zip(["p01", "p10", "p50", "p90", "p99"], q, strict=True)),
            "gamma": self.gamma,
            "lam": self.lam,
            "solver": self.solve.solver,
            "solver_details": self.solve.details,
            "grad_norm": self.grad_norm,
            "timings": self.timings,
            "sign_convention": self.sign_convention,
        }


def estimate(
    model: TrainedModel,
    graph: Any,
    *,
    lam: float = 0.5,
    non_iid: bool = True,
    direct: bool = True,
    direct_exact: bool = False,
    solver: str = "auto",
    damping: float = 0.0,
    rtol: float = 1e-6,
    cg_tol: float = 1e-10,
    cg_max_iter: int = 2000,
    lissa_depth: int = 1000,
    lissa_damping: float = 0.01,
    progress: ProgressCallback | None = None,
    groups: list[int] | None = None,
    chunk_runner: ChunkRunner | None = None,
    method: str = "auto",
    on_plan: Callable[[InfluencePlan], None] | None = None,
    on_stepper: Callable[[Stepper], None] | None = None,
) -> InfluenceResult:
    """Estimate ΔΓ of deleting each training node (see the module docstring for the math and the sign).

    Args:
        model: the trained model (polish it first: the estimate linearises around a stationary point).
        graph: the graph it was trained on.
        lam: Γ = lam·Γ_SP + (1 − lam)·Γ_EO.
        non_iid: include the change of the other training nodes' losses (the paper's non-i.i.d. term).
        direct: include the direct change of Γ through test nodes whose computation graph holds ``v``.
        direct_exact: recompute Γ per node for that term instead of linearising it (slower; on Income the two
            differ by up to 5% of a typical estimate, where a deletion reorders near-tied probabilities).
        solver: ``"exact"`` (dense eigendecomposition, pseudo-inverse), ``"cg"``, ``"lissa"``, ``"lanczos"``
            (damped, matrix-free: CG on ``H + μI`` preconditioned by Lanczos eigenpairs,
            :mod:`bind_core.influence.lowrank`), or ``"auto"`` (exact up to 5000 parameters; beyond, lanczos for
            multi-layer and attention models and CG for one-layer ones).
        damping: added to the Hessian's eigenvalues (exact, cg); 0 by default. For ``lanczos``, 0 means the
            proximal rule ``μ = DAMPING_RULE·λ_max`` of the step estimate.
        progress: ``progress("influence", fraction)``.
        groups: the groups Γ is measured over (default: all; an audit's minimum group size narrows them).
        chunk_runner: computes the per-node terms from the plan (``chunk_runner(plan, model) -> chunks``), for
            instance spread over several workers; default: all of them here, in one chunk.
        method: ``"linear"``: the influence function above (one solve, Γ linearised; the paper's estimate);
            ``"step"``: one damped Newton step per node with Γ evaluated exactly there, answering the proximal
            response (:mod:`bind_core.influence.step`; ``solver``, ``damping``, ``non_iid``, ``direct`` and
            ``chunk_runner`` do not apply); ``"auto"`` (default): ``"step"`` for multi-layer and attention models
            up to :data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS` parameters, else ``"linear"``.
        on_plan: given the linear estimate's plan once it is made (not called for ``"step"``), so that work sharing
            its solve (the edge attribution, :func:`bind_core.influence.edges.estimate_edges`) need not solve again.
        on_stepper: for ``"step"``, given its :class:`~bind_core.influence.step.Stepper` (the damped inverse), for
            the same reason (:func:`bind_core.influence.deep_edges.estimate_edges_deep`).

    Returns:
        An :class:`InfluenceResult` aligned with ``graph.train_idx``.
    """

    def report(frac: float) -> None:
        if progress is not None:
            progress("influence", frac)

    fm = FunctionalModel.from_trained(model, graph, groups)
    if choose_method(method, fm) == "step":
        stepped = step_estimate(fm, progress=report, on_stepper=on_stepper)
        grad_norm = float(torch.func.grad(fm.objective)(fm.theta).norm())
        return InfluenceResult.of_columns(
            graph.train_idx, stepped.delta, stepped.parts, lam, fm.gammas(fm.theta).detach(), stepped.solve,
            grad_norm, stepped.timings,
        )  # fmt: skip
    the_plan = plan(
        model, graph, lam=lam, non_iid=non_iid, direct=direct, direct_exact=direct_exact, solver=solver,
        damping=damping, rtol=rtol, cg_tol=cg_tol, cg_max_iter=cg_max_iter, lissa_depth=lissa_depth,
        lissa_damping=lissa_damping, groups=groups, progress=lambda f: report(0.5 * f), fm=fm,
    )  # fmt: skip
    if on_plan is not None:
        on_plan(the_plan)
    if chunk_runner is None:
        m = the_plan.num_train
        per_node = None if progress is None else (lambda f: report(0.5 + 0.5 * f))
        chunks = [estimate_chunk(the_plan, model, graph, 0, m, fm=fm, progress=per_node)]
    else:
        chunks = chunk_runner(the_plan, model)
    report(1.0)
    return combine(the_plan, graph, chunks)


METHODS = ("auto", "linear", "step")


def choose_method(method: str, fm: FunctionalModel) -> str:
    """The estimate :func:`estimate` runs for ``method`` on this model (see its ``method`` argument)."""
    return pick_method(method, row_separable=fm.module.row_separable, num_parameters=fm.num_parameters)


def pick_method(method: str, *, row_separable: bool, num_parameters: int) -> str:
    """:func:`choose_method` from the model's shape alone (what :mod:`bind_core.pipeline.budget` needs first)."""
    if method not in METHODS:
        raise ConfigError(f"method: {method!r} is not one of {', '.join(METHODS)}")
    if method != "auto":
        return method
    return "linear" if row_separable or num_parameters > EXACT_MAX_PARAMETERS else "step"


def plan(
    model: TrainedModel,
    graph: Any,
    *,
    lam: float = 0.5,
    non_iid: bool = True,
    direct: bool = True,
    direct_exact: bool = False,
    solver: str = "auto",
    damping: float = 0.0,
    rtol: float = 1e-6,
    cg_tol: float = 1e-10,
    cg_max_iter: int = 2000,
    lissa_depth: int = 1000,
    lissa_damping: float = 0.01,
    groups: list[int] | None = None,
    progress: Callable[[float], None] | None = None,
    fm: FunctionalModel | None = None,
) -> InfluencePlan:
    """The part of :func:`estimate` done once: ``∇Γ``, the solve ``s = H⁻¹·∇Γ`` and ``a_j = ∇ℓ_jᵀ·s``."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    fm = fm or FunctionalModel.from_trained(model, graph, groups)
    theta = fm.theta
    grad_norm = float(torch.func.grad(fm.objective)(theta).norm())
    gam = fm.gammas(theta).detach()
    grad_gamma = _gamma_gradients(fm, theta)  # [2, p]
    timings["gradients"] = time.perf_counter() - t0
    if progress is not None:
        progress(0.2)

    t0 = time.perf_counter()
    s, info = solve_hessian(
        fm, grad_gamma.T.contiguous(), solver=solver, rtol=rtol, damping=damping, cg_tol=cg_tol,
        cg_max_iter=cg_max_iter, lissa_depth=lissa_depth, lissa_damping=lissa_damping,
        progress=None if progress is None else (lambda f: progress(0.2 + 0.6 * f)),
    )  # fmt: skip
    info.seconds = time.perf_counter() - t0
    timings["solve"] = info.seconds
    if progress is not None:
        progress(0.8)

    t0 = time.perf_counter()
    train = graph.train_idx.to(fm.device)
    y = graph.y.to(fm.device)
    a = directional_loss_derivatives(lambda f: fm.logits(f, train), theta, s, y[train])  # [m, 2]
    timings["loss_derivatives"] = time.perf_counter() - t0
    if progress is not None:
        progress(1.0)
    return InfluencePlan(
        lam=lam, theta=theta.detach(), s=s, a=a, gamma=gam, grad_norm=grad_norm, solve=info, non_iid=non_iid,
        direct=direct, direct_exact=direct_exact, groups=groups, timings=timings,
    )  # fmt: skip


def estimate_chunk(
    plan: InfluencePlan,
    model: TrainedModel,
    graph: Any,
    start: int,
    stop: int,
    *,
    fm: FunctionalModel | None = None,
    progress: Callable[[float], None] | None = None,
) -> InfluenceChunk:
    """The per-node terms of training positions ``start..stop-1`` (see :mod:`bind_core.influence.plan`).
    ``progress(fraction of the positions)`` is called after each batch of affected pairs; it may raise."""
    t0 = time.perf_counter()
    fm = fm or FunctionalModel.from_trained(model, graph, plan.groups)
    theta = fm.theta
    ref = plan.theta.to(theta.device, theta.dtype)
    if ref.shape != theta.shape or not torch.equal(ref, theta):
        raise ConfigError("the model's weights are not the ones the influence plan was made for")
    m = int(graph.train_idx.numel())
    if plan.num_train != m or not 0 <= start <= stop <= m:
        raise ConfigError(f"chunk {start}..{stop} does not fit a plan of {plan.num_train} training nodes ({m} here)")
    s = plan.s.to(fm.device)
    a = plan.a.to(fm.device)
    k = stop - start
    non_iid_part = torch.zeros(k, 2, dtype=torch.float64, device=fm.device)
    direct_part = torch.zeros(k, 2, dtype=torch.float64, device=fm.device)
    if plan.non_iid or plan.direct:
        deletion_terms(
            fm, theta, s, a, plan.gamma.to(fm.device), non_iid_part, direct_part, non_iid=plan.non_iid,
            direct=plan.direct, exact=plan.direct_exact, start=start, stop=stop, progress=progress,
        )  # fmt: skip
    return InfluenceChunk(
        start, stop, iid=a[start:stop] / m, non_iid=non_iid_part / m, direct=direct_part,
        seconds=time.perf_counter() - t0,
    )  # fmt: skip


def combine(plan: InfluencePlan, graph: Any, chunks: list[InfluenceChunk]) -> InfluenceResult:
    """The estimate from its plan and chunks covering every training position exactly once."""
    parts = stack_chunks(chunks, plan.num_train)
    total = parts["iid"] + parts["non_iid"] + parts["direct"]
    lam, gam = plan.lam, plan.gamma
    timings = dict(plan.timings)
    timings["per_node_terms"] = float(sum(c.seconds for c in chunks))
    timings["chunks"] = float(len(chunks))
    return InfluenceResult.of_columns(graph.train_idx, total, parts, lam, gam, plan.solve, plan.grad_norm, timings)


def solve_hessian(
    fm: FunctionalModel,
    rhs: Tensor,
    *,
    solver: str = "auto",
    rtol: float = 1e-6,
    damping: float = 0.0,
    cg_tol: float = 1e-10,
    cg_max_iter: int = 2000,
    lissa_depth: int = 1000,
    lissa_damping: float = 0.01,
    progress: Callable[[float], None] | None = None,
) -> tuple[Tensor, SolveInfo]:
    """``H⁻¹·rhs`` (``rhs``: ``[p, k]``) at the model's weights with the chosen solver (see :func:`estimate`).
    ``progress(fraction)`` is called as the solver advances (Hessian columns, iterations); it may raise."""
    theta = fm.theta
    chosen = choose(solver, fm.num_parameters)
    if solver == "auto" and chosen == "cg" and not fm.module.row_separable:
        chosen = "lanczos"  # a deep model beyond the dense Hessian: the damped (proximal) solve, matrix-free
    if chosen == "lanczos":
        lanczos_progress = None if progress is None else (lambda f: progress(0.9 * f))
        operator = damped_inverse(
            retained_hvp(fm.objective, theta), fm.num_parameters, rule=DAMPING_RULE, damping=damping or None,
            dtype=theta.dtype, device=theta.device, resolve=RESOLVE_FOR_SOLVE, progress=lanczos_progress,
        )  # fmt: skip
        x, record = operator.solve(rhs, tol=cg_tol, max_iter=cg_max_iter, progress=progress)
        return x, SolveInfo("lanczos", details={"parameters": fm.num_parameters, **operator.details, **record})
    if chosen == "exact":
        return solve_exact(
            fm.objective, theta, rhs, rtol=rtol, damping=damping, chunk=hessian_columns(fm), progress=progress
        )
    hvp = make_hvp(fm.objective, theta)
    if chosen == "cg":
        return solve_cg(hvp, rhs, tol=cg_tol, max_iter=cg_max_iter, damping=damping, progress=progress)
    return solve_lissa(hvp, rhs, depth=lissa_depth, damping=lissa_damping, progress=progress)


def _gamma_gradients(fm: FunctionalModel, theta: Tensor) -> Tensor:
    """``[∇Γ_SP, ∇Γ_EO]`` by reverse-mode autograd (POT's exact transport, used for multi-class labels, is an
    autograd function that ``torch.func`` transforms cannot trace)."""
    probe = theta.clone().requires_grad_(True)
    values = fm.gammas(probe)
    rows = [torch.autograd.grad(values[i], probe, retain_graph=i == 0)[0] for i in range(2)]
    return torch.stack(rows).detach()
