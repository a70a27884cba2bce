"""Inverse-Hessian-vector solvers: exact (eigendecomposition), conjugate gradients, and LiSSA.

All solve ``H·X = B`` for the Hessian ``H = ∇²L(θ̂)`` of the training objective and a few right-hand sides
``B [p, k]``. A trained GNN is not at a convex optimum, so ``H`` can be singular or indefinite:

* flat directions are real: the objective is invariant under rotating a layer's hidden units together with the
  next layer's inputs when weight decay is the only regulariser, so ``H`` has (numerically) zero eigenvalues
  along those orbits. ``∇Γ`` and every ``∇ℓ_v`` are orthogonal to them (``Γ`` and the losses are invariant
  too), so the right answer is the pseudo-inverse: ``exact`` drops eigenvalues with ``|λ| ≤ rtol·max|λ|``.
* negative eigenvalues beyond that threshold mean the weights are not at a minimum (not polished). ``exact``
  then uses ``|λ|`` (the saddle-free Newton choice) and reports how many it flipped; ``cg`` stops at the first
  direction of non-positive curvature. Polishing the model (``TrainConfig.polish``) avoids both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch.func import grad, hessian, jvp

from bind_core.errors import ConfigError
from bind_core.influence.arguments import SOLVERS
from bind_core.influence.functional import FunctionalModel
from bind_core.models.estimator import DENSE_MAX_PARAMETERS
from bind_core.training.hessian import dense_hessian as chunked_hessian
from bind_core.training.hessian import dense_hessian_by_rows

EXACT_MAX_PARAMETERS = DENSE_MAX_PARAMETERS
"""The exact solver's and the dense curvature's bound (one value with the default estimate's choice)."""


@dataclass
class SolveInfo:
    """What a solver did, for the audit record."""

    solver: str
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def make_hvp(objective: Callable[[Tensor], Tensor], theta: Tensor) -> Callable[[Tensor], Tensor]:
    """``v ↦ H·v`` by forward-over-reverse differentiation (no Hessian is formed)."""
    g = grad(objective)

    def hvp(v: Tensor) -> Tensor:
        tangent: Tensor = jvp(g, (theta,), (v,))[1]
        return tangent

    return hvp


def retained_hvp(objective: Callable[[Tensor], Tensor], theta: Tensor) -> Callable[[Tensor], Tensor]:
    """``v ↦ H·v`` by reverse-over-reverse products on one retained gradient graph: the gradient's graph is built
    once, and each product is one more backward pass through it. For a message-passing model on a large graph this
    is the cheaper way, because every product reuses the forward pass (a two-layer SAGE, hidden 64, on a
    20,000-node graph: 52 ms a product against 126 ms by forward-over-reverse, equal to 6·10⁻¹⁵ relative); it
    holds the memory of one forward and backward pass while it lives. Not usable inside ``torch.func`` transforms
    (:func:`make_hvp` is)."""
    probe = theta.detach().clone().requires_grad_(True)
    (g,) = torch.autograd.grad(objective(probe), probe, create_graph=True)

    def hvp(v: Tensor) -> Tensor:
        (out,) = torch.autograd.grad(g, probe, grad_outputs=v, retain_graph=True)
        return out.detach()

    return hvp


def choose(solver: str, num_parameters: int) -> str:
    if solver not in SOLVERS:
        raise ConfigError(f"solver: {solver!r} is not one of {', '.join(SOLVERS)}")
    if solver != "auto":
        return solver
    return "exact" if num_parameters <= EXACT_MAX_PARAMETERS else "cg"


def dense_hessian(
    objective: Callable[[Tensor], Tensor],
    theta: Tensor,
    chunk: int | None = None,
    *,
    progress: Callable[[float], None] | None = None,
    threads: int = 1,
) -> Tensor:
    """The ``[p, p]`` Hessian: ``torch.func.hessian`` (all ``p`` columns at once) when ``chunk`` is None and it
    applies, else columns by HVPs, ``chunk`` at a time (:func:`bind_core.training.hessian.dense_hessian`; memory:
    ``chunk`` copies of the activations, see :func:`hessian_chunk`); ``chunk=0``: row by row on one retained
    gradient graph (:func:`bind_core.training.hessian.dense_hessian_by_rows`, for message-passing models).
    ``progress(fraction of the columns)`` is called as columns are formed (not by the all-at-once path); it may
    raise to abort. ``threads``: CPU threads forming the rows at once (``chunk=0`` only; the same matrix)."""
    p = theta.numel()
    if chunk == 0:
        return dense_hessian_by_rows(objective, theta, progress=progress, threads=threads)
    if chunk is None or chunk >= p:
        try:
            h: Tensor = hessian(objective)(theta)
            return 0.5 * (h + h.T)
        except (RuntimeError, NotImplementedError):
            chunk = 256
    return chunked_hessian(objective, theta, chunk=chunk, progress=progress)


def hessian_chunk(activation_elements: int, num_parameters: int, budget: int = 2**24) -> int:
    """How many Hessian columns to form at once so that each intermediate stays near ``budget`` elements
    (128 MiB in float64), given the elements one forward pass's largest activations hold: ``vmap`` over all
    ``p`` columns at once multiplies them by ``p`` (a two-layer GCN on a 10⁵-node graph: ~10¹¹ elements)."""
    return max(1, min(num_parameters, budget // max(activation_elements, 1)))


def solve_exact(
    objective: Callable[[Tensor], Tensor],
    theta: Tensor,
    rhs: Tensor,
    *,
    rtol: float = 1e-6,
    damping: float = 0.0,
    chunk: int | None = None,
    progress: Callable[[float], None] | None = None,
) -> tuple[Tensor, SolveInfo]:
    """Pseudo-inverse solve by eigendecomposition (see the module docstring for the treatment of ``λ``).
    ``progress(fraction)`` is called while the Hessian's columns are formed; it may raise to abort."""
    h = dense_hessian(objective, theta, chunk, progress=progress)
    evals, evecs = torch.linalg.eigh(h)
    scale = float(evals.abs().max())
    threshold = rtol * scale
    kept = evals.abs() > threshold
    negative = evals < -threshold
    lam = evals.abs() + damping
    inv = torch.where(kept, 1.0 / lam, torch.zeros_like(lam))
    x = evecs @ (inv.unsqueeze(1) * (evecs.T @ rhs))
    info = SolveInfo(
        "exact",
        details={
            "parameters": int(theta.numel()),
            "max_eigenvalue": float(evals.max()),
            "min_eigenvalue": float(evals.min()),
            "dropped_eigenvalues": int((~kept).sum()),
            "negative_eigenvalues_flipped": int(negative.sum()),
            "rtol": rtol,
            "damping": damping,
            "hessian_columns_at_once": chunk or int(theta.numel()),
        },
    )
    return x, info


def solve_cg(
    hvp: Callable[[Tensor], Tensor],
    rhs: Tensor,
    *,
    tol: float = 1e-10,
    max_iter: int = 1000,
    damping: float = 0.0,
    progress: Callable[[float], None] | None = None,
) -> tuple[Tensor, SolveInfo]:
    """Conjugate gradients on ``(H + δI)·x = b`` for each column ``b`` of ``rhs``, matrix-free.

    Started from zero, CG stays in the Krylov space of ``b``, which lies in the range of ``H`` when ``b`` is
    orthogonal to its flat directions, so it returns the pseudo-inverse solution. It stops early (and says
    so) on a direction of non-positive curvature. ``progress(fraction of the iteration cap)`` is called after
    every iteration and may raise to abort.
    """
    cols, iters, stopped = [], [], []
    for column, b in enumerate(rhs.T):
        x = torch.zeros_like(b)
        r = b.clone()
        d = r.clone()
        rr = r @ r
        b_norm = float(b.norm()) or 1.0
        reason, k = "max_iter", 0
        for k in range(1, max_iter + 1):
            if progress is not None:
                progress((column + k / max_iter) / rhs.shape[1])
            hd = hvp(d) + damping * d
            curvature = d @ hd
            if curvature <= 0:
                reason = "non_positive_curvature"
                break
            alpha = rr / curvature
            x = x + alpha * d
            r = r - alpha * hd
            rr_new = r @ r
            if float(rr_new.sqrt()) <= tol * b_norm:
                reason = "converged"
                break
            d = r + (rr_new / rr) * d
            rr = rr_new
        cols.append(x)
        iters.append(k)
        stopped.append(reason)
    info = SolveInfo("cg", details={"iterations": iters, "stopped": stopped, "tol": tol, "damping": damping})
    return torch.stack(cols, dim=1), info


def solve_lissa(
    hvp: Callable[[Tensor], Tensor],
    rhs: Tensor,
    *,
    depth: int = 1000,
    damping: float = 0.01,
    scale: float | None = None,
    power_iterations: int = 30,
    progress: Callable[[float], None] | None = None,
) -> tuple[Tensor, SolveInfo]:
    """LiSSA (Agarwal et al. 2017), the paper's stochastic solver, kept for comparison.

    Iterates ``h ← b + (I − (H + δI)/s)·h`` ``depth`` times and returns ``h/s``. The scale ``s`` must exceed the
    largest eigenvalue; it is estimated by power iteration (×1.5) instead of being hand-tuned per dataset.
    Full-batch HVPs are used, so the result is deterministic; it converges only along directions with
    ``λ + δ > 0`` and slowly along small ones, which shrinks the estimates (the reason ``exact`` is default).
    ``progress(fraction)`` is called after every iteration and may raise to abort.
    """
    if scale is None:
        v = torch.randn(rhs.shape[0], dtype=rhs.dtype, device=rhs.device, generator=torch.Generator().manual_seed(0))
        v = v / v.norm()
        top = 0.0
        for _ in range(power_iterations):
            if progress is not None:
                progress(0.0)
            w = hvp(v) + damping * v
            top = float(w.norm())
            v = w / (top or 1.0)
        scale = 1.5 * top
    if scale <= 0:
        raise ConfigError("lissa: the Hessian's scale estimate is not positive")
    cols = []
    for column, b in enumerate(rhs.T):
        h = b.clone()
        for i in range(depth):
            if progress is not None:
                progress((column + i / depth) / rhs.shape[1])
            h = b + h - (hvp(h) + damping * h) / scale
        cols.append(h / scale)
    info = SolveInfo("lissa", details={"depth": depth, "damping": damping, "scale": scale})
    return torch.stack(cols, dim=1), info


def hessian_columns(fm: FunctionalModel) -> int:
    """How the dense Hessian is formed: for a row-separable model, columns by forward-over-reverse products,
    as many at once as keep the activations of the training rows near a memory budget; for a message-passing
    model, row by row on one retained gradient graph (``0``: a forward-mode pass through PyG's scatter costs
    about three backward passes)."""
    if not fm.module.row_separable:
        return 0
    return hessian_chunk(activation_elements(fm), fm.num_parameters)


def activation_elements(fm: FunctionalModel) -> int:
    """What one column's pass over the training objective holds at its widest, for :func:`hessian_chunk`: a value and
    a tangent for each row it runs on (a row-separable model's training rows, else the objective's graph) at the widest
    layer."""
    module, rows = fm.module, fm.objective_rows()
    width = max(module.in_dim, module.config.hidden * module.config.heads)
    count = rows.train.numel() if module.row_separable else rows.inputs.x.shape[0]
    return int(count) * width * 2
