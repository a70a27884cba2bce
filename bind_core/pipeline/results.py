"""The audit's results as typed dataclasses: exactly the JSON of :meth:`~bind_core.pipeline.audit.AuditResult.to_dict`
(what the service stores and serves), key for key.

``AuditResults.from_dict(doc).to_dict() == doc`` for every audit's stored document (``tests/test_results_typed.py``
checks it on real audits). A number a set of nodes cannot define is ``null`` (never 0), with its reason beside it
where the producer gives one (``undefined`` of :class:`MetricValues`, ``excluded_reason`` of :class:`GroupMetrics`,
``reason`` of :class:`AgainstRandom`). The service's response models (``app/audits/result_schemas.py``) are built
from these classes and their field docs.
"""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bind_core.pipeline.result_codec import decode, encode, key, open_keys

__all__ = [
    "AgainstRandom",
    "AuditResults",
    "Correlation",
    "CrossGroupEdges",
    "DebiasingRow",
    "Distributed",
    "EdgeAttribution",
    "EdgeDebiasing",
    "EdgeDebiasingRow",
    "EdgeRow",
    "EdgeValidation",
    "EdgeValidationPoint",
    "EffectSpread",
    "FeatureProfile",
    "FeatureStats",
    "GraphSummary",
    "GroupMetrics",
    "GroupShare",
    "Histograms",
    "InfluenceRow",
    "InfluenceSummary",
    "Interval",
    "Intervals",
    "LabelShare",
    "MetricValues",
    "Metrics",
    "ModelSummary",
    "NodeProfile",
    "NumericSummary",
    "Overlap",
    "PairOverlap",
    "ProfileRule",
    "ProfileSet",
    "ProfileSets",
    "PygCheck",
    "Quantiles",
    "RandomSet",
    "RandomSpread",
    "Refinement",
    "RuleCondition",
    "RuleSearch",
    "RuleStats",
    "SolverDetails",
    "Spectrum",
    "Stability",
    "Stationarity",
    "SuppliedModel",
    "TestMetrics",
    "TrainingHistory",
    "Validation",
    "ValidationPoint",
    "WorkerShare",
    "WorstPair",
]

NULLABLE = " (null when undefined; see ``undefined``)"


# ---------------------------------------------------------------------- metrics
@dataclass(kw_only=True)
class MetricValues:
    """Utility and fairness on a set of test nodes (:class:`bind_core.fairness.metrics.FairnessReport`)."""

    nodes: int = key("integer: the number of nodes measured")
    accuracy: float | None = key("number in [0, 1]: accuracy" + NULLABLE)
    auc: float | None = key("number in [0, 1]: ROC AUC" + NULLABLE)
    f1: float | None = key("number in [0, 1]: F1 of the positive class" + NULLABLE)
    delta_sp: float | None = key("number >= 0: ΔSP, the largest gap in predicted positive rates" + NULLABLE)
    delta_eo: float | None = key("number >= 0: ΔEO, the largest gap in true positive rates" + NULLABLE)
    gamma_sp: float | None = key("number >= 0: Γ_SP, PDD of the predicted probabilities" + NULLABLE)
    gamma_eo: float | None = key("number >= 0: Γ_EO, PDD over the positive nodes" + NULLABLE)
    gamma: float | None = key("number >= 0: Γ = lam·Γ_SP + (1−lam)·Γ_EO" + NULLABLE)
    undefined: dict[str, str] | None = key(
        "object, metric name → reason: present only when some metric is undefined (null)", optional=True
    )


@dataclass(kw_only=True)
class WorstPair:
    """The pair of groups with the largest gap for one fairness metric."""

    value: float = key("number: the metric over that pair")
    groups: list[int] = key("[integer, integer]: the two group codes")


@dataclass(kw_only=True)
class TestMetrics(MetricValues):
    """The metrics on all test nodes, and the worst pair of groups per fairness metric."""

    worst_pairs: dict[str, WorstPair | None] = key(
        "object, metric (delta_sp, delta_eo, gamma_sp, gamma_eo) → its worst pair, null when no pair defines it"
    )


