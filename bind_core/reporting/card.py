"""The audit as a model card's quantitative analysis (Mitchell et al., 2019; the Model Card Toolkit's
``quantitative_analysis.performance_metrics``), plus BIND's own blocks, typed: :func:`build_model_card` builds a
:class:`ModelCard` from the typed results (:func:`~bind_core.reporting.exports.model_card` from stored JSON too); its
``to_dict()`` is the JSON document that leaves the library (the service's export, a file)."""

# ruff: noqa: RUF009  (key() returns dataclasses.field(...): fields with metadata, not shared defaults)
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bind_core.codec import Encoded, key
from bind_core.data.records import GraphSummary
from bind_core.debiasing.records import AgainstRandom, Correlation, DebiasingRow, RetrainRecipe
from bind_core.fairness.records import GroupMetrics, Interval, Intervals, Metrics, MetricValues, TestMetrics
from bind_core.influence.records import Distributed, Quantiles
from bind_core.pipeline.results import AuditResults, InfluenceRow
from bind_core.pipeline.results_edges import EdgeAttribution
from bind_core.pipeline.results_summary import Summary
from bind_core.reporting.page import finite
from bind_core.training.records import ModelSummary

__all__ = [
    "EXPORT_FORMAT",
    "CardDebiasing",
    "CardInfluence",
    "CardValidation",
    "ModelCard",
    "PerformanceMetric",
    "build_model_card",
]

EXPORT_FORMAT = "bind-audit/model-card-quantitative-analysis/v1"
# (key in metrics.test, model-card type); their intervals, where computed, sit under metrics.intervals[key].
TEST_METRICS = (
    ("accuracy", "accuracy"),
    ("auc", "roc_auc"),
    ("f1", "f1"),
    ("delta_sp", "delta_sp"),
    ("delta_eo", "delta_eo"),
    ("gamma_sp", "gamma_sp"),
    ("gamma_eo", "gamma_eo"),
    ("gamma", "gamma"),
)
GROUP_METRICS = (
    ("accuracy", "accuracy"),
    ("positive_rate", "positive_rate"),
    ("tpr", "true_positive_rate"),
    ("mean_probability", "mean_predicted_probability"),
    ("size", "test_nodes"),
)
# (key in metrics.test.worst_pairs, model-card type): the largest value over pairs of the included groups.
WORST_PAIR_METRICS = (
    ("delta_sp", "delta_sp_worst_pair"),
    ("delta_eo", "delta_eo_worst_pair"),
    ("gamma_sp", "gamma_sp_worst_pair"),
    ("gamma_eo", "gamma_eo_worst_pair"),
)


@dataclass(frozen=True, kw_only=True)
class ConfidenceInterval:
    """A metric's bootstrap interval, where both ends are finite."""

    lower_bound: float = key("number: the lower bound")
    upper_bound: float = key("number: the upper bound")


@dataclass(frozen=True, kw_only=True)
class PerformanceMetric:
    """One entry of ``performance_metrics``: a metric on one slice of the test nodes."""

    type: str = key("string: the metric (accuracy, roc_auc, ..., <metric>_worst_pair)")
    value: float | None = key("number or null (undefined, or not finite)")
    slice: str = key("string: test, group=g, or group=a vs group=b")
    undefined: str | None = key("string: why the value is undefined", optional=True)
    confidence_interval: ConfidenceInterval | None = key("its bootstrap interval, where finite", optional=True)
    group: int | None = key("integer: the group code of a group=g slice", optional=True)
    group_name: str | None = key("string: that group's name", optional=True)
    included: bool | None = key("boolean: whether the fairness metrics include that group", optional=True)
    groups: list[int] | None = key("[integer, integer]: a worst pair's groups", optional=True)
    group_names: list[str] | None = key("[string, string]: their names", optional=True)


@dataclass(frozen=True, kw_only=True)
class QuantitativeAnalysis:
    """The performance metrics and the intervals' coverage."""

    performance_metrics: list[PerformanceMetric] = key("every metric on every slice")
    confidence_level: float | None = key("number or null (no bootstrap): the intervals' coverage")


