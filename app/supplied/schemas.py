"""Supplied models (``/v1/models``) as the API shows them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import TYPE_CHECKING, TypeAlias

from pydantic import BaseModel, ConfigDict

from app.core.db.tables import SuppliedModel, VersionOutputs
from app.core.records import StoredModel, model_for
from bind_core import ModelDocument
from bind_core.pipeline import OutputOrder, OutputsMatch, TrainingFit, UnknownCategories

if TYPE_CHECKING:
    ModelDocumentRead: TypeAlias = StoredModel
    TrainingFitRead: TypeAlias = StoredModel
    OutputOrderRead: TypeAlias = StoredModel
    OutputsMatchRead: TypeAlias = StoredModel
else:
    ModelDocumentRead = model_for(ModelDocument)
    """A model's description in this project's form (``bind_core.ModelDocument``)."""
    TrainingFitRead = model_for(TrainingFit)
    OutputOrderRead = model_for(OutputOrder)
    OutputsMatchRead = model_for(OutputsMatch)


class RegistrationFit(BaseModel):
    """The model read on its graph's training nodes when it was registered, as an audit's ``supplied_model`` says
    it: how well it fits them against a constant and a uniform guess, and whether its outputs rank the labels below
    chance (their order reversed)."""

    training_fit: TrainingFitRead | None = None
    output_order: OutputOrderRead | None = None
    outputs: OutputsMatchRead | None = None
    """Where the registration was given the model's own outputs (``outputs``): the model as read gives them
    (``matches``), on how many nodes and how closely; null where none were given."""


class ModelRead(BaseModel):
    """A registered GNN: its graph, its ``bind_core`` config (architecture, dimensions) and size."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    graph_id: uuid.UUID
    name: str
    config: ModelDocumentRead
    """``format``, ``model`` (arch, layers, hidden...), ``training``, ``in_dim``, ``num_classes``, ``dtype``; for a
    model registered in the ``torch_geometric`` form, ``source`` (its class, constructor arguments and loss)."""
    size_bytes: int
    """Size of the safetensors weights."""
    unknown_categories: UnknownCategories = "refuse"
    """Audited on a later version of its graph, what a category its encoder never saw (a one-hot column
    ``column=value`` the registration lacks) becomes: ``refuse`` (the audit fails with ``model-does-not-fit``, naming
    it) or ``ignore`` (the column is left out and its nodes read as none of the model's categories of that column, as
    an encoder fitted once and set to ignore unknown values gives them; ``supplied_model.carried.ignored``). Fixed
    at registration, as the weights are: every audit of the model reads its inputs one way (register it again to
    read them another)."""
    created_at: datetime
    warnings: list[str] = []
    """What the registration found to check before auditing the model (kept with it): e.g. that the graph's features
    were min-max scaled at upload (``summary.features_scaled``), or that on its own training nodes it does no better
    than a constant (fed other inputs than it was trained on), as an audit would warn."""
    warning_codes: list[str] = []
    """The code of each of ``warnings``, in their order (``scaled_inputs``, ``training_fit``, ``output_order``; the
    audit's codes)."""
    fit: RegistrationFit | None = None
    """The model read on its graph's training nodes when it was registered; null where ``fit_not_checked`` says why
    it was not read."""
    fit_not_checked: str | None = None
    """Why the registration did not read the model on its graph (a graph above 200,000 nodes, or a model registered
    before the reading was kept); null otherwise."""
    outputs_pending: bool = False
    """The model's own outputs were given but its graph is too large for a registration to compare them: they are
    kept, and its first audit on that graph compares them (its results' ``supplied_model.outputs``; a model that does
    not give them fails it, ``outputs-differ``), after which ``fit.outputs`` holds the match."""

    @classmethod
    def of(cls, row: SuppliedModel) -> ModelRead:
        """The row, with what its registration found reading the model on its graph."""
        read = cls.model_validate(row)
        kept = row.registration
        if kept is None:
            return read.model_copy(update={"fit_not_checked": NOT_KEPT})
        fit = kept.get("fit")
        return read.model_copy(
            update={
                "warnings": list(kept.get("warnings") or []),
                "warning_codes": list(kept.get("warning_codes") or []),
                "fit": RegistrationFit.model_validate(fit) if fit is not None else None,
                "fit_not_checked": kept.get("fit_not_checked"),
                "outputs_pending": bool(kept.get("outputs_pending")),
            }
        )


NOT_KEPT = (
    "the model was registered before its registration's reading was kept: an audit of it checks its fit in its first "
    "seconds (warning codes training_fit, output_order)"
)


class ModelPage(BaseModel):
    items: list[ModelRead]
    next_page_token: str | None = None


class VersionOutputsRead(BaseModel):
    """A supplied model's own outputs on one version of its graph (``PUT /v1/models/{id}/outputs/{graph_id}``)."""

    model_id: uuid.UUID
    graph_id: uuid.UUID
    graph_version: int
    outputs_name: str
    """The file's name as uploaded (``.npy`` or ``.csv``)."""
    size_bytes: int
    match: OutputsMatchRead | None = None
    """The model as an audit reads that version (its inputs carried over to the registration's) gives them
    (``matches``), on how many nodes and how closely; null until compared: on a graph above 200,000 nodes the
    model's first audit on that version compares them (and fails ``outputs-differ`` where they differ)."""
    created_at: datetime

    @classmethod
    def of(cls, row: VersionOutputs, graph_version: int) -> VersionOutputsRead:
        return cls.model_validate(
            {
                "model_id": row.model_id,
                "graph_id": row.graph_id,
                "graph_version": graph_version,
                "outputs_name": row.outputs_name,
                "size_bytes": row.size_bytes,
                "match": row.match,
                "created_at": row.created_at,
            }
        )


class VersionOutputsPage(BaseModel):
    items: list[VersionOutputsRead]
    next_page_token: str | None = None
