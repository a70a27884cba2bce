"""The audit result's ``edges`` section (:class:`~bind_core.pipeline.results_edges.EdgeAttribution`) from an edge
attribution (:func:`bind_core.influence.edges.estimate_edges`): the counts, the most harmful and helpful edges, and
whether the harm sits on edges between sensitive groups. The section of an audit that could not attribute edges (no
influence stage) is :func:`edges_not_computed`: every number null, with the reason, never 0."""

from __future__ import annotations

import torch

from bind_core.data.graph import Graph
from bind_core.data.labels import group_value, user_ids
from bind_core.influence.edge_records import CrossGroupEdges, EdgeRow
from bind_core.influence.edges import EDGE_SIGN_CONVENTION, EdgeInfluenceResult
from bind_core.pipeline.results_edges import EdgeAttribution

__all__ = ["DAMPED", "EDGE_TOP", "edge_section", "edges_not_computed"]

DAMPED = "damped steps (the proximal response; first-order values for the edges not settled)"
"""The ``estimator`` of a multi-layer or attention model's edge section (:mod:`bind_core.influence.deep_edges`)."""

EDGE_TOP = 10
"""Harmful and helpful edges listed in the section (as the node estimate's ``top_harmful``)."""


def _top(delta: torch.Tensor, k: int, harmful: bool) -> list[int]:
    """Positions of the ``k`` most harmful (ΔΓ < 0, most negative first) or helpful (ΔΓ > 0, most positive first)
    edges; ties by position, as the paginated endpoint orders them."""
    keep = torch.nonzero(delta < 0 if harmful else delta > 0).flatten()
    values = delta[keep] if harmful else -delta[keep]
    order = sorted(range(keep.numel()), key=lambda j: (float(values[j]), int(keep[j])))
    return [int(keep[j]) for j in order[:k]]


def _share(part: float, whole: float, why: str, name: str, undefined: dict[str, str]) -> float | None:
    if whole > 0:
        return part / whole
    undefined[name] = why
    return None


def _cross_group(graph: Graph, result: EdgeInfluenceResult) -> CrossGroupEdges:
    """Edges between groups: their share of the edges (all, and those whose deletion changes anything) against
    their share of the harm (the sum of −ΔΓ over edges with ΔΓ < 0) and of the help (ΔΓ over edges with ΔΓ > 0)."""
    edges, delta, affects = result.edges, result.delta.double(), result.affects
    across = graph.sens[edges[:, 0]] != graph.sens[edges[:, 1]]
    undefined: dict[str, str] = {}
    total, affecting = int(edges.shape[0]), int(affects.sum())
    harm, help_ = (-delta).clamp(min=0), delta.clamp(min=0)
    harm_share = _share(float(harm[across].sum()), float(harm.sum()), "no edge has ΔΓ < 0", "harm_share", undefined)
    affecting_share = _share(
        float((across & affects).sum()),
        affecting,
        "no edge's deletion changes a loss or a prediction",
        "affecting_share",
        undefined,
    )
    harm_ratio = None
    if harm_share is not None and affecting_share:
        harm_ratio = harm_share / affecting_share
    else:
        undefined["harm_ratio"] = "the share of harm or the share of affecting edges between groups is undefined or 0"
    return CrossGroupEdges(
        edges=int(across.sum()),
        affecting_edges=int((across & affects).sum()),
        edge_share=_share(float(across.sum()), total, "the graph has no edge", "edge_share", undefined),
        affecting_share=affecting_share,
        harm_share=harm_share,
        help_share=_share(
            float(help_[across].sum()), float(help_.sum()), "no edge has ΔΓ > 0", "help_share", undefined
        ),
        harm_ratio=harm_ratio,
        undefined=undefined or None,
    )


def edge_section(
    graph: Graph, result: EdgeInfluenceResult, *, seconds: float, shared_solve: bool, top: int = EDGE_TOP
) -> EdgeAttribution:
    """The audit result's ``edges``.

    Args:
        graph: the audited graph.
        result: every edge's estimate.
        seconds: the seconds the attribution took.
        shared_solve: whether it reused the node estimate's Hessian solve.
        top: the harmful and the helpful edges listed.

    Returns:
        The :class:`~bind_core.pipeline.results_edges.EdgeAttribution`, without the edge debiasing and the edge
        self-check (later stages add them).
    """
    delta = result.delta.double()
    return EdgeAttribution(
        computed=True,
        reason=None,
        edges=int(result.edges.shape[0]),
        affecting=int(result.affects.sum()),
        harmful=int((delta < 0).sum()),
        helpful=int((delta > 0).sum()),
        seconds=seconds,
        shared_solve=shared_solve,
        top_harmful=[_listed(graph, result, i) for i in _top(delta, top, True)],
        top_helpful=[_listed(graph, result, i) for i in _top(delta, top, False)],
        cross_group=_cross_group(graph, result),
        sign_convention=EDGE_SIGN_CONVENTION,
        estimator=None if result.settled is None else DAMPED,
        settled=None if result.settled is None else int(result.settled.sum()),
    )


def _listed(graph: Graph, result: EdgeInfluenceResult, i: int) -> EdgeRow:
    """The ``i``-th edge as the section lists it: it changes something by construction (its ΔΓ is not 0), so
    without ``affects``; ``settled`` for the damped estimate of a multi-layer or attention model (absent
    otherwise)."""
    (u, v), (uid, vid) = result.edges[i].tolist(), user_ids(graph, result.edges[i].tolist())
    return EdgeRow(
        position=i,
        u_index=u,
        v_index=v,
        u_id=uid,
        v_id=vid,
        u_group=int(graph.sens[u]),
        v_group=int(graph.sens[v]),
        within_group=bool(graph.sens[u] == graph.sens[v]),
        delta=float(result.delta[i].double()),
        delta_sp=float(result.delta_sp[i].double()),
        delta_eo=float(result.delta_eo[i].double()),
        settled=None if result.settled is None else bool(result.settled[i]),
        u_group_name=group_value(graph, int(graph.sens[u])),
        v_group_name=group_value(graph, int(graph.sens[v])),
    )


def edges_not_computed(reason: str) -> EdgeAttribution:
    """The ``edges`` section of an audit that asked for edges but could not attribute them.

    Args:
        reason: why not.

    Returns:
        Every number null, and the ``reason``.
    """
    return EdgeAttribution(
        computed=False,
        reason=reason,
        edges=None,
        affecting=None,
        harmful=None,
        helpful=None,
        seconds=None,
        shared_solve=None,
        top_harmful=None,
        top_helpful=None,
        cross_group=None,
        sign_convention=EDGE_SIGN_CONVENTION,
    )
