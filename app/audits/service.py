"""Audits: creating them (idempotently), reading, listing and cancelling them.

The row is the job's truth. Creating one inserts it ``queued`` and registers the Celery send to run
after the request's commit; if the broker is down then, the row stays ``queued`` and the worker's
sweeper sends it later.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import CursorResult
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from app.audits.budget import check_budget, cost_of
from app.audits.schemas import AuditCreate
from app.audits.tasks import send_run_audit
from app.core.db.base import utcnow
from app.core.db.session import after_commit
from app.core.db.tables import ACTIVE_STATES, Audit, Graph, SuppliedModel, Tenant
from app.core.errors import Conflict, NotFound, ValidationProblem
from app.core.pagination import newest_first
from app.core.publisher import Publisher
from app.core.settings import Settings
from app.datasets.lookup import present_dataset
from app.graphs.versions import resolve_name
from app.supplied.service import registered_model
from app.tenants.limits import check_queue_room
from bind_core import AuditConfig, BindError, ConfigError, read_document
from bind_core.pipeline import check_budgets, check_measurable_groups, planned_stages


def request_hash(body: AuditCreate) -> str:
    """SHA-256 of the request's canonical JSON (defaults filled in, keys sorted)."""
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def create_audit(
    session: Session,
    tenant: Tenant,
    body: AuditCreate,
    *,
    settings: Settings,
    publisher: Publisher,
    idempotency_key: str | None = None,
) -> tuple[Audit, bool]:
    """Insert a queued audit and send its task after the commit.

    Returns:
        ``(audit, created)``; ``created`` is False when ``idempotency_key`` replays an earlier request.

    Raises:
        Conflict: ``idempotency_key`` was used before with another body.
        ValidationProblem: unknown graph or dataset, or a configuration bind_core rejects.
        TenantQueueFull: the tenant already has ``BIND_TENANT_MAX_QUEUED`` queued audits (a replay is not refused).
    """
    digest = request_hash(body)
    if idempotency_key is not None:
        earlier = _replay(session, tenant, idempotency_key, digest)
        if earlier is not None:
            return earlier, False
    try:
        parsed = AuditConfig.from_dict(body.config_dict())
    except BindError as exc:
        raise ValidationProblem(str(exc), slug="invalid-config", title="Invalid audit configuration") from exc
    if body.graph_name is not None:
        body = body.model_copy(update={"graph_id": resolve_name(session, tenant, body.graph_name).id})
    if body.model_id is not None:
        body, parsed = _model_source(session, tenant, body, body.model_id, parsed)
    dataset, graph_version = _check_source(session, tenant, body, settings)
    check_queue_room(session, tenant, settings)
    _check_budget(session, body, parsed, settings)
    audit = Audit(
        tenant_id=tenant.id,
        graph_id=body.graph_id,
        dataset=dataset,
        model_id=body.model_id,
        graph_version=graph_version,
        config=parsed.to_dict(),
        request_hash=digest,
        idempotency_key=idempotency_key,
        state="queued",
        progress=0.0,
        attempts=0,
    )
    return _insert(session, tenant, audit, publisher)


def _insert(session: Session, tenant: Tenant, audit: Audit, publisher: Publisher) -> tuple[Audit, bool]:
    """Insert ``audit`` and send its task after the commit; a concurrent request with the same idempotency key that
    won the race is answered as it was."""
    try:
        with session.begin_nested():
            session.add(audit)
            session.flush()
    except IntegrityError:
        key = audit.idempotency_key
        earlier = _replay(session, tenant, key, audit.request_hash) if key else None
        if earlier is None:
            raise
        return earlier, False
    audit_id = audit.id
    after_commit(session, lambda: send_run_audit(publisher, audit_id))
    return audit, True


def _replay(session: Session, tenant: Tenant, key: str, digest: str) -> Audit | None:
    earlier = session.scalar(select(Audit).where(Audit.tenant_id == tenant.id, Audit.idempotency_key == key))
    if earlier is not None and earlier.request_hash != digest:
        raise Conflict(
            "This Idempotency-Key was used with a different request body.",
            slug="idempotency-key-reused",
            title="Idempotency key reused",
        )
    return earlier


