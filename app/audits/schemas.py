"""Audit requests and audit state. Defaults are the BIND paper's (GCN, 1 layer, 16 hidden, 1000 epochs)."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    WrapValidator,
    computed_field,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from app.audits.config_schema import AuditConfigRead
from app.audits.pace import time_left
from app.audits.result_schemas import AuditResultsRead, StoredModel, lenient
from app.core.db.base import utcnow
from bind_core.pipeline import MAX_EPOCHS, UNTRAINED

AuditState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
AuditStage = Literal["training", "metrics", "influence", "debiasing", "validation"]
STAGE_ORDER: tuple[AuditStage, ...] = get_args(AuditStage)
"""bind_core's :data:`~bind_core.pipeline.config.STAGES`, in their order (``tests/app/api/test_api_stages.py``)."""


class ModelSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN: "a finite number", not a bound

    arch: Literal["gcn", "gin", "sage", "gat"] = "gcn"
    layers: StrictInt = Field(default=1, ge=1, le=8)
    hidden: StrictInt = Field(default=16, ge=1, le=4096)
    dropout: StrictFloat = Field(default=0.5, ge=0.0, lt=1.0)
    heads: StrictInt = Field(default=1, ge=1, le=16, description="Attention heads (GAT only).")
    v2: StrictBool = Field(
        default=False,
        description="GAT only: GATv2's layers (PyG's GATv2Conv: the scores' activation before the attention vector).",
    )
    residual: StrictBool = Field(
        default=False, description="GAT only: each layer adds a linear map of its input (PyG's residual)."
    )
    normalize: StrictBool = Field(
        default=False,
        description="SAGE only: each layer's output divided by its L2 norm, node by node (PyG's SAGEConv normalize).",
    )


class TrainingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN: "a finite number", not a bound

    epochs: StrictInt = Field(
        default=1000,
        ge=0,
        le=MAX_EPOCHS,
        description="Adam epochs (full batch; the best validation epoch's weights are kept). 0: no Adam epoch, the "
        "polish alone trains the model from its seeded initial weights; refused where the polish does not run "
        "(polish false here, or left unset for a deeper model or GAT), which would audit an untrained model.",
    )
    lr: StrictFloat = Field(default=1e-3, gt=0.0, le=10.0)
    weight_decay: StrictFloat = Field(default=1e-4, ge=0.0, le=10.0)
    seed: StrictInt = Field(default=10, ge=0, le=2**31 - 1)
    polish: StrictBool | None = Field(
        default=None,
        description="Finish training at a stationary point (float64 L-BFGS, then Newton). Unset: where the estimate "
        "is the paper's influence function (one-layer GCN, GIN, SAGE), which answers 'retrain without v' there; not "
        "for deeper models or GAT, whose step estimate is defined at any weights: they are audited as Adam leaves "
        "them (its best validation epoch), as a user trains them.",
    )
    newton_seconds: StrictFloat = Field(
        default=900.0,
        gt=0.0,
        le=86_400.0,
        description="Time the polish's Newton finish may take to bring the model to a stationary point; a model "
        "left short of one is audited as it is, with its gradient reported under stationarity.",
    )
    batch_size: StrictInt = Field(
        default=0,
        ge=0,
        le=100_000_000,
        description="0: full-batch Adam epochs (the paper's). Above 0: an Adam step per batch of this many training "
        "nodes, on neighbours sampled per layer (fan_out); multi-layer GCN, GIN and SAGE only. The polish that follows "
        "is always exact (full-batch objective), so the audited weights do not depend on the sampling.",
    )
    fan_out: list[StrictInt] = Field(
        default_factory=list,
        max_length=8,
        description="With batch_size: neighbours sampled per layer, the batch's own neighbours first (as PyG's "
        "num_neighbors); -1 takes every neighbour. Empty: every neighbour at every layer.",
    )

    optimizer: Literal["adam", "sgd"] = Field(
        default="adam", description="adam (the paper's) or sgd (with momentum); weight_decay is the coupled L2 term."
    )
    momentum: StrictFloat = Field(default=0.0, ge=0.0, lt=1.0, description="SGD's momentum (optimizer sgd only).")
    patience: StrictInt = Field(
        default=0,
        ge=0,
        le=1_000_000,
        description="Early stopping: 0 runs every epoch; k > 0 stops once the validation loss has not improved for k "
        "epochs (the best epoch's weights are kept).",
    )

    @field_validator("fan_out")
    @classmethod
    def _fan_out_entries(cls, value: list[int]) -> list[int]:
        if any(n == 0 or n < -1 for n in value):
            raise ValueError("each entry is a positive number of neighbours, or -1 for every neighbour")
        return value

    @model_validator(mode="after")
    def _trained(self) -> Self:
        if self.epochs == 0 and self.polish is False:  # named as the field at fault, not the section
            error = InitErrorDetails(
                type=PydanticCustomError("untrained", UNTRAINED.split(": ", 1)[1]), loc=("epochs",), input=0
            )
            raise ValidationError.from_exception_data(type(self).__name__, [error])
        return self


