"""Edge debiasing against chance and the edge estimates' self-check, typed (collected in
:mod:`bind_core.pipeline.results`)."""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass

from bind_core.codec import key
from bind_core.debiasing.records import AgainstRandom, Correlation, UndefinedTruth
from bind_core.fairness.records import Intervals


@dataclass(kw_only=True)
class EdgeValidationPoint:
    """One checked edge: its estimate against deleting it (both directions) and re-optimising."""

    u: int = key("integer: index of its first endpoint in the graph (the smaller index)")
    v: int = key("integer: index of its second endpoint")
    u_id: int | str = key("integer or string: the first endpoint's id, in the user's terms (graph.node_id_meaning)")
    v_id: int | str = key("integer or string: the second endpoint's id")
    estimated: list[float] = key("numbers: estimated change of [Γ, Γ_SP, Γ_EO]")
    actual: list[float] | None = key(
        "numbers: the change after deleting the edge and re-optimising, same order; null where the re-optimisation "
        "found no finite optimum (see undefined_truth)"
    )


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
    undefined_truth: UndefinedTruth | None = key(
        "the checked edges without a ground truth (nodes: each edge's two endpoints); absent when every one has one",
        optional=True,
    )


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
    change: Intervals | None = key(
        "after − before per metric, the mean over the seeds, with its paired percentile bootstrap interval over the "
        "test nodes: every resample draws the same test nodes for each seed's models with and without the edges, so "
        "an interval that excludes 0 says the change is not an artefact of which nodes were tested (the seeds' own "
        "noise is the check against chance's); absent without the bootstrap or where nothing was deleted",
        optional=True,
    )


@dataclass(kw_only=True)
class EdgeDebiasing:
    """Edge debiasing against chance: the pool the budgets draw from, the seeds' baselines, one row per budget."""

    pool: int = key("integer: edges whose deletion changes a training loss or a test prediction")
    gamma_audited: float = key("number: Γ of the audited model")
    baselines: dict[str, float] = key("object, seed → Γ retrained with that seed on the unchanged graph")
    noise_floor: float = key("number: standard deviation of the baselines")
    budgets: list[EdgeDebiasingRow] = key("one row per edge budget")
    retrain: str | None = key(
        "string: how every retraining trained: audit (the model's recipe: Adam, then the polish where it has it) or "
        "adam (Adam alone, as a user trains); absent in audits from before the setting",
        optional=True,
    )