@dataclass(kw_only=True)
class GroupMetrics:
    """One sensitive group's test nodes (:func:`bind_core.fairness.breakdown.group_breakdown`)."""

    group: int = key("integer: the group code")
    name: str = key("string: the group's name (an intersectional group's is its combination, e.g. female|black)")
    size: int = key("integer: its test nodes")
    included: bool = key("boolean: whether the fairness metrics include it (min_group_size)")
    excluded_reason: str | None = key("string or null: why it is left out of the metrics")
    positive_rate: float | None = key("number in [0, 1] or null (no test node): predicted positive rate")
    tpr: float | None = key("number in [0, 1] or null (no positive test node): true positive rate")
    mean_probability: float | None = key("number in [0, 1] or null: mean predicted probability of the last class")
    accuracy: float | None = key("number in [0, 1] or null: accuracy on its test nodes")


@dataclass(kw_only=True)
class Histograms:
    """Histograms of the predicted probability of the last class on the test nodes, per group."""

    bin_edges: list[float] = key("numbers: the bins' edges, one more than the counts")
    all: dict[str, list[int]] = key("object, group code → counts per bin of all its test nodes")
    positives: dict[str, list[int]] = key("object, group code → counts per bin of its positive test nodes")


@dataclass(kw_only=True)
class Interval:
    """A metric's percentile bootstrap interval (:class:`bind_core.fairness.bootstrap.Interval`)."""

    estimate: float | None = key("number or null: the metric on the full test sample")
    low: float | None = key("number or null: lower bound (null when no resample defines it)")
    high: float | None = key("number or null: upper bound")
    dropped: int = key("integer: resamples that could not define the metric, left out")


@dataclass(kw_only=True)
class Intervals:
    """Bootstrap confidence intervals of the test metrics (present when ``bootstrap`` > 0)."""

    level: float = key("number in (0, 1): the intervals' coverage")
    resamples: int = key("integer: bootstrap resamples drawn")
    accuracy: Interval | None = key("accuracy's interval", optional=True)
    auc: Interval | None = key("ROC AUC's interval", optional=True)
    f1: Interval | None = key("F1's interval", optional=True)
    delta_sp: Interval | None = key("ΔSP's interval", optional=True)
    delta_eo: Interval | None = key("ΔEO's interval", optional=True)
    gamma_sp: Interval | None = key("Γ_SP's interval (none for more than two classes)", optional=True)
    gamma_eo: Interval | None = key("Γ_EO's interval", optional=True)
    gamma: Interval | None = key("Γ's interval", optional=True)


@dataclass(kw_only=True)
class Metrics:
    """The metrics stage: the trained model on the test split."""

    test: TestMetrics = key("the metrics on all test nodes")
    groups: list[GroupMetrics] = key("the per-group breakdown, one entry per sensitive group")
    included_groups: list[int] = key("integers: the groups the fairness metrics compare")
    histograms: Histograms = key("probability histograms per group")
    intervals: Intervals | None = key("bootstrap confidence intervals; absent without bootstrap", optional=True)


# ---------------------------------------------------------------------- influence
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
    """The distribution of the per-node estimates ΔΓ (:meth:`bind_core.influence.estimate.InfluenceResult.summary`)."""

    count: int = key("integer: training nodes estimated")
    harmful: int = key("integer: nodes with ΔΓ < 0 (deleting them reduces bias)")
    helpful: int = key("integer: nodes with ΔΓ > 0")
    sum: float = key("number: sum of the estimates")
    mean: float = key("number: their mean")
    std: float = key("number: their standard deviation")
    min: float = key("number: the smallest (most harmful)")
    max: float = key("number: the largest (most helpful)")
    quantiles: Quantiles = key("quantiles of the estimates")
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