@dataclass(frozen=True, kw_only=True)
class CardInfluence:
    """The influence summary (without timings and solver details) and the top lists."""

    count: int = key("integer: training nodes estimated")
    undefined: int | None = key(
        "integer: of them, the nodes whose ΔΓ is null (no minimum near the given weights), left out of the figures "
        "below; absent when there are none",
        optional=True,
    )
    harmful: int = key("integer: nodes with ΔΓ < 0")
    helpful: int = key("integer: nodes with ΔΓ > 0")
    sum: float | None = key("number: sum of the estimates (null when no node has one, as each figure below)")
    mean: float | None = key("number: their mean")
    std: float | None = key("number: their standard deviation")
    min: float | None = key("number: the smallest")
    max: float | None = key("number: the largest")
    quantiles: Quantiles | None = key("quantiles of the estimates (null when no node has one)")
    gamma: dict[str, float] = key("object: the model's Γ, keys sp, eo and total")
    lam: float = key("number: λ of Γ")
    solver: str = key("string: the inverse-Hessian solver used")
    grad_norm: float = key("number: norm of the training objective's gradient")
    sign_convention: str = key("string: what the sign of ΔΓ means")
    distributed: Distributed | None = key("how the per-node terms were spread over workers", optional=True)
    top_harmful: list[InfluenceRow] = key("the most harmful nodes")
    top_helpful: list[InfluenceRow] = key("the most helpful nodes")


@dataclass(frozen=True, kw_only=True)
class CardDebiasing:
    """One debiasing budget (:class:`~bind_core.debiasing.records.DebiasingRow`, less its seconds)."""

    budget: float = key("number: the budget, a fraction (< 1) or a count (>= 1) of training nodes")
    requested: int = key("integer: nodes the budget asks for")
    deleted: int = key("integer: nodes deleted")
    nodes: list[int | str] = key("the deleted nodes' ids, in the user's terms")
    estimated_delta: float | None = key("number: the estimated ΔΓ of deleting them (null where there is none)")
    caveat: str | None = key("string: why the estimate cannot be taken at its word", optional=True)
    selection: str = key("string: top_ranked or non_overlapping")
    utility_aware: bool = key("boolean: whether nodes estimated to raise the validation loss were kept")
    estimated_utility: float | None = key("number: the estimated change in validation loss", optional=True)
    before: MetricValues = key("the test metrics before")
    after: MetricValues = key("the test metrics after retraining without the nodes")
    backfired: list[str] | None = key("strings: the bias metrics that rose after the deletion", optional=True)
    within_noise: list[str] | None = key(
        "strings: of backfired, those that rose only within the test nodes' sampling noise", optional=True
    )
    against_random: AgainstRandom | None = key("the check against chance; null unless debias_seeds were given")
    retrain: str | None = key("string: how every retraining of the row trained (audit or adam)", optional=True)
    chance_rule: str | None = key("string: whether the check against chance ran by default and why", optional=True)
    recipe: RetrainRecipe | None = key("the training every retraining of the row used", optional=True)


@dataclass(frozen=True, kw_only=True)
class CardValidation:
    """The self-check's correlations."""

    count: int = key("integer: sets checked")
    mode: str = key("string: the ground truth re-optimised against")
    pearson: float | None = key("number or null: Pearson correlation for Γ")
    spearman: float | None = key("number or null: Spearman correlation for Γ")
    correlations: dict[str, Correlation] = key("object, gamma / gamma_sp / gamma_eo → its correlations")


@dataclass(frozen=True, kw_only=True)
class ModelCard(Encoded):
    """The model card document (:data:`EXPORT_FORMAT`)."""

    format: str = key("string: the document's format")
    audit_id: str | None = key("string or null: the audit's id")
    sign_convention: str = key("string: what the sign of the influence estimates means")
    summary: Summary | None = key("the audit's verdict; null in audits from before it was written")
    quantitative_analysis: QuantitativeAnalysis = key("the performance metrics")
    influence: CardInfluence | None = key("the influence estimate; null without influence")
    debiasing: list[CardDebiasing] | None = key("the debiasing rows, less their seconds; null without debiasing")
    validation: CardValidation | None = key("the self-check; null when it did not run")
    edges: EdgeAttribution | None = key("the edge attribution; null unless the audit asked for edges")
    warnings: list[str] = key("strings: the audit's caveats")
    graph: GraphSummary = key("the graph audited")
    model: ModelSummary = key("the model audited")


