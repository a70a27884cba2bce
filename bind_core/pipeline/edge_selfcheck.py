"""The edge self-check: a random sample of the edge estimates against deleting the edge and re-optimising
(:func:`bind_core.debiasing.edge_validation.validate_edges`), run with the validation stage when the audit attributed
the edges; the ``edges`` section's ``validation`` (typed :class:`~bind_core.pipeline.results.EdgeValidation`), or its
``validation_reason``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bind_core.data.graph import Graph
from bind_core.data.labels import user_ids
from bind_core.debiasing.edge_records import EdgeValidation, EdgeValidationPoint
from bind_core.debiasing.edge_validation import validate_edges
from bind_core.influence.curvature import Coordinates
from bind_core.influence.edges import EdgeInfluenceResult
from bind_core.pipeline.config import AuditConfig
from bind_core.pipeline.stages import Tick, planned_stages
from bind_core.training.fit import TrainedModel

__all__ = ["EDGE_VALIDATION_SEED", "GROUND_TRUTH", "edge_validation_reason", "edge_validation_stage"]

EDGE_VALIDATION_SEED = 0
"""The seed of the edge sample: the node self-check's (``validate``'s default, which the validation stage keeps)."""
GROUND_TRUTH = {"reoptimize": "re-optimisation", "proximal": "proximal re-optimisation"}
"""What the edge estimates are checked against, by the validation's mode: the trained weights re-optimised (float64
polish) without the edge; for the damped estimate of multi-layer and attention models, the proximal re-optimisation
(the same objective plus the estimate's damping, the question that estimate answers)."""


def edge_validation_reason(config: AuditConfig, edges: EdgeInfluenceResult | None) -> str | None:
    """Why the audit does not check the edge estimates (``None``: it does): it needs the edges' estimate, a positive
    ``edge_validation_sample`` and the validation stage (among ``stages``, with a positive ``validation_sample``)."""
    if edges is None:
        return "the edges were not attributed"
    if config.edge_validation_sample == 0:
        return "edge_validation_sample is 0"
    if "validation" not in planned_stages(config):
        return "the validation stage did not run (not among stages, or validation_sample is 0)"
    return None


def _undefined(est: np.ndarray, act: np.ndarray) -> str | None:
    """Why a correlation (and the slope) of ``est`` with ``act`` is undefined, or ``None`` (the rule of
    :func:`bind_core.debiasing.validation._corr`, whose numbers the section takes)."""
    if est.size < 3:
        return f"{est.size} edge(s) checked with a ground truth: a correlation needs 3 or more"
    if np.std(est) == 0:
        return "the estimates of the checked edges are all equal"
    if np.std(act) == 0:
        return "the actual changes of the checked edges are all equal"
    return None


def edge_validation_stage(
    model: TrainedModel,
    graph: Graph,
    config: AuditConfig,
    edges: EdgeInfluenceResult,
    groups: list[int] | None,
    *,
    progress: Tick,
    coordinates: Coordinates | None = None,
) -> EdgeValidation:
    """Check ``edge_validation_sample`` edge estimates (drawn among the edges whose deletion changes something; for
    the damped estimate, among its settled edges) against deleting the edge and re-optimising; progress (and
    cancellation) under the stage name ``validation``, between edges and during each re-optimisation. Pearson,
    Spearman and the slope are null with the reason in ``undefined`` when the sample cannot define them (fewer than
    3 edges, constant values), never 0. ``coordinates``: those a proximal ground truth runs in (the estimate's
    curvature's, given by the audit that formed it)."""
    checked = validate_edges(
        model,
        graph,
        edges,
        sample=config.edge_validation_sample,
        seed=EDGE_VALIDATION_SEED,
        groups=groups,
        progress=lambda fraction: progress("validation", fraction),
        coordinates=coordinates,
    )
    doc = checked.record()
    defined = np.isfinite(checked.actual).all(axis=1)  # edges without a ground truth are left out (undefined_truth)
    est, act = checked.estimated[defined, 0], checked.actual[defined, 0]
    why = _undefined(est, act)
    slope = None if why is not None else float(np.polyfit(est, act, 1)[0])
    undefined = {} if why is None else {"pearson": why, "spearman": why, "slope": why}
    clear = doc.clear_of_noise
    if clear is None:
        undefined["clear_of_noise"] = "no edge was checked"
    return EdgeValidation(
        ground_truth=GROUND_TRUTH[checked.mode],
        mode=checked.mode,
        sample=config.edge_validation_sample,
        affecting=int((edges.affects if edges.settled is None else edges.affects & edges.settled).sum()),
        count=len(checked.sets),
        seed=EDGE_VALIDATION_SEED,
        pearson=doc.pearson,
        spearman=doc.spearman,
        slope=slope,
        correlations=doc.correlations,
        noise_floor=doc.noise_floor,
        clear_of_noise=clear,
        seconds=checked.seconds,
        points=[
            EdgeValidationPoint(
                u=u, v=v, u_id=uid, v_id=vid, estimated=e.tolist(), actual=a.tolist() if np.isfinite(a).all() else None
            )
            for (u, v), (uid, vid), e, a in zip(
                checked.sets, _endpoint_ids(graph, checked.sets), checked.estimated, checked.actual, strict=True
            )
        ],
        # the damped estimate: the sample is drawn among its settled edges (absent otherwise)
        population=None if edges.settled is None else doc.extra["population"],
        undefined=undefined or None,
        undefined_truth=checked.undefined_truth,
    )


def _endpoint_ids(graph: Graph, pairs: Sequence[Sequence[int]]) -> list[tuple[int | str, int | str]]:
    """The user's ids of each checked edge's endpoints."""
    us = user_ids(graph, [u for u, _ in pairs])
    vs = user_ids(graph, [v for _, v in pairs])
    return list(zip(us, vs, strict=True))