@dataclass(kw_only=True)
class InfluenceRow:
    """One training node's estimate (as in ``GET /v1/audits/{id}/influence``)."""

    position: int = key("integer: rank of the node in the training split (0-based)")
    node_index: int = key("integer: index of the node in the graph (0-based)")
    node_id: int = key("integer: the node's original id")
    group: int = key("integer: its sensitive group")
    label: int = key("integer: its label")
    delta: float = key("number: ΔΓ of deleting it (negative: harmful)")
    delta_sp: float = key("number: the same for Γ_SP")
    delta_eo: float = key("number: the same for Γ_EO")


# ---------------------------------------------------------------------- edges
@dataclass(kw_only=True)
class EdgeRow:
    """One undirected edge's estimate (as in ``GET /v1/audits/{id}/edges``, less ``affects``)."""

    position: int = key("integer: the edge's place in the attribution's order (0-based)")
    u_index: int = key("integer: index of its first endpoint in the graph (the smaller index)")
    v_index: int = key("integer: index of its second endpoint")
    u_id: int = key("integer: the first endpoint's original id")
    v_id: int = key("integer: the second endpoint's original id")
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
    u_id: int = key("integer: the first endpoint's original id")
    v_id: int = key("integer: the second endpoint's original id")
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


# ---------------------------------------------------------------------- debiasing
@dataclass(kw_only=True)
class EffectSpread:
    """The change in Γ after retraining without the selected nodes, per seed."""

    effects: list[float] = key("numbers: Γ(retrained without the set) − Γ(retrained on the graph), per seed")
    mean: float = key("number: their mean")
    std: float = key("number: their standard deviation")


@dataclass(kw_only=True)
class RandomSet:
    """One random set of the same size."""

    effects: list[float] = key("numbers: its effect per seed")
    mean: float = key("number: their mean")


@dataclass(kw_only=True)
class RandomSpread:
    """The random sets' effects."""

    sets: list[RandomSet] = key("each random set")
    mean: float = key("number: mean of the sets' means")
    std: float = key("number: standard deviation of the sets' means")


@dataclass(kw_only=True)
class AgainstRandom:
    """The budget's selection against chance (:func:`bind_core.debiasing.chance.against_random`)."""

    size: int = key("integer: nodes in the selected set (and each random one)")
    seeds: list[int] = key("integers: the training seeds retrained with")
    noise_floor: float = key("number: standard deviation of Γ across seeds on the unchanged graph")
    noise_multiple: float = key("number: how many yardsticks a difference must exceed")
    selected: EffectSpread | None = key("the selected set's effects; null when nothing was selected")
    random: RandomSpread | None = key("the random sets' effects; null when nothing was selected")
    advantage: float | None = key("number or null: random mean − selected mean (positive: the selection does better)")
    yardstick: float | None = key("number: the larger of the noise floor and the random sets' spread", optional=True)
    beats_random: bool | None = key("boolean or null: advantage > noise_multiple × yardstick")
    reduces_bias: bool | None = key("boolean or null: the selected mean < −noise_multiple × noise floor")
    reason: str | None = key("string: why the numbers are null (nothing was selected)", optional=True)
    verdict: str = key("string: one sentence on what the comparison shows")


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


@dataclass(kw_only=True)
class DebiasingRow:
    """One budget: delete the most harmful training nodes, retrain, compare
    (:func:`bind_core.debiasing.debias.debias`)."""

    budget: float = key("number: the budget asked for, a fraction (< 1) or a count (>= 1) of training nodes")
    requested: int = key("integer: nodes the budget asks for")
    deleted: int = key("integer: nodes deleted")
    nodes: list[int] = key("integers: the deleted nodes' original ids")
    estimated_delta: float = key("number: the estimated ΔΓ of deleting them")
    caveat: str | None = key(
        "string: why the estimate cannot be taken at its word (it lowers Γ by more than Γ itself); present only then",
        optional=True,
    )
    selection: str = key("string: top_ranked (a step estimate's sets) or non_overlapping (the paper's rule)")
    utility_aware: bool = key("boolean: whether nodes estimated to raise the validation loss were kept")
    estimated_utility: float | None = key(
        "number: the estimated change in validation loss (utility-aware only)", optional=True
    )
    before: MetricValues = key("the test metrics before")
    after: MetricValues = key("the test metrics after retraining without the nodes")
    against_random: AgainstRandom | None = key("the check against chance; null unless debias_seeds were given")
    seconds: float = key("number: seconds the budget took")
    retrain: str | None = key(
        "string: how every retraining of the row trained: audit (the model's settings: Adam, then the polish; "
        "before is the audited model) or adam (Adam alone, as a user trains; before is the unchanged graph retrained "
        "so too); absent in audits from before the setting",
        optional=True,
    )


