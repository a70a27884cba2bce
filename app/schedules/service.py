"""Scheduled audits: creating, reading, pausing, resuming and deleting schedules, and their run history.

The worker's scheduler (``app/schedules/scheduler.py``) turns due slots into audits; this module only manages the
schedule rows. A schedule's audit settings are checked here with the same rules as ``POST /v1/audits``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, select, tuple_
from sqlalchemy.orm import Session

from app.audits.schemas import AuditCreate
from app.audits.service import describing_supplied, refuse_trained_settings
from app.core.db.base import utcnow
from app.core.db.tables import Audit, Schedule, SuppliedModel, Tenant
from app.core.errors import Conflict, NotFound, ValidationProblem
from app.core.pagination import decode_token, encode_token, newest_first, timestamp_part, uuid_part
from app.core.settings import Settings
from app.datasets.lookup import present_dataset
from app.graphs.versions import resolve_name
from app.schedules.schemas import Breach, RunRead, ScheduleCreate
from app.schedules.slots import check_cron, check_interval_floor, first_slot
from app.supplied.service import registered_model
from app.webhooks.thresholds import breaches, inputs_confirmed, test_metrics, withheld
from bind_core import AuditConfig, BindError

_SOURCE_KEYS = {"graph_id", "graph_name", "dataset", "model_id"}


def create_schedule(session: Session, tenant: Tenant, body: ScheduleCreate, *, settings: Settings) -> Schedule:
    """Insert an active schedule after checking its audit settings, source and timing (422 otherwise).

    The source must exist now: a ``graph_name`` with no graph of that name for the tenant is the ``422`` naming
    ``graph_name`` that ``POST /v1/audits`` gives (:func:`~app.graphs.versions.resolve_name`). A graph deleted
    later does not stop the schedule: that slot's audit fails with ``graph-not-found`` (``scheduler.py``).
    """
    supplied = _supplied_model(session, tenant, body, body.model_id) if body.model_id is not None else None
    graph_name = body.graph_name if supplied is None else supplied[0]
    config = _config(body.audit, supplied=None if supplied is None else supplied[1])
    if body.cron is not None and (why := check_cron(body.cron)) is not None:
        raise ValidationProblem(f"cron: {why}.", errors=[{"field": "cron", "message": why}])
    check_interval_floor(interval_seconds=body.interval_seconds, cron=body.cron, settings=settings)
    dataset = present_dataset(body.dataset, settings) if body.dataset is not None else None
    if graph_name is not None:
        resolve_name(session, tenant, graph_name)
    now = utcnow()
    row = Schedule(
        tenant_id=tenant.id,
        graph_name=graph_name,
        dataset=dataset,
        model_id=body.model_id,
        settings=body.audit,
        config=config,
        interval_seconds=body.interval_seconds,
        cron=body.cron,
        thresholds=body.thresholds.model_dump(exclude_none=True) if body.thresholds else None,
        state="active",
        next_run_at=first_slot(interval_seconds=body.interval_seconds, cron=body.cron, now=now),
    )
    session.add(row)
    session.flush()
    return row


def _supplied_model(
    session: Session, tenant: Tenant, body: ScheduleCreate, model_id: uuid.UUID
) -> tuple[str, dict[str, Any]]:
    """The name of the graph the schedule's supplied model was registered for, and the model's stored config; 422
    for an unknown model, or a ``graph_name`` that is not that graph's."""
    model = registered_model(session, tenant, model_id)
    if body.graph_name is not None and body.graph_name != model.graph_name:
        why = f"the model was registered for the graph {model.graph_name!r}; leave graph_name out or give that name"
        raise ValidationProblem(f"graph_name: {why}.", errors=[{"field": "graph_name", "message": why}])
    return model.graph_name, model.config


