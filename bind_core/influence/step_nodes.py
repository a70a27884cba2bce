"""The step estimate of every training node, and of node sets (:class:`~bind_core.influence.step.Stepper`'s
deletions, settled one at a time or in batches: :mod:`bind_core.influence.batched`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.codec import encode, key
from bind_core.influence.batched import batch_size, delete_many
from bind_core.influence.curvature import DAMPING_RULE
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.solvers import SolveInfo
from bind_core.influence.step import STEPS, Deletion, Stepper
from bind_core.influence.terms import train_loss_derivatives
from bind_core.influence.threads import settle_each
from bind_core.threads import check_threads

__all__ = ["Settling", "StepEstimate", "step_estimate", "step_set_estimates"]


@dataclass
class StepEstimate:
    """What :func:`step_estimate` computed, aligned with ``train_idx``."""

    delta: Tensor
    """``[m, 2]``: ΔΓ_SP, ΔΓ_EO at the weights reached on ``G − v``."""
    parts: dict[str, Tensor]
    """``iid``, ``non_iid``, ``direct``: the first-order estimate's terms (damped solve); ``step``: the rest."""
    solve: SolveInfo
    timings: dict[str, float]
    residual: Tensor
    """``[m]``: the largest entry of the proximal objective's gradient where each node stopped."""
    taken: Tensor
    """``[m]``: damped Newton steps taken per node."""
    far: Tensor
    """``[m]`` bool: the nodes whose deletion has no minimum near ``θ̂`` (:attr:`Deletion.far`)."""
    weights: Tensor | None = None
    """``[m, p]``: the weights reached per node (``keep_weights=True`` only)."""
    first_steps: Tensor | None = None
    """``[m, p]``: each node's first step ``(1/m)·(H + μI)⁻¹·∇c_v`` (``keep_weights=True`` only)."""


def step_estimate(
    fm: FunctionalModel,
    *,
    rule: float = DAMPING_RULE,
    rtol: float = 1e-9,
    steps: int = STEPS,
    tol: float = 1e-7,
    keep_weights: bool = False,
    progress: Callable[[float], None] | None = None,
    operator: str = "auto",
    on_stepper: Callable[[Stepper], None] | None = None,
    batch_bytes: int | None = None,
    threads: int = 1,
) -> StepEstimate:
    """ΔΓ of every training node: damped Newton steps towards the proximal optimum on ``G − v``, Γ exactly there.

    The first step is ``Δθ_v = (1/m)·(H + μI)⁻¹·∇c_v`` (the module docstring); up to ``steps − 1`` more use the
    same frozen ``(H + μI)⁻¹`` on the exact gradient of the proximal objective on ``G − v`` (a chord method), each
    halved up to :data:`HALVINGS` times until the objective decreases enough (Armijo), until the gradient's
    largest entry is at most ``tol``. ``solve.details`` records the spectrum, the damping and how many nodes did
    not settle.

    ``operator`` (:data:`OPERATORS`) says how ``(H + μI)⁻¹`` is applied: beyond
    :data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS` parameters, or with ``"lanczos"``, from Lanczos
    eigenpairs plus damping, matrix-free; the solve for ``∇Γ`` is then exact by preconditioned CG and the steps'
    frozen inverse is approximate (the chord steps settle on the exact gradient all the same).

    ``on_stepper`` is given the :class:`Stepper` once it is made, so that other deletions of the same model (the
    edges, :mod:`bind_core.influence.deep_edges`) reuse its damped inverse. ``batch_bytes``: the memory budget of
    one batch of deletions settled together (:func:`~bind_core.influence.batched.batch_size`; ``None``: the
    device's default; 0: one at a time). ``threads``: how many CPU threads settle deletions at once
    (:mod:`bind_core.influence.threads`; the results do not depend on it).
    """
    check_threads(threads, "deletion threads")
    hessian_progress = None if progress is None else (lambda f: progress(0.1 * f))
    stepper = Stepper.build(
        fm, rule=rule, rtol=rtol, steps=steps, tol=tol, operator=operator, progress=hessian_progress, threads=threads
    )
    timings = {"solve": stepper.solve.seconds}
    if on_stepper is not None:
        on_stepper(stepper)
    if progress is not None:
        progress(0.1)
    m = stepper.m
    s_damped = stepper.solve_damped_exactly(stepper.grad_gamma.T.contiguous())  # (H + μI)⁻¹·∇Γ, [p, 2]
    iid = train_loss_derivatives(fm, fm.theta, s_damped).cpu() / m  # (1/m)·∇ℓ_vᵀ·s: first-order i.i.d.
    nodes = _PerNode.empty(m, fm.theta, keep_weights)
    t0 = time.perf_counter()
    size = batch_size(stepper, batch_bytes)
    batches = [list(range(start, min(m, start + size))) for start in range(0, m, size)]

    def put(i: int, outs: list[Deletion]) -> None:
        for pos, out in zip(batches[i], outs, strict=True):
            nodes.put(pos, out)
        if progress is not None:  # every batch: one deletion is a few full-graph passes
            progress(0.1 + 0.9 * (batches[i][-1] + 1) / m)

    settle_each(stepper, batches, lambda s, positions: delete_many(s, [[p] for p in positions]), put, threads=threads)
    timings["per_node_terms"] = time.perf_counter() - t0
    stepper.solve.details["batch_size"] = size
    solve = stepper.solve
    solve.details |= encode(nodes.settling(steps, tol, stepper.mixes))
    first, direct, exact = nodes.first, nodes.direct, nodes.exact
    parts = {"iid": iid, "non_iid": first - iid, "direct": direct, "step": exact - first - direct}
    return StepEstimate(
        exact, parts, solve, timings, nodes.residual, nodes.taken, nodes.far, nodes.weights, nodes.first_steps
    )


