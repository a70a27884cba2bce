"""The influence estimate's settings as one typed object (:class:`InfluenceArguments`).

Every choice is a ``Literal``, so a type checker catches ``solver="cgg"``; at run time a bad value is a
:class:`~bind_core.errors.ConfigError` that quotes it and lists the valid ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Literal, get_args

from bind_core.config import DictConfig
from bind_core.errors import ConfigError

Solver = Literal["auto", "exact", "cg", "lissa", "lanczos"]
"""How ``H⁻¹·∇Γ`` is solved (:mod:`bind_core.influence.solvers`)."""
Method = Literal["auto", "linear", "step"]
"""Which estimate: the influence function (``linear``), damped steps with Γ exact (``step``), or by model."""

SOLVERS: tuple[str, ...] = get_args(Solver)
METHODS: tuple[str, ...] = get_args(Method)


@dataclass(frozen=True)
class InfluenceArguments(DictConfig):
    """What :func:`bind_core.estimate_influence` computes, and how.

    Args:
        lam: Γ = lam·Γ_SP + (1 − lam)·Γ_EO, in [0, 1].
        method: ``"linear"``: the influence function (one solve, Γ linearised; the paper's estimate);
            ``"step"``: one damped step per node on the proximal Bregman objective with Γ exact on G − v
            (:mod:`bind_core.influence.step`; ``solver``, ``damping``, ``non_iid`` and ``direct`` do not apply);
            ``"auto"``: ``"step"`` for multi-layer and attention models up to
            :data:`~bind_core.influence.solvers.EXACT_MAX_PARAMETERS` parameters, and for one-layer models whose
            weights are not stationary (a model as given), else ``"linear"``
            (:func:`~bind_core.models.estimator.default_estimator`).
        non_iid: include the change of the other training nodes' losses (the paper's non-i.i.d. term).
        direct: include the direct change of Γ through test nodes whose computation graph holds ``v``.
        direct_exact: recompute Γ per node for the direct term instead of linearising it (slower).
        solver: ``"exact"`` (dense eigendecomposition), ``"cg"``, ``"lissa"``, ``"lanczos"`` (damped,
            matrix-free) or ``"auto"`` (exact up to 5000 parameters; beyond, lanczos for multi-layer and
            attention models and CG for one-layer ones).
        damping: added to the Hessian's eigenvalues (exact, cg); for ``lanczos``, 0 means the proximal rule.
        rtol: relative eigenvalue cut of the exact solver's pseudo-inverse.
        cg_tol: CG's relative residual target.
        cg_max_iter: CG's iteration cap.
        lissa_depth: LiSSA's recursion depth.
        lissa_damping: LiSSA's damping.
    """

    section = "influence"

    lam: float = 0.5
    method: Method = "auto"
    non_iid: bool = True
    direct: bool = True
    direct_exact: bool = False
    solver: Solver = "auto"
    damping: float = 0.0
    rtol: float = 1e-6
    cg_tol: float = 1e-10
    cg_max_iter: int = 2000
    lissa_depth: int = 1000
    lissa_damping: float = 0.01

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"method: {self.method!r} is not one of {', '.join(METHODS)}")
        if self.solver not in SOLVERS:
            raise ConfigError(f"solver: {self.solver!r} is not one of {', '.join(SOLVERS)}")
        if not 0.0 <= self.lam <= 1.0:
            raise ConfigError(f"lam: {self.lam!r} must be in [0, 1]")
        for name in ("damping", "rtol", "cg_tol", "lissa_damping"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name}: {value!r} must be a finite number >= 0")
        for name in ("cg_max_iter", "lissa_depth"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}: {getattr(self, name)!r} must be >= 1")

    def but(self, **changes: Any) -> InfluenceArguments:
        """A copy with some fields changed.

        Args:
            **changes: fields and their new values (checked like the original's).

        Returns:
            A new :class:`InfluenceArguments`.

        Raises:
            ConfigError: a changed value is invalid (the message quotes it).
        """
        return replace(self, **changes)
