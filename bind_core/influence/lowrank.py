"""Damped inverse-Hessian products without a dense Hessian: Lanczos for the top of the spectrum, CG for the rest.

A multi-layer model's estimate answers the proximal question (:mod:`bind_core.influence.step`): it needs
``(H + μI)⁻¹·b`` with ``μ = rule·λ_max``. Up to :data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS`
parameters the Hessian is formed and decomposed; beyond, a ``p × p`` matrix is out of reach (10⁵ parameters: 80
GB), and only Hessian-vector products are affordable. This module builds, from ``k`` Lanczos iterations (``k``
HVPs, Paige's recurrence with full reorthogonalisation), the top eigenpairs ``(λ_i, u_i)`` of ``H`` and:

* the damping ``μ = rule·λ_max`` (Lanczos finds the largest eigenvalue first, to many digits in a few dozen
  iterations);
* an approximate inverse ``P = U·diag(1/(|λ_i| + μ))·Uᵀ + (I − UUᵀ)/(λ_c + μ)``, where ``λ_c ≥ 0`` stands for the
  unresolved part of the spectrum (the smallest resolved Ritz value, halved). The damped spectrum of a trained
  GNN is a few large eigenvalues over a bulk far below ``μ`` (a two-layer GCN: 190 of 433 below the weight decay),
  so once Lanczos has passed ``μ`` the complement's ``1/(λ + μ)`` lies within a factor ``(λ_c + μ)/μ`` of the
  truth. This is the low-rank-plus-damping inverse of Schioppa et al. (AAAI 2022) with the damping kept for the
  complement rather than dropping it;
* an exact solve: conjugate gradients on ``(H + μI)·x = b`` preconditioned by ``P`` (:meth:`DampedInverse.solve`),
  to a relative residual ``tol``. The damped system's condition number is at most ``1 + λ_max/μ`` (1001 with the
  default rule), and ``P`` removes the top of the spectrum, so CG needs tens of products, not hundreds.

The per-node steps use ``P`` alone (:meth:`DampedInverse.apply`): they are chord steps on the exact gradient
(:class:`~bind_core.influence.step.Stepper`), which converge for any ``P`` with ``‖I − P(H + μI)‖ < 1`` on the
directions that matter; ``P``'s error factor on the complement is ``|λ − λ_c|/(λ_c + μ) < 1``.
"""

# ruff: noqa: RUF009  (key() returns dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from bind_core.codec import key

LANCZOS_MAX = 400
"""The most Lanczos iterations (HVPs, and ``[p, k]`` basis vectors kept in memory) for one operator."""

RESOLVE_FOR_STEPS = 0.1
"""Lanczos resolves the spectrum down to ``μ/10`` for an operator the per-node chord steps apply (each step they save
is a pass over the graph)."""

RESOLVE_FOR_SOLVE = 1.0
"""Lanczos stops once it has resolved the spectrum down to ``μ`` for an operator that only preconditions CG: the
flat bulk below ``μ`` is where Lanczos is slowest and where the damping already bounds the condition number, so CG
finishes in a few more products. Two-layer SAGE, hidden 64, 20,000 nodes: 380 Lanczos products and 2×5 CG
iterations (28 s) against 50 and 2×10 (4.5 s); the estimates agree to 6·10⁻¹¹ of the largest."""


@dataclass(kw_only=True)
class CgRecord:
    """How :meth:`DampedInverse.solve`'s preconditioned CG went (it joins the solve's details)."""

    cg_iterations: list[int] = key("integers: CG iterations per right-hand side")
    cg_relative_residuals: list[float] = key("numbers: each column's final relative residual")
    cg_tol: float = key("number: the relative residual asked for")