PRINTABLE = r"^[^\x00-\x1f\x7f]+$"
"""Names hold no control characters (Postgres text cannot hold NUL; a name is looked up before anything else)."""


class AuditCreate(BaseModel):
    """What to audit (an uploaded graph or a built-in dataset, exactly one) and how."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN: "a finite number", not a bound

    graph_id: uuid.UUID | None = None
    dataset: str | None = Field(default=None, min_length=1, max_length=100, pattern=PRINTABLE)
    graph_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=PRINTABLE,
        description="A graph by name: its latest version when queued.",
    )
    model_id: uuid.UUID | None = Field(
        default=None, description="Audit this supplied model (POST /v1/models) instead of training one; its graph."
    )
    model: ModelSettings = Field(default_factory=ModelSettings)
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    lam: StrictFloat = Field(default=0.5, ge=0.0, le=1.0, description="Γ = lam·Γ_SP + (1−lam)·Γ_EO.")
    solver: Literal["auto", "exact", "cg", "lissa", "lanczos"] = "auto"
    non_iid: StrictBool = Field(default=True, description="Include BIND's non-i.i.d. (neighbourhood) term.")
    budgets: list[StrictFloat] = Field(
        default=[0.01, 0.1],
        max_length=32,
        description="Debiasing budgets: fractions (<1) or whole counts (>=1, at most the training nodes: more is "
        "refused, for an uploaded graph before queueing, else when the audit starts) of the training set to delete.",
    )
    bootstrap: StrictInt = Field(
        1000, ge=0, le=100_000, description="Bootstrap resamples for the metrics' confidence intervals; 0 disables."
    )
    level: StrictFloat = Field(0.95, gt=0.0, lt=1.0, description="Coverage of the confidence intervals.")
    validation_sample: StrictInt = Field(
        default=50,
        ge=0,
        le=10_000,
        description="Training nodes whose estimate is checked by re-optimising the model without them; 0 disables.",
    )
    stages: list[AuditStage] = Field(
        default=list(STAGE_ORDER),
        max_length=len(STAGE_ORDER),
        description="The stages to run, as the command line's --skip leaves them: training and metrics always run "
        "(listed or not); influence, debiasing and validation when listed (debiasing and validation need influence). "
        "Stored in this order, with training and metrics.",
    )
    min_group_size: StrictInt = Field(
        default=0,
        ge=0,
        le=10_000_000,
        description="Groups with fewer test nodes are reported (breakdown, warning) but kept out of every fairness "
        "metric, Γ and the influence objective; 0 keeps every group.",
    )
    stability_seeds: list[StrictInt] = Field(
        default=[],
        max_length=10,
        description="Retrain with each of these training seeds (2 or more, distinct) and report the overlap of the "
        "top-k harmful sets; empty disables (each seed retrains the model).",
    )
    stability_k: StrictInt = Field(default=10, ge=1, le=100_000, description="k of the top-k harmful sets compared.")
    debias_utility: StrictBool = Field(
        default=False,
        description="Debias only with harmful nodes whose deletion is not estimated to raise the validation loss "
        "(utility-aware BIND); false: the paper's method.",
    )
    refine_steps: StrictInt = Field(
        default=0,
        ge=0,
        le=10_000,
        description="0 keeps the influence function's estimates; n > 0 re-optimises every training node's deletion "
        "approximately with up to n trust-region steps on the trained model's Hessian (models of at most 5000 "
        "parameters; for those where one Newton step is not enough, e.g. a one-layer GIN). Slower.",
    )

    estimator: Literal["auto", "linear", "step"] = Field(
        default="auto",
        description="linear: the paper's influence function (one solve, Γ linearised); step: damped Newton steps "
        "per training node with Γ evaluated exactly on the graph without it, answering the proximal response "
        "(retraining without the node while staying near the trained weights; models of at most 5000 parameters); "
        "auto: step for multi-layer and attention models and for one-layer models whose weights are not stationary "
        "(a supplied model as given), linear otherwise. The self-check's ground truth follows.",
    )

    debias_seeds: list[StrictInt] = Field(
        default=[],
        max_length=10,
        description="Check each debiasing budget against chance: retrain with each of these training seeds (3 or "
        "more, distinct) the unchanged graph (the seed noise floor), the graph without the selected nodes and "
        "without debias_random_sets random sets of the same size; each budget then reports both effects, their "
        "spread and whether the selection beats random deletion beyond twice the noise. Empty disables.",
    )
    debias_random_sets: StrictInt = Field(default=3, ge=1, le=20, description="Random sets per budget for that check.")
    chance_seconds: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="Without debias_seeds, run the check against chance anyway (seeds 1, 10, 100) when it is cheap: "
        "when its retrainings times the audited model's own training seconds come to at most this many seconds. "
        "0 (the service's default, so that the cost quoted before queueing is the cost run) never; each debiasing "
        "row's chance_rule says whether it ran and why. The command line's bind-audit run uses 60.",
    )
    debias_retrain: Literal["audit", "adam"] = Field(
        default="audit",
        description="How every retraining of the debiasing stage trains (each budget's retrain after the deletion, "
        "the check against chance and the edge debiasing). audit: as the audited model was trained (Adam, then the "
        "polish to a stationary point). adam: the same settings without the polish (Adam alone, keeping its best "
        "validation epoch, as a user trains); each row's before is then the unchanged graph retrained so too. Use "
        "adam for multi-layer models: there the polish costs minutes per retraining and polished models from "
        "different seeds land in different minima, whose noise swamps the check against chance.",
    )
    edges: StrictBool = Field(
        default=False,
        description="Also attribute the bias to every undirected edge (ΔΓ of deleting it, reusing the node "
        "estimate's solve): results.edges and GET /v1/audits/{id}/edges. One-layer GCN, GIN and SAGE; for other "
        "models results.edges says why it is empty. Off by default: its cost grows with the sum of squared degrees "
        "(about 1.1x the node estimate's time on Income, 10x on Recidivism).",
    )
    edge_budgets: list[float] = Field(
        default=[0.0025, 0.01],
        max_length=10,
        description="With edges and debias_seeds (and the debiasing stage): for each budget, a fraction in (0, 1] of "
        "the edges whose deletion changes anything, delete the most harmful edges, retrain with every debias seed "
        "and compare with deleting random edges from the same pool (results.edges.debiasing). Keep them small: at "
        "5-10% the summed estimates exceed Γ and deleting them raised bias on Income and Recidivism.",
    )
    edge_validation_sample: StrictInt = Field(
        default=30,
        ge=0,
        le=10_000,
        description="With edges attributed and the validation stage: edges, drawn at random among those whose deletion "
        "changes anything, whose estimate is checked by deleting the edge and re-optimising the model "
        "(results.edges.validation); 0 disables.",
    )
    reference: Literal["as_given", "polished"] = Field(
        default="as_given",
        description="For a supplied model (model_id): which model the audit describes. as_given: the supplied weights "
        "as they are (every metric from their own forward pass; the influence estimate answers the proximal Bregman "
        "response, defined at any weights). polished: a copy re-optimised to a stationary point first (for "
        "research); the supplied model's metrics and the share of test predictions that differ are then reported "
        "beside it (results.supplied_model.comparison). Ignored for a model the audit trains.",
    )

    @field_validator("debias_seeds")
    @classmethod
    def _three_seeds(cls, seeds: list[int]) -> list[int]:
        if seeds and (len(seeds) < 3 or len(set(seeds)) != len(seeds) or any(not 0 <= s < 2**31 for s in seeds)):
            raise ValueError("give three or more distinct seeds in [0, 2^31), or none")
        return seeds

    @field_validator("stability_seeds")
    @classmethod
    def _distinct_seeds(cls, seeds: list[int]) -> list[int]:
        if len(seeds) == 1 or len(set(seeds)) != len(seeds) or any(not 0 <= s < 2**31 for s in seeds):
            raise ValueError("give two or more distinct seeds in [0, 2^31), or none")
        return seeds

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if self.model_id is not None and self.dataset is not None:
            raise ValueError("a supplied model (model_id) is audited on its own graph, not a dataset")
        if self.graph_name is not None and (self.graph_id is not None or self.dataset is not None):
            raise ValueError("give one of graph_id, graph_name and dataset")
        if self.graph_name is None and self.model_id is None and (self.graph_id is None) == (self.dataset is None):
            raise ValueError("give exactly one of graph_id, graph_name and dataset")
        return self

    @field_validator("stages")
    @classmethod
    def _known_order(cls, stages: list[AuditStage]) -> list[AuditStage]:
        if len(set(stages)) != len(stages):
            raise ValueError("name each stage once")
        for later in ("debiasing", "validation"):
            if later in stages and "influence" not in stages:
                raise ValueError(f"{later} needs influence: add influence, or leave {later} out")
        return [s for s in STAGE_ORDER if s in {"training", "metrics", *stages}]

    @field_validator("edge_budgets")
    @classmethod
    def _edge_fractions(cls, budgets: list[float]) -> list[float]:
        if any(not 0 < b <= 1 for b in budgets):
            raise ValueError("edge budgets must be fractions in (0, 1]")
        return budgets

    @field_validator("budgets")
    @classmethod
    def _positive_budgets(cls, budgets: list[float]) -> list[float]:
        if any(not (0 < b < float("inf")) for b in budgets):
            raise ValueError("budgets must be positive and finite")
        if any(b >= 1 and b != int(b) for b in budgets):
            raise ValueError("a budget of 1 or more is a count of nodes and must be a whole number")
        return budgets

    def config_dict(self) -> dict[str, Any]:
        """The input of ``bind_core.pipeline.audit.AuditConfig.from_dict``."""
        return self.model_dump(mode="json", exclude={"graph_id", "dataset", "model_id", "graph_name"})


class StoredFieldError(StoredModel):
    """One offending input of a problem (as :class:`app.core.problem_schema.FieldError`)."""

    field: str | None = Field(None, description="string: dotted path of the offending input")
    message: str | None = Field(None, description="string: what is wrong with it")
    file: str | None = Field(None, description="string: the uploaded file it is in")
    rows: list[int] | None = Field(None, description="integers: up to five offending rows, 1-based")
    values: list[str] | None = Field(None, description="strings: the offending values at those rows")
    count: int | None = Field(None, description="integer: how many rows are at fault in all")


class StoredProblem(StoredModel):
    """The RFC 9457 problem that stopped a failed audit (as :class:`app.core.problem_schema.Problem`, with the
    problem type's own members, e.g. ``limits``), served as stored."""

    type: str | None = Field(None, description="string: the problem type's URI")
    title: str | None = Field(None, description="string: its short summary")
    status: int | None = Field(None, description="integer: the HTTP status it stands for")
    detail: str | None = Field(None, description="string: what went wrong in this audit")
    instance: str | None = Field(None, description="string: the audit it concerns")
    errors: list[StoredFieldError] | None = Field(None, description="the offending inputs, where there are some")


class AuditSummary(BaseModel):
    """An audit's state, as listed (``GET /v1/audits/{id}`` adds its config and results)."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    state: AuditState
    stage: str | None
    """The stage running now or last: training, metrics, influence, debiasing, validation."""
    progress: float
    """Progress of the audit, 0 to 1."""
    attempts: int
    device: str | None
    """Where it ran: ``cpu`` or ``cuda:N``."""
    graph_id: uuid.UUID | None
    """Null for a dataset audit, or once the graph was deleted."""
    graph_version: int | None = None
    """The version of the graph audited (see ``GET /v1/graphs?name=``)."""
    dataset: str | None
    model_id: uuid.UUID | None = None
    """The supplied model audited, if any (null: the audit trained its own, or the model was deleted)."""
    error: Annotated[StoredProblem | None, WrapValidator(lenient)]
    """When failed: an RFC 9457 problem document."""
    warnings: list[str] | None = None
    """The audit's warnings known so far, one sentence each (null: none known yet). While it runs, those known once
    its model and metrics are in, before the estimate's minutes: a supplied model that does no better than a constant
    on its own training nodes (fed inputs it never saw), outputs in another order, groups too small to measure; once
    it succeeded, the results' full list (``results.warnings``)."""
    warning_codes: list[str] | None = None
    """Each warning's stable code, in the order of ``warnings`` (``training_fit``, ``output_order``,
    ``few_positives``...; the API's docs list them): what a machine acts on, where the sentences may be reworded. Null
    where ``warnings`` is, and for audits from before 2026-12-07."""
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    pace: dict[str, Any] | None = Field(None, exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def time_left(self) -> TimeLeftRead | None:
        """While it runs: how long it has left (``app.audits.pace``); null otherwise, and before its first stage."""
        return time_left_read(self.state, self.pace)


def time_left_read(state: str, pace: dict[str, Any] | None) -> TimeLeftRead | None:
    """A running job's time left as of now, from its recorded pace; None unless it runs and has one."""
    if state != "running":
        return None
    found = time_left(pace, utcnow())
    return TimeLeftRead(**dataclasses.asdict(found)) if found is not None else None


class TimeLeftRead(BaseModel):
    """A running audit's time left, as of the request. The running stage's comes from its pace so far (progress
    within a stage is close to linear in time; in its first 2 s and 5%, from an earlier run); the stages after it's
    from how long they took in the latest earlier audit of the same request or schedule, and without one the whole
    audit's is null. ``basis`` says which."""

    seconds: float | None
    """number: seconds the whole audit has left, or null (``basis`` says why)."""
    stage_seconds: float | None
    """number: seconds the running stage has left, or null (it has just begun)."""
    basis: str
    """string: how the figures were reached, or why they are null."""


class AuditRead(AuditSummary):
    """An audit's state and, when it succeeded, its results."""

    config: Annotated[AuditConfigRead, WrapValidator(lenient)]
    """The full ``bind_core.pipeline.audit.AuditConfig`` it runs with (defaults filled in)."""
    results: Annotated[AuditResultsRead | None, WrapValidator(lenient)]
    """When succeeded: everything the audit produced, typed (``bind_core/pipeline/results.py``, served through
    ``app/audits/result_schemas.py``): ``metrics``, ``influence_summary``, ``top_harmful``, ``debiasing``,
    ``validation``, ``stationarity``, ``timings``, ``warnings``..."""


class AuditPage(BaseModel):
    items: list[AuditSummary]
    next_page_token: str | None = None