# ---------------------------------------------------------------------- validation, stability
@dataclass(kw_only=True)
class Correlation:
    """Estimated against actual ΔΓ for one part of Γ."""

    pearson: float | None = key("number in [-1, 1] or null (undefined, e.g. constant values)")
    spearman: float | None = key("number in [-1, 1] or null")


@dataclass(kw_only=True)
class ValidationPoint:
    """One checked set of nodes."""

    nodes: list[int] = key("integers: the nodes deleted")
    estimated: list[float] = key("numbers: estimated change of [Γ, Γ_SP, Γ_EO]")
    actual: list[float] = key("numbers: the change after re-optimising without them, same order")


@dataclass(kw_only=True)
class Validation:
    """The self-check: estimates against re-optimisation (:class:`bind_core.debiasing.validation.Validation`)."""

    protocol: str = key("string: how the nodes were chosen (sample)")
    mode: str = key("string: the ground truth re-optimised against")
    count: int = key("integer: sets checked")
    pearson: float | None = key("number or null: Pearson correlation for Γ")
    spearman: float | None = key("number or null: Spearman correlation for Γ")
    correlations: dict[str, Correlation] = key("object, gamma / gamma_sp / gamma_eo → its correlations")
    points: list[ValidationPoint] = key("every checked set")
    seconds: float = key("number: seconds the check took")
    noise_floor: float | None = key("number: the size of change the re-optimisation cannot resolve", optional=True)
    clear_of_noise: float | None = key("number in [0, 1]: share of sets whose change exceeds it", optional=True)
    extra: dict[str, Any] = open_keys("the check's other figures")


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
    sets: dict[str, list[int]] = key("object, seed → its top-k harmful node ids")
    pairwise: list[PairOverlap] = key("the overlap of every pair of seeds")
    all: Overlap = key("the overlap of all the sets")
    mean_pairwise_jaccard: float = key("number in [0, 1]: mean Jaccard index over the pairs")


# ---------------------------------------------------------------------- the profile of the harmful nodes
@dataclass(kw_only=True)
class NumericSummary:
    """The distribution of a number over a set of nodes (those where it is defined)."""

    mean: float = key("number: the mean")
    min: float = key("number: the smallest value")
    p10: float = key("number: 10th percentile")
    p50: float = key("number: median")
    p90: float = key("number: 90th percentile")
    max: float = key("number: the largest value")


@dataclass(kw_only=True)
class GroupShare:
    """One sensitive group's nodes in a set."""

    group: int = key("integer: the group code")
    name: str = key("string: the group's name")
    count: int = key("integer: the set's nodes in the group")
    share: float | None = key("number in [0, 1] or null (an empty set): count / the set's nodes")


@dataclass(kw_only=True)
class LabelShare:
    """One label's nodes in a set."""

    label: int = key("integer: the label")
    count: int = key("integer: the set's nodes with the label")
    share: float | None = key("number in [0, 1] or null (an empty set): count / the set's nodes")


@dataclass(kw_only=True)
class ProfileSet:
    """The distributions over one set of training nodes (:func:`bind_core.explain.profile.profile_nodes`)."""

    nodes: int = key("integer: training nodes in the set")
    delta_sum: float = key("number: the sum of their ΔΓ")
    delta_mean: float | None = key("number or null (an empty set): their mean ΔΓ")
    harm_share: float | None = key(
        "number in [0, 1] or null (no node has ΔΓ < 0): their share of the harm, the sum of −ΔΓ over nodes with ΔΓ < 0"
    )
    groups: list[GroupShare] = key("per sensitive group: its nodes in the set")
    labels: list[LabelShare] = key("per label: its nodes in the set")
    degree: NumericSummary | None = key("the degree's distribution; null for an empty set")
    cross_group_share: NumericSummary | None = key(
        "the distribution of the share of a node's neighbours in another group (nodes with a neighbour); null when "
        "none has one"
    )
    no_neighbours: int = key("integer: nodes without a neighbour (no cross-group share)")
    undefined: dict[str, str] | None = key("object, number → why it is null: present when one is", optional=True)


