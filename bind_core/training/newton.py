"""A trust-region Newton finish to a stationary point, on the dense Hessian.


Shared by the training polish (:func:`bind_core.training.polish.polish`) and usable by the influence solvers; it imports
nothing else from ``bind_core`` but the Hessian and its record (:class:`~bind_core.training.records.NewtonRecord`), so
either side may import it.

:func:`newton_finish` is for the case the L-BFGS polish leaves unconverged: an objective whose Hessian spans many
orders of magnitude (a one-layer GIN on a graph with a high-degree hub sums hundreds of neighbour rows, so its
Hessian has eigenvalues up to ~10⁵ next to the weight decay's 10⁻⁴), or a region of negative curvature. With the
exact Hessian ``H = V·diag(λ)·Vᵀ`` each step solves the trust-region subproblem exactly (Moré & Sorensen 1983;
Nocedal & Wright, *Numerical Optimization*, ch. 4):

    d(μ) = −V·diag(1/(λ + μ))·Vᵀ·g,   μ ≥ max(0, −λ_min),   ‖d(μ)‖ ≤ Δ,

i.e. the Newton step when ``H`` is positive definite and the step fits, otherwise the eigenvalues shifted by the
smallest ``μ`` that makes ``H + μI`` positive definite and the step fit the radius ``Δ``. The step is accepted
when the objective decreases by a fair share of what the quadratic model predicts, and ``Δ`` grows or shrinks
by that ratio (the line search on the objective). Directions with ``|λ| ≤ rtol·max|λ|`` are flat (a symmetry of
the objective, e.g. rotating hidden units with weight decay as the only regulariser); the gradient has no
component along them and the unshifted step leaves them alone. Close to the minimum the objective's decrease
falls below float64 round-off while the gradient still exceeds the tolerance; a step whose predicted decrease
is at round-off level is then accepted when it reduces the gradient norm instead (locally, the Newton step is
the Newton step for ∇L = 0). No constant depends on the data: the radius starts at the length of the first
Newton step and ``rtol`` is relative to the largest eigenvalue.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.func import grad_and_value

from bind_core.training.hessian import HessianForm, dense_hessian
from bind_core.training.records import NewtonRecord

NEWTON_MAX_PARAMETERS = 5000
"""Above this many parameters a dense Hessian (``p²`` float64 entries and ``p`` Hessian-vector products) is too
costly to form at every Newton step, and :func:`newton_finish` is not used by the polish."""


def _shift_for_radius(lam: Tensor, gt: Tensor, radius: float, lower: float) -> float:
    """The smallest ``μ ≥ lower`` with ``‖gt/(λ+μ)‖ ≤ radius`` (``‖·‖`` decreases in ``μ`` above ``−λ_min``)."""

    def norm(mu: float) -> float:
        return float((gt / (lam + mu)).norm())

    lo = lower
    if norm(lo) <= radius:
        return lo
    hi = max(lo, 0.0) + float(gt.norm()) / radius + 1e-300  # ‖gt/(λ+hi)‖ ≤ ‖gt‖/(hi−lower') ≤ radius
    while norm(hi) > radius:
        hi = 2 * hi + 1e-300
    for _ in range(200):  # bisection in μ; ~60 halvings reach float64 resolution
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if norm(mid) > radius:
            lo = mid
        else:
            hi = mid
    return hi


def newton_finish(
    objective: Callable[[Tensor], Tensor],
    theta: Tensor,
    *,
    tol: float,
    max_iter: int = 200,
    rtol: float = 1e-12,
    max_seconds: float | None = None,
    progress: Callable[[float], None] | None = None,
    eigen: tuple[Tensor, Tensor] | None = None,
    refresh_after: int = 0,
    refresh_limit: int = 0,
    hessian: HessianForm | None = None,
) -> tuple[Tensor, NewtonRecord]:
    """Trust-region Newton with the exact Hessian from ``theta`` until ``max|∇objective| ≤ tol``.

    See the module docstring for the method. ``eigen=(λ, V)``, an eigendecomposition of the Hessian at some
    nearby point, is used at every step instead of forming the Hessian (a frozen-Hessian, or chord, trust-region
    method: each step costs one gradient instead of ``p`` Hessian-vector products and an ``eigh``, and the trust
    region keeps the steps honest where the frozen curvature is wrong; convergence is linear instead of
    quadratic). With ``refresh_after = k > 0`` the frozen Hessian is replaced by the exact one at the current point
    whenever ``k`` steps in a row have not halved the gradient norm (the frozen curvature has stopped helping).
    With ``refresh_limit = K > k`` each refresh doubles the window before the next one, up to ``K`` steps, and a
    window that halves the gradient resets it to ``k``: far from a minimum, where the curvature changes faster than
    any Hessian can follow and the steps crawl whatever Hessian they use, Hessians that cost ``p`` gradients each are
    formed less often; close to one, where a fresh Hessian helps, as often as before.
    ``hessian(objective, theta)`` forms each Hessian (default :func:`dense_hessian`; a message-passing model's is
    cheaper row by row, :func:`dense_hessian_by_rows`); it is passed ``progress`` too, so that forming one can be
    aborted.

    Returns the new flat parameters and a :class:`~bind_core.training.records.NewtonRecord`: ``iterations`` (steps
    tried), ``hessians`` (formed here),
    ``accepted`` steps, ``converged``, ``max_abs_grad`` and ``grad_norm`` at the end,
    ``negative_eigenvalues`` and ``min_eigenvalue`` of the last Hessian, ``seconds`` and the stop ``reason``
    (``converged``, ``max_iter``, ``max_seconds``, ``radius`` when the trust radius collapsed to round-off).
    ``progress(fraction of max_iter)`` is called after every iteration and may raise to abort.
    """
    start = time.perf_counter()
    form = hessian or dense_hessian
    search = _TrustRegion.start(objective, theta, eigen)
    reason = "max_iter"
    for it in range(max_iter):
        if float(search.g.abs().max()) <= tol:
            reason = "converged"
            break
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            reason = "max_seconds"
            break
        search.iterations = it + 1
        lam, vec = search.curvature(form, refresh_after, refresh_limit, _standing(progress, it, max_iter))
        collapsed = search.step(lam, vec, rtol)
        if progress is not None:
            progress(min(1.0, (it + 1) / max(max_iter, 1)))
        if collapsed:
            reason = "radius"
            break
    else:
        if float(search.g.abs().max()) <= tol:
            reason = "converged"
    return search.theta, search.record(reason, time.perf_counter() - start)


def _standing(progress: Callable[[float], None] | None, it: int, max_iter: int) -> Callable[[float], None]:
    """The progress of forming a Hessian in iteration ``it``: the iteration's fraction stands still meanwhile."""

    def hold(_fraction: float) -> None:
        if progress is not None:
            progress(min(1.0, it / max(max_iter, 1)))

    return hold


