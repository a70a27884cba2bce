"""The audit result's ``edges`` section (edge attribution, its self-check and edge debiasing against chance), typed:
part of :mod:`bind_core.pipeline.results`."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.codec import key
from bind_core.debiasing.edge_records import EdgeDebiasing, EdgeValidation
from bind_core.influence.edge_records import CrossGroupEdges, EdgeRow


@dataclass(kw_only=True)
class EdgeAttribution:
    """The bias attributed to edges: ΔΓ of deleting each undirected edge (:mod:`bind_core.influence.edges`);
    with ``computed`` false (a model the estimator does not cover), every number is null and ``reason`` says why."""

    computed: bool = key("boolean: whether the edges were attributed")
    reason: str | None = key("string or null: why not (null when computed)")
    edges: int | None = key("integer: undirected edges attributed (every edge of the graph)")
    affecting: int | None = key("integer: those whose deletion changes a training loss or a test prediction")
    harmful: int | None = key("integer: edges with ΔΓ < 0")
    helpful: int | None = key("integer: edges with ΔΓ > 0")
    seconds: float | None = key("number: seconds the attribution took")
    shared_solve: bool | None = key("boolean: it reused the node estimate's Hessian solve (no second solve)")
    top_harmful: list[EdgeRow] | None = key("up to 10 most harmful edges (ΔΓ < 0), most negative first")
    top_helpful: list[EdgeRow] | None = key("up to 10 most helpful edges (ΔΓ > 0), most positive first")
    cross_group: CrossGroupEdges | None = key("edges between groups against the harm they carry")
    sign_convention: str = key("string: what the sign of an edge's ΔΓ means")
    estimator: str | None = key(
        "string: multi-layer and attention models only: how the values were obtained (damped first-order values "
        "for every edge, settled by damped steps for the top ones)",
        optional=True,
    )
    settled: int | None = key("integer: multi-layer and attention models only: edges settled", optional=True)
    debiasing: EdgeDebiasing | None = key(
        "deleting the most harmful edges per edge budget, against random edges; absent when it did not run "
        "(debiasing_reason says why)",
        optional=True,
    )
    debiasing_reason: str | None = key(
        "string: why the edges were not debiased (no debias_seeds, no edge budgets, no debiasing stage); absent "
        "when they were or the edges were not attributed",
        optional=True,
    )
    validation: EdgeValidation | None = key(
        "the edge self-check: a sample of edge estimates against deleting the edge and re-optimising; absent when "
        "it did not run (validation_reason says why)",
        optional=True,
    )
    validation_reason: str | None = key(
        "string: why the edge estimates were not checked (edges not attributed, edge_validation_sample 0, no "
        "validation stage); absent when they were",
        optional=True,
    )
