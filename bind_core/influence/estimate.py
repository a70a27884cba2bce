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
from typing import Any

import torch
from torch import Tensor

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.influence.arguments import METHODS, InfluenceArguments
from bind_core.influence.curvature import DAMPING_RULE
from bind_core.influence.distributed.chunks import ChunkRunner, combine, estimate_chunk
from bind_core.influence.distributed.plan import InfluencePlan
from bind_core.influence.functional import FunctionalModel, gammas_from_proba
from bind_core.influence.lowrank import RESOLVE_FOR_SOLVE, damped_inverse
from bind_core.influence.result import InfluenceResult
from bind_core.influence.rowblocks import gamma_gradients, test_probabilities
from bind_core.influence.solvers import (
    SolveInfo,
    choose,
    hessian_columns,
    make_hvp,
    retained_hvp,
    solve_cg,
    solve_exact,
    solve_lissa,
)
from bind_core.influence.step import Stepper
from bind_core.influence.step_nodes import step_estimate
from bind_core.influence.terms import train_loss_derivatives
from bind_core.models.estimator import default_estimator
from bind_core.training.fit import ProgressCallback, TrainedModel
from bind_core.training.stationarity import is_stationary


def estimate(
    model: TrainedModel,
    graph: Any,
    arguments: InfluenceArguments | None = None,
    *,
    progress: ProgressCallback | None = None,
    groups: list[int] | None = None,
    chunk_runner: ChunkRunner | None = None,
    on_plan: Callable[[InfluencePlan], None] | None = None,
    on_stepper: Callable[[Stepper], None] | None = None,
    deletion_threads: int = 1,
) -> InfluenceResult:
    """Estimate ΔΓ of deleting each training node (see the module docstring for the math and the sign).

    Args:
        model: the trained model, with the weights to attribute (any weights: see docs/METHOD.md, "The model as
            given").
        graph: the graph it was trained on.
        arguments: what to compute and how (:class:`~bind_core.influence.arguments.InfluenceArguments`);
            default: its defaults.
        progress: ``progress("influence", fraction)``.
        groups: the groups Γ is measured over (default: all; an audit's minimum group size narrows them).
        chunk_runner: computes the per-node terms from the plan (``chunk_runner(plan, model) -> chunks``), for
            instance spread over several workers; default: all of them here, in one chunk (linear only).
        on_plan: given the linear estimate's plan once it is made (not called for ``"step"``), so that work sharing
            its solve (the edge attribution, :func:`bind_core.influence.edges.estimate_edges`) need not solve again.
        on_stepper: for ``"step"``, given its :class:`~bind_core.influence.step.Stepper` (the damped inverse), for
            the same reason (:func:`bind_core.influence.deep_edges.estimate_edges_deep`).
        deletion_threads: for ``"step"``, how many CPU threads settle the deletions at once
            (:mod:`bind_core.influence.threads`; the results do not depend on it).

    Returns:
        An :class:`InfluenceResult` aligned with ``graph.train_idx``.
    """

    def report(frac: float) -> None:
        if progress is not None:
            progress("influence", frac)

    args = arguments or InfluenceArguments()
    lam = args.lam
    fm = FunctionalModel.from_trained(model, graph, groups)
    if choose_method(args.method, fm, model, graph) == "step":
        return _stepped(fm, graph, lam, report, on_stepper, deletion_threads)
    the_plan = plan(model, graph, args, groups=groups, progress=lambda f: report(0.5 * f), fm=fm)
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


def _stepped(
    fm: FunctionalModel,
    graph: Any,
    lam: float,
    report: Callable[[float], None],
    on_stepper: Callable[[Stepper], None] | None,
    threads: int = 1,
) -> InfluenceResult:
    """The ``"step"`` estimate (:func:`~bind_core.influence.step_nodes.step_estimate`) as an
    :class:`InfluenceResult`."""
    stepped = step_estimate(fm, progress=report, on_stepper=on_stepper, threads=threads)
    grad_norm = float(torch.func.grad(fm.objective)(fm.theta).norm())
    gamma = gammas_from_proba(test_probabilities(fm, fm.theta), fm.graph, fm.groups)
    settled = stepped.residual <= stepped.solve.details["tol"]
    return InfluenceResult.of_columns(
        graph.train_idx,
        stepped.delta,
        stepped.parts,
        lam,
        gamma,
        stepped.solve,
        grad_norm,
        stepped.timings,
        settled,
        no_minimum=stepped.far,
    )