@dataclass(kw_only=True)
class ProfileSets:
    """The harmful, helpful and all training nodes."""

    harmful: ProfileSet = key("the most harmful nodes (see ``definition``)")
    helpful: ProfileSet = key("the most helpful nodes")
    all: ProfileSet = key("every training node")


@dataclass(kw_only=True)
class FeatureStats:
    """A feature column over one set of nodes."""

    mean: float = key("number: its mean")
    share: float | None = key("number in [0, 1]: share of nodes at the higher value (binary columns)", optional=True)
    p10: float | None = key("number: 10th percentile (numeric columns)", optional=True)
    p50: float | None = key("number: median (numeric columns)", optional=True)
    p90: float | None = key("number: 90th percentile (numeric columns)", optional=True)


@dataclass(kw_only=True)
class FeatureProfile:
    """One feature column in the harmful, helpful and all training nodes."""

    index: int = key("integer: the column (0-based)")
    name: str = key("string: its name (x<index> when the graph names none)")
    kind: str = key("string: binary (two values; one-hot columns) or numeric")
    high: float | None = key("number: a binary column's higher value, whose share is given", optional=True)
    harmful: FeatureStats | None = key("the column over the harmful nodes; null when the set is empty")
    helpful: FeatureStats | None = key("over the helpful nodes; null when the set is empty")
    all: FeatureStats | None = key("over all training nodes")
    difference: float | None = key(
        "number or null: (harmful mean − all mean) / the column's standard deviation on the training nodes"
    )
    undefined: dict[str, str] | None = key("object, number → why it is null: present when one is", optional=True)


@dataclass(kw_only=True)
class RuleCondition:
    """One condition of a rule."""

    variable: str = key("string: group, label, degree, cross_group_share or feature:<name>")
    op: str = key("string: ==, !=, <= or >")
    value: float = key("number: the level or threshold compared with")
    text: str = key("string: the condition for people")


@dataclass(kw_only=True)
class RuleStats:
    """A rule on one half of the training nodes."""

    support: int = key("integer: the half's nodes it covers")
    support_share: float | None = key("number in [0, 1]: their share of the half")
    mean_delta: float | None = key("number or null (it covers no node): their mean ΔΓ")
    harm_share: float | None = key("number in [0, 1] or null (no node of the half has ΔΓ < 0): their share of its harm")
    undefined: dict[str, str] | None = key("object, number → why it is null: present when one is", optional=True)


@dataclass(kw_only=True)
class ProfileRule:
    """A rule that picks out where the harm concentrates, and held on the held-out half."""

    conditions: list[RuleCondition] = key("the conditions, all of which a node meets")
    text: str = key("string: the rule for people")
    fit: RuleStats = key("on the half the rule was fitted on")
    holdout: RuleStats = key("on the held-out half")
    p_value: float = key("number: one-sided permutation p-value of its held-out mean ΔΓ")


@dataclass(kw_only=True)
class RuleSearch:
    """How the rules were searched and checked (:mod:`bind_core.explain.rules`)."""

    seed: int = key("integer: the seed of the split into halves (the training seed)")
    fit_nodes: int = key("integer: training nodes in the fit half")
    holdout_nodes: int = key("integer: training nodes in the held-out half")
    max_depth: int = key("integer: the tree's depth (conditions per rule at most)")
    min_leaf: int = key("integer: fit nodes a leaf must hold at least")
    splits_considered: int = key("integer: candidate splits")
    alpha: float = key("number: the family-wise error rate of the held-out check")
    permutations: int = key("integer: permutations of the held-out test")
    criterion: str = key("string: when a rule holds on the held-out half")
    tested: int = key("integer: candidate rules (harmful leaves) checked on the held-out half")
    rejected: int = key("integer: those that did not hold (not reported)")
    reason: str | None = key("string or null: why no rule is reported (null when some is)")