@dataclass
class _TrustRegion:
    """What :func:`newton_finish` carries from step to step: the point, its objective and gradient, the trust
    radius (``nan`` until the first step sets it), the frozen eigendecomposition (``None``: a fresh Hessian at
    every step) and the counts the record reports."""

    objective: Callable[[Tensor], Tensor]
    gradient: Callable[[Tensor], tuple[Tensor, Tensor]]
    """The gradient and the value in one pass (:func:`torch.func.grad_and_value`): a candidate step is judged by its
    value, and nearly all are accepted (~90% on Income), whose gradient is then needed too."""
    theta: Tensor
    value: float
    g: Tensor
    frozen: tuple[Tensor, Tensor] | None
    checkpoint: float
    """The gradient norm when ``refresh_after`` last started counting."""
    eps: float
    radius: float = math.nan
    since: int = 0
    window: int = 0
    """The steps the current frozen Hessian gets before a refresh (``refresh_after``, doubled by each refresh up to
    ``refresh_limit``, reset by a window that halved the gradient); 0 until the first step."""
    iterations: int = 0
    accepted: int = 0
    hessians: int = 0
    negative: int = 0
    min_eigenvalue: float = math.nan

    @classmethod
    def start(
        cls, objective: Callable[[Tensor], Tensor], theta: Tensor, eigen: tuple[Tensor, Tensor] | None
    ) -> _TrustRegion:
        """The state at ``theta`` before the first step."""
        gradient = grad_and_value(objective)
        theta = theta.detach().clone()
        g, value = gradient(theta)
        eps = torch.finfo(theta.dtype).eps
        return cls(objective, gradient, theta, float(value), g, eigen, float(g.norm()), eps)

    def curvature(
        self, form: HessianForm, refresh_after: int, refresh_limit: int, hold: Callable[[float], None]
    ) -> tuple[Tensor, Tensor]:
        """The eigendecomposition this step uses: the exact Hessian's at the current point, or the frozen one,
        replaced by the exact one when the window's steps in a row (``refresh_after``, grown up to
        ``refresh_limit`` by refreshes) have not halved the gradient norm."""
        if self.frozen is None:
            lam, vec = torch.linalg.eigh(form(self.objective, self.theta, progress=hold))
            self.hessians += 1
            return lam, vec
        self.window = self.window or refresh_after
        if refresh_after and self.since >= self.window:
            if float(self.g.norm()) > 0.5 * self.checkpoint:
                self.frozen = torch.linalg.eigh(form(self.objective, self.theta, progress=hold))
                self.hessians += 1
                self.window = min(2 * self.window, max(refresh_limit, refresh_after))  # the next must earn its cost
            else:
                self.window = refresh_after
            self.checkpoint, self.since = float(self.g.norm()), 0
        self.since += 1
        return self.frozen

    def step(self, lam: Tensor, vec: Tensor, rtol: float) -> bool:
        """One accepted trust-region step with the Hessian ``V·diag(λ)·Vᵀ`` (``lam``, ``vec``), shrinking the radius
        until one is accepted; ``True`` when the radius collapsed to round-off first (no step taken)."""
        scale = float(lam.abs().max()) or 1.0
        flat = lam.abs() <= rtol * scale
        self.min_eigenvalue = float(lam.min())
        self.negative = int((lam < -rtol * scale).sum())
        gt = torch.where(flat, torch.zeros_like(lam), vec.T @ self.g)
        lam_safe = torch.where(flat, torch.ones_like(lam), lam)  # flat components of gt are zero
        lower = max(0.0, -self.min_eigenvalue * (1 + 1e-10)) if self.negative else 0.0
        if math.isnan(self.radius):  # first step: the Newton step's length (shifted if H is indefinite)
            self.radius = float((gt / (lam_safe + lower)).norm()) or 1.0
        while True:
            mu = _shift_for_radius(lam_safe, gt, self.radius, lower)
            dt = -gt / (lam_safe + mu)
            d = vec @ dt
            predicted = -float(gt @ dt + 0.5 * (lam_safe * dt * dt).sum())  # model decrease, ≥ 0
            candidate = self.theta + d
            g_new, found = self.gradient(candidate)
            new_value = float(found)
            ok, rho = self._judge(new_value, predicted, g_new)
            self._resize(rho, float(d.norm()))
            if ok:
                self.theta, self.value, self.g = candidate, new_value, g_new
                self.accepted += 1
                return False
            if self.radius <= 1e3 * self.eps * max(float(self.theta.norm()), 1.0):
                return True

    def _judge(self, new_value: float, predicted: float, g_new: Tensor) -> tuple[bool, float]:
        """``(accepted, ρ)`` for a candidate with objective ``new_value`` and gradient ``g_new``: ``ρ`` the actual
        decrease over the predicted one, or, for a predicted decrease at round-off, whether the step keeps the value
        and reduces the gradient norm."""
        noise = 64 * self.eps * max(abs(self.value), 1.0)
        if predicted <= noise:  # at round-off: judge the step by the gradient it leads to
            ok = new_value <= self.value + noise and float(g_new.norm()) < float(self.g.norm())
            return ok, 1.0 if ok else 0.0
        rho = (self.value - new_value) / predicted
        return rho > 1e-4, rho

    def _resize(self, rho: float, step: float) -> None:
        """Shrink the radius to half the step when the model predicted poorly; double it when the model was good
        and the step reached the radius."""
        if rho < 0.25:
            self.radius = 0.5 * step
        elif rho > 0.75 and step >= 0.99 * self.radius:
            self.radius = 2.0 * self.radius

    def record(self, reason: str, seconds: float) -> NewtonRecord:
        """What :func:`newton_finish` returns beside the weights."""
        return NewtonRecord(
            iterations=self.iterations,
            hessians=self.hessians,
            accepted=self.accepted,
            converged=reason == "converged",
            reason=reason,
            max_abs_grad=float(self.g.abs().max()),
            grad_norm=float(self.g.norm()),
            negative_eigenvalues=self.negative,
            min_eigenvalue=self.min_eigenvalue,
            seconds=seconds,
        )
