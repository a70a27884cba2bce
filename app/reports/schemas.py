"""The audit export: a model card's quantitative analysis plus BIND's influence and debiasing blocks.

Built by :func:`bind_core.reporting.exports.model_card`; these models only declare (and check) its shape in OpenAPI.
Its influence, debiasing, validation, graph and model blocks are the audit's typed results
(:mod:`app.audits.result_schemas`), less a few keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, TypeAlias

from pydantic import BaseModel, Field, WrapValidator, create_model

from app.audits.result_schemas import StoredModel, lenient, model_for
from bind_core.pipeline.results import (
    DebiasingRow,
    EdgeAttribution,
    GraphSummary,
    InfluenceRow,
    InfluenceSummary,
    ModelSummary,
    NodeProfile,
    Validation,
)

if TYPE_CHECKING:
    ExportInfluence: TypeAlias = StoredModel
    ExportDebiasing: TypeAlias = StoredModel
    ExportValidation: TypeAlias = StoredModel
    ExportGraph: TypeAlias = StoredModel
    ExportModel: TypeAlias = StoredModel
    ExportEdges: TypeAlias = StoredModel
    ProfileRead: TypeAlias = StoredModel
else:
    _Row = model_for(InfluenceRow)
    ExportInfluence = create_model(
        "AuditExportInfluence",
        __base__=model_for(InfluenceSummary),
        __doc__="The influence summary (without timings and solver details) with the top harmful and helpful nodes.",
        top_harmful=(list[_Row] | None, Field(None, description="up to 10 most harmful nodes")),
        top_helpful=(list[_Row] | None, Field(None, description="up to 10 most helpful nodes")),
    )
    ExportDebiasing = model_for(DebiasingRow)
    ExportValidation = model_for(Validation)
    ExportGraph = model_for(GraphSummary)
    ExportModel = model_for(ModelSummary)
    ExportEdges = model_for(EdgeAttribution)
    ProfileRead = model_for(NodeProfile)
    """``GET /v1/audits/{id}/profile``: what the harmful training nodes have in common."""


class ConfidenceInterval(BaseModel):
    lower_bound: float | None
    upper_bound: float | None


class PerformanceMetric(BaseModel):
    type: str
    """``accuracy``, ``roc_auc``, ``f1``, ``delta_sp``, ``delta_eo``, ``gamma_sp``, ``gamma_eo``, ``gamma``;
    per group also ``positive_rate``, ``true_positive_rate``, ``mean_predicted_probability``, ``test_nodes``."""
    value: float | None
    slice: str
    """``test`` (all test nodes) or ``group=g`` (the test nodes of sensitive group g)."""
    confidence_interval: ConfidenceInterval | None = None
    """Percentile bootstrap interval at ``confidence_level``, where computed (test slice)."""
    group: int | None = None
    """The sensitive group of a ``group=g`` slice."""
    group_name: str | None = None
    """Its name (an intersectional group's is its combination, e.g. ``female|black``)."""
    included: bool | None = None
    """Whether the metrics include that group (see the audit's warnings for why not)."""
    groups: list[int] | None = None
    """The two groups of a ``*_worst_pair`` entry."""
    group_names: list[str] | None = None
    """Their names."""


class QuantitativeAnalysis(BaseModel):
    performance_metrics: list[PerformanceMetric]
    confidence_level: float | None = None


class AuditExport(BaseModel):
    format: str
    """``bind-audit/model-card-quantitative-analysis/v1``."""
    audit_id: str | None = None
    sign_convention: str | None = None
    quantitative_analysis: QuantitativeAnalysis
    influence: Annotated[ExportInfluence | None, WrapValidator(lenient)] = None
    """The influence summary (count, harmful, helpful, quantiles, Γ, λ, solver) with the top harmful and
    helpful nodes."""
    debiasing: Annotated[list[ExportDebiasing] | None, WrapValidator(lenient)] = None
    """Per budget: requested, deleted, the deleted nodes, the estimated ΔΓ, and the metrics before and after."""
    validation: Annotated[ExportValidation | None, WrapValidator(lenient)] = None
    """Estimated against actual ΔΓ: count, Pearson, Spearman, per-part correlations."""
    edges: Annotated[ExportEdges | None, WrapValidator(lenient)] = None
    """The bias attributed to edges (an audit run with ``edges``): counts, the top harmful and helpful edges and
    the cross-group summary; not computed: nulls and the reason."""
    warnings: list[str] = Field(default_factory=list)
    graph: Annotated[ExportGraph | None, WrapValidator(lenient)] = None
    """The graph audited (as in the audit's results)."""
    model: Annotated[ExportModel | None, WrapValidator(lenient)] = None
    """The model audited (as in the audit's results)."""
