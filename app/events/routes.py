"""``/v1/events``: the tenant's audit trail, for admin keys; a page at a time or all of it as JSON lines."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import AwareDatetime
from sqlalchemy.orm import Session, sessionmaker

from app.core.deps import SessionDep
from app.core.pagination import DEFAULT_LIMIT, MAX_LIMIT
from app.core.problem_schema import problem_responses
from app.tenants.deps import AdminTenant
from app.trail import service
from app.trail.record import trailed
from app.trail.schemas import EventPage, EventRead

router = APIRouter(prefix="/events", tags=["events"])

JSON_LINES = "application/x-ndjson"


def event_filter(
    actor: Annotated[Literal["key", "cli", "system"] | None, Query(description="Only this kind of actor.")] = None,
    actor_key_id: Annotated[uuid.UUID | None, Query(description="Only the entries of this API key.")] = None,
    action: Annotated[str | None, Query(max_length=64, description="Only this action, e.g. `graph.purge`.")] = None,
    target: Annotated[str | None, Query(max_length=300, description="Only this resource, e.g. `/audits/<id>`.")] = None,
    since: Annotated[
        AwareDatetime | None, Query(description="From this time on (inclusive; ISO 8601 with a zone).")
    ] = None,
    until: Annotated[
        AwareDatetime | None, Query(description="Before this time (exclusive; ISO 8601 with a zone).")
    ] = None,
) -> service.EventFilter:
    return service.EventFilter(actor, actor_key_id, action, target, since, until)


FilterDep = Annotated[service.EventFilter, Depends(event_filter)]


@router.get("", response_model=EventPage, responses=problem_responses(403))
def list_events(
    session: SessionDep,
    tenant: AdminTenant,
    where: FilterDep,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> EventPage:
    """The tenant's trail, newest first: every state-changing action and every read of a report or an export,
    with the acting key, the target, the request id, the outcome and the time. Admin keys only."""
    rows, token = service.list_events(session, tenant.id, where, limit=limit, page_token=page_token)
    return EventPage(items=[EventRead.model_validate(r) for r in rows], next_page_token=token)


@router.get(
    "/export",
    dependencies=[trailed("events.export")],
    response_class=StreamingResponse,
    responses={
        200: {"content": {JSON_LINES: {}}, "description": "One `EventRead` per line, oldest first."},
        **problem_responses(403),
    },
)
def export_events(request: Request, tenant: AdminTenant, where: FilterDep) -> StreamingResponse:
    """The tenant's matching trail entries as JSON lines, oldest first (itself an entry, ``events.export``)."""
    factory: sessionmaker[Session] = request.app.state.session_factory
    return StreamingResponse(
        _lines(factory, tenant.id, where),
        media_type=JSON_LINES,
        headers={"Content-Disposition": 'attachment; filename="events.jsonl"'},
    )


def _lines(factory: sessionmaker[Session], tenant_id: uuid.UUID, where: service.EventFilter) -> Iterator[bytes]:
    """The export's lines, read in their own session (the request's is closed before the body is sent)."""
    with factory() as session:
        for event in service.iter_events(session, tenant_id, where):
            yield EventRead.model_validate(event).model_dump_json().encode() + b"\n"
