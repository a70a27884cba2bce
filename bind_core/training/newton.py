"""A trust-region Newton finish to a stationary point, on the dense Hessian.


Shared by the training polish (:func:`bind_core.training.polish.polish`) and usable by the influence solvers; it imports
nothing else from ``bind_core``, so either side may import it.

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
from typing import Any

import torch
from torch import Tensor
from torch.func import grad

from bind_core.training.hessian import HessianForm, dense_hessian

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
    hessian: HessianForm | None = None,
) -> tuple[Tensor, dict[str, Any]]:
    """Trust-region Newton with the exact Hessian from ``theta`` until ``max|∇objective| ≤ tol``.

    See the module docstring for the method. ``eigen=(λ, V)``, an eigendecomposition of the Hessian at some
    nearby point, is used at every step instead of forming the Hessian (a frozen-Hessian, or chord, trust-region
    method: each step costs one gradient instead of ``p`` Hessian-vector products and an ``eigh``, and the trust
    region keeps the steps honest where the frozen curvature is wrong; convergence is linear instead of
    quadratic). With ``refresh_after = k > 0`` the frozen Hessian is replaced by the exact one at the current point
    whenever ``k`` steps in a row have not halved the gradient norm (the frozen curvature has stopped helping).
    ``hessian(objective, theta)`` forms each Hessian (default :func:`dense_hessian`; a message-passing model's is
    cheaper row by row, :func:`dense_hessian_by_rows`); it is passed ``progress`` too, so that forming one can be
    aborted.

    Returns the new flat parameters and a record: ``iterations`` (steps tried), ``hessians`` (formed here),
    ``accepted`` steps, ``converged``, ``max_abs_grad`` and ``grad_norm`` at the end,
    ``negative_eigenvalues`` and ``min_eigenvalue`` of the last Hessian, ``seconds`` and the stop ``reason``
    (``converged``, ``max_iter``, ``max_seconds``, ``radius`` when the trust radius collapsed to round-off).
    ``progress(fraction of max_iter)`` is called after every iteration and may raise to abort.
    """
    start = time.perf_counter()
    form = hessian or dense_hessian
    it = 0

    def hold(_fraction: float) -> None:  # while a Hessian is formed the iteration's fraction stands still
        if progress is not None:
            progress(min(1.0, it / max(max_iter, 1)))

    g_fn = grad(objective)
    theta = theta.detach().clone()
    value = float(objective(theta))
    g = g_fn(theta)
    radius = math.nan
    accepted = 0
    reason = "max_iter"
    iterations = 0
    neg, min_ev = 0, math.nan
    eps = torch.finfo(theta.dtype).eps
    hessians = 0
    checkpoint, since = float(g.norm()), 0  # for refresh_after
    for it in range(max_iter):
        if float(g.abs().max()) <= tol:
            reason = "converged"
            break
        if max_seconds is not None and time.perf_counter() - start > max_seconds:
            reason = "max_seconds"
            break
        iterations = it + 1
        if eigen is None:
            lam, vec = torch.linalg.eigh(form(objective, theta, progress=hold))
            hessians += 1
        else:
            if refresh_after and since >= refresh_after:
                if float(g.norm()) > 0.5 * checkpoint:
                    eigen = torch.linalg.eigh(form(objective, theta, progress=hold))
                    hessians += 1
                checkpoint, since = float(g.norm()), 0
            since += 1
            lam, vec = eigen
        scale = float(lam.abs().max()) or 1.0
        flat = lam.abs() <= rtol * scale
        min_ev = float(lam.min())
        neg = int((lam < -rtol * scale).sum())
        gt = torch.where(flat, torch.zeros_like(lam), vec.T @ g)
        lam_safe = torch.where(flat, torch.ones_like(lam), lam)  # flat components of gt are zero
        lower = max(0.0, -min_ev * (1 + 1e-10)) if neg else 0.0
        if math.isnan(radius):  # first step: the Newton step's length (shifted if H is indefinite)
            radius = float((gt / (lam_safe + lower)).norm()) or 1.0
        while True:
            mu = _shift_for_radius(lam_safe, gt, radius, lower)
            dt = -gt / (lam_safe + mu)
            d = vec @ dt
            predicted = -float(gt @ dt + 0.5 * (lam_safe * dt * dt).sum())  # model decrease, ≥ 0
            candidate = theta + d
            new_value = float(objective(candidate))
            actual = value - new_value
            noise = 64 * eps * max(abs(value), 1.0)
            if predicted <= noise:  # at round-off: judge the step by the gradient it leads to
                g_new = g_fn(candidate)
                ok = new_value <= value + noise and float(g_new.norm()) < float(g.norm())
                rho = 1.0 if ok else 0.0
            else:
                rho = actual / predicted
                ok = rho > 1e-4
                g_new = g_fn(candidate) if ok else g
            step = float(d.norm())
            if rho < 0.25:
                radius = 0.5 * step
            elif rho > 0.75 and step >= 0.99 * radius:
                radius = 2.0 * radius
            if ok:
                theta, value, g = candidate, new_value, g_new
                accepted += 1
                break
            if radius <= 1e3 * eps * max(float(theta.norm()), 1.0):
                reason = "radius"
                break
        if progress is not None:
            progress(min(1.0, (it + 1) / max(max_iter, 1)))
        if reason == "radius":
            break
    else:
        if float(g.abs().max()) <= tol:
            reason = "converged"
    return theta, {
        "iterations": iterations,
        "hessians": hessians,
        "accepted": accepted,
        "converged": reason == "converged",
        "reason": reason,
        "max_abs_grad": float(g.abs().max()),
        "grad_norm": float(g.norm()),
        "negative_eigenvalues": neg,
        "min_eigenvalue": min_ev,
        "seconds": time.perf_counter() - start,
    }
