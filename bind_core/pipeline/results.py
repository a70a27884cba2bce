"""The audit's results as typed dataclasses: exactly the JSON of :meth:`~bind_core.pipeline.audit.AuditResult.to_dict`
(what the service stores and serves), key for key.

``AuditResults.from_dict(doc).to_dict() == doc`` for every audit's stored document
(``tests/core/pipeline/test_results_typed.py`` checks it on real audits). A number a set of nodes cannot define is
``null`` (never 0), with its reason beside it where the producer gives one (``undefined`` of :class:`MetricValues`,
``excluded_reason`` of :class:`GroupMetrics`, ``reason`` of :class:`AgainstRandom`). The service's response models
(``app/audits/result_schemas.py``) are built from these classes and their field docs.
"""

# ruff: noqa: RUF009  (key() and open_keys() return dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bind_core.pipeline.result_codec import EXTRA, decode, encode, key, open_keys
from bind_core.pipeline.results_checks import AgainstRandom, Correlation, EffectSpread, RandomSet, RandomSpread
from bind_core.pipeline.results_edges import (
    CrossGroupEdges,
    EdgeAttribution,
    EdgeDebiasing,
    EdgeDebiasingRow,
    EdgeRow,
    EdgeValidation,
    EdgeValidationPoint,
)
from bind_core.pipeline.results_metrics import (
    GroupMetrics,
    Histograms,
    Interval,
    Intervals,
    Metrics,
    MetricValues,
    TestMetrics,
    WorstPair,
)
from bind_core.pipeline.results_profile import (
    FeatureProfile,
    FeatureStats,
    GroupShare,
    LabelShare,
    NodeProfile,
    NumericSummary,
    ProfileRule,
    ProfileSet,
    ProfileSets,
    RuleCondition,
    RuleSearch,
    RuleStats,
)
from bind_core.pipeline.results_summary import AttributionFinding, DebiasingFinding, GapFinding, Summary, TrustFinding

__all__ = [
    "EXTRA",
    "AgainstRandom",
    "AttributionFinding",
    "AuditResults",
    "Correlation",
    "CrossGroupEdges",
    "DebiasingFinding",
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
    "GapFinding",
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
    "ReferenceComparison",
    "Refinement",
    "RetrainRecipe",
    "RuleCondition",
    "RuleSearch",
    "RuleStats",
    "SolverDetails",
    "Spectrum",
    "Stability",
    "Stationarity",
    "Summary",
    "SuppliedModel",
    "TestMetrics",
    "TrainingHistory",
    "TrustFinding",
    "Validation",
    "ValidationPoint",
    "WorkerShare",
    "WorstPair",
]


# ---------------------------------------------------------------------- metrics


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
    """The distribution of the per-node estimates ΔΓ (:meth:`bind_core.influence.result.InfluenceResult.summary`)."""

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
    node_id: int | str = key("integer or string: the user's id (graph.node_id_meaning says what it is)")
    group: int = key("integer: its sensitive group")
    label: int = key("integer: its label")
    delta: float = key("number: ΔΓ of deleting it (negative: harmful)")
    delta_sp: float = key("number: the same for Γ_SP")
    delta_eo: float = key("number: the same for Γ_EO")


# ---------------------------------------------------------------------- edges


# ---------------------------------------------------------------------- debiasing


@dataclass(kw_only=True)
class DebiasingRow:
    """One budget: delete the most harmful training nodes, retrain, compare
    (:func:`bind_core.debiasing.debias.debias`)."""

    budget: float = key("number: the budget asked for, a fraction (< 1) or a count (>= 1) of training nodes")
    requested: int = key("integer: nodes the budget asks for")
    deleted: int = key("integer: nodes deleted")
    nodes: list[int | str] = key(
        "integers or strings: the deleted nodes' ids, each the user's id (graph.node_id_meaning says what it is)"
    )
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
    backfired: list[str] | None = key(
        "strings: the bias metrics (delta_sp, delta_eo, gamma) that rose after the deletion, so the budget backfired "
        "on them; empty when none rose; absent in audits from before it was recorded",
        optional=True,
    )
    against_random: AgainstRandom | None = key("the check against chance; null unless debias_seeds were given")
    seconds: float = key("number: seconds the budget took")
    retrain: str | None = key(
        "string: how every retraining of the row trained: audit (the model's settings: Adam, then the polish; "
        "before is the audited model) or adam (Adam alone, as a user trains; before is the unchanged graph retrained "
        "so too); absent in audits from before the setting",
        optional=True,
    )
    chance_rule: str | None = key(
        "string: whether the check against chance ran by default and why (the audit's chance_seconds rule); absent "
        "where the seeds were given or the rule is off",
        optional=True,
    )
    recipe: RetrainRecipe | None = key(
        "the training every retraining of the row used (a supplied model's: its config's training section); absent in "
        "audits from before it was recorded",
        optional=True,
    )


@dataclass(kw_only=True)
class RetrainRecipe:
    """How the debiasing retrained (:class:`bind_core.training.fit.TrainConfig`): from scratch, with each seed."""

    optimizer: str = key("string: adam or sgd")
    lr: float = key("number: learning rate")
    weight_decay: float = key("number: the L2 coefficient λ of the objective")
    epochs: int = key("integer: epochs at most")
    patience: int = key("integer: early stopping after this many epochs without a better validation loss (0: off)")
    keep: str = key("string: best_val (the epoch of the lowest validation loss) or last")
    polish: bool = key("boolean: whether a float64 L-BFGS polish to a stationary point followed")
    extra: dict[str, Any] = open_keys("the recipe's other settings (seed, momentum, mini-batches)")