@dataclass
class DampedInverse:
    """``(H + μI)⁻¹`` for a matrix-free ``H`` (see the module docstring): the top eigenpairs and the damping."""

    hvp: Callable[[Tensor], Tensor]
    evals: Tensor
    """``[k]``: resolved Ritz values, largest first."""
    evecs: Tensor
    """``[p, k]``: their Ritz vectors (orthonormal)."""
    mu: float
    complement: float
    """``λ_c``: the eigenvalue assumed for the unresolved directions (``≥ 0``)."""
    details: dict[str, Any] = field(default_factory=dict)

    def apply(self, vec: Tensor) -> Tensor:
        """``P·vec`` (``vec``: ``[p]`` or ``[p, k]``), the low-rank-plus-damping approximation."""
        coords = self.evecs.T @ vec
        scale = 1.0 / (self.evals.abs() + self.mu)
        scale = scale if vec.ndim == 1 else scale.unsqueeze(1)
        rest = vec - self.evecs @ coords
        return self.evecs @ (scale * coords) + rest / (self.complement + self.mu)

    def solve(
        self,
        rhs: Tensor,
        *,
        tol: float = 1e-10,
        max_iter: int = 500,
        progress: Callable[[float], None] | None = None,
    ) -> tuple[Tensor, CgRecord]:
        """``(H + μI)⁻¹·rhs`` by CG preconditioned with :meth:`apply`, each column to relative residual ``tol``.

        Args:
            rhs: ``[p]`` or ``[p, k]``.
            tol: the relative residual each column is solved to.
            max_iter: CG iterations per column at most.
            progress: called with ``1.0`` after every product (it may raise, to stop).

        Returns:
            The solution (the shape of ``rhs``) and the :class:`CgRecord`.
        """
        cols, iterations, residuals = [], [], []

        def matvec(v: Tensor) -> Tensor:
            if progress is not None:
                progress(1.0)
            return self.hvp(v) + self.mu * v

        for b in rhs.T if rhs.ndim == 2 else rhs.unsqueeze(0):
            x, k, res = _pcg(matvec, self.apply, b, tol=tol, max_iter=max_iter)
            cols.append(x)
            iterations.append(k)
            residuals.append(res)
        out = torch.stack(cols, dim=1) if rhs.ndim == 2 else cols[0]
        return out, CgRecord(cg_iterations=iterations, cg_relative_residuals=residuals, cg_tol=tol)


def damped_inverse(
    hvp: Callable[[Tensor], Tensor],
    p: int,
    *,
    rule: float,
    damping: float | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str = "cpu",
    max_iter: int = LANCZOS_MAX,
    seed: int = 0,
    resolve: float = RESOLVE_FOR_STEPS,
    progress: Callable[[float], None] | None = None,
) -> DampedInverse:
    """Lanczos on ``hvp`` until the Ritz values converged at the top reach below ``resolve·μ`` (``μ = rule·λ_max``,
    or ``damping`` when given), the Krylov space is exhausted, or ``max_iter`` products; then :class:`DampedInverse`
    from the converged pairs. ``progress(fraction)`` is called after every product (it may raise, to stop).

    ``resolve``: :data:`RESOLVE_FOR_STEPS` where the operator itself takes many chord steps (its accuracy saves
    full-graph passes per node), :data:`RESOLVE_FOR_SOLVE` where it only preconditions CG for a few right-hand
    sides."""
    start = time.perf_counter()
    steps = min(max_iter, p)
    run = _Lanczos.start(p, steps, seed, dtype, device)
    for j in range(steps):
        w, beta = run.extend(hvp, j)
        if progress is not None:
            progress((j + 1) / steps)
        due = (j + 1) % 10 == 0 or j + 1 == steps or beta <= 1e-12 * max(abs(a) for a in run.alphas)
        if due and run.check(beta, rule=rule, damping=damping, resolve=resolve):
            break
        if j + 1 == steps:
            break
        run.betas.append(beta)
        run.basis[:, j + 1] = w / beta
    return run.inverse(hvp, rule=rule, damping=damping, dtype=dtype, start=start)