def _config(settings: dict[str, Any], *, supplied: dict[str, Any] | None = None) -> dict[str, Any]:
    """The audit's full config from a schedule's ``audit`` settings (describing the supplied model whose stored config
    is ``supplied``, whose own architecture and recipe are not the schedule's to set)."""
    errors = [{"field": f"audit.{k}", "message": "the schedule names the source"} for k in _SOURCE_KEYS & set(settings)]
    if errors:
        raise ValidationProblem("A schedule's audit settings do not name a source.", errors=errors)
    try:
        request = AuditCreate.model_validate({**settings, "dataset": "-"})
        if supplied is not None:
            refuse_trained_settings(request, prefix="audit.")
        return describing_supplied(AuditConfig.from_dict(request.config_dict()), supplied).to_dict()
    except ValidationError as exc:
        fields = [{"field": "audit." + ".".join(map(str, e["loc"])), "message": e["msg"]} for e in exc.errors()]
        raise ValidationProblem("Invalid audit settings.", errors=fields) from exc
    except BindError as exc:
        raise ValidationProblem(str(exc), slug="invalid-config", title="Invalid audit configuration") from exc


def get_schedule(session: Session, tenant: Tenant, schedule_id: uuid.UUID, *, lock: bool = False) -> Schedule:
    stmt = select(Schedule).where(Schedule.id == schedule_id, Schedule.tenant_id == tenant.id)
    row = session.scalar(stmt.with_for_update() if lock else stmt)
    if row is None:
        raise NotFound("schedule", schedule_id)
    return row


def list_schedules(
    session: Session, tenant: Tenant, *, limit: int, page_token: str | None
) -> tuple[list[Schedule], str | None]:
    stmt = select(Schedule).where(Schedule.tenant_id == tenant.id)
    return newest_first(session, stmt, Schedule, kind="schedules", limit=limit, token=page_token)


def set_state(session: Session, tenant: Tenant, schedule_id: uuid.UUID, state: str) -> Schedule:
    """Pause or resume. Resuming an interval schedule runs it at once, a cron one at its next time."""
    row = get_schedule(session, tenant, schedule_id, lock=True)
    if row.state == state:
        return row
    if state == "active":
        row.next_run_at = first_slot(interval_seconds=row.interval_seconds, cron=row.cron, now=utcnow())
    elif state != "paused":
        raise Conflict(f"unknown state {state!r}")
    row.state = state
    session.flush()
    return row


def delete_schedule(session: Session, tenant: Tenant, schedule_id: uuid.UUID) -> None:
    """Delete a schedule; its audits stay (their ``schedule_id`` becomes null)."""
    row = get_schedule(session, tenant, schedule_id, lock=True)
    session.execute(delete(Schedule).where(Schedule.id == row.id))
    session.expunge(row)


def runs(
    session: Session, schedule: Schedule, *, limit: int, page_token: str | None = None
) -> tuple[list[RunRead], str | None]:
    """One page of the schedule's runs, newest slot first, with their metrics and threshold breaches, and the next
    page's token (``None`` on the last): a deployed model's whole history, however long, a page at a time.

    Raises:
        BadRequest: ``page_token`` is not one this listing issued (400 ``invalid-page-token``).
    """
    before = None
    if page_token is not None:
        slot_s, id_s = decode_token(page_token, "runs", 2)
        before = (timestamp_part(slot_s), uuid_part(id_s))
    found = history(session, schedule, limit=limit + 1, before=before)
    token = None
    if len(found) > limit:
        found, last = found[:limit], found[limit - 1]
        token = encode_token("runs", [last["slot_time"].isoformat(), str(last["audit_id"])])
    out = []
    for r in found:
        breaches_found = [Breach.model_validate(b) for b in r["breaches"]]
        out.append(
            RunRead(
                slot_time=r["slot_time"],
                audit_id=r["audit_id"],
                state=r["state"],
                graph_version=r["graph_version"],
                accuracy=r["accuracy"],
                delta_sp=r["delta_sp"],
                delta_eo=r["delta_eo"],
                gamma=r["gamma"],
                breaches=breaches_found,
                withheld=r["withheld"],
                inputs_confirmed=r["inputs_confirmed"],
                warning_codes=r["warning_codes"],
                failure=r["failure"],
            )
        )
    return out, token