# ---------------------------------------------------------------------- validation, stability


@dataclass(kw_only=True)
class ValidationPoint:
    """One checked set of nodes."""

    nodes: list[int] = key("integers: the nodes deleted")
    estimated: list[float] = key("numbers: estimated change of [Γ, Γ_SP, Γ_EO]")
    actual: list[float] | None = key(
        "numbers: the change after re-optimising without them, same order; null where the re-optimisation found no "
        "finite optimum (see undefined_truth)"
    )


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
    sets: dict[str, list[int | str]] = key("object, seed → its top-k harmful nodes' ids (the user's ids)")
    pairwise: list[PairOverlap] = key("the overlap of every pair of seeds")
    all: Overlap = key("the overlap of all the sets")
    mean_pairwise_jaccard: float = key("number in [0, 1]: mean Jaccard index over the pairs")


# ---------------------------------------------------------------------- the profile of the harmful nodes


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
    group_names: list[str] = key("strings: each group's value(s) as the user's file writes them (the codes for arrays)")
    sensitive: list[str] | None = key(
        "strings: the sensitive attribute(s), as the user's columns are named (sens for arrays); absent in audits "
        "from before it was recorded",
        optional=True,
    )
    group_labels: list[str] | None = key(
        "strings: each group in the user's terms, attribute=value (race=1, gender=F & age=young), with its "
        "documented meaning in parentheses where the data's provenance gives one",
        optional=True,
    )
    label: str | None = key("string: the label's column (y for arrays)", optional=True)
    class_names: list[str] | None = key("strings: each class's value as the user's file writes it", optional=True)
    node_id_column: str | None = key(
        "string: the node table's column the node ids come from; absent where node ids are row positions",
        optional=True,
    )
    node_id_meaning: str | None = key("string: what every node_id of the results is, in words", optional=True)
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
class ReferenceComparison:
    """With ``reference="polished"``: the supplied model and the polished copy side by side
    (:func:`bind_core.pipeline.reference.compare_reference`)."""

    as_given: MetricValues = key("the supplied model's test metrics, from its own forward pass")
    polished: MetricValues = key("the polished copy's test metrics (the model the audit describes)")
    predictions_differ: float | None = key(
        "number: share of test nodes whose predicted label differs; null without test nodes", optional=True
    )
    test_nodes: int | None = key("integer: test nodes compared", optional=True)


@dataclass(kw_only=True)
class SuppliedModel:
    """What was done to a supplied model before its audit (added by the service; ``POST /v1/models``)."""

    id: str | None = key("string: the supplied model's id", optional=True)
    reference: str | None = key(
        "string: as_given (the supplied weights audited as they are) or polished (a polished copy audited, the "
        "supplied model reported beside it)",
        optional=True,
    )
    polished_by_service: bool = key("boolean: the audit describes a copy polished to a stationary point")
    grad_norm_supplied: float | None = key("number: gradient norm of the training objective as supplied", optional=True)
    grad_norm: float | None = key("number: gradient norm as audited", optional=True)
    comparison: ReferenceComparison | None = key(
        "with reference polished: the supplied and the polished model's metrics side by side", optional=True
    )
    pyg: PygCheck | None = key("a PyG model's reproduction check", optional=True)
    extra: dict[str, Any] = open_keys("other figures of the record")


# ---------------------------------------------------------------------- the whole
@dataclass(kw_only=True)
class AuditResults:
    """Everything an audit produced (:meth:`bind_core.pipeline.audit.AuditResult.to_dict`), typed; the stages an
    audit did not run leave their parts null. Every field's meaning is also in its ``key(...)`` description, which
    the API's schema carries; the terms are in the docs' glossary.

    Attributes:
        summary: the verdict first: the findings in a few plain sentences, with their fields; absent in audits from
            before it was written.
        metrics: the metrics stage: test metrics, per-group breakdown, histograms and intervals.
        influence_summary: the influence estimate's distribution; null without influence.
        top_harmful: up to 10 most harmful nodes (ΔΓ < 0); null without influence.
        top_helpful: up to 10 most helpful nodes (ΔΓ > 0); null without influence.
        debiasing: one row per budget; null when debiasing did not run.
        validation: the self-check; null when it did not run.
        stability: the top-k stability across seeds; null unless ``stability_seeds``.
        refinement: the estimates' refinement; null unless ``refine_steps``.
        stationarity: the polish's record and the stationarity check.
        training: the training run.
        model: the model audited.
        graph: the graph audited.
        timings: stage → seconds, in the order the stages ran.
        device: where it ran (``cpu`` or ``cuda:N``).
        warnings: caveats about the graph, the metrics, the model and the estimates.
        sign_convention: what the sign of the influence estimates means.
        profile: what the harmful training nodes have in common; absent without influence.
        edges: the bias attributed to each undirected edge; absent unless the audit asked for edges.
        supplied_model: for an audit of a supplied model, what was done to it (added by the service).
    """

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
    summary: Summary | None = key(
        "the verdict first: the findings in a few plain sentences, with their fields; absent in audits from before "
        "it was written",
        optional=True,
    )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditResults:
        """The typed form of a results document.

        Args:
            data: the results' JSON form, as stored (:meth:`to_dict`, or the service's ``results``).

        Returns:
            The :class:`AuditResults`.

        Raises:
            ResultFormatError: the document does not fit the types
                (:class:`~bind_core.pipeline.result_codec.ResultFormatError`).
        """
        return decode(cls, data)

    def to_dict(self) -> dict[str, Any]:
        """The results document again.

        Returns:
            The JSON-ready document, equal to the one :meth:`from_dict` read.
        """
        return encode(self)
