"""An edge attribution (:func:`bind_core.influence.edges.estimate_edges`) as the audit reports it: one row per
undirected edge (what the service stores and pages through), the most harmful and helpful edges, and whether the
harm sits on edges between sensitive groups.

Kept apart from the estimator so that its maths stays as it is: this module only labels and summarises its numbers.
The section of an audit that could not attribute edges (a multi-layer or attention model, no influence stage) is
:func:`edges_not_computed`: every number null, with the reason, never 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from bind_core.data.graph import Graph
from bind_core.data.labels import user_ids
from bind_core.influence.edges import EDGE_SIGN_CONVENTION, EdgeInfluenceResult

__all__ = [
    "EDGE_ROW_KEYS",
    "EDGE_TOP",
    "edge_rows",
    "edge_section",
    "edges_not_computed",
    "iter_edge_rows",
    "join_edge_results",
]

DAMPED = "damped steps (the proximal response; first-order values for the edges not settled)"
"""The ``estimator`` of a multi-layer or attention model's edge section (:mod:`bind_core.influence.deep_edges`)."""

EDGE_TOP = 10
"""Harmful and helpful edges listed in the section (as the node estimate's ``top_harmful``)."""
EDGE_ROW_KEYS = (
    "position",
    "u_index",
    "v_index",
    "u_id",
    "v_id",
    "u_group",
    "v_group",
    "within_group",
    "affects",
    "delta",
    "delta_sp",
    "delta_eo",
)


