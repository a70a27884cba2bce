"""The damped curvature a step estimate moves by: ``(B″ + μI)⁻¹`` at the given weights ``θ̂``.

``B`` is the proximal Bregman objective of the weights as given (:meth:`FunctionalModel.bregman
<bind_core.influence.functional.FunctionalModel.bregman>`), so ``B″(θ̂)`` is the Gauss–Newton matrix plus the weight
decay: positive semi-definite at any weights (docs/METHOD.md, "The model as given"). The dense matrix is formed from
the training rows' Jacobian where the model allows (:mod:`bind_core.influence.gaussnewton`), else from the Hessian's
rows. The damping follows a rule, ``μ = DAMPING_RULE·λ_max`` (:func:`damping_for`). It is applied either from the
dense matrix's eigendecomposition or, matrix-free, from Lanczos eigenpairs plus damping
(:mod:`bind_core.influence.lowrank`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from bind_core.codec import encode
from bind_core.errors import ConfigError
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.gaussnewton import gauss_newton
from bind_core.influence.lowrank import DampedInverse, damped_inverse
from bind_core.influence.solvers import EXACT_MAX_PARAMETERS, SolveInfo, dense_hessian, hessian_columns, retained_hvp

DAMPING_RULE = 1e-3
"""``μ = DAMPING_RULE·λ_max``: the proximal damping relative to the largest curvature eigenvalue (a condition
number of the damped matrix of at most ~1000; docs/METHOD.md shows where this came from)."""

OPERATORS = ("auto", "dense", "lanczos")
"""How ``(B″ + μI)⁻¹`` is applied: the dense matrix's eigendecomposition, or Lanczos eigenpairs plus damping;
``auto``: dense up to :data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS` parameters."""


def damping_for(eigenvalues: Tensor, rule: float = DAMPING_RULE) -> float:
    """The proximal damping ``μ = rule·λ_max`` for a curvature with these eigenvalues."""
    return rule * float(eigenvalues.max().clamp(min=0.0))


def choose_operator(operator: str, num_parameters: int) -> str:
    """``operator`` made concrete for a model of ``num_parameters``; a :class:`ConfigError` for one it cannot take."""
    if operator not in OPERATORS:
        raise ConfigError(f"operator: {operator!r} is not one of {', '.join(OPERATORS)}")
    if operator == "auto":
        return "dense" if num_parameters <= EXACT_MAX_PARAMETERS else "lanczos"
    if operator == "dense" and num_parameters > EXACT_MAX_PARAMETERS:
        raise ConfigError(
            f"the dense damped inverse needs a dense Hessian, and this model has {num_parameters} parameters (at "
            f"most {EXACT_MAX_PARAMETERS}); use operator='lanczos'"
        )
    return operator


@dataclass(frozen=True)
class Coordinates:
    """Coordinates in which the damped curvature is the identity. Dense: ``θ = θ̂ + V·(s ⊙ u)`` with ``V`` its
    eigenvectors and ``s = (|λ| + μ)^{-1/2}`` (``μ^{-1/2}`` on the dropped directions), so that ``V·diag(s²)·Vᵀ =
    (B″ + μI)⁻¹``. Low-rank (the Lanczos operator, ``rest`` given): ``θ = θ̂ + S·u`` with ``S = V·diag(s)·Vᵀ +
    r·(I − V·Vᵀ)`` the symmetric square root of its ``P``, ``V`` the ``k`` Ritz vectors and ``r = (λ_c + μ)^{-1/2}``.
    An optimiser run in ``u`` takes Newton-sized steps from the first; it reaches the same minimum as in ``θ``, since
    the change of variables is invertible (:mod:`bind_core.debiasing.proximal_truth`)."""

    basis: Tensor
    """``[p, p]`` (dense) or ``[p, k]`` (low-rank): ``V``."""
    scale: Tensor
    """``[p]`` or ``[k]``: ``s``."""
    rest: float | None = None
    """``r``, the scale of the directions outside ``V`` (low-rank only)."""

    def weights(self, anchor: Tensor, u: Tensor) -> Tensor:
        """``θ̂ + V·(s ⊙ u)`` (dense) or ``θ̂ + S·u`` (low-rank), ``anchor`` being ``θ̂``."""
        if self.rest is None:
            return anchor + self.basis @ (self.scale * u)
        return anchor + self._root(u)

    def gradient(self, grad: Tensor) -> Tensor:
        """The gradient in ``u`` of a function whose gradient in ``θ`` is ``grad``: ``s ⊙ (Vᵀ·grad)`` (dense) or
        ``S·grad`` (low-rank: ``S`` is symmetric)."""
        if self.rest is None:
            return self.scale * (self.basis.T @ grad)
        return self._root(grad)

    def _root(self, vec: Tensor) -> Tensor:
        assert self.rest is not None
        inside = self.basis.T @ vec
        return self.basis @ (self.scale * inside) + self.rest * (vec - self.basis @ inside)


@dataclass
class DampedCurvature:
    """``(B″ + μI)⁻¹`` at ``θ̂``: from the eigendecomposition (``evecs``, ``inv``) or a Lanczos operator
    (``lowrank``). Made by :meth:`build`; the constructor only stores."""

    mu: float
    """The damping ``μ``."""
    solve: SolveInfo
    """How it was made: the operator, its seconds and the spectrum's figures."""
    evecs: Tensor | None = None
    """``[p, p]``: the eigenvectors (dense)."""
    inv: Tensor | None = None
    """``[p]``: ``1/(|λ| + μ)`` on the kept eigenvalues, 0 on the dropped (dense)."""
    lowrank: DampedInverse | None = None
    """The Lanczos operator (matrix-free)."""

    @classmethod
    def build(
        cls,
        fm: FunctionalModel,
        *,
        rule: float = DAMPING_RULE,
        rtol: float = 1e-9,
        operator: str = "auto",
        progress: Callable[[float], None] | None = None,
        threads: int = 1,
    ) -> DampedCurvature:
        """The damped curvature of ``fm``'s Bregman objective at its weights.

        Args:
            fm: the model as given, on its graph.
            rule: the damping rule (``μ = rule·λ_max``).
            rtol: eigenvalues below ``rtol·|λ|_max`` are dropped (flat symmetry directions; dense only).
            operator: :data:`OPERATORS`.
            progress: ``progress(fraction)`` while the matrix or the eigenpairs are formed.
            threads: CPU threads forming the dense matrix: its Jacobian's blocks on that many intra-op threads, or its
                rows that many at once.
        """
        if choose_operator(operator, fm.num_parameters) == "lanczos":
            return cls._lanczos(fm, rule, progress)
        return cls._dense(fm, rule, rtol, progress, threads)

    @classmethod
    def _lanczos(cls, fm: FunctionalModel, rule: float, progress: Callable[[float], None] | None) -> DampedCurvature:
        t0 = time.perf_counter()
        theta = fm.theta
        lowrank = damped_inverse(
            retained_hvp(fm.bregman, theta),
            fm.num_parameters,
            rule=rule,
            dtype=theta.dtype,
            device=theta.device,
            progress=progress,
        )
        details = {"parameters": fm.num_parameters, **lowrank.details, "method": "step"}
        return cls(lowrank.mu, SolveInfo("lanczos", seconds=time.perf_counter() - t0, details=details), lowrank=lowrank)

    @classmethod
    def _dense(
        cls,
        fm: FunctionalModel,
        rule: float,
        rtol: float,
        progress: Callable[[float], None] | None,
        threads: int = 1,
    ) -> DampedCurvature:
        t0 = time.perf_counter()
        matrix = gauss_newton(fm, progress=progress, threads=threads)
        formed = "jacobian"
        if matrix is None:
            matrix = dense_hessian(fm.bregman, fm.theta, hessian_columns(fm), progress=progress, threads=threads)
            formed = "hessian"
        evals, evecs = torch.linalg.eigh(matrix)
        del matrix
        scale = float(evals.abs().max())
        kept = evals.abs() > rtol * scale
        mu = damping_for(evals, rule)
        inv = torch.where(kept, 1.0 / (evals.abs() + mu), torch.zeros_like(evals))
        details = {
            "parameters": fm.num_parameters,
            "max_eigenvalue": float(evals.max()),
            "min_eigenvalue": float(evals.min()),
            "dropped_eigenvalues": int((~kept).sum()),
            "negative_eigenvalues_flipped": int((evals < -rtol * scale).sum()),
            "below_weight_decay": int((evals.abs() < fm.weight_decay).sum()),
            "rtol": rtol,
            "damping": mu,
            "damping_rule": rule,
            "method": "step",
            "formed": formed,
        }
        return cls(mu, SolveInfo("exact", seconds=time.perf_counter() - t0, details=details), evecs=evecs, inv=inv)

    def coordinates(self) -> Coordinates:
        """The :class:`Coordinates` of this curvature: from the eigendecomposition, or the Lanczos operator's pairs."""
        if self.lowrank is not None:
            low = self.lowrank
            scale = (low.evals.abs() + low.mu).rsqrt()
            return Coordinates(basis=low.evecs, scale=scale, rest=(low.complement + low.mu) ** -0.5)
        assert self.evecs is not None and self.inv is not None
        inv = torch.where(self.inv > 0, self.inv, torch.full_like(self.inv, 1.0 / self.mu))
        return Coordinates(basis=self.evecs, scale=inv.sqrt())

    def apply(self, vec: Tensor) -> Tensor:
        """``(B″ + μI)⁻¹·vec`` (``vec``: ``[p]`` or ``[p, k]``), flat symmetry directions left out; with the Lanczos
        operator its low-rank-plus-damping approximation (the chord steps correct it on the exact gradient)."""
        if self.lowrank is not None:
            return self.lowrank.apply(vec)
        assert self.evecs is not None and self.inv is not None
        inv = self.inv if vec.ndim == 1 else self.inv.unsqueeze(1)
        return self.evecs @ (inv * (self.evecs.T @ vec))

    def apply_exactly(self, vec: Tensor) -> Tensor:
        """``(B″ + μI)⁻¹·vec`` to rounding: the dense inverse, or CG preconditioned by the Lanczos operator (its
        record joins ``solve.details``)."""
        if self.lowrank is None:
            return self.apply(vec)
        out, record = self.lowrank.solve(vec)
        self.solve.details |= encode(record)
        return out