@dataclass(kw_only=True)
class Settling:
    """How the training nodes' damped steps settled (it joins the solve's details)."""

    steps_max: int = key("integer: damped steps per node at most")
    steps_median: float = key("number: the median of the steps the nodes took")
    tol: float = key("number: a node settled when the proximal gradient's largest entry is at most this")
    unsettled: int = key("integer: nodes that did not settle")
    stalled: int | None = key(
        "integer: of the unsettled nodes, those whose steps stalled before steps_max (they stopped making progress, "
        "as on the kinks of a ReLU model's objective, where no gradient vanishes); the rest ran out of steps",
        optional=True,
    )
    max_residual: float = key(
        "number: the largest remaining gradient entry (over the nodes with a value, where any node has one)"
    )
    finished: int | None = key(
        "integer: nodes whose chord steps stopped short and that L-BFGS on the same objective finished from there, "
        "in the damped curvature's coordinates",
        optional=True,
    )
    no_minimum: int | None = key(
        "integer: of the unsettled nodes, those whose deletion has no minimum near the given weights (the finish "
        "carried the weights more than 10·max(1, ‖θ̂‖) away): no value answers the question for them",
        optional=True,
    )
    mixed: bool | None = key(
        "boolean: whether the chord steps were Anderson-mixed (a smooth model; a model with kinks is not)",
        optional=True,
    )
    moved_far: int | None = key(
        "integer: of the nodes with a value, those whose deletion carried the weights further than MOVED_FAR (a "
        "quarter) of ‖θ̂‖ from the given weights: the objective is nearly flat along their pull, so their ΔΓ "
        "describes a substantially different model and saturates (docs/METHOD.md, 'Deletions that move far')",
        optional=True,
    )
    moved_max: float | None = key(
        "number: the farthest any deletion with a value carried the weights, as a share of ‖θ̂‖",
        optional=True,
    )


MOVED_FAR = 0.25
"""A deletion that carries the weights further than this share of ``‖θ̂‖`` answers for a substantially different
model (:attr:`Settling.moved_far`; the audit warns). Settled deletions of models the audit trains move at most 0.11 of
it (a two-layer GIN as Adam leaves it, ``synthetic(300, seed=3)``), those of a PyG two-layer ReLU GCN on Income at
most 0.062 but for the rarer class's nodes, 0.27–1.96 (docs/METHOD.md, "Deletions that move far")."""


