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

from bind_core.codec import EXTRA, Encoded, decode, key, open_keys
from bind_core.data.records import CarriedInputs, GraphSummary
from bind_core.debiasing.edge_records import EdgeDebiasing, EdgeDebiasingRow, EdgeValidation, EdgeValidationPoint
from bind_core.debiasing.records import (
    AgainstRandom,
    Correlation,
    DebiasingRow,
    EffectSpread,
    RandomSet,
    RandomSpread,
    RetrainRecipe,
    Validation,
    ValidationPoint,
)
from bind_core.explain.records import (
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
from bind_core.fairness.records import (
    GroupMetrics,
    Histograms,
    Interval,
    Intervals,
    Metrics,
    MetricValues,
    TestMetrics,
    WorstPair,
)
from bind_core.influence.edge_records import CrossGroupEdges, EdgeRow
from bind_core.influence.records import (
    Distributed,
    InfluenceSummary,
    Overlap,
    PairOverlap,
    Quantiles,
    Refinement,
    SolverDetails,
    Stability,
    WorkerShare,
)
from bind_core.influence.records import InfluenceRow as EstimateRow
from bind_core.models.records import PygCheck
from bind_core.pipeline.results_edges import EdgeAttribution
from bind_core.pipeline.results_summary import AttributionFinding, DebiasingFinding, GapFinding, Summary, TrustFinding
from bind_core.training.fit_check import TrainingFit
from bind_core.training.output_order import OutputOrder
from bind_core.training.outputs import OutputsMatch
from bind_core.training.records import ModelSummary, Spectrum, Stationarity, TrainingHistory

__all__ = [
    "EXTRA",
    "AgainstRandom",
    "AttributionFinding",
    "AuditResults",
    "CarriedInputs",
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
    "OutputOrder",
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
@dataclass(frozen=True, kw_only=True)
class InfluenceRow(EstimateRow):
    """One training node's estimate in the user's terms: a row of
    :meth:`bind_core.pipeline.audit.AuditResult.influence_rows` (every training node), and of the results'
    ``top_harmful`` and ``top_helpful`` lists. :func:`bind_core.codec.encode` makes it the JSON object of
    ``GET /v1/audits/{id}/influence``, the CLI's ``influence`` list and the exports' columns
    (:data:`bind_core.reporting.exports.INFLUENCE_COLUMNS`), keys in this order: the estimate's
    (:class:`bind_core.influence.records.InfluenceRow`), then the names of its group and label.

    ``group`` and ``label`` are the graph's codes (stable integers); ``group_name`` and ``label_name`` are what the
    user's data writes for them (the results' ``graph.group_names`` and ``graph.class_names``)."""

    group_name: str | None = key(
        "string: its sensitive group as the user's data writes it (graph.group_names[group]: the value, a bin, or an "
        "intersectional group's combination); absent in audits stored before it was written",
        optional=True,
    )
    label_name: str | None = key(
        "string: its label as the user's data writes it (graph.class_names[label]); absent in audits stored before "
        "it was written",
        optional=True,
    )


# ---------------------------------------------------------------------- edges


# ---------------------------------------------------------------------- debiasing


# ---------------------------------------------------------------------- validation, stability


# ---------------------------------------------------------------------- the profile of the harmful nodes


# ---------------------------------------------------------------------- the model, its training, the graph


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
    """What was done to a supplied model before its audit (``run_audit(model=TrainedModel.from_bytes(...))``, the
    command line's ``--model-weights``, the service's ``POST /v1/models``)."""

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
    classes: list[str] | None = key(
        "strings: the label value each of the model's outputs stands for, output 0 first, as its config gave them "
        "(classes); the outputs were put in the graph's class order before the audit. Absent: output k read as the "
        "label's k-th value in sorted order",
        optional=True,
    )
    output_order: OutputOrder | None = key(
        "the model's scores on its labelled training nodes against chance: below_chance says its outputs may be in "
        "another order than the label's classes",
        optional=True,
    )
    training_fit: TrainingFit | None = key(
        "the model's mean cross-entropy on its labelled training nodes against a constant predictor's and a uniform "
        "guess's: no_better, or worse_than_guess without overconfident (a model that classifies them clearly better "
        "than the commonest label), says it is most likely fed other inputs than it was trained on; absent in audits "
        "from before 2026-12-06",
        optional=True,
    )
    outputs: OutputsMatch | None = key(
        "the owner's outputs on this graph against the model as read (given at registration, or to bind-audit run "
        "--model-outputs): matches says the audit reads the owner's model fed what its owner feeds it; absent where "
        "none were given",
        optional=True,
    )
    carried: CarriedInputs | None = key(
        "a model audited on another version of the graph it was registered for (a scheduled audit): how that "
        "version's inputs were made the registration's; absent where the model is audited on its own graph",
        optional=True,
    )
    extra: dict[str, Any] = open_keys("other figures of the record")


# ---------------------------------------------------------------------- the whole
@dataclass(kw_only=True)
class AuditResults(Encoded):
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
        warning_codes: each warning's stable code, in the order of ``warnings``.
        sign_convention: what the sign of the influence estimates means.
        profile: what the harmful training nodes have in common; absent without influence.
        edges: the bias attributed to each undirected edge; absent unless the audit asked for edges.
        supplied_model: for an audit of a supplied model, what was done to it.
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
    warning_codes: list[str] | None = key(
        "strings: each warning's stable code, in the order of warnings (training_fit, self_check_low...; the API's "
        "docs list them): what a machine acts on, where the sentences may be reworded; absent in audits from before "
        "2026-12-07",
        optional=True,
    )
    sign_convention: str = key("string: what the sign of the influence estimates means")
    profile: NodeProfile | None = key(
        "what the harmful training nodes have in common; absent without influence", optional=True
    )
    edges: EdgeAttribution | None = key(
        "the bias attributed to each undirected edge; absent unless the audit asked for edges", optional=True
    )
    supplied_model: SuppliedModel | None = key("for an audit of a supplied model: what was done to it", optional=True)
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
                (:class:`~bind_core.codec.ResultFormatError`).
        """
        return decode(cls, data)
