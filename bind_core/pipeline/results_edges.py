"""The audit result's ``edges`` section (edge attribution, its self-check and edge debiasing against chance), typed:
part of :mod:`bind_core.pipeline.results`."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.pipeline.result_codec import key
from bind_core.pipeline.results_checks import AgainstRandom, Correlation


@dataclass(kw_only=True)
class EdgeRow:
    """One undirected edge's estimate (as in ``GET /v1/audits/{id}/edges``, less ``affects``)."""

    position: int = key("integer: the edge's place in the attribution's order (0-based)")
    u_index: int = key("integer: index of its first endpoint in the graph (the smaller index)")
    v_index: int = key("integer: index of its second endpoint")
    u_id: int | str = key("integer or string: the first endpoint's id, in the user's terms (graph.node_id_meaning)")
    v_id: int | str = key("integer or string: the second endpoint's id")
    u_group: int = key("integer: the first endpoint's sensitive group")
    v_group: int = key("integer: the second endpoint's sensitive group")
    within_group: bool = key("boolean: both endpoints are in the same group (false: a cross-group edge)")
    delta: float = key("number: ΔΓ of deleting the edge, both directions (negative: harmful)")
    delta_sp: float = key("number: the same for Γ_SP")
    delta_eo: float = key("number: the same for Γ_EO")
    settled: bool | None = key(
        "boolean: multi-layer and attention models only: the value was settled by damped steps with Γ exact (else "
        "it is the damped first-order value)",
        optional=True,
    )


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


@dataclass(kw_only=True)
class EdgeValidationPoint:
    """One checked edge: its estimate against deleting it (both directions) and re-optimising."""

    u: int = key("integer: index of its first endpoint in the graph (the smaller index)")
    v: int = key("integer: index of its second endpoint")
    u_id: int | str = key("integer or string: the first endpoint's id, in the user's terms (graph.node_id_meaning)")
    v_id: int | str = key("integer or string: the second endpoint's id")
    estimated: list[float] = key("numbers: estimated change of [Γ, Γ_SP, Γ_EO]")
    actual: list[float] = key("numbers: the change after deleting the edge and re-optimising, same order")


@dataclass(kw_only=True)
class EdgeValidation:
    """The edge self-check (:func:`bind_core.debiasing.edge_validation.validate_edges`): estimated against actual
    ΔΓ for edges drawn at random among those whose deletion changes something."""

    ground_truth: str = key(
        "string: what the estimates are checked against (re-optimisation; proximal re-optimisation for the damped "
        "estimate of multi-layer and attention models)"
    )
    mode: str = key("string: the ground truth's mode (reoptimize or proximal)")
    sample: int = key("integer: edges asked for (edge_validation_sample)")
    affecting: int = key(
        "integer: edges the sample is drawn from (those whose deletion changes something; for the damped estimate, "
        "its settled ones)"
    )
    count: int = key("integer: edges checked, min(sample, affecting)")
    seed: int = key("integer: the seed of the draw")
    pearson: float | None = key("number in [-1, 1] or null (see ``undefined``): Pearson correlation for Γ")
    spearman: float | None = key("number in [-1, 1] or null (see ``undefined``): Spearman correlation for Γ")
    slope: float | None = key(
        "number or null (see ``undefined``): least-squares slope of actual on estimated ΔΓ (1: the right scale)"
    )
    correlations: dict[str, Correlation] = key("object, gamma / gamma_sp / gamma_eo → its correlations")
    noise_floor: float | None = key("number: the change of Γ the re-optimisation makes with nothing deleted")
    clear_of_noise: float | None = key(
        "number in [0, 1] or null (no edge checked): share of edges whose |ΔΓ| exceeds twice it"
    )
    seconds: float = key("number: seconds the check took")
    points: list[EdgeValidationPoint] = key("every checked edge")
    population: str | None = key(
        "string: the damped estimate only: which edges the sample is drawn from (its settled edges)", optional=True
    )
    undefined: dict[str, str] | None = key("object, number → why it is null: present when one is", optional=True)


@dataclass(kw_only=True)
class EdgeDebiasingRow(AgainstRandom):
    """One edge budget: delete the most harmful affecting edges, retrain with every seed, compare with random edges
    from the same pool (:func:`bind_core.debiasing.edge_debias.debias_edges`); the check against chance's keys
    (``size`` etc.) count edges."""

    budget: float = key("number in (0, 1]: the fraction of the affecting edges asked for")
    requested: int = key("integer: edges the budget asks for")
    deleted: int = key("integer: edges deleted (fewer when fewer have ΔΓ < 0)")
    estimated: float = key("number: the sum of the deleted edges' estimates")
    caveat: str | None = key("string or null: why the summed estimate cannot be taken at its word (it exceeds Γ)")
    cross_group: int = key("integer: deleted edges that join two groups")
    before: float = key("number: mean Γ retrained on the unchanged graph, over the seeds")
    after: float | None = key("number or null (nothing deleted): mean Γ retrained without the edges")


@dataclass(kw_only=True)
class EdgeDebiasing:
    """Edge debiasing against chance: the pool the budgets draw from, the seeds' baselines, one row per budget."""

    pool: int = key("integer: edges whose deletion changes a training loss or a test prediction")
    gamma_audited: float = key("number: Γ of the audited model")
    baselines: dict[str, float] = key("object, seed → Γ retrained with that seed on the unchanged graph")
    noise_floor: float = key("number: standard deviation of the baselines")
    budgets: list[EdgeDebiasingRow] = key("one row per edge budget")
    retrain: str | None = key(
        "string: how every retraining trained: audit (the model's settings: Adam, then the polish) or adam (Adam "
        "alone, as a user trains); absent in audits from before the setting",
        optional=True,
    )