def build_model_card(results: AuditResults, *, audit_id: str | None = None) -> ModelCard:
    """The audit as a :class:`ModelCard` (the shape :func:`bind_core.reporting.exports.model_card` documents).

    Args:
        results: the audit's typed results.
        audit_id: the audit's id, where it has one.

    Returns:
        The model card, before encoding (numbers as the results hold them, non-finite ones included).
    """
    metrics = results.metrics
    names = {group.group: group.name for group in metrics.groups}
    performance = _test_metrics(metrics.test, metrics.intervals) + _group_metrics(metrics.groups, names)
    if len(metrics.included_groups) > 2:
        performance.extend(_worst_pairs(metrics, names))
    validation = results.validation
    return ModelCard(
        format=EXPORT_FORMAT,
        audit_id=audit_id,
        sign_convention=results.sign_convention,
        summary=results.summary,
        quantitative_analysis=QuantitativeAnalysis(
            performance_metrics=performance,
            confidence_level=metrics.intervals.level if metrics.intervals else None,
        ),
        influence=_influence(results),
        debiasing=[_without_seconds(run) for run in results.debiasing or []] or None,
        validation=CardValidation(
            count=validation.count,
            mode=validation.mode,
            pearson=validation.pearson,
            spearman=validation.spearman,
            correlations=validation.correlations,
        )
        if validation
        else None,
        edges=results.edges,
        warnings=list(results.warnings),
        graph=results.graph,
        model=results.model,
    )


def _without_seconds(run: DebiasingRow) -> CardDebiasing:
    return CardDebiasing(
        budget=run.budget,
        requested=run.requested,
        deleted=run.deleted,
        nodes=run.nodes,
        estimated_delta=run.estimated_delta,
        caveat=run.caveat,
        selection=run.selection,
        utility_aware=run.utility_aware,
        estimated_utility=run.estimated_utility,
        before=run.before,
        after=run.after,
        backfired=run.backfired,
        within_noise=run.within_noise,
        against_random=run.against_random,
        retrain=run.retrain,
        chance_rule=run.chance_rule,
        recipe=run.recipe,
    )


def _band(intervals: Intervals | None, name: str) -> ConfidenceInterval | None:
    band: Interval | None = getattr(intervals, name) if intervals is not None else None
    if band is None or band.low is None or band.high is None or not (finite(band.low) and finite(band.high)):
        return None
    return ConfidenceInterval(lower_bound=band.low, upper_bound=band.high)


def _test_metrics(test: TestMetrics, intervals: Intervals | None) -> list[PerformanceMetric]:
    """The ``test`` slice: each metric with its interval where finite, or its reason where undefined."""
    undefined = test.undefined or {}
    return [
        PerformanceMetric(
            type=kind,
            value=getattr(test, name),
            slice="test",
            undefined=undefined.get(name),
            confidence_interval=_band(intervals, name),
        )
        for name, kind in TEST_METRICS
        if getattr(test, name) is not None or name in undefined
    ]


def _group_metrics(groups: list[GroupMetrics], names: Mapping[int, str]) -> list[PerformanceMetric]:
    """The ``group=g`` slices: each group's metrics, with its name and whether the gaps include it."""
    return [
        PerformanceMetric(
            type=kind,
            value=getattr(group, name),
            slice=f"group={group.group}",
            group=group.group,
            group_name=names[group.group],
            included=group.included,
        )
        for group in groups
        for name, kind in GROUP_METRICS
        if getattr(group, name) is not None
    ]


def _influence(results: AuditResults) -> CardInfluence | None:
    """The influence summary (without timings and solver details) and the top lists; ``None`` without influence."""
    s = results.influence_summary
    if s is None:
        return None
    return CardInfluence(
        count=s.count,
        undefined=s.undefined,
        harmful=s.harmful,
        helpful=s.helpful,
        sum=s.sum,
        mean=s.mean,
        std=s.std,
        min=s.min,
        max=s.max,
        quantiles=s.quantiles,
        gamma=s.gamma,
        lam=s.lam,
        solver=s.solver,
        grad_norm=s.grad_norm,
        sign_convention=s.sign_convention,
        distributed=s.distributed,
        top_harmful=results.top_harmful or [],
        top_helpful=results.top_helpful or [],
    )


def _worst_pairs(metrics: Metrics, names: Mapping[int, str]) -> list[PerformanceMetric]:
    """One performance metric per worst pair, with the pair's groups and their names."""
    out = []
    for name, kind in WORST_PAIR_METRICS:
        pair = metrics.test.worst_pairs.get(name)
        if pair is None or pair.value is None:
            continue
        out.append(
            PerformanceMetric(
                type=kind,
                value=pair.value,
                slice=" vs ".join(f"group={g}" for g in pair.groups),
                groups=list(pair.groups),
                group_names=[names.get(g, str(g)) for g in pair.groups],
            )
        )
    return out