def _model_source(
    session: Session, tenant: Tenant, body: AuditCreate, model_id: uuid.UUID, parsed: AuditConfig
) -> tuple[AuditCreate, AuditConfig]:
    """The request with the supplied model's graph filled in, and the audit's settings describing that model (its
    architecture and recipe, :meth:`AuditConfig.describing`); 422 for an unknown model or a graph that is not a
    version of the one it was registered for (another version is audited with the model's inputs carried over,
    :func:`app.graphs.model_inputs.carry_model_inputs`, or fails with ``model-does-not-fit``)."""
    refuse_trained_settings(body)
    model = registered_model(session, tenant, model_id, lock=True)
    graph_id = model.graph_id if body.graph_id is None else body.graph_id
    if graph_id != model.graph_id:
        name = session.scalar(select(Graph.name).where(Graph.id == graph_id, Graph.tenant_id == tenant.id))
        if name is not None and name != model.graph_name:  # no such graph: _check_source names it
            field = "graph_name" if body.graph_name is not None else "graph_id"
            why = f"not a version of {model.graph_name!r} (the model's {model.graph_id})"
            raise ValidationProblem(
                f"The model was registered for the graph {model.graph_name!r}; it is audited on a version of it.",
                errors=[{"field": field, "message": why}],
            )
    return body.model_copy(update={"graph_id": graph_id}), describing_supplied(parsed, model.config)


def refuse_trained_settings(body: AuditCreate, prefix: str = "") -> None:
    """422 naming each setting of a model the audit trains given beside ``model_id``: a supplied model's architecture
    and recipe are its config's (``GET /v1/models/{id}``), and taking them silently would describe a model nobody
    audited. ``training.seed`` stays: it seeds the audit's own samples. ``prefix`` goes before each field's name (a
    schedule's ``audit.``)."""
    named = (["model"] if "model" in body.model_fields_set else []) + [
        f"training.{k}" for k in sorted(body.training.model_fields_set - {"seed"})
    ]
    named = [prefix + name for name in named]
    if named:
        why = "a supplied model (model_id) is audited with its own architecture and training recipe, its config's"
        raise ValidationProblem(
            f"{', '.join(named)}: {why} (GET /v1/models/{{id}}); leave these out (training.seed, which seeds the "
            "audit's samples, may stay).",
            errors=[{"field": name, "message": f"{why}; leave it out"} for name in named],
        )


def describing_supplied(config: AuditConfig, supplied: dict[str, Any] | None) -> AuditConfig:
    """``config`` as the audit of the supplied model whose stored config is ``supplied`` runs it: that model's
    architecture and recipe (:meth:`AuditConfig.describing`), so that the stored settings and the cost estimate are
    the audited model's; ``config`` itself without a supplied model."""
    if supplied is None:
        return config
    try:
        document = read_document(supplied)  # read when the model was registered
    except BindError:  # a config of a form this version no longer reads: the worker says so when it loads the model
        return config
    try:
        return config.describing(document.model, document.training)
    except ConfigError as exc:  # the audit's settings refuse the model's recipe (debias_retrain adam with 0 epochs)
        raise ValidationProblem(str(exc), slug="invalid-config", title="Invalid audit configuration") from exc


def _check_source(
    session: Session, tenant: Tenant, body: AuditCreate, settings: Settings
) -> tuple[str | None, int | None]:
    """Check the graph or dataset exists for this tenant; return the canonical dataset name or the graph's
    version."""
    if body.graph_id is not None:
        # A share lock, so that the graph cannot be deleted before this audit is committed.
        stmt = select(Graph.version).where(Graph.id == body.graph_id, Graph.tenant_id == tenant.id)
        version = session.scalar(stmt.with_for_update(read=True))
        if version is None:
            raise ValidationProblem(
                f"No graph with id {body.graph_id}.", errors=[{"field": "graph_id", "message": "no such graph"}]
            )
        return None, version
    assert body.dataset is not None
    name = present_dataset(body.dataset, settings)
    return name, None