@dataclass(kw_only=True)
class NodeProfile:
    """What the harmful training nodes have in common (:func:`bind_core.explain.profile.profile_nodes`)."""

    fraction: float = key("number in (0, 1): the share of training nodes in the harmful and the helpful set")
    definition: str = key("string: how the sets are chosen")
    sets: ProfileSets = key("the distributions over the harmful, helpful and all training nodes")
    features: list[FeatureProfile] = key("per feature column, in column order")
    rules: list[ProfileRule] = key("the rules that held on the held-out half, most held-out harm first")
    search: RuleSearch = key("how the rules were searched and checked")


# ---------------------------------------------------------------------- the model, its training, the graph
@dataclass(kw_only=True)
class Refinement:
    """The refinement of the estimates (``refine_steps`` > 0)."""

    max_iter: int | None = key("integer: trust-region steps allowed per node", optional=True)
    deletions: int | None = key("integer: deletions refined", optional=True)
    converged: int | None = key("integer: those that converged", optional=True)
    seconds: float | None = key("number: seconds it took", optional=True)
    extra: dict[str, Any] = open_keys("its other figures (tolerances, steps, Hessians)")


@dataclass(kw_only=True)
class Spectrum:
    """The Hessian's spectrum at the weights (from the influence estimate's solve)."""

    max_eigenvalue: float | None = key("number: largest eigenvalue", optional=True)
    min_eigenvalue: float | None = key("number: smallest eigenvalue", optional=True)
    below_weight_decay: int | None = key("integer: eigenvalues below the weight decay", optional=True)
    dropped_eigenvalues: int | None = key("integer: eigenvalues dropped by the solver", optional=True)
    damping: float | None = key("number: damping added", optional=True)


@dataclass(kw_only=True)
class Stationarity:
    """The polish's record and the audit's stationarity check."""

    stationary: bool | str | None = key(
        'boolean: the weights pass the check before influence, or the string "kinks": a model with kinks accepted '
        "as a minimum on them (see ``kinks``)",
        optional=True,
    )
    grad_norm: float | None = key("number: gradient norm of the training objective", optional=True)
    max_abs_grad: float | None = key("number: its largest entry", optional=True)
    tolerance: float | None = key("number: the check's tolerance", optional=True)
    polished: bool | None = key("boolean: whether the L-BFGS/Newton polish ran", optional=True)
    converged: bool | None = key("boolean: whether the polish converged", optional=True)
    spectrum: Spectrum | None = key("the Hessian's spectrum; null when the solver reports none", optional=True)
    extra: dict[str, Any] = open_keys("the polish's other figures (iterations, seconds, Newton steps...)")


@dataclass(kw_only=True)
class TrainingHistory:
    """The training run (:class:`bind_core.training.fit.TrainedModel` ``history``)."""

    epochs: int | None = key("integer: Adam epochs run", optional=True)
    best_epoch: int | None = key("integer: the epoch of the kept weights", optional=True)
    best_val_loss: float | None = key("number: their validation loss", optional=True)
    seconds: float | None = key("number: seconds training took", optional=True)
    extra: dict[str, Any] = open_keys("other figures of the run")


@dataclass(kw_only=True)
class ModelSummary:
    """The model audited: its parameter count and :class:`bind_core.models.gnn.ModelConfig`."""

    parameters: int = key("integer: trainable parameters")
    arch: str | None = key("string: gcn, gin, sage or gat", optional=True)
    layers: int | None = key("integer: message-passing layers", optional=True)
    hidden: int | None = key("integer: hidden width", optional=True)
    dropout: float | None = key("number: dropout during training", optional=True)
    heads: int | None = key("integer: attention heads (GAT)", optional=True)
    activation: str | None = key("string: the nonlinearity between layers", optional=True)
    extra: dict[str, Any] = open_keys("the model configuration's other settings")


