"""The console's retrained models: on a finished audit's page, each debiasing budget's weights and config to download
and a form that registers them as a supplied model of the audit's graph (the API's own service,
``app.audits.model_artifact_pages``), then the graph's page with that model chosen to audit. Plain links and forms:
no script needed; registering needs the ``auditor`` role and the session's CSRF token."""

from __future__ import annotations

import json
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Form
from fastapi.responses import RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session, defer

from app.audits import model_artifact_pages as artifacts
from app.console.deps import ConsoleAuditorDep, ConsoleUserDep, check_csrf
from app.console.pages import refused
from app.core.db.tables import Audit, ModelArtifact
from app.core.deps import SessionDep
from app.core.errors import ProblemError
from app.trail.record import trailed

router = APIRouter(prefix="/console", include_in_schema=False)

REGISTER_ERRORS = {
    "weights-not-kept": "The weights were not kept (over the size limit); download the config instead.",
    "audit-has-no-graph": "This audit has no graph to register a model for (a built-in dataset, or a deleted "
    "graph); download the weights and config instead.",
    "model-does-not-fit": "The model no longer fits the graph.",
    "invalid-model": "The retrained model predicts values that are not finite on the graph.",
    "unsupported-model": "The retrained model cannot be audited as it is on the graph.",
}
"""The messages the audit page shows when registering failed (by the problem's slug; nothing else is echoed)."""

_TARGET = "/audits/{audit_id}/models/{model_id}"


def budget_models(session: Session, audit: Audit) -> dict[int, dict[str, Any]]:
    """The audit's kept debiasing models by budget index, as the audit page's debiasing table shows them."""
    if audit.state != "succeeded":
        return {}
    rows = session.scalars(
        select(ModelArtifact)
        .options(defer(ModelArtifact.weights))
        .where(ModelArtifact.audit_id == audit.id, ModelArtifact.source == "debias")
    )
    return {row.budget_index: _links(audit.id, row) for row in rows if row.budget_index is not None}


def what_if_model(session: Session, audit_id: uuid.UUID, job_id: uuid.UUID) -> dict[str, Any] | None:
    """The model a verified what-if kept (retrained without the set), as its page offers it; ``None`` before it
    succeeded."""
    row = session.scalars(
        select(ModelArtifact)
        .options(defer(ModelArtifact.weights))
        .where(ModelArtifact.audit_id == audit_id, ModelArtifact.what_if_id == job_id)
    ).first()
    return None if row is None else _links(audit_id, row)


def _links(audit_id: uuid.UUID, row: ModelArtifact) -> dict[str, Any]:
    """A kept model's downloads and its register form's target, and why its weights were not kept."""
    base = f"/console/audits/{audit_id}/models/{row.id}"
    return {
        "id": str(row.id),
        "kept": row.note is None,
        "note": row.note,
        "weights": f"{base}/weights",
        "config": f"{base}/config",
        "register": f"{base}/register",
    }


@router.get("/audits/{audit_id}/models/{model_id}/weights", dependencies=[trailed("export.model_weights", _TARGET)])
def model_weights(audit_id: uuid.UUID, model_id: uuid.UUID, session: SessionDep, user: ConsoleUserDep) -> Response:
    """The retrained model's safetensors weights, as a download."""
    row = artifacts.get_artifact(session, user.tenant, audit_id, model_id)
    body = artifacts.kept_weights(row)
    name = f"audit-{audit_id}-{artifacts.artifact_label(row)}.safetensors"
    headers = {"Content-Disposition": f'attachment; filename="{name}"', "ETag": f'"{row.sha256}"'}
    return Response(body, media_type="application/octet-stream", headers=headers)


@router.get("/audits/{audit_id}/models/{model_id}/config")
def model_config(audit_id: uuid.UUID, model_id: uuid.UUID, session: SessionDep, user: ConsoleUserDep) -> Response:
    """The retrained model's config (the audited model's form), as a JSON download."""
    row = artifacts.get_artifact(session, user.tenant, audit_id, model_id)
    name = f"audit-{audit_id}-{artifacts.artifact_label(row)}.json"
    return Response(
        json.dumps(row.config, indent=2),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


@router.post("/audits/{audit_id}/models/{model_id}/register", status_code=303, dependencies=[trailed("model.register")])
def register_model(
    audit_id: uuid.UUID,
    model_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleAuditorDep,
    response: Response,
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Register the retrained model as a supplied model, then the graph's page with it chosen for the next audit;
    when it cannot be registered, the audit's page saying why."""
    check_csrf(user, csrf)
    try:
        model = artifacts.register_artifact(session, user.tenant, audit_id, model_id, None)
    except ProblemError as exc:
        if exc.slug not in REGISTER_ERRORS:
            raise
        refused(response, exc.status)
        return RedirectResponse(f"/console/audits/{audit_id}?model_error={exc.slug}#debiasing", status_code=303)
    return RedirectResponse(f"/console/graphs/{model.graph_id}?registered={model.id}#start", status_code=303)