@dataclass
class _PerNode:
    """What :func:`step_estimate` gathers per training node (:class:`StepEstimate`'s fields, ``first`` and
    ``direct`` the first-order value's terms)."""

    exact: Tensor
    direct: Tensor
    first: Tensor
    taken: Tensor
    residual: Tensor
    finished: Tensor
    far: Tensor
    moved: Tensor
    """``[m]``: how far each deletion carried the weights from ``θ̂``, as a share of ``‖θ̂‖``."""
    theta: Tensor
    scale: float
    """``‖θ̂‖`` (at least the smallest positive float), what :attr:`moved` is a share of."""
    weights: Tensor | None
    first_steps: Tensor | None

    @classmethod
    def empty(cls, m: int, theta: Tensor, keep_weights: bool) -> _PerNode:
        """Room for ``m`` nodes of the model whose given weights are ``theta`` (and their weights when
        ``keep_weights``)."""
        p = theta.numel()
        return cls(
            moved=torch.zeros(m, dtype=torch.float64),
            theta=theta.detach().double().cpu(),
            scale=max(float(theta.norm()), 1e-300),
            exact=torch.zeros(m, 2, dtype=torch.float64),
            direct=torch.zeros(m, 2, dtype=torch.float64),
            first=torch.zeros(m, 2, dtype=torch.float64),
            taken=torch.zeros(m, dtype=torch.long),
            residual=torch.zeros(m, dtype=torch.float64),
            finished=torch.zeros(m, dtype=torch.bool),
            far=torch.zeros(m, dtype=torch.bool),
            weights=torch.zeros(m, p, dtype=torch.float64) if keep_weights else None,
            first_steps=torch.zeros(m, p, dtype=torch.float64) if keep_weights else None,
        )

    def put(self, pos: int, out: Deletion) -> None:
        """The deletion of the node at training position ``pos``."""
        self.exact[pos], self.direct[pos], self.first[pos] = out.delta, out.direct, out.first_order
        self.taken[pos], self.residual[pos] = out.taken, out.residual
        self.finished[pos], self.far[pos] = out.finished > 0, out.far is not None
        self.moved[pos] = float((out.weights.double() - self.theta).norm()) / self.scale
        if self.weights is not None and self.first_steps is not None:
            self.weights[pos], self.first_steps[pos] = out.weights, out.first_step

    def settling(self, steps: int, tol: float, mixed: bool) -> Settling:
        """How the nodes settled, for the solve's details (``mixed``: :attr:`Stepper.mixes`)."""
        valued = self.residual[~self.far]  # a deletion without a minimum has no residual to speak of
        return Settling(
            steps_max=steps,
            steps_median=float(self.taken.double().median()),
            tol=tol,
            unsettled=int((self.residual > tol).sum()),
            stalled=int(((self.residual > tol) & (self.taken < steps) & ~self.far).sum()),
            max_residual=float(valued.max() if valued.numel() else self.residual.max()),
            finished=int(self.finished.sum()),
            no_minimum=int(self.far.sum()),
            mixed=mixed,
            moved_far=int(((self.moved > MOVED_FAR) & ~self.far).sum()),
            moved_max=float(self.moved[~self.far].max()) if bool((~self.far).any()) else None,
        )


def step_set_estimates(
    fm: FunctionalModel,
    sets: list[list[int]],
    *,
    rule: float = DAMPING_RULE,
    steps: int = STEPS,
    tol: float = 1e-7,
    stepper: Stepper | None = None,
    batch_bytes: int | None = None,
    threads: int = 1,
) -> list[Deletion]:
    """The step estimate of deleting each set of training positions together (one step from θ̂ for the whole set
    on ``G − S``, Γ exactly there), rather than the sum of its members' estimates, which for a flat objective
    can add up past anything the set can do. ``batch_bytes``, ``threads``: as :func:`step_estimate`'s."""
    check_threads(threads, "deletion threads")
    stepper = stepper or Stepper.build(fm, rule=rule, steps=steps, tol=tol, threads=threads)
    size = batch_size(stepper, batch_bytes)
    batches = [sets[start : start + size] for start in range(0, len(sets), size)]
    out: list[Deletion] = []
    settle_each(stepper, batches, delete_many, lambda _, settled: out.extend(settled), threads=threads)
    return out
