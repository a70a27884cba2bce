"""Refined estimates where one Newton step from ``θ̂`` is not enough: each deletion re-optimised approximately.

The influence function (:func:`bind_core.influence.estimate`) is the first Newton step of re-optimising the
objective of ``G − v`` from ``θ̂``, with ``Γ`` linearised along it. That is accurate when the step is small
against the scale on which the curvature changes, as for the paper's one-layer GCN (per-node Pearson 0.9995
on Income). A one-layer GIN breaks both assumptions: its Hessian has eigenvalues from ~10⁻¹¹ to ~10²–10⁵ (sums
over hundreds of neighbour rows next to directions held only by the weight decay), so the re-optimised weights
travel along nearly flat directions far beyond the quadratic model, and ``Γ`` is not linear along that path.

:func:`refine` follows each deletion further: from ``θ̂`` it takes trust-region steps on the exact objective of
``G − v`` with the eigendecomposition of the Hessian at ``θ̂`` frozen (:func:`bind_core.training.newton.newton_finish`
with ``eigen=``; a chord method whose first step, before the trust region intervenes, is the influence
function's), forms the exact Hessian of ``G − v`` only when ``refresh_after`` steps in a row have not halved the
gradient, stops at ``max|∇L₋ᵥ| ≤ tol`` or after ``max_iter`` steps, and evaluates ``Γ`` exactly on ``G − v`` at
the weights reached. A frozen step costs one gradient of the training objective (no Hessian-vector products, no
solve), so this is several times cheaper than re-optimising with a fresh Hessian at every step, and far dearer
than the estimate (0.6–2.1 s per node for the GINs of docs/RESULTS.md, against 1.3 s for all 1000 nodes'
estimates). It is an approximate re-optimisation, not an influence function; where the reduced
objective has several minima near ``θ̂`` it may settle in another one than a Newton re-optimisation would.

The sign convention is the estimate's (:data:`bind_core.influence.SIGN_CONVENTION`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from bind_core.errors import ConfigError
from bind_core.influence import records
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.result import InfluenceResult
from bind_core.influence.solvers import dense_hessian, hessian_columns
from bind_core.training.fit import TrainedModel
from bind_core.training.newton import NEWTON_MAX_PARAMETERS, newton_finish
from bind_core.training.records import NewtonRecord

REFRESH_AFTER = 20
"""Default of ``refresh_after``: a fresh Hessian when 20 steps in a row have not halved the gradient."""


def require_refinable(num_parameters: int) -> None:
    """Raise :class:`ConfigError` for a model too large to refine (each step needs its dense Hessian)."""
    if num_parameters > NEWTON_MAX_PARAMETERS:
        raise ConfigError(
            f"refining needs a dense Hessian, and this model has {num_parameters} parameters (at most "
            f"{NEWTON_MAX_PARAMETERS}); set refine_steps to 0 or use a smaller model"
        )


@dataclass
class Refinement:
    """What :func:`refine_deletions` did, per deletion (a set of training positions; a node is a set of one)."""

    deletions: list[list[int]]
    """Positions in ``train_idx`` deleted together, one list per deletion."""
    refined: Tensor
    """``[k, 2]``: ΔΓ_SP, ΔΓ_EO at the weights the refinement reached."""
    converged: Tensor
    """``[k]`` bool: the gradient of the reduced objective reached ``tol``."""
    steps: Tensor
    """``[k]``: trust-region steps taken."""
    hessians: Tensor
    """``[k]``: fresh Hessians formed (see ``refresh_after``)."""
    max_abs_grad: Tensor
    """``[k]``: ``max|∇L₋ₛ|`` at the end."""
    lam: float
    seconds: float
    settings: dict[str, Any]

    @property
    def delta(self) -> Tensor:
        """``[k]``: refined ΔΓ = lam·ΔΓ_SP + (1 − lam)·ΔΓ_EO."""
        return self.lam * self.refined[:, 0] + (1 - self.lam) * self.refined[:, 1]

    def record(self) -> records.Refinement:
        """The refinement as the results record it (counts and totals; the per-node values go with the influence
        list).

        Returns:
            The :class:`~bind_core.influence.records.Refinement`: ``deletions``, ``converged``, ``seconds``,
            ``max_iter``, and the other figures and settings (``median_steps``, ``hessians``, ``max_abs_grad``,
            tolerances) in ``extra``.
        """
        k = len(self.deletions)
        extra: dict[str, Any] = {
            "median_steps": float(self.steps.double().median()) if k else 0.0,
            "hessians": int(self.hessians.sum()),
            "max_abs_grad": float(self.max_abs_grad.max()) if k else 0.0,
            **self.settings,
        }
        return records.Refinement(
            deletions=k,
            converged=int(self.converged.sum()),
            seconds=self.seconds,
            max_iter=extra.pop("max_iter", None),
            extra=extra,
        )


def refine_deletions(
    model: TrainedModel,
    graph: Any,
    deletions: Sequence[Sequence[int]],
    *,
    lam: float = 0.5,
    max_iter: int = 300,
    tol: float = 1e-7,
    rtol: float = 1e-12,
    refresh_after: int = REFRESH_AFTER,
    groups: list[int] | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> Refinement:
    """Refined ΔΓ of each deletion (a list of training positions removed together), see the module docstring.

    Args:
        model: the polished model.
        graph: the graph it was trained on.
        deletions: one list of positions in ``train_idx`` per deletion.
        lam: Γ = lam·Γ_SP + (1 − lam)·Γ_EO (for :attr:`Refinement.delta`).
        max_iter: trust-region steps per deletion at most.
        tol: stop when ``max|∇L₋ₛ| ≤ tol`` (the polish's tolerance by default).
        rtol: eigenvalues with ``|λ| ≤ rtol·max|λ|`` are flat and the steps leave them alone.
        refresh_after: form the exact Hessian of ``G − S`` at the current weights when this many steps in a
            row have not halved the gradient (``0``: never; see :func:`~bind_core.training.newton.newton_finish`).
        groups: the groups Γ is measured over (as given to the estimate).
        progress: ``progress("refine", fraction)``; may raise to abort.

    Raises:
        ConfigError: the model has more than :data:`~bind_core.training.newton.NEWTON_MAX_PARAMETERS` parameters (a
            dense Hessian is needed), or a position is out of range.
    """
    start = time.perf_counter()
    m = int(graph.train_idx.numel())
    require_refinable(model.num_parameters)
    sets = [[int(p) for p in d] for d in deletions]
    if any(not 0 <= p < m for d in sets for p in d):
        raise ConfigError(f"refine positions must be in [0, {m})")
    fm = FunctionalModel.from_trained(model, graph, groups)
    theta = fm.theta
    base = fm.gammas(theta).detach()
    eigen = torch.linalg.eigh(dense_hessian(fm.objective, theta, hessian_columns(fm)))
    outcomes = _Outcomes.empty(len(sets))
    for i, positions in enumerate(sets):
        reduced, _ = graph.without_nodes(graph.train_idx[torch.tensor(positions, dtype=torch.long)])
        fm_s = FunctionalModel.from_trained(model, reduced, groups)
        theta_s, rec = newton_finish(
            fm_s.objective, theta, tol=tol, max_iter=max_iter, rtol=rtol, eigen=eigen, refresh_after=refresh_after
        )
        outcomes.put(i, (fm_s.gammas(theta_s).detach() - base).cpu(), rec)
        if progress is not None:
            progress("refine", (i + 1) / max(len(sets), 1))
    settings = {"max_iter": max_iter, "tol": tol, "rtol": rtol, "refresh_after": refresh_after}
    return outcomes.refinement(sets, lam, time.perf_counter() - start, settings)


@dataclass
class _Outcomes:
    """What :func:`refine_deletions` gathers per deletion (the fields of :class:`Refinement` of the same names)."""

    refined: Tensor
    converged: Tensor
    steps: Tensor
    hessians: Tensor
    max_abs_grad: Tensor

    @classmethod
    def empty(cls, k: int) -> _Outcomes:
        """Room for ``k`` deletions."""
        return cls(
            torch.zeros(k, 2, dtype=torch.float64),
            torch.zeros(k, dtype=torch.bool),
            torch.zeros(k, dtype=torch.long),
            torch.zeros(k, dtype=torch.long),
            torch.zeros(k, dtype=torch.float64),
        )

    def put(self, i: int, refined: Tensor, rec: NewtonRecord) -> None:
        """Deletion ``i``: its refined ``[ΔΓ_SP, ΔΓ_EO]`` and its Newton record."""
        self.refined[i] = refined
        self.converged[i] = bool(rec.converged)
        self.steps[i] = int(rec.accepted)
        self.hessians[i] = int(rec.hessians)
        self.max_abs_grad[i] = float(rec.max_abs_grad)

    def refinement(
        self, deletions: list[list[int]], lam: float, seconds: float, settings: dict[str, Any]
    ) -> Refinement:
        """The :class:`Refinement` record of the deletions gathered."""
        return Refinement(
            deletions=deletions,
            refined=self.refined,
            converged=self.converged,
            steps=self.steps,
            hessians=self.hessians,
            max_abs_grad=self.max_abs_grad,
            lam=lam,
            seconds=seconds,
            settings=settings,
        )


def refine(
    model: TrainedModel,
    graph: Any,
    influence: InfluenceResult,
    *,
    positions: Sequence[int] | Tensor | None = None,
    max_iter: int = 300,
    tol: float = 1e-7,
    rtol: float = 1e-12,
    refresh_after: int = REFRESH_AFTER,
    groups: list[int] | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> tuple[InfluenceResult, Refinement]:
    """Replace the estimates of ``positions`` (default: every training node) by refined ones.

    ``influence`` is :func:`~bind_core.influence.estimate`'s result for ``model`` on ``graph``; the other
    arguments are :func:`refine_deletions`'s. Returns a copy of ``influence`` whose ``delta``, ``delta_sp`` and
    ``delta_eo`` hold the refined values at ``positions`` (``parts["refinement"]`` the change, so the parts
    still add up), and the :class:`Refinement` record.
    """
    m = int(graph.train_idx.numel())
    if influence.delta.numel() != m:
        raise ConfigError("the influence result does not belong to this graph's training nodes")
    pos = torch.arange(m) if positions is None else torch.as_tensor(positions, dtype=torch.long).reshape(-1)
    record = refine_deletions(
        model,
        graph,
        [[p] for p in pos.tolist()],
        lam=influence.lam,
        max_iter=max_iter,
        tol=tol,
        rtol=rtol,
        refresh_after=refresh_after,
        groups=groups,
        progress=progress,
    )
    first = torch.stack([influence.delta_sp, influence.delta_eo], dim=1).double().cpu()[pos]
    lam = influence.lam
    delta_sp, delta_eo = influence.delta_sp.clone(), influence.delta_eo.clone()
    delta_sp[pos] = record.refined[:, 0].to(delta_sp.dtype)
    delta_eo[pos] = record.refined[:, 1].to(delta_eo.dtype)
    if influence.no_minimum is not None:  # no value answers these; a refinement of another objective does not either
        delta_sp[influence.no_minimum] = float("nan")
        delta_eo[influence.no_minimum] = float("nan")
    change = torch.zeros(m, 2, dtype=torch.float64)
    change[pos] = record.refined - first
    result = dataclasses.replace(
        influence,
        delta=lam * delta_sp + (1 - lam) * delta_eo,
        delta_sp=delta_sp,
        delta_eo=delta_eo,
        parts={**influence.parts, "refinement": change.to(influence.delta.dtype)},
        timings={**influence.timings, "refine": record.seconds},
        settled=None if influence.settled is None else influence.settled.clone().index_put_((pos,), record.converged),
    )
    return result, record
