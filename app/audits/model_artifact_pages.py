"""Reading an audit's retrained models (``model_artifacts``) for the API and the console: pages of them with each
budget's headline, one model's parts, and registering one as a supplied model (through ``app.supplied.service``:
the same checks as an upload)."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session, defer

from app.audits.service import get_audit
from app.core.db.tables import Audit, Graph, ModelArtifact, SuppliedModel, Tenant
from app.core.errors import Conflict, ProblemError
from app.core.pagination import decode_token, encode_token, int64_part, invalid_token, uuid_part
from app.supplied import service as supplied
from bind_core.pipeline import UnknownCategories

HEADLINE = ("accuracy", "delta_sp", "delta_eo", "gamma")
"""The after-metrics a listed model shows (the full row is the audit's ``results.debiasing``)."""


def finished_audit(session: Session, tenant: Tenant, audit_id: uuid.UUID) -> Audit:
    """The tenant's audit, succeeded.

    Raises:
        NotFound: no such audit for this tenant (``audit-not-found``).
        Conflict: it has not succeeded (``audit-not-succeeded``).
    """
    audit = get_audit(session, tenant, audit_id)
    if audit.state != "succeeded":
        raise Conflict(
            f"Audit {audit.id} is {audit.state}; its retrained models exist only once it has succeeded.",
            slug="audit-not-succeeded",
            title="Audit has not succeeded",
        )
    return audit


def _order() -> tuple[Any, ...]:
    return (ModelArtifact.source, func.coalesce(ModelArtifact.budget_index, -1), ModelArtifact.id)


def artifact_page(
    session: Session, tenant: Tenant, audit_id: uuid.UUID, *, limit: int, token: str | None
) -> tuple[Audit, list[ModelArtifact], str | None]:
    """One page of the audit's retrained models: the budgets in order, then the what-ifs.

    Raises:
        NotFound, Conflict: see :func:`finished_audit`; also ``models-not-kept`` (409) when the audit kept none.
        BadRequest: a page token this listing did not issue.
    """
    audit = finished_audit(session, tenant, audit_id)
    stmt = select(ModelArtifact).options(defer(ModelArtifact.weights)).where(ModelArtifact.audit_id == audit.id)
    if token is not None:
        source, index, ident = decode_token(token, "audit-models", 3)
        if not isinstance(source, str):
            raise invalid_token()
        stmt = stmt.where(tuple_(*_order()) > tuple_(source, int64_part(index), uuid_part(ident)))
    rows = list(session.scalars(stmt.order_by(*_order()).limit(limit + 1)))
    if not rows and token is None:
        raise Conflict(
            f"Audit {audit.id} kept no retrained models: its debiasing stage did not run (or had no budgets), or "
            "it finished before retrained models were kept.",
            slug="models-not-kept",
            title="No retrained models",
        )
    if len(rows) <= limit:
        return audit, rows, None
    last = rows[limit - 1]
    key = [last.source, -1 if last.budget_index is None else last.budget_index, str(last.id)]
    return audit, rows[:limit], encode_token("audit-models", key)


def get_artifact(session: Session, tenant: Tenant, audit_id: uuid.UUID, model_id: uuid.UUID) -> ModelArtifact:
    """One of the audit's retrained models (its weights loaded when asked for).

    Raises:
        NotFound, Conflict: see :func:`finished_audit`; ``audit-model-not-found`` (404): no such model of it.
    """
    audit = finished_audit(session, tenant, audit_id)
    row = session.scalar(select(ModelArtifact).where(ModelArtifact.id == model_id, ModelArtifact.audit_id == audit.id))
    if row is None:
        raise ProblemError(
            f"Audit {audit.id} has no retrained model with id {model_id}.",
            status=404,
            title="Not found",
            slug="audit-model-not-found",
        )
    return row


def kept_weights(row: ModelArtifact) -> bytes:
    """The model's safetensors bytes.

    Raises:
        Conflict: ``weights-not-kept`` (409): they were over the size limit (the row's ``note``).
    """
    if row.weights is None:
        raise Conflict(row.note or "The weights were not kept.", slug="weights-not-kept", title="Weights not kept")
    return row.weights


def budget_row(audit: Audit, row: ModelArtifact) -> dict[str, Any] | None:
    """The audit's ``results.debiasing`` row of a budget's model (``None`` for another source)."""
    rows = (audit.results or {}).get("debiasing") or []
    index = row.budget_index
    if row.source != "debias" or index is None or not 0 <= index < len(rows):
        return None
    found: dict[str, Any] = rows[index]
    return found


def register_artifact(
    session: Session, tenant: Tenant, audit_id: uuid.UUID, model_id: uuid.UUID, name: str | None
) -> SuppliedModel:
    """Register one of the audit's retrained models as a supplied model of the audit's graph, checked as an upload
    is (``app.supplied.service.check_model``). An audit of a supplied model on another version of its graph read that
    version as the model's registration did (``supplied_model.carried``), and retrained on it so: the retrained
    model is registered for the registration's graph version, whose columns and scaling it was trained on (audited on
    any version of that graph, its inputs are carried over as the audit's were), and read on it as a registration
    reads an uploaded model (``supplied.read_at_registration``). CPU-heavy: call from a worker thread.

    Raises:
        NotFound, Conflict: see :func:`get_artifact` and :func:`kept_weights`; ``audit-has-no-graph`` (409): the
            audit ran on a built-in dataset, or its graph (or the version its inputs were carried to) was deleted;
            ValidationProblem: the graph no longer fits.
    """
    row = get_artifact(session, tenant, audit_id, model_id)
    weights = kept_weights(row)
    audit = get_audit(session, tenant, audit_id)
    graph_id = _trained_on(session, tenant, audit)
    if graph_id is None:
        raise Conflict(
            f"Audit {audit.id} has no graph to register the model for (it ran on a built-in dataset, or its graph "
            "was deleted); download the weights and config instead.",
            slug="audit-has-no-graph",
            title="Audit has no graph",
        )
    return supplied.register(
        session,
        tenant,
        graph_id,
        weights,
        dict(row.config),
        name=name,
        unknown_categories=_reads_unknown_categories(session, audit),
        default_name=_default_name(audit, row),
    )


def _reads_unknown_categories(session: Session, audit: Audit) -> UnknownCategories:
    """How the retrained model reads a later version's unseen category: as the supplied model the audit retrained
    from did (its inputs were read so), ``refuse`` for a model the audit trained or one since deleted."""
    if audit.model_id is None:
        return "refuse"
    found = session.scalar(select(SuppliedModel.unknown_categories).where(SuppliedModel.id == audit.model_id))
    return supplied.parse_unknown_categories(found)


def _trained_on(session: Session, tenant: Tenant, audit: Audit) -> uuid.UUID | None:
    """The graph version whose columns and scaling the audit's retrained models read: the audit's graph, or where the
    audit carried a supplied model's inputs over to its registration's (``supplied_model.carried``), that version
    (``None`` when it is gone)."""
    carried = (((audit.results or {}).get("supplied_model") or {}).get("carried")) or {}
    registered = carried.get("registered_graph_id") if isinstance(carried, dict) else None
    if not registered:
        return audit.graph_id
    found = session.scalar(select(Graph.id).where(Graph.id == uuid.UUID(str(registered)), Graph.tenant_id == tenant.id))
    return found


def _default_name(audit: Audit, row: ModelArtifact) -> str:
    found = budget_row(audit, row)
    if found is not None:
        return f"audit {str(audit.id)[:8]}, budget {found.get('budget')} ({found.get('deleted')} nodes deleted)"
    return f"audit {str(audit.id)[:8]}, {row.source} {row.what_if_id or row.budget_index}"


def artifact_label(row: ModelArtifact) -> str:
    """A kept model's name in file names: ``budget-<index>`` or ``what-if-<job id>``."""
    return f"budget-{row.budget_index}" if row.source == "debias" else f"what-if-{row.what_if_id}"