def _check_budget(session: Session, body: AuditCreate, config: AuditConfig, settings: Settings) -> None:
    """Refuse (422 ``resource-limit``) an audit of an uploaded graph whose estimated cost is over the limits; a
    built-in dataset's sizes are known only once loaded, so the worker checks those."""
    if body.graph_id is None:
        return
    summary = session.scalar(select(Graph.summary).where(Graph.id == body.graph_id))
    if summary is None:
        return
    supplied = None
    if body.model_id is not None:
        supplied = session.scalar(select(SuppliedModel.config).where(SuppliedModel.id == body.model_id))
    try:
        cost = cost_of(config, summary, supplied)
    except (BindError, KeyError, TypeError) as exc:  # a summary or model config of an older format
        raise ValidationProblem(f"cannot estimate the audit's cost: {exc}", slug="invalid-config") from exc
    check_budget(cost, settings)
    _check_budget_counts(config, summary)
    try:  # the groups the metrics can measure, from the summary: refused now rather than when the audit starts
        check_measurable_groups(summary, config.min_group_size)
    except ConfigError as exc:
        field = {"field": "min_group_size", "message": str(exc)}
        raise ValidationProblem(
            str(exc), slug="invalid-config", title="Invalid audit configuration", errors=[field]
        ) from exc


def _check_budget_counts(config: AuditConfig, summary: dict[str, Any]) -> None:
    """422 naming ``budgets`` when a count is more than the graph's training nodes (it was cut to them); a graph
    summary without ``train`` (an older one) is left to the worker, which refuses it before training."""
    train = summary.get("train")
    if not isinstance(train, int) or "debiasing" not in planned_stages(config):
        return
    try:
        check_budgets(config.budgets, train)
    except ConfigError as exc:
        field = {"field": "budgets", "message": str(exc).removeprefix("budgets: ")}
        raise ValidationProblem(
            str(exc), slug="invalid-config", title="Invalid audit configuration", errors=[field]
        ) from exc


def get_audit(session: Session, tenant: Tenant, audit_id: uuid.UUID) -> Audit:
    """The tenant's audit, or 404 (also for another tenant's audit)."""
    audit = session.scalar(select(Audit).where(Audit.id == audit_id, Audit.tenant_id == tenant.id))
    if audit is None:
        raise NotFound("audit", audit_id)
    return audit


def list_audits(
    session: Session,
    tenant: Tenant,
    *,
    graph_id: uuid.UUID | None,
    state: str | None,
    limit: int,
    page_token: str | None,
) -> tuple[list[Audit], str | None]:
    # Listings show summaries: leave the large JSON columns in the database.
    stmt = (
        select(Audit)
        .options(defer(Audit.config), defer(Audit.results), defer(Audit.model_config))
        .where(Audit.tenant_id == tenant.id)
    )
    if graph_id is not None:
        stmt = stmt.where(Audit.graph_id == graph_id)
    if state is not None:
        stmt = stmt.where(Audit.state == state)
    return newest_first(session, stmt, Audit, kind="audits", limit=limit, token=page_token)


def cancel_audit(session: Session, tenant: Tenant, audit_id: uuid.UUID) -> Audit:
    """Mark a queued or running audit ``cancelled`` (the worker sees it and stops).

    Cancelling a cancelled audit is a no-op. Raises NotFound, or Conflict when it already finished.
    """
    now = utcnow()
    # One conditional UPDATE, so a worker finishing the audit at the same moment cannot be overwritten.
    result: CursorResult[Any] = session.execute(  # type: ignore[assignment]  # DML gives a CursorResult
        update(Audit)
        .where(Audit.id == audit_id, Audit.tenant_id == tenant.id, Audit.state.in_(ACTIVE_STATES))
        .values(state="cancelled", finished_at=now, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    audit = session.scalar(
        select(Audit)
        .where(Audit.id == audit_id, Audit.tenant_id == tenant.id)
        .execution_options(populate_existing=True)
    )
    if audit is None:
        raise NotFound("audit", audit_id)
    if result.rowcount == 0 and audit.state != "cancelled":
        raise Conflict(
            f"The audit already {audit.state}; only queued or running audits can be cancelled.",
            slug="audit-finished",
            title="Audit already finished",
        )
    return audit
