"""The console's form that gives a deployed model's own outputs on this version of its graph (the API's ``PUT
/v1/models/{id}/outputs/{graph_id}``, :mod:`app.supplied.version_outputs`), on the graph's page: the model chosen
among those registered for the graph's name, and the file. Then the graph's page saying what comparing them found, or
the form's refusal. Needs the ``auditor`` role and the session's CSRF token."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from app.console.deps import ConsoleAuditorDep
from app.console.uploads import graph_form
from app.console.workbench import graph_view
from app.core.deps import SessionDep, SettingsDep
from app.core.errors import ValidationProblem
from app.graphs.uploads import ReceivedUpload
from app.supplied import version_outputs
from app.trail.record import trailed

router = APIRouter(prefix="/console", include_in_schema=False)


@router.post("/graphs/{graph_id}/outputs", status_code=303, dependencies=[trailed("model.outputs")])
async def give_outputs(
    graph_id: uuid.UUID,
    request: Request,
    response: Response,
    session: SessionDep,
    user: ConsoleAuditorDep,
    settings: SettingsDep,
) -> Response:
    """Keep the chosen model's own outputs on this version, as the API does; the graph's page says what comparing
    them found, or shows the form's refusal."""

    async def give(received: ReceivedUpload) -> str:
        model_id = _model_id(received.fields.get("model_id"))
        if "outputs" not in received.files:
            raise ValidationProblem(
                "Choose the file of the model's outputs on this version.",
                errors=[{"field": "outputs", "message": "required"}],
            )
        data = await run_in_threadpool(received.files["outputs"].read_bytes)
        name = received.client_names.get("outputs") or "outputs"
        await run_in_threadpool(
            lambda: version_outputs.put_outputs(session, user.tenant, model_id, graph_id, data, name)
        )
        return f"/console/graphs/{graph_id}?outputs={model_id}#outputs"

    return await graph_form(
        request,
        response,
        session,
        user,
        settings,
        file_parts=("outputs",),
        field_parts=("model_id",),
        what="outputs",
        refusal="The outputs cannot be kept.",
        act=give,
        shown=lambda sent, problem: graph_view(session, user, graph_id, outputs_form=sent, outputs_problem=problem),
    )


def _model_id(value: str | None) -> uuid.UUID:
    try:
        return uuid.UUID(value or "")
    except ValueError as exc:
        raise ValidationProblem(
            "Choose the model whose outputs these are.", errors=[{"field": "model_id", "message": "required"}]
        ) from exc