@dataclass(kw_only=True)
class GraphSummary:
    """The graph audited (:meth:`bind_core.data.graph.Graph.summary`)."""

    name: str = key("string: the graph's name")
    nodes: int = key("integer: nodes")
    edges: int = key("integer: undirected edges")
    features: int = key("integer: feature columns")
    classes: int = key("integer: label classes")
    groups: int = key("integer: sensitive groups")
    group_sizes: list[int] = key("integers: nodes per group")
    group_names: list[str] = key("strings: each group's name")
    class_sizes: list[int] = key("integers: labelled nodes per class")
    unlabeled: int = key("integer: nodes without a label")
    train: int = key("integer: training nodes")
    val: int = key("integer: validation nodes")
    test: int = key("integer: test nodes")


@dataclass(kw_only=True)
class PygCheck:
    """A PyG model's reproduction check: the converted model against the PyG module's logits."""

    max_logit_difference: float | None = key("number: largest relative difference of the logits", optional=True)
    extra: dict[str, Any] = open_keys("the check's other figures")


@dataclass(kw_only=True)
class SuppliedModel:
    """What was done to a supplied model before its audit (added by the service; ``POST /v1/models``)."""

    id: str | None = key("string: the supplied model's id", optional=True)
    polished_by_service: bool = key("boolean: the service polished it to a stationary point first")
    grad_norm_supplied: float | None = key("number: gradient norm as supplied (when polished)", optional=True)
    grad_norm: float | None = key("number: gradient norm as audited", optional=True)
    pyg: PygCheck | None = key("a PyG model's reproduction check", optional=True)
    extra: dict[str, Any] = open_keys("other figures of the record")


# ---------------------------------------------------------------------- the whole
@dataclass(kw_only=True)
class AuditResults:
    """Everything an audit produced (:meth:`bind_core.pipeline.audit.AuditResult.to_dict`); the stages an audit
    did not run leave their parts null."""

    metrics: Metrics = key("the metrics stage")
    influence_summary: InfluenceSummary | None = key("the influence estimate's distribution; null without influence")
    top_harmful: list[InfluenceRow] | None = key("up to 10 most harmful nodes (ΔΓ < 0); null without influence")
    top_helpful: list[InfluenceRow] | None = key("up to 10 most helpful nodes (ΔΓ > 0); null without influence")
    debiasing: list[DebiasingRow] | None = key("one row per budget; null when debiasing did not run")
    validation: Validation | None = key("the self-check; null when it did not run")
    stability: Stability | None = key("the top-k stability across seeds; null unless stability_seeds")
    refinement: Refinement | None = key("the estimates' refinement; null unless refine_steps")
    stationarity: Stationarity = key("the polish's record and the stationarity check")
    training: TrainingHistory = key("the training run")
    model: ModelSummary = key("the model audited")
    graph: GraphSummary = key("the graph audited")
    timings: dict[str, float] = key("object, stage → seconds, in the order the stages ran")
    device: str = key("string: where it ran (cpu or cuda:N)")
    warnings: list[str] = key("strings: caveats about the graph, the metrics, the model and the estimates")
    sign_convention: str = key("string: what the sign of the influence estimates means")
    profile: NodeProfile | None = key(
        "what the harmful training nodes have in common; absent without influence", optional=True
    )
    edges: EdgeAttribution | None = key(
        "the bias attributed to each undirected edge; absent unless the audit asked for edges", optional=True
    )
    supplied_model: SuppliedModel | None = key(
        "for an audit of a supplied model: what was done to it (added by the service)", optional=True
    )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditResults:
        """The typed form of a results document (its JSON form, as stored); raises
        :class:`~bind_core.pipeline.result_codec.ResultFormatError` when it does not fit."""
        return decode(cls, data)

    def to_dict(self) -> dict[str, Any]:
        """The results document again, equal to the one read."""
        return encode(self)
