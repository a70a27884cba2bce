"""``/v1/schedules``: recurring audits with alert thresholds, and the history of their metrics."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status

from app.core.deps import SessionDep, SettingsDep
from app.core.pagination import DEFAULT_LIMIT, MAX_LIMIT
from app.core.problem_schema import problem_responses
from app.schedules import service
from app.schedules.schemas import RunPage, ScheduleCreate, SchedulePage, ScheduleRead
from app.tenants.deps import AdminTenant, AuditorTenant, ViewerTenant
from app.trail.record import trailed
from bind_core.reporting import CSP, render_history

router = APIRouter(prefix="/schedules", tags=["schedules"])

LimitQuery = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
REPORT_MAX_RUNS = 1000


@router.post(
    "", status_code=status.HTTP_201_CREATED, response_model=ScheduleRead, dependencies=[trailed("schedule.create")]
)
def create_schedule(
    body: ScheduleCreate, response: Response, session: SessionDep, tenant: AuditorTenant, settings: SettingsDep
) -> Any:
    """Schedule an audit of a graph's latest version (``graph_name``) or a dataset, every
    ``interval_seconds`` (the first run at once) or on a ``cron`` expression (UTC). A ``graph_name`` with no graph
    of that name is a 422 naming it, as for ``POST /v1/audits``."""
    row = service.create_schedule(session, tenant, body, settings=settings)
    response.headers["Location"] = f"/v1/schedules/{row.id}"
    return row


@router.get("", response_model=SchedulePage)
def list_schedules(
    session: SessionDep,
    tenant: ViewerTenant,
    limit: LimitQuery = DEFAULT_LIMIT,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> SchedulePage:
    rows, token = service.list_schedules(session, tenant, limit=limit, page_token=page_token)
    return SchedulePage(items=[ScheduleRead.model_validate(r) for r in rows], next_page_token=token)


@router.get("/{schedule_id}", response_model=ScheduleRead, responses=problem_responses(404))
def read_schedule(schedule_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Any:
    return service.get_schedule(session, tenant, schedule_id)


@router.post(
    "/{schedule_id}/pause",
    response_model=ScheduleRead,
    responses=problem_responses(404),
    dependencies=[trailed("schedule.pause", "/schedules/{schedule_id}")],
)
def pause_schedule(schedule_id: uuid.UUID, session: SessionDep, tenant: AuditorTenant) -> Any:
    """Stop starting runs (runs already queued still run)."""
    return service.set_state(session, tenant, schedule_id, "paused")


@router.post(
    "/{schedule_id}/resume",
    response_model=ScheduleRead,
    responses=problem_responses(404),
    dependencies=[trailed("schedule.resume", "/schedules/{schedule_id}")],
)
def resume_schedule(schedule_id: uuid.UUID, session: SessionDep, tenant: AuditorTenant) -> Any:
    """Start runs again: an interval schedule at once, a cron schedule at its next time."""
    return service.set_state(session, tenant, schedule_id, "active")


@router.delete(
    "/{schedule_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404),
    dependencies=[trailed("schedule.delete", "/schedules/{schedule_id}")],
)
def delete_schedule(schedule_id: uuid.UUID, session: SessionDep, tenant: AdminTenant) -> Response:
    """Delete a schedule; the audits it ran stay."""
    service.delete_schedule(session, tenant, schedule_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{schedule_id}/runs", response_model=RunPage, responses=problem_responses(400, 404))
def schedule_runs(
    schedule_id: uuid.UUID,
    session: SessionDep,
    tenant: ViewerTenant,
    limit: LimitQuery = 100,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> RunPage:
    """The history of the bias metrics: one run per slot, newest first, with ΔSP, ΔEO, Γ and breaches; a page at a
    time (``next_page_token``)."""
    schedule = service.get_schedule(session, tenant, schedule_id)
    items, token = service.runs(session, schedule, limit=limit, page_token=page_token)
    return RunPage(schedule_id=schedule.id, items=items, next_page_token=token)


@router.get(
    "/{schedule_id}/report",
    response_class=Response,
    responses={
        200: {
            "description": "The history as one self-contained HTML5 page (no script, no external files)",
            "content": {"text/html": {"schema": {"type": "string"}}},
        },
        **problem_responses(404),
    },
    dependencies=[trailed("report.read", "/schedules/{schedule_id}")],
)
def schedule_report(
    schedule_id: uuid.UUID,
    session: SessionDep,
    tenant: ViewerTenant,
    limit: Annotated[int, Query(ge=1, le=REPORT_MAX_RUNS)] = 365,
) -> Response:
    """The schedule's metrics over time as an HTML page: ΔSP, ΔEO and Γ of its latest ``limit`` runs with the
    alert thresholds drawn as lines, accuracy, and a table of the runs with the thresholds each crossed."""
    schedule = service.get_schedule(session, tenant, schedule_id)
    runs = service.history(session, schedule, limit=limit)
    facts = service.schedule_facts(schedule, service.model_label(session, schedule))
    page = render_history(facts, runs, title=f"BIND schedule {schedule.id}")
    return Response(page, media_type="text/html; charset=utf-8", headers={"Content-Security-Policy": CSP})