def history(
    session: Session, schedule: Schedule, *, limit: int, before: tuple[datetime, uuid.UUID] | None = None
) -> list[dict[str, Any]]:
    """The latest ``limit`` slots (``before``: those before that ``(slot_time, audit id)``) as plain dicts, newest
    first: ``slot_time``, ``audit_id``, ``state``,
    ``graph_version``, the test-set ``accuracy``, ``delta_sp``, ``delta_eo``, ``gamma`` (``None`` until the
    audit succeeded), ``breaches``, ``withheld`` (why the run has no verdict: a supplied model that no longer fits
    the version's data, outputs in another order), ``inputs_confirmed`` (a supplied model's: its own outputs on the
    version confirmed what the audit read), ``warning_codes`` and ``failure`` (a failed run's problem, in words); the
    runs of :func:`bind_core.reporting.history.render_history`."""
    stmt = select(
        Audit.id, Audit.slot_time, Audit.state, Audit.graph_version, Audit.results, Audit.warning_codes, Audit.error
    ).where(Audit.schedule_id == schedule.id)
    if before is not None:
        stmt = stmt.where(tuple_(Audit.slot_time, Audit.id) < tuple_(*before))
    rows = session.execute(stmt.order_by(Audit.slot_time.desc(), Audit.id.desc()).limit(limit)).all()
    out = []
    for row in rows:
        done = row.state == "succeeded"
        results = row.results if done else None
        test = ((results or {}).get("metrics") or {}).get("test") or {}
        accuracy = test.get("accuracy")
        out.append(
            {
                "slot_time": row.slot_time,
                "audit_id": row.id,
                "state": row.state,
                "graph_version": row.graph_version,
                "accuracy": float(accuracy) if isinstance(accuracy, int | float) else None,
                **test_metrics(results),
                "breaches": breaches(row.results, schedule.thresholds) if done else [],
                "withheld": withheld(results),
                "inputs_confirmed": inputs_confirmed(results),
                "warning_codes": list(row.warning_codes) if isinstance(row.warning_codes, list) else None,
                "failure": _failure(row.error) if row.state == "failed" else None,
            }
        )
    return out


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _failure(error: Any) -> str | None:
    """A failed run's problem in words: its type's last part and its detail (``model-does-not-fit: …``)."""
    if not isinstance(error, dict):
        return None
    slug = str(error.get("type") or "").rsplit("/", 1)[-1]
    detail = _text(error.get("detail")) or _text(error.get("title")) or ""
    return f"{slug}: {detail}" if slug and detail else slug or detail or None


def model_label(session: Session, schedule: Schedule, *, with_id: bool = True) -> str | None:
    """The schedule's supplied model as a person reads it: its name, and its id with ``with_id`` (``model <id>
    (deleted)`` once it is gone); ``None`` for a schedule whose runs train their own model."""
    if schedule.model_id is None:
        return None
    name = session.scalar(
        select(SuppliedModel.name).where(
            SuppliedModel.id == schedule.model_id, SuppliedModel.tenant_id == schedule.tenant_id
        )
    )
    if name is None:
        return f"model {schedule.model_id} (deleted)"
    return f"model {name!r} ({schedule.model_id})" if with_id else f"model {name!r}"


def schedule_facts(schedule: Schedule, model: str | None = None) -> dict[str, Any]:
    """The schedule as the plain dict :func:`bind_core.reporting.history.render_history` takes (``model``: its
    supplied model as :func:`model_label` names it)."""
    return {
        "id": str(schedule.id),
        "graph_name": schedule.graph_name,
        "dataset": schedule.dataset,
        "model": model,
        "interval_seconds": schedule.interval_seconds,
        "cron": schedule.cron,
        "state": schedule.state,
        "thresholds": schedule.thresholds,
        "next_run_at": schedule.next_run_at,
        "created_at": schedule.created_at,
    }