def join_edge_results(parts: list[EdgeInfluenceResult]) -> EdgeInfluenceResult:
    """The attributions of consecutive parts of the edges (each from the same plan) as one, in their order; the
    timings add up."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    timings: dict[str, float] = {}
    for part in parts:
        for name, seconds in part.timings.items():
            timings[name] = timings.get(name, 0.0) + seconds
    return EdgeInfluenceResult(
        edges=torch.cat([p.edges for p in parts]),
        delta=torch.cat([p.delta for p in parts]),
        delta_sp=torch.cat([p.delta_sp for p in parts]),
        delta_eo=torch.cat([p.delta_eo for p in parts]),
        parts={k: torch.cat([p.parts[k] for p in parts]) for k in first.parts},
        affects=torch.cat([p.affects for p in parts]),
        lam=first.lam,
        gamma=first.gamma,
        solve=first.solve,
        grad_norm=first.grad_norm,
        timings=timings,
        settled=None if first.settled is None else torch.cat([p.settled for p in parts if p.settled is not None]),
    )


def edge_rows(
    graph: Graph, result: EdgeInfluenceResult, start: int = 0, stop: int | None = None
) -> list[dict[str, Any]]:
    """One row per attributed edge (those at positions ``start..stop-1``), in the estimator's order (``position``),
    with both endpoints' indexes, original ids and sensitive groups, whether both are in the same group, whether
    deleting it changes anything, and ΔΓ."""
    stop = int(result.edges.shape[0]) if stop is None else stop
    edges = result.edges[start:stop]
    u, v = edges[:, 0], edges[:, 1]
    columns = (
        u.tolist(),
        v.tolist(),
        user_ids(graph, u.tolist()),
        user_ids(graph, v.tolist()),
        graph.sens[u].tolist(),
        graph.sens[v].tolist(),
        result.affects[start:stop].tolist(),
        result.delta[start:stop].double().tolist(),
        result.delta_sp[start:stop].double().tolist(),
        result.delta_eo[start:stop].double().tolist(),
    )
    return [
        {
            "position": start + k,
            "u_index": int(ui),
            "v_index": int(vi),
            "u_id": int(uid),
            "v_id": int(vid),
            "u_group": int(ug),
            "v_group": int(vg),
            "within_group": ug == vg,
            "affects": bool(a),
            "delta": float(d),
            "delta_sp": float(dsp),
            "delta_eo": float(deo),
        }
        for k, (ui, vi, uid, vid, ug, vg, a, d, dsp, deo) in enumerate(zip(*columns, strict=True))
    ]


def iter_edge_rows(graph: Graph, result: EdgeInfluenceResult, *, batch: int = 20_000) -> Iterator[dict[str, Any]]:
    """:func:`edge_rows`, made ``batch`` rows at a time: a graph's edges can be millions, and a Python dict per edge
    all at once would hold gigabytes."""
    total = int(result.edges.shape[0])
    for start in range(0, total, batch):
        yield from edge_rows(graph, result, start, min(start + batch, total))


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


def _cross_group(graph: Graph, result: EdgeInfluenceResult) -> dict[str, Any]:
    """Edges between groups: their share of the edges (all, and those whose deletion changes anything) against
    their share of the harm (the sum of −ΔΓ over edges with ΔΓ < 0) and of the help (ΔΓ over edges with ΔΓ > 0)."""
    edges, delta, affects = result.edges, result.delta.double(), result.affects
    across = graph.sens[edges[:, 0]] != graph.sens[edges[:, 1]]
    undefined: dict[str, str] = {}
    total, affecting = int(edges.shape[0]), int(affects.sum())
    harm, help_ = (-delta).clamp(min=0), delta.clamp(min=0)
    out: dict[str, Any] = {
        "edges": int(across.sum()),
        "affecting_edges": int((across & affects).sum()),
        "edge_share": _share(float(across.sum()), total, "the graph has no edge", "edge_share", undefined),
        "affecting_share": _share(
            float((across & affects).sum()),
            affecting,
            "no edge's deletion changes a loss or a prediction",
            "affecting_share",
            undefined,
        ),
        "harm_share": _share(
            float(harm[across].sum()), float(harm.sum()), "no edge has ΔΓ < 0", "harm_share", undefined
        ),
        "help_share": _share(
            float(help_[across].sum()), float(help_.sum()), "no edge has ΔΓ > 0", "help_share", undefined
        ),
    }
    if out["harm_share"] is not None and out["affecting_share"]:
        out["harm_ratio"] = out["harm_share"] / out["affecting_share"]
    else:
        out["harm_ratio"] = None
        undefined["harm_ratio"] = "the share of harm or the share of affecting edges between groups is undefined or 0"
    out["undefined"] = undefined or None
    return out


def edge_section(
    graph: Graph, result: EdgeInfluenceResult, *, seconds: float, shared_solve: bool, top: int = EDGE_TOP
) -> dict[str, Any]:
    """The audit result's ``edges`` (typed as :class:`bind_core.pipeline.results.EdgeAttribution`)."""
    delta = result.delta.double()
    out: dict[str, Any] = {
        "computed": True,
        "reason": None,
        "edges": int(result.edges.shape[0]),
        "affecting": int(result.affects.sum()),
        "harmful": int((delta < 0).sum()),
        "helpful": int((delta > 0).sum()),
        "seconds": seconds,
        "shared_solve": shared_solve,
        "top_harmful": [_without_affects(edge_rows(graph, result, i, i + 1)[0]) for i in _top(delta, top, True)],
        "top_helpful": [_without_affects(edge_rows(graph, result, i, i + 1)[0]) for i in _top(delta, top, False)],
        "cross_group": _cross_group(graph, result),
        "sign_convention": EDGE_SIGN_CONVENTION,
    }
    if result.settled is not None:  # the damped estimate of a multi-layer or attention model (absent otherwise)
        settled = result.settled
        out["estimator"] = DAMPED
        out["settled"] = int(settled.sum())
        for name in ("top_harmful", "top_helpful"):
            out[name] = [row | {"settled": bool(settled[row["position"]])} for row in out[name]]
    return out


def _without_affects(row: dict[str, Any]) -> dict[str, Any]:
    """A listed edge changes something by construction (its ΔΓ is not 0): the flag is left out."""
    return {k: v for k, v in row.items() if k != "affects"}


def edges_not_computed(reason: str) -> dict[str, Any]:
    """The ``edges`` section of an audit that asked for edges but could not attribute them: nulls and ``reason``."""
    return {
        "computed": False,
        "reason": reason,
        "edges": None,
        "affecting": None,
        "harmful": None,
        "helpful": None,
        "seconds": None,
        "shared_solve": None,
        "top_harmful": None,
        "top_helpful": None,
        "cross_group": None,
        "sign_convention": EDGE_SIGN_CONVENTION,
    }
