"""What the console's pages show of each row: plain values the templates print (and escape), and the geometry of
a schedule's sparkline."""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from app.audits.pace import left_words, time_left
from app.core.db.tables import Audit, Graph, Schedule, Webhook, WebhookDelivery
from bind_core.reporting import fmt

RUNNING = ("queued", "running")
METRICS = (("delta_sp", "ΔSP", "#c0392b"), ("delta_eo", "ΔEO", "#8e44ad"), ("gamma", "Γ", "#2471a3"))
SPARK_W, SPARK_H, SPARK_PAD = 160.0, 40.0, 3.0


def when(moment: datetime | None) -> str:
    """A time for a person, in UTC to the second; ``—`` when absent."""
    return "—" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def graph_row(graph: Graph) -> dict[str, Any]:
    summary = graph.summary or {}
    return {
        "id": str(graph.id),
        "name": graph.name,
        "version": graph.version,
        "nodes": fmt(summary.get("nodes")),
        "edges": fmt(summary.get("edges")),
        "groups": fmt(summary.get("groups")),
        "size": fmt(graph.size_bytes),
        "created": when(graph.created_at),
    }


def audit_row(audit: Audit) -> dict[str, Any]:
    """An audit's state, stage and progress (0–100), what it audits, its times and its problem if it failed."""
    error = audit.error or {}
    return {
        "id": str(audit.id),
        "source": f"dataset {audit.dataset}" if audit.dataset else f"graph version {fmt(audit.graph_version)}",
        "version": fmt(audit.graph_version),
        "graph_id": str(audit.graph_id) if audit.graph_id else None,
        "state": audit.state,
        "stage": audit.stage or "—",
        "progress": round(100 * min(max(float(audit.progress or 0.0), 0.0), 1.0)),
        "running": audit.state in RUNNING,
        **left_in_words(audit.state, audit.pace),
        "succeeded": audit.state == "succeeded",
        "attempts": audit.attempts,
        "created": when(audit.created_at),
        "started": when(audit.started_at),
        "finished": when(audit.finished_at),
        "error": f"{error.get('title', 'error')}: {error.get('detail', '')}" if error else None,
        "warnings": [str(w) for w in audit.warnings or []],
    }


def left_in_words(state: str, pace: dict[str, Any] | None) -> dict[str, str | None]:
    """A running audit's or what-if's time left in a few words (``left``) and how it was reached (``left_basis``)."""
    found = time_left(pace, datetime.now(UTC)) if state == "running" else None
    if found is None:
        return {"left": None, "left_basis": None}
    return {"left": left_words(dataclasses.asdict(found)), "left_basis": found.basis}


def audit_verdict(audit: Audit) -> dict[str, Any] | None:
    """A finished audit's verdict and findings in plain sentences (the results' ``summary``; ``None`` before the
    audit finished, or for results from before the summary was written)."""
    if audit.state != "succeeded":
        return None
    summary = (audit.results or {}).get("summary")
    if not isinstance(summary, dict) or not summary.get("verdict"):
        return None
    lines = str(summary.get("text", "")).splitlines()
    return {"headline": str(summary["verdict"]), "findings": lines[1:]}


def schedule_row(schedule: Schedule, runs: Sequence[Mapping[str, Any]], model: str | None = None) -> dict[str, Any]:
    """A schedule with its latest succeeded values against its thresholds and a sparkline of its runs.

    ``runs`` as :func:`app.schedules.service.history` gives them (newest first); ``model`` the schedule's supplied
    model as :func:`app.schedules.service.model_label` names it."""
    thresholds = {k: float(v) for k, v in (schedule.thresholds or {}).items() if _finite(v)}
    done = [r for r in reversed(runs) if r.get("state") == "succeeded"]  # oldest first
    latest = done[-1] if done else None
    values = [
        {
            "name": name,
            "value": fmt(latest.get(key)) if latest else "—",
            "threshold": fmt(thresholds[key]) if key in thresholds else "none",
            "crossed": bool(
                latest and key in thresholds and _finite(latest.get(key)) and latest[key] > thresholds[key]
            ),
        }
        for key, name, _ in METRICS
    ]
    return {
        "id": str(schedule.id),
        "source": (f"{model} on " if model else "")
        + (f"graph {schedule.graph_name}" if schedule.graph_name else f"dataset {schedule.dataset}"),
        "timing": f"cron {schedule.cron}" if schedule.cron else f"every {fmt(schedule.interval_seconds)} s",
        "state": schedule.state,
        "next": when(schedule.next_run_at),
        "latest": (
            when(latest.get("slot_time")) + (" · no verdict (the report says why)" if latest.get("withheld") else "")
        )
        if latest
        else "no succeeded run yet",
        "values": values,
        "spark": sparkline(done, thresholds),
        "runs": len(runs),
    }


def sparkline(done: Sequence[Mapping[str, Any]], thresholds: Mapping[str, float]) -> dict[str, Any] | None:
    """Polylines of ΔSP, ΔEO and Γ over the succeeded runs (oldest first) and a dashed line per threshold, in a
    ``SPARK_W`` × ``SPARK_H`` box from 0 to the largest value; ``None`` with fewer than two runs."""
    if len(done) < 2:
        return None
    seen = [float(r[k]) for r in done for k, _, _ in METRICS if _finite(r.get(k))]
    top = max([*seen, *thresholds.values(), 1e-9]) * 1.1
    step = (SPARK_W - 2 * SPARK_PAD) / (len(done) - 1)

    def y(value: float) -> float:
        return round(SPARK_H - SPARK_PAD - (SPARK_H - 2 * SPARK_PAD) * value / top, 2)

    lines = []
    for key, name, colour in METRICS:
        points = [
            f"{round(SPARK_PAD + i * step, 2)},{y(float(r[key]))}" for i, r in enumerate(done) if _finite(r.get(key))
        ]
        if points:
            lines.append({"name": name, "colour": colour, "points": " ".join(points)})
    limits = [
        {"name": name, "colour": colour, "y": y(thresholds[key])} for key, name, colour in METRICS if key in thresholds
    ]
    return {"width": SPARK_W, "height": SPARK_H, "lines": lines, "limits": limits}


def webhook_row(webhook: Webhook, deliveries: Sequence[WebhookDelivery]) -> dict[str, Any]:
    return {
        "id": str(webhook.id),
        "url": webhook.url,
        "events": ", ".join(webhook.events or []),
        "warning_codes": ", ".join(webhook.warning_codes or []),
        "rotating": when(webhook.previous_secret_expires_at) if _overlapping(webhook) else None,
        "event_list": list(webhook.events or []),
        "code_list": list(webhook.warning_codes or []),
        "created": when(webhook.created_at),
        "deliveries": [
            {
                "id": str(d.id),
                "event": d.event,
                "audit": _audit_of(d.payload),
                "state": d.state,
                "attempts": d.attempts,
                "status": fmt(d.response_status),
                "error": d.last_error or "",
                "created": when(d.created_at),
            }
            for d in deliveries
        ],
    }


def _overlapping(webhook: Webhook) -> bool:
    """Whether a rotated secret still signs beside the webhook's current one."""
    until = webhook.previous_secret_expires_at
    return webhook.previous_secret is not None and until is not None and until > datetime.now(UTC)


def _audit_of(payload: Any) -> str | None:
    """The audit a delivery's event is about (its ``data.audit_id``), where it names one as an id."""
    data = payload.get("data") if isinstance(payload, dict) else None
    found = data.get("audit_id") if isinstance(data, dict) else None
    try:
        return str(uuid.UUID(str(found))) if found else None
    except ValueError:
        return None


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
