"""The response model of an audit's ``config``: the full :class:`bind_core.pipeline.config.AuditConfig` it runs with
(``AuditConfig.to_dict``), defaults filled in. Served as stored (see :class:`app.audits.result_schemas.StoredModel`):
every key optional, unnamed keys kept."""

from __future__ import annotations

from pydantic import Field

from app.audits.result_schemas import StoredModel


class ModelConfigRead(StoredModel):
    """The architecture (:class:`bind_core.models.gnn.ModelConfig`)."""

    arch: str | None = Field(None, description="string: gcn, gin, sage or gat")
    layers: int | None = Field(None, description="integer: message-passing layers")
    hidden: int | None = Field(None, description="integer: hidden width")
    dropout: float | None = Field(None, description="number in [0, 1): dropout during training")
    heads: int | None = Field(None, description="integer: attention heads (GAT only)")
    activation: str | None = Field(
        None, description="string: gelu, relu, tanh, elu or identity (none, PyG's act null), between layers"
    )
    head: bool | None = Field(None, description="boolean: a linear head after the last layer")
    outputs: int | None = Field(None, description="integer: the last layer's width (0: the number of classes)")
    concat: bool | None = Field(None, description="boolean: GAT heads concatenated (else averaged)")
    attention: str | None = Field(None, description="string: GAT's attention function")
    negative_slope: float | None = Field(None, description="number: GAT's leaky-ReLU slope")
    v2: bool | None = Field(None, description="boolean: GATv2's layers (GAT only)")
    share_weights: bool | None = Field(None, description="boolean: a GATv2's source and target maps are one")
    residual: bool | None = Field(None, description="boolean: a GAT's layers add a linear map of their input")
    normalize: bool | None = Field(
        None, description="boolean: a SAGE's layers divide each node's output by its L2 norm"
    )
    head_activation: bool | None = Field(
        None, description="boolean: the head reads the last layer's output through the activation and dropout"
    )


class TrainingConfigRead(StoredModel):
    """The optimisation (:class:`bind_core.training.fit.TrainConfig`)."""

    epochs: int | None = Field(None, description="integer: Adam epochs")
    lr: float | None = Field(None, description="number: Adam's learning rate")
    weight_decay: float | None = Field(None, description="number: the L2 coefficient λ")
    seed: int | None = Field(None, description="integer: the seed of initialisation and dropout")
    polish: bool | None = Field(
        None,
        description="boolean: finish at a stationary point (L-BFGS, Newton); unset: where the estimate is the paper's "
        "influence function (one-layer GCN, GIN, SAGE), not for deeper models or GAT (audited as Adam leaves them)",
    )
    polish_max_iter: int | None = Field(None, description="integer: L-BFGS iteration cap")
    polish_tol: float | None = Field(None, description="number: the polish's gradient tolerance")
    keep: str | None = Field(None, description="string: best_val or last, the Adam weights kept")
    newton_seconds: float | None = Field(None, description="number: seconds the Newton finish may take")
    batch_size: int | None = Field(None, description="integer: training nodes per Adam step (0: full batch)")
    fan_out: list[int] | None = Field(None, description="integers: neighbours sampled per layer (-1: all)")


class AuditConfigRead(StoredModel):
    """Everything the audit runs with (see ``POST /v1/audits`` for each setting's meaning)."""

    model: ModelConfigRead | None = Field(None, description="the architecture")
    training: TrainingConfigRead | None = Field(None, description="the optimisation")
    lam: float | None = Field(None, description="number in [0, 1]: Γ = lam·Γ_SP + (1−lam)·Γ_EO")
    solver: str | None = Field(None, description="string: the inverse-Hessian solver")
    non_iid: bool | None = Field(None, description="boolean: BIND's non-i.i.d. term included")
    budgets: list[float] | None = Field(None, description="numbers: debiasing budgets (fractions < 1 or counts)")
    validation_sample: int | None = Field(None, description="integer: nodes of the self-check (0: off)")
    stages: list[str] | None = Field(None, description="strings: the stages asked for")
    bootstrap: int | None = Field(None, description="integer: bootstrap resamples (0: off)")
    level: float | None = Field(None, description="number in (0, 1): the intervals' coverage")
    min_group_size: int | None = Field(None, description="integer: smaller groups are left out of the metrics")
    stability_seeds: list[int] | None = Field(None, description="integers: seeds of the stability check")
    stability_k: int | None = Field(None, description="integer: k of the top-k sets compared")
    refine_steps: int | None = Field(None, description="integer: refinement steps (0: off)")
    debias_utility: bool | None = Field(None, description="boolean: utility-aware debiasing")
    estimator: str | None = Field(None, description="string: auto, linear or step")
    debias_seeds: list[int] | None = Field(None, description="integers: seeds of the check against chance")
    debias_random_sets: int | None = Field(None, description="integer: random sets per budget in that check")
    chance_seconds: float | None = Field(
        None, description="number: the check against chance runs by default when it costs at most this (0: never)"
    )
    debias_retrain: str | None = Field(
        None,
        description="string: audit (retrain as the audited model was trained: its recipe, with the polish where the "
        "recipe has it) or adam (Adam alone)",
    )
    edges: bool | None = Field(None, description="boolean: every edge's ΔΓ attributed too (results.edges)")
    edge_budgets: list[float] | None = Field(
        None, description="numbers in (0, 1]: edge debiasing budgets, fractions of the edges that change anything"
    )
    edge_validation_sample: int | None = Field(None, description="integer: edges of the edge self-check (0: off)")
    reference: str | None = Field(
        None, description="string: as_given (the supplied weights) or polished (a polished copy, the supplied beside)"
    )
