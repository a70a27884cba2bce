"""An audit's retrained models (``/v1/audits/{id}/models``) as the API shows them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bind_core.pipeline import UnknownCategories


class ArtifactLinks(BaseModel):
    """Where to fetch the model's parts and how to register it (``weights`` is null when they were not kept)."""

    weights: str | None = Field(description="GET: the safetensors weights (null when they were not kept).")
    config: str = Field(description="GET: the JSON config, in the form of the audited model.")
    # named apart from pydantic's BaseModel.register (ABCMeta's), which a field named so shadows with a warning; the
    # API's key is "register" all the same
    register_: str | None = Field(
        alias="register", description="POST: register the model as a supplied model (null without weights)."
    )


class ArtifactHeadline(BaseModel):
    """The retrained model's test metrics after the deletion (the budget's full row: ``results.debiasing``)."""

    accuracy: float | None = None
    delta_sp: float | None = None
    delta_eo: float | None = None
    gamma: float | None = None


class ArtifactRead(BaseModel):
    """One model the audit retrained: a debiasing budget's (``source: debias``), after deleting ``deleted``
    training nodes."""

    id: uuid.UUID
    source: Literal["debias", "what_if"]
    budget_index: int | None = Field(description="The budget's place in the audit's budgets (source debias).")
    budget: float | None = Field(description="The budget asked for: a fraction (< 1) or a count of training nodes.")
    deleted: int | None = Field(description="Training nodes deleted before the retraining.")
    what_if_id: uuid.UUID | None = None
    after: ArtifactHeadline | None = Field(description="Headline test metrics of the retrained model.")
    form: str = Field(description="The config's format: bind-audit/model@1 or torch_geometric (the audited model's).")
    weights_kept: bool
    note: str | None = Field(description="Why the weights were not kept (over BIND_MODEL_ARTIFACT_MAX_BYTES).")
    size_bytes: int
    sha256: str
    created_at: datetime
    links: ArtifactLinks


class ArtifactPage(BaseModel):
    items: list[ArtifactRead]
    next_page_token: str | None = None


class ArtifactRegister(BaseModel):
    """Register a retrained model as a supplied model of the audit's graph."""

    name: str | None = Field(default=None, max_length=200, description="A name (default: one naming the budget).")


class ArtifactConfig(BaseModel):
    """A retrained model's config, in the form of the audited model. ``bind-audit/model@1``: ``model``, ``training``,
    ``in_dim``, ``num_classes``, ``dtype``, ``history``, ``stationarity`` (``TrainedModel.config_dict``).
    ``torch_geometric``: ``class``, ``args`` (the constructor's), ``training`` (``loss`` and the recipe the
    retraining used), ``dtype`` (docs/API.md, supplied models)."""

    model_config = ConfigDict(extra="allow")

    format: Literal["bind-audit/model@1", "torch_geometric"]


class RegisteredModel(BaseModel):
    """The supplied model a retrained model was registered as (``GET /v1/models/{id}`` has its config)."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    graph_id: uuid.UUID
    name: str
    size_bytes: int
    unknown_categories: UnknownCategories = "refuse"
    """As the supplied model the audit retrained from reads a later version's unseen category (``refuse`` for a
    model the audit trained)."""
    created_at: datetime
