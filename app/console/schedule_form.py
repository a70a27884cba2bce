"""The graph page's schedule form: audit the graph's latest version every hour, day or week, of a model the audit
trains or of a supplied model registered for any version of it (its inputs carried over), with an optional ΔSP alert
threshold; ``POST /v1/schedules`` with the same checks, its refusals on the form."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Form
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from app.console.deps import ConsoleAuditorDep, check_csrf
from app.console.form_errors import form_refusal
from app.console.pages import refused
from app.console.workbench import EVERY, graph_view
from app.core.deps import SessionDep, SettingsDep
from app.core.errors import ProblemError
from app.graphs import service as graphs
from app.schedules import service as schedules
from app.schedules.schemas import ScheduleCreate
from app.trail.record import trailed

router = APIRouter(prefix="/console", include_in_schema=False)

FormText = Annotated[str, Form(max_length=200)]


@router.post("/graphs/{graph_id}/schedule", status_code=303, dependencies=[trailed("schedule.create")])
def schedule_graph(
    graph_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleAuditorDep,
    settings: SettingsDep,
    response: Response,
    csrf: FormText = "",
    model_id: FormText = "",
    every: FormText = "day",
    delta_sp: FormText = "",
) -> Response:
    """Schedule audits of the graph's name (its latest version at each run) and go to the schedules page."""
    check_csrf(user, csrf)
    graph = graphs.get_graph(session, user.tenant, graph_id)  # 404 for another tenant's graph, before anything
    form = {"model_id": model_id, "every": every, "delta_sp": delta_sp}
    problem: ProblemError | None = None
    try:
        body = ScheduleCreate.model_validate(_request(graph.name, form))
        schedules.create_schedule(session, user.tenant, body, settings=settings)
    except (ValidationError, ProblemError) as exc:
        problem = form_refusal(exc, "The schedule's settings are not valid.")
    if problem is not None:
        refused(response, problem.status)
        return graph_view(session, user, graph_id, schedule=form, schedule_problem=problem)
    return RedirectResponse("/console/schedules", status_code=303)


def _request(graph_name: str, form: dict[str, str]) -> dict[str, Any]:
    """The ``POST /v1/schedules`` body the form asks for (a value the form cannot read is passed on as typed, so that
    validation names it)."""
    body: dict[str, Any] = {"graph_name": graph_name, "interval_seconds": EVERY.get(form["every"], form["every"])}
    if form["model_id"]:
        body["model_id"] = form["model_id"]
    threshold = form["delta_sp"].strip()
    if threshold:
        try:
            body["thresholds"] = {"delta_sp": float(threshold)}
        except ValueError:
            body["thresholds"] = {"delta_sp": threshold}
    return body
