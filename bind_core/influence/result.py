"""What an influence estimate returns: :class:`InfluenceResult`, and the sign convention it follows."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from bind_core.codec import decode
from bind_core.influence.records import InfluenceSummary, Quantiles, SolverDetails
from bind_core.influence.solvers import SolveInfo

SIGN_CONVENTION = (
    "delta = Γ(model retrained without node v) − Γ(current model); positive: deleting v increases bias "
    "(v helps fairness); negative: v is harmful (deleting it reduces bias)."
)


@dataclass
class InfluenceResult:
    """Estimated ΔΓ for every training node, aligned with ``train_idx``.

    ``delta_sp``/``delta_eo`` are the Γ_SP and Γ_EO parts; ``delta = lam·delta_sp + (1 − lam)·delta_eo``.
    ``parts`` splits each into ``iid``, ``non_iid`` and ``direct`` (each ``[m, 2]``: SP, EO columns).
    Sign: ``delta = Γ(retrained without v) − Γ(now)``, negative for a harmful node (:data:`SIGN_CONVENTION`).

    Attributes:
        train_idx: the training nodes' indices, ``[m]``, int64; row ``i`` of every tensor below is node
            ``train_idx[i]``.
        delta: estimated ΔΓ of deleting each training node, ``[m]``.
        delta_sp: the Γ_SP part, ``[m]``.
        delta_eo: the Γ_EO part, ``[m]``.
        parts: ``iid``, ``non_iid`` and ``direct`` terms, each ``[m, 2]`` (SP, EO columns).
        lam: λ of Γ = λ·Γ_SP + (1 − λ)·Γ_EO.
        gamma: the model's Γ now: ``sp``, ``eo`` and ``total``.
        solve: what the inverse-Hessian solver did (its name, seconds, details).
        grad_norm: the training objective's gradient norm at the weights.
        timings: part of the estimate → seconds.
        sign_convention: what the sign of ΔΓ means, in words.
        settled: ``[m]`` bool, the step estimate's only: whether each node's steps settled at the proximal optimum
            (its gradient at most ``solve.details["tol"]``); ``False``: its value is where the steps stopped,
            approximate. ``None`` for the linear estimate (a closed form: nothing to settle).
        no_minimum: ``[m]`` bool, the step estimate's only: the nodes whose deletion has no minimum near the given
            weights (retraining without them, even kept near them, carries the weights away): no value answers the
            question, and their ``delta``, ``delta_sp``, ``delta_eo`` and ``parts["step"]`` are NaN. ``None`` for the
            linear estimate. :attr:`defined` masks the rest.
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
    settled: Tensor | None = None
    no_minimum: Tensor | None = None

    @property
    def defined(self) -> Tensor:
        """``[m]`` bool: the nodes whose ΔΓ is a number (every node but those with :attr:`no_minimum`).

        Returns:
            The mask, ``torch.isfinite(delta)``.
        """
        return torch.isfinite(self.delta)

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
        settled: Tensor | None = None,
        *,
        no_minimum: Tensor | None = None,
    ) -> InfluenceResult:
        """An estimate from its columns.

        Args:
            train_idx: the training nodes' indices, ``[m]``.
            total: ``[m, 2]``: ΔΓ_SP and ΔΓ_EO of deleting each node.
            parts: ``iid``, ``non_iid`` and ``direct`` terms, each ``[m, 2]``.
            lam: λ of Γ = λ·Γ_SP + (1 − λ)·Γ_EO.
            gamma: ``[Γ_SP, Γ_EO]`` now.
            solve: what the solver did.
            grad_norm: the training objective's gradient norm at the weights.
            timings: part of the estimate → seconds.
            settled: the step estimate's per-node settling (:attr:`settled`), else ``None``.
            no_minimum: the step estimate's nodes without a minimum near the weights (:attr:`no_minimum`; their
                ``total`` rows NaN), else ``None``.

        Returns:
            The :class:`InfluenceResult`, with ``delta = lam·total[:, 0] + (1 − lam)·total[:, 1]``.
        """
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
            settled=settled,
            no_minimum=no_minimum,
        )

    def summary(self) -> InfluenceSummary:
        """The distribution of the estimates, for reports and the API.

        Returns:
            The :class:`~bind_core.influence.records.InfluenceSummary`: ``count``, ``harmful`` (ΔΓ < 0), ``helpful``
            (ΔΓ > 0), ``sum``, ``mean``, ``std``, ``min``, ``max``, ``quantiles`` (``p01`` … ``p99``), ``gamma``,
            ``lam``, ``solver``, ``solver_details``, ``grad_norm``, ``timings`` and ``sign_convention``; the figures
            over the nodes whose ΔΓ is :attr:`defined`, ``undefined`` counting the rest (``null`` figures where no node
            has one).
        """
        d = self.delta.double()[self.defined]
        some = d.numel() > 0
        q = torch.quantile(d, torch.tensor([0.01, 0.1, 0.5, 0.9, 0.99], dtype=torch.float64)).tolist() if some else []
        undefined = int(self.delta.numel() - d.numel())
        return InfluenceSummary(
            count=int(self.delta.numel()),
            undefined=undefined or None,
            harmful=int((d < 0).sum()),
            helpful=int((d > 0).sum()),
            sum=float(d.sum()) if some else None,
            mean=float(d.mean()) if some else None,
            std=(float(d.std()) if d.numel() > 1 else 0.0) if some else None,
            min=float(d.min()) if some else None,
            max=float(d.max()) if some else None,
            quantiles=Quantiles(**dict(zip(["p01", "p10", "p50", "p90", "p99"], q, strict=True))) if some else None,
            gamma=dict(self.gamma),
            lam=self.lam,
            solver=self.solve.solver,
            solver_details=decode(SolverDetails, self.solve.details, "solver_details"),
            grad_norm=self.grad_norm,
            timings=dict(self.timings),
            sign_convention=self.sign_convention,
        )