@dataclass
class _Lanczos:
    """The state of :func:`damped_inverse`'s Lanczos run: the orthonormal basis (``[p, steps + 1]``), the
    tridiagonal's ``alphas`` and ``betas``, and the Ritz pairs at the last check with how many of the largest in a
    row have ``converged``."""

    basis: Tensor
    alphas: list[float] = field(default_factory=list)
    betas: list[float] = field(default_factory=list)
    evals: Tensor | None = None
    evecs_t: Tensor | None = None
    converged: int = 0

    @classmethod
    def start(cls, p: int, steps: int, seed: int, dtype: torch.dtype, device: torch.device | str) -> _Lanczos:
        """A random unit start vector (from ``seed``) in a basis of room for ``steps`` iterations."""
        gen = torch.Generator().manual_seed(seed)
        q = torch.randn(p, generator=gen, dtype=dtype).to(device)
        basis = torch.empty(p, steps + 1, dtype=dtype, device=device)
        basis[:, 0] = q / q.norm()
        return cls(basis)

    def extend(self, hvp: Callable[[Tensor], Tensor], j: int) -> tuple[Tensor, float]:
        """Iteration ``j``: records ``α_j`` and returns the next direction, orthogonal to the basis, and its norm
        ``β_j``."""
        w = hvp(self.basis[:, j])
        self.alphas.append(float(self.basis[:, j] @ w))
        for _ in range(2):  # full reorthogonalisation, twice (Kahan): keeps the basis orthonormal to rounding
            w = w - self.basis[:, : j + 1] @ (self.basis[:, : j + 1].T @ w)
        return w, float(w.norm())

    def check(self, beta: float, *, rule: float, damping: float | None, resolve: float) -> bool:
        """The Ritz pairs so far and how many of the largest have converged; ``True`` when Lanczos stops: the
        Krylov space is exhausted (``beta`` at round-off) or the converged pairs reach below ``resolve·μ``."""
        self.evals, self.evecs_t = evals, evecs_t = _ritz(self.alphas, self.betas)
        top = float(evals.abs().max())
        mu = rule * top if damping is None else damping
        # A Ritz pair has converged when its residual ‖H·u − λ·u‖ = β·|last entry of its vector| is small.
        residual = beta * evecs_t[-1].abs()
        converged = residual <= 1e-6 * top
        self.converged = _converged_prefix(evals, converged)
        resolved_below = self.converged > 0 and float(evals[self.converged - 1].abs()) < resolve * mu
        return beta <= 1e-12 * top or resolved_below

    def inverse(
        self, hvp: Callable[[Tensor], Tensor], *, rule: float, damping: float | None, dtype: torch.dtype, start: float
    ) -> DampedInverse:
        """The :class:`DampedInverse` of the converged pairs (``start``: when the run began, for ``seconds``)."""
        assert self.evals is not None and self.evecs_t is not None
        evals = self.evals
        k = len(self.alphas)
        top = float(evals.abs().max())
        mu = rule * top if damping is None else damping
        keep = self.converged
        device = self.basis.device
        ritz_vectors = self.basis[:, :k] @ self.evecs_t[:, :keep].to(device=device, dtype=dtype)  # tridiagonal's: CPU
        kept = evals[:keep].to(device=device, dtype=dtype)
        complement = 0.5 * float(kept.abs().min()) if keep else top
        details = {
            "lanczos_iterations": k,
            "resolved_eigenpairs": keep,
            "max_eigenvalue": float(evals.max()),
            "smallest_resolved_eigenvalue": float(kept.abs().min()) if keep else None,
            "complement_eigenvalue": complement,
            "damping": mu,
            "damping_rule": rule if damping is None else None,
            "seconds": time.perf_counter() - start,
        }
        return DampedInverse(hvp, kept, ritz_vectors, mu, complement, details)


def _ritz(alphas: list[float], betas: list[float]) -> tuple[Tensor, Tensor]:
    """Eigenpairs of the Lanczos tridiagonal matrix, by decreasing ``|λ|``: values ``[k]``, vectors ``[k, k]``."""
    k = len(alphas)
    t = torch.diag(torch.tensor(alphas, dtype=torch.float64))
    if k > 1:
        off = torch.tensor(betas[: k - 1], dtype=torch.float64)
        t = t + torch.diag(off, 1) + torch.diag(off, -1)
    evals, evecs = torch.linalg.eigh(t)
    order = torch.argsort(evals.abs(), descending=True)
    return evals[order], evecs[:, order]


def _converged_prefix(evals: Tensor, converged: Tensor) -> int:
    """How many of the largest Ritz pairs in a row have converged (the resolved top of the spectrum)."""
    bad = (~converged).nonzero()
    return int(bad[0, 0]) if bad.numel() else int(evals.numel())


def _pcg(
    matvec: Callable[[Tensor], Tensor],
    precondition: Callable[[Tensor], Tensor],
    b: Tensor,
    *,
    tol: float,
    max_iter: int,
) -> tuple[Tensor, int, float]:
    """Preconditioned conjugate gradients for a symmetric positive definite ``matvec``; ``(x, iterations, ‖r‖/‖b‖)``."""
    b_norm = float(b.norm())
    x = torch.zeros_like(b)
    if b_norm == 0.0:
        return x, 0, 0.0
    r = b.clone()
    z = precondition(r)
    d = z.clone()
    rz = r @ z
    k = 0
    for k in range(1, max_iter + 1):  # noqa: B007 (k is reported)
        hd = matvec(d)
        alpha = rz / (d @ hd)
        x = x + alpha * d
        r = r - alpha * hd
        if float(r.norm()) <= tol * b_norm:
            break
        z = precondition(r)
        rz_new = r @ z
        d = z + (rz_new / rz) * d
        rz = rz_new
    return x, k, float(r.norm()) / b_norm