def choose_method(method: str, fm: FunctionalModel, model: TrainedModel, graph: Graph) -> str:
    """The estimate :func:`estimate` runs for ``method`` on ``model`` (``fm``: its functional form on ``graph``; see
    the ``method`` argument): where the choice turns on it, whether the weights are stationary."""
    separable, p = fm.module.row_separable, fm.num_parameters
    chosen = pick_method(method, row_separable=separable, num_parameters=p)
    if method == "auto" and chosen == "linear":  # the default at a stationary point only: read the weights
        return pick_method(method, row_separable=separable, num_parameters=p, stationary=is_stationary(model, graph))
    return chosen


def pick_method(method: str, *, row_separable: bool, num_parameters: int, stationary: bool = True) -> str:
    """:func:`choose_method` from the model's shape alone (what :mod:`bind_core.pipeline.budget` needs first) and
    whether its weights are stationary (:func:`~bind_core.models.estimator.default_estimator`)."""
    if method not in METHODS:
        raise ConfigError(f"method: {method!r} is not one of {', '.join(METHODS)}")
    if method != "auto":
        return method
    return default_estimator(row_separable=row_separable, num_parameters=num_parameters, stationary=stationary)


def plan(
    model: TrainedModel,
    graph: Any,
    arguments: InfluenceArguments | None = None,
    *,
    groups: list[int] | None = None,
    progress: Callable[[float], None] | None = None,
    fm: FunctionalModel | None = None,
) -> InfluencePlan:
    """The part of :func:`estimate` done once: ``∇Γ``, the solve ``s = H⁻¹·∇Γ`` and ``a_j = ∇ℓ_jᵀ·s``
    (``arguments.method`` does not apply: a plan is always the linear estimate's)."""
    args = arguments or InfluenceArguments()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    fm = fm or FunctionalModel.from_trained(model, graph, groups)
    theta = fm.theta
    grad_norm = float(torch.func.grad(fm.objective)(theta).norm())
    gam, grad_gamma = gamma_gradients(fm, theta)  # [2], [2, p]
    timings["gradients"] = time.perf_counter() - t0
    if progress is not None:
        progress(0.2)

    t0 = time.perf_counter()
    s, info = _solve_plan(fm, grad_gamma, args, None if progress is None else (lambda f: progress(0.2 + 0.6 * f)))
    info.seconds = time.perf_counter() - t0
    timings["solve"] = info.seconds
    if progress is not None:
        progress(0.8)

    t0 = time.perf_counter()
    a = train_loss_derivatives(fm, theta, s)  # [m, 2]
    timings["loss_derivatives"] = time.perf_counter() - t0
    if progress is not None:
        progress(1.0)
    return InfluencePlan(
        lam=args.lam,
        theta=theta.detach(),
        s=s,
        a=a,
        gamma=gam,
        grad_norm=grad_norm,
        solve=info,
        non_iid=args.non_iid,
        direct=args.direct,
        direct_exact=args.direct_exact,
        groups=groups,
        timings=timings,
    )


def _solve_plan(
    fm: FunctionalModel, grad_gamma: Tensor, args: InfluenceArguments, progress: Callable[[float], None] | None
) -> tuple[Tensor, SolveInfo]:
    """The plan's solve ``s = H⁻¹·∇Γ`` (``grad_gamma``: ``[2, p]``) with the solver settings of ``args``."""
    return solve_hessian(
        fm,
        grad_gamma.T.contiguous(),
        solver=args.solver,
        rtol=args.rtol,
        damping=args.damping,
        cg_tol=args.cg_tol,
        cg_max_iter=args.cg_max_iter,
        lissa_depth=args.lissa_depth,
        lissa_damping=args.lissa_damping,
        progress=progress,
    )


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
            retained_hvp(fm.objective, theta),
            fm.num_parameters,
            rule=DAMPING_RULE,
            damping=damping or None,
            dtype=theta.dtype,
            device=theta.device,
            resolve=RESOLVE_FOR_SOLVE,
            progress=lanczos_progress,
        )
        x, record = operator.solve(rhs, tol=cg_tol, max_iter=cg_max_iter, progress=progress)
        return x, SolveInfo("lanczos", details={"parameters": fm.num_parameters, **operator.details, **encode(record)})
    if chosen == "exact":
        return solve_exact(
            fm.objective, theta, rhs, rtol=rtol, damping=damping, chunk=hessian_columns(fm), progress=progress
        )
    hvp = make_hvp(fm.objective, theta)
    if chosen == "cg":
        return solve_cg(hvp, rhs, tol=cg_tol, max_iter=cg_max_iter, damping=damping, progress=progress)
    return solve_lissa(hvp, rhs, depth=lissa_depth, damping=lissa_damping, progress=progress)
