"""The models an audit retrained, kept to take away (``model_artifacts``): each debiasing budget's (and, later, each
verified what-if's) safetensors weights and config in the form of the audited model.

:func:`store_model_artifact` is what a job that retrains a model calls; :func:`export_form` says in which form.
Weights over ``BIND_MODEL_ARTIFACT_MAX_BYTES`` are not kept: the row keeps the config, the size, the hash and a note.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.core.db.tables import Audit, Graph, ModelArtifact, SuppliedModel
from bind_core import TrainedModel
from bind_core.pipeline import ExportedModel, export_model, retrained_form, weight_names


@dataclass(frozen=True)
class KeptModel:
    """What is kept of one retrained model, ready to store: its config, its weights unless over the cap (then
    ``note`` says so), and the weights' size and SHA-256 either way."""

    config: dict[str, Any]
    weights: bytes | None
    size_bytes: int
    sha256: str
    note: str | None = None

    @classmethod
    def of(cls, exported: ExportedModel, max_bytes: int) -> KeptModel:
        """``exported`` under the cap ``max_bytes`` (its weights dropped, with a note, when larger).

        Args:
            exported: the model's weights and config (:func:`bind_core.pipeline.export_model`).
            max_bytes: the largest weights kept (``BIND_MODEL_ARTIFACT_MAX_BYTES``).

        Returns:
            The kept model.
        """
        size, digest = exported.size_bytes, exported.sha256
        if size <= max_bytes:
            return cls(exported.config, exported.weights, size, digest)
        note = (
            f"The weights ({size} bytes) are over the {max_bytes}-byte limit (BIND_MODEL_ARTIFACT_MAX_BYTES); "
            "only the config was kept."
        )
        return cls(exported.config, None, size, digest, note)


def export_form(session: Session, audit_id: uuid.UUID) -> tuple[dict[str, Any] | None, list[str] | None]:
    """The form a model the audit retrains is handed back in: the audited supplied model's config (its ``classes``,
    where it names them, the audited graph's: a retrained model's outputs are in the graph's class order) and its
    weights' parameter names, or ``(None, None)`` for a model the audit trained itself (or a supplied model since
    deleted).

    Args:
        session: an open session.
        audit_id: the audit.

    Returns:
        ``(form, names)`` for :func:`bind_core.pipeline.export_model`.
    """
    row = session.execute(
        select(SuppliedModel.config, SuppliedModel.weights, Graph.summary)
        .join(Audit, Audit.model_id == SuppliedModel.id)
        .outerjoin(Graph, Graph.id == Audit.graph_id)
        .where(Audit.id == audit_id)
    ).one_or_none()
    if row is None:
        return None, None
    classes = (row.summary or {}).get("class_names") or []
    return retrained_form(row.config, classes), weight_names(row.weights)


def store_model_artifact(
    session: Session,
    *,
    tenant_id: uuid.UUID,
    audit_id: uuid.UUID,
    source: str,
    index_or_id: int | uuid.UUID,
    model: TrainedModel | KeptModel,
    max_bytes: int,
    form: dict[str, Any] | None = None,
    names: list[str] | None = None,
) -> ModelArtifact:
    """Keep a retrained model of an audit, in the caller's transaction, replacing one kept before under the same
    key (an earlier attempt's).

    Args:
        session: the caller's session.
        tenant_id: the audit's tenant.
        audit_id: the audit.
        source: ``"debias"`` (``index_or_id``: the budget's index) or ``"what_if"`` (``index_or_id``: its id).
        index_or_id: see ``source``.
        model: the retrained model (exported here in ``form``, :func:`export_form`), or one already kept.
        max_bytes: the largest weights kept (``BIND_MODEL_ARTIFACT_MAX_BYTES``).
        form: the audited model's form, for a ``TrainedModel``.
        names: the audited model's parameter names, for a ``TrainedModel``.

    Returns:
        The new row (flushed).
    """
    key = _key(source, index_or_id)
    kept = model if isinstance(model, KeptModel) else KeptModel.of(export_model(model, form, names), max_bytes)
    session.execute(
        delete(ModelArtifact).where(
            ModelArtifact.audit_id == audit_id,
            ModelArtifact.source == source,
            *(getattr(ModelArtifact, k) == v for k, v in key.items()),
        )
    )
    row = ModelArtifact(
        tenant_id=tenant_id,
        audit_id=audit_id,
        source=source,
        config=kept.config,
        weights=kept.weights,
        size_bytes=kept.size_bytes,
        sha256=kept.sha256,
        note=kept.note,
        **key,
    )
    session.add(row)
    session.flush()
    return row


def _key(source: str, index_or_id: int | uuid.UUID) -> dict[str, Any]:
    """The row's key columns for ``source``.

    Raises:
        ValueError: a key of the wrong kind for the source, or an unknown source.
    """
    if source == "debias" and isinstance(index_or_id, int):
        return {"budget_index": index_or_id}
    if source == "what_if" and isinstance(index_or_id, uuid.UUID):
        return {"what_if_id": index_or_id}
    raise ValueError(f"source {source!r} with {index_or_id!r}: 'debias' takes a budget index, 'what_if' a UUID")


@dataclass
class KeptModels:
    """The debiasing stage's sink (``bind_core.run_audit(keep=...)``): each budget's retrained model, exported in
    the audited model's form as soon as it is trained and held (capped) until the attempt stores its outcome
    (:func:`store_kept`)."""

    form: dict[str, Any] | None
    names: list[str] | None
    max_bytes: int
    kept: dict[int, KeptModel] = field(default_factory=dict)

    def __call__(self, index: int, model: TrainedModel) -> None:
        """Keep the ``index``-th budget's retrained ``model``."""
        self.kept[index] = KeptModel.of(export_model(model, self.form, self.names), self.max_bytes)


def store_kept(session: Session, audit_id: uuid.UUID, models: KeptModels) -> int:
    """Store an attempt's kept debiasing models, in the transaction that stores its results.

    Args:
        session: the outcome's session.
        audit_id: the audit.
        models: the attempt's sink.

    Returns:
        How many rows were stored.
    """
    tenant_id = session.scalar(select(Audit.tenant_id).where(Audit.id == audit_id))
    if tenant_id is None or not models.kept:
        return 0
    for index, kept in sorted(models.kept.items()):
        store_model_artifact(
            session,
            tenant_id=tenant_id,
            audit_id=audit_id,
            source="debias",
            index_or_id=index,
            model=kept,
            max_bytes=models.max_bytes,
        )
    return len(models.kept)
