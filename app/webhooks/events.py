"""Events for webhooks, written as delivery rows in the transaction that finishes an audit (an outbox).

``audit.succeeded`` / ``audit.failed`` for every finished audit; ``schedule.threshold_exceeded`` when a
scheduled audit succeeded and a test-set metric exceeds one of its schedule's thresholds; ``audit.warned`` while an
audit runs, when its warnings known once the model and its metrics are in are stored (in that transaction), to each
subscription whose ``warning_codes`` (if it names some) include one of the audit's. The payload
follows Standard Webhooks: ``{"type", "timestamp", "data"}``. The delivery tasks are sent after the commit
(:func:`app.webhooks.tasks.send_deliveries`); a send lost in a crash is picked up again by
:func:`app.webhooks.tasks.resend_stale`.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from app.core.db.session import now
from app.core.db.tables import Audit, Schedule, Webhook, WebhookDelivery
from app.webhooks.thresholds import breaches, test_metrics, withheld


def audit_warned(session: Session, audit_id: uuid.UUID) -> list[uuid.UUID]:
    """Insert the deliveries of a running audit's ``audit.warned`` event (its warnings known once the model and its
    metrics are in, just stored); return their ids (send them after commit)."""
    audit = session.get(Audit, audit_id)
    if audit is None or audit.state != "running" or not audit.warnings:
        return []
    return _deliver(session, audit, [("audit.warned", _data(audit))])


def audit_finished(session: Session, audit_id: uuid.UUID) -> list[uuid.UUID]:
    """Insert the deliveries of a just-finished audit's events; return their ids (send them after commit)."""
    audit = session.get(Audit, audit_id)
    if audit is None or audit.state not in ("succeeded", "failed"):
        return []
    data = _data(audit)
    events = []
    if audit.state == "succeeded":
        data["metrics"] = test_metrics(audit.results)
        data["withheld"] = withheld(audit.results)
        events.append(("audit.succeeded", data))
        schedule = session.get(Schedule, audit.schedule_id) if audit.schedule_id else None
        thresholds = schedule.thresholds if schedule is not None else None
        found = breaches(audit.results, thresholds)
        if found:
            events.append(("schedule.threshold_exceeded", {**data, "thresholds": thresholds, "breaches": found}))
    else:
        data["error"] = audit.error
        events.append(("audit.failed", data))
    return _deliver(session, audit, events)


def _data(audit: Audit) -> dict[str, Any]:
    """What every audit event's ``data`` holds."""
    return {
        "audit_id": str(audit.id),
        "state": audit.state,
        "graph_id": _s(audit.graph_id),
        "graph_version": audit.graph_version,
        "dataset": audit.dataset,
        "model_id": _s(audit.model_id),
        "schedule_id": _s(audit.schedule_id),
        "slot_time": audit.slot_time.isoformat() if audit.slot_time else None,
        "warnings": audit.warnings,
        "warning_codes": audit.warning_codes,
    }


def _deliver(session: Session, audit: Audit, events: list[tuple[str, dict[str, Any]]]) -> list[uuid.UUID]:
    """One delivery row per event and subscribed webhook of the audit's tenant; their ids."""
    hooks = session.scalars(select(Webhook).where(Webhook.tenant_id == audit.tenant_id)).all()
    if not hooks:
        return []
    t = now()
    rows: list[dict[str, Any]] = [
        {
            "id": uuid.uuid4(),
            "webhook_id": hook.id,
            "event": name,
            "state": "pending",
            "attempts": 0,
            "payload": {"type": name, "timestamp": t.isoformat(), "data": body},
            "next_attempt_at": t,
            "created_at": t,
        }
        for name, body in events
        for hook in hooks
        if name in hook.events and _wanted(hook, name, audit)
    ]
    if rows:
        session.execute(insert(WebhookDelivery), rows)
    return [r["id"] for r in rows]


def _wanted(hook: Webhook, event: str, audit: Audit) -> bool:
    """Whether ``hook`` takes ``event`` of ``audit``: ``audit.warned`` only where it warns with one of the hook's
    codes, when the hook names some."""
    if event != "audit.warned" or hook.warning_codes is None:
        return True
    return bool(set(hook.warning_codes) & set(audit.warning_codes or []))


def _s(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)
