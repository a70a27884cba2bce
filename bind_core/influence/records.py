"""The influence estimate's parts of the audit results, typed: the estimate's distribution and solver, its rows, the
top-k stability across seeds and the refinement (collected in :mod:`bind_core.pipeline.results`)."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bind_core.codec import key, open_keys


@dataclass(kw_only=True)
class Quantiles:
    """Quantiles of the per-node estimates."""

    p01: float = key("number: 1st percentile")
    p10: float = key("number: 10th percentile")
    p50: float = key("number: median")
    p90: float = key("number: 90th percentile")
    p99: float = key("number: 99th percentile")


@dataclass(kw_only=True)
class SolverDetails:
    """How the estimate was solved; the keys depend on the solver and the estimator."""

    method: str | None = key("string: linear (influence function) or step (damped Newton steps)", optional=True)
    parameters: int | None = key("integer: the model's parameters", optional=True)
    max_eigenvalue: float | None = key("number: the Hessian's largest eigenvalue", optional=True)
    min_eigenvalue: float | None = key("number: the Hessian's smallest eigenvalue", optional=True)
    damping: float | None = key("number: damping added to the Hessian", optional=True)
    extra: dict[str, Any] = open_keys("the solver's other figures (iterations, residuals, tolerances...)")


@dataclass(kw_only=True)
class InfluenceSummary:
    """The distribution of the per-node estimates ΔΓ (:meth:`bind_core.influence.result.InfluenceResult.summary`)."""

    count: int = key("integer: training nodes estimated")
    undefined: int | None = key(
        "integer: of them, the nodes whose ΔΓ is null (their deletion has no minimum near the given weights: the "
        "rows' no_minimum), left out of the figures below; absent when there are none",
        optional=True,
    )
    harmful: int = key("integer: nodes with ΔΓ < 0 (deleting them reduces bias)")
    helpful: int = key("integer: nodes with ΔΓ > 0")
    sum: float | None = key("number: sum of the estimates (null when no node has one, as each figure below)")
    mean: float | None = key("number: their mean")
    std: float | None = key("number: their standard deviation")
    min: float | None = key("number: the smallest (most harmful)")
    max: float | None = key("number: the largest (most helpful)")
    quantiles: Quantiles | None = key("quantiles of the estimates (null when no node has one)")
    gamma: dict[str, float] = key("object: the model's Γ on the objective's nodes, keys sp, eo and total")
    lam: float = key("number in [0, 1]: λ of Γ = λ·Γ_SP + (1−λ)·Γ_EO")
    solver: str = key("string: the inverse-Hessian solver used")
    solver_details: SolverDetails = key("how the estimate was solved")
    grad_norm: float = key("number: norm of the training objective's gradient at the weights")
    timings: dict[str, float] = key("object, part of the estimate → seconds")
    sign_convention: str = key("string: what the sign of ΔΓ means")
    distributed: Distributed | None = key(
        "how the per-node terms were spread over workers (added by the service when it spread them)", optional=True
    )


@dataclass(kw_only=True)
class WorkerShare:
    """One worker's (and device's) share of a distributed estimate."""

    worker: str = key("string: the worker's name")
    device: str = key("string: its device")
    chunks: int = key("integer: chunks it computed")
    nodes: int = key("integer: training nodes in them")
    seconds: float = key("number: seconds they took")


@dataclass(kw_only=True)
class Distributed:
    """How the influence estimate's per-node terms were spread over workers (``app/influence/chunks.py``)."""

    chunks: int = key("integer: chunks computed")
    coordinator: str = key("string: the worker that planned them and assembled the estimate")
    workers: list[WorkerShare] = key("per worker and device: its share")
    reclaimed: int = key("integer: chunks claimed more than once (a worker was lost)")
    extra: dict[str, Any] = open_keys("other figures of the spread")


@dataclass(frozen=True, kw_only=True)
class InfluenceRow:
    """One training node's estimate: a row of :meth:`bind_core.pipeline.audit.AuditResult.influence_rows` (every
    training node), and of the results' ``top_harmful`` and ``top_helpful`` lists. :func:`bind_core.codec.encode`
    makes it the JSON object of ``GET /v1/audits/{id}/influence``, the CLI's ``influence`` list and the exports'
    columns (:data:`bind_core.reporting.exports.INFLUENCE_COLUMNS`), keys in this order."""

    position: int = key("integer: rank of the node in the training split (0-based)")
    node_index: int = key("integer: index of the node in the graph (0-based)")
    node_id: int | str = key("integer or string: the user's id (graph.node_id_meaning says what it is)")
    group: int = key("integer: its sensitive group")
    label: int = key("integer: its label")
    delta: float | None = key(
        "number: ΔΓ of deleting it (negative: harmful); null where no value answers the question (no_minimum)"
    )
    delta_sp: float | None = key("number: the same for Γ_SP (null with delta)")
    delta_eo: float | None = key("number: the same for Γ_EO (null with delta)")
    settled: bool | None = key(
        "boolean: the step estimate's (multi-layer and attention models) only: whether the node's steps settled at "
        "the proximal optimum; false: its value is where they stopped, approximate (solver_details.unsettled counts "
        "them); absent for the linear estimate, a closed form with nothing to settle",
        optional=True,
    )
    no_minimum: bool | None = key(
        "boolean: present (true) only where the node's deletion has no minimum near the given weights (the step "
        "estimate's): retraining without it, even kept near them, carries the weights away, so no value answers "
        "the question and its deltas are null (solver_details.no_minimum counts them)",
        optional=True,
    )


@dataclass(kw_only=True)
class Overlap:
    """Overlap of top-k harmful sets."""

    intersection: int = key("integer: nodes in every set")
    union: int = key("integer: nodes in any set")
    jaccard: float = key("number in [0, 1]: intersection / union")


@dataclass(kw_only=True)
class PairOverlap(Overlap):
    """Overlap of two seeds' sets."""

    seeds: list[int] = key("[integer, integer]: the two training seeds")


@dataclass(kw_only=True)
class Stability:
    """The top-k harmful sets across training seeds (:func:`bind_core.influence.stability.topk_stability`)."""

    k: int = key("integer: the k of the top-k sets")
    seeds: list[int] = key("integers: the training seeds")
    sets: dict[str, list[int | str]] = key("object, seed → its top-k harmful nodes' ids (the user's ids)")
    pairwise: list[PairOverlap] = key("the overlap of every pair of seeds")
    all: Overlap = key("the overlap of all the sets")
    mean_pairwise_jaccard: float = key("number in [0, 1]: mean Jaccard index over the pairs")


@dataclass(kw_only=True)
class Refinement:
    """The refinement of the estimates (``refine_steps`` > 0)."""

    max_iter: int | None = key("integer: trust-region steps allowed per node", optional=True)
    deletions: int | None = key("integer: deletions refined", optional=True)
    converged: int | None = key("integer: those that converged", optional=True)
    seconds: float | None = key("number: seconds it took", optional=True)
    extra: dict[str, Any] = open_keys("its other figures (tolerances, steps, Hessians)")
