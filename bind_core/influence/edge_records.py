"""The edge attribution's rows and cross-group shares, typed (collected in :mod:`bind_core.pipeline.results`)."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.codec import key


@dataclass(frozen=True, kw_only=True)
class EdgeRow:
    """One undirected edge's estimate. Every edge's row (:func:`bind_core.influence.edge_rows.edge_rows`: what the
    service stores and serves at ``GET /v1/audits/{id}/edges``, and the exports' columns) has ``affects`` and no
    ``settled``; the ``edges`` section's lists (``top_harmful``, ``top_helpful``) leave ``affects`` out (their edges
    change something by construction) and have ``settled`` for the damped estimate. :func:`bind_core.codec.encode`
    writes the keys in this order, an absent one left out."""

    position: int = key("integer: the edge's place in the attribution's order (0-based)")
    u_index: int = key("integer: index of its first endpoint in the graph (the smaller index)")
    v_index: int = key("integer: index of its second endpoint")
    u_id: int | str = key("integer or string: the first endpoint's id, in the user's terms (graph.node_id_meaning)")
    v_id: int | str = key("integer or string: the second endpoint's id")
    u_group: int = key("integer: the first endpoint's sensitive group")
    v_group: int = key("integer: the second endpoint's sensitive group")
    within_group: bool = key("boolean: both endpoints are in the same group (false: a cross-group edge)")
    affects: bool | None = key(
        "boolean: deleting the edge changes some training loss or test prediction (false: its ΔΓ is 0 exactly); in "
        "every edge's rows, absent from the section's lists (their edges all change something)",
        optional=True,
    )
    delta: float = key("number: ΔΓ of deleting the edge, both directions (negative: harmful)")
    delta_sp: float = key("number: the same for Γ_SP")
    delta_eo: float = key("number: the same for Γ_EO")
    settled: bool | None = key(
        "boolean: multi-layer and attention models only: the value was settled by damped steps with Γ exact (else "
        "it is the damped first-order value)",
        optional=True,
    )
    u_group_name: str | None = key(
        "string: the first endpoint's group as the user's data writes it (graph.group_names[u_group]: the value, a "
        "bin, or an intersectional group's combination); absent from rows stored before names were kept",
        optional=True,
    )
    v_group_name: str | None = key("string: the second endpoint's group, the same way", optional=True)


@dataclass(kw_only=True)
class CrossGroupEdges:
    """Whether the harm sits on edges between groups: their share of the edges against their share of the harm."""

    edges: int = key("integer: edges whose endpoints are in different groups")
    affecting_edges: int = key("integer: those whose deletion changes a training loss or a test prediction")
    edge_share: float | None = key("number in [0, 1] or null (no edge): cross-group edges / all edges")
    affecting_share: float | None = key(
        "number in [0, 1] or null (no edge changes anything): the same among the edges whose deletion changes "
        "something (the others have ΔΓ = 0 exactly)"
    )
    harm_share: float | None = key(
        "number in [0, 1] or null (no edge has ΔΓ < 0): their share of the harm, the sum of −ΔΓ over edges with ΔΓ < 0"
    )
    help_share: float | None = key(
        "number in [0, 1] or null (no edge has ΔΓ > 0): their share of the sum of ΔΓ over edges with ΔΓ > 0"
    )
    harm_ratio: float | None = key(
        "number or null: harm_share / affecting_share (above 1: cross-group edges carry more than their share)"
    )
    undefined: dict[str, str] | None = key("object, number → why it is null: present when one is")


@dataclass(kw_only=True)
class EdgeInfluenceSummary:
    """Counts and the distribution of the edge estimates over the edges that affect something
    (:meth:`bind_core.influence.edges.EdgeInfluenceResult.summary`)."""

    edges: int = key("integer: edges estimated")
    affecting: int = key("integer: those whose deletion changes a training loss or a test prediction")
    harmful: int = key("integer: affecting edges with ΔΓ < 0 (deleting them reduces bias)")
    helpful: int = key("integer: affecting edges with ΔΓ > 0")
    gamma: dict[str, float] = key("object: the model's Γ, keys sp, eo and total")
    lam: float = key("number in [0, 1]: λ of Γ = λ·Γ_SP + (1−λ)·Γ_EO")
    timings: dict[str, float] = key("object, part of the estimate → seconds")
    sign_convention: str = key("string: what the sign of ΔΓ means")
    sum: float | None = key("number: sum of the affecting edges' estimates; absent when none affects", optional=True)
    min: float | None = key("number: the smallest (most harmful); absent when no edge affects", optional=True)
    max: float | None = key("number: the largest (most helpful); absent when no edge affects", optional=True)
