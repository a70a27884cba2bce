"""An edge attribution (:func:`bind_core.influence.edges.estimate_edges`) as rows: one per undirected edge, what the
service stores and pages through (the audit's ``edges`` section is :mod:`bind_core.pipeline.edge_section`).

Kept apart from the estimator so that its maths stays as it is: this module only labels its numbers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields

import torch

from bind_core.data.graph import Graph
from bind_core.data.labels import group_value, user_ids
from bind_core.influence.edge_records import EdgeRow
from bind_core.influence.edges import EdgeInfluenceResult

__all__ = [
    "EDGE_ROW_KEYS",
    "EdgeRow",
    "edge_rows",
    "iter_edge_rows",
    "join_edge_results",
]

EDGE_ROW_KEYS: tuple[str, ...] = tuple(f.name for f in fields(EdgeRow) if f.name != "settled")
"""The keys of every edge's row, in order: the fields of :class:`EdgeRow` less ``settled`` (which only the ``edges``
section's lists carry); the exports' columns."""


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


def edge_rows(graph: Graph, result: EdgeInfluenceResult, start: int = 0, stop: int | None = None) -> list[EdgeRow]:
    """One row per attributed edge (those at positions ``start..stop-1``), in the estimator's order.

    Args:
        graph: the graph the edges were attributed on.
        result: the attribution.
        start: the first position.
        stop: the position after the last (``None``: every edge from ``start``).

    Returns:
        One :class:`EdgeRow` per edge: its ``position``, both endpoints' indexes, the user's ids (as
        :func:`bind_core.data.labels.user_ids` gives them: integers, or text where the id column holds text) and
        sensitive groups (codes, and ``u_group_name``/``v_group_name`` as the user's data writes them), whether
        both are in the same group, whether deleting it changes anything (``affects``), and ΔΓ with its parts;
        ``settled`` is left out.
    """
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
        EdgeRow(
            position=start + k,
            u_index=int(ui),
            v_index=int(vi),
            u_id=uid,
            v_id=vid,
            u_group=int(ug),
            v_group=int(vg),
            within_group=ug == vg,
            affects=bool(a),
            delta=float(d),
            delta_sp=float(dsp),
            delta_eo=float(deo),
            u_group_name=group_value(graph, int(ug)),
            v_group_name=group_value(graph, int(vg)),
        )
        for k, (ui, vi, uid, vid, ug, vg, a, d, dsp, deo) in enumerate(zip(*columns, strict=True))
    ]


def iter_edge_rows(graph: Graph, result: EdgeInfluenceResult, *, batch: int = 20_000) -> Iterator[EdgeRow]:
    """:func:`edge_rows`, made ``batch`` rows at a time: a graph's edges can be millions, and a row per edge all at
    once would hold gigabytes.

    Args:
        graph: the graph the edges were attributed on.
        result: the attribution.
        batch: rows made at a time.

    Returns:
        An iterator over the rows of :func:`edge_rows`, in order.
    """
    total = int(result.edges.shape[0])
    for start in range(0, total, batch):
        yield from edge_rows(graph, result, start, min(start + batch, total))
