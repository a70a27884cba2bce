"""``/v1/audits/{id}/models``: the models an audit retrained (each debiasing budget's), to download as safetensors
weights and a config in the form of the audited model, or to register as a supplied model."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response, status

from app.audits import model_artifact_pages as pages
from app.audits.model_artifact_schemas import (
    ArtifactConfig,
    ArtifactHeadline,
    ArtifactLinks,
    ArtifactPage,
    ArtifactRead,
    ArtifactRegister,
    RegisteredModel,
)
from app.core.db.tables import Audit, ModelArtifact
from app.core.deps import SessionDep
from app.core.pagination import DEFAULT_LIMIT, MAX_LIMIT
from app.core.problem_schema import problem_responses
from app.tenants.deps import AuditorTenant, ViewerTenant
from app.trail.record import trailed

router = APIRouter(prefix="/audits", tags=["audits"])

_ERRORS = problem_responses(404, 409)
_TARGET = "/audits/{audit_id}/models/{model_id}"


def artifact_read(audit: Audit, row: ModelArtifact, base: str = "/v1") -> ArtifactRead:
    """A listed model, with its budget's headline and its links under ``base``."""
    found = pages.budget_row(audit, row) or {}
    after = found.get("after")
    href = f"{base}/audits/{audit.id}/models/{row.id}"
    kept = row.note is None
    return ArtifactRead(
        id=row.id,
        source=row.source,  # type: ignore[arg-type]  # the table's check constraint
        budget_index=row.budget_index,
        budget=found.get("budget"),
        deleted=found.get("deleted"),
        what_if_id=row.what_if_id,
        after=ArtifactHeadline(**{k: after.get(k) for k in pages.HEADLINE}) if isinstance(after, dict) else None,
        form=str(row.config.get("format", "")),
        weights_kept=kept,
        note=row.note,
        size_bytes=row.size_bytes,
        sha256=row.sha256,
        created_at=row.created_at,
        links=ArtifactLinks(
            weights=f"{href}/weights" if kept else None,
            config=f"{href}/config",
            register=f"{href}/register" if kept else None,
        ),
    )


@router.get("/{audit_id}/models", response_model=ArtifactPage, responses=_ERRORS)
def list_audit_models(
    audit_id: uuid.UUID,
    session: SessionDep,
    tenant: ViewerTenant,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> ArtifactPage:
    """The models the audit retrained, one per debiasing budget in order: nodes deleted, the headline metrics after,
    size, SHA-256 and links. 409 ``audit-not-succeeded`` before it succeeded, ``models-not-kept`` when it kept
    none."""
    audit, rows, token = pages.artifact_page(session, tenant, audit_id, limit=limit, token=page_token)
    return ArtifactPage(items=[artifact_read(audit, r) for r in rows], next_page_token=token)


@router.get(
    "/{audit_id}/models/{model_id}/weights",
    response_class=Response,
    dependencies=[trailed("export.model_weights", _TARGET)],
    responses={
        200: {
            "description": "The safetensors weights (ETag: their SHA-256)",
            "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
        },
        304: {"description": "Not modified (If-None-Match matched)"},
        **_ERRORS,
    },
)
def read_audit_model_weights(
    audit_id: uuid.UUID, model_id: uuid.UUID, request: Request, session: SessionDep, tenant: ViewerTenant
) -> Response:
    """The retrained model's weights as safetensors (never a pickle); 409 ``weights-not-kept`` when they were over
    ``BIND_MODEL_ARTIFACT_MAX_BYTES``."""
    row = pages.get_artifact(session, tenant, audit_id, model_id)
    body = pages.kept_weights(row)
    etag = f'"{row.sha256}"'
    matches = {t.strip().removeprefix("W/") for t in request.headers.get("if-none-match", "").split(",")}
    if etag in matches or "*" in matches:
        return Response(status_code=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
    name = f"audit-{audit_id}-{pages.artifact_label(row)}.safetensors"
    headers = {"Content-Disposition": f'attachment; filename="{name}"', "ETag": etag}
    return Response(body, media_type="application/octet-stream", headers=headers)


@router.get("/{audit_id}/models/{model_id}/config", response_model=ArtifactConfig, responses=_ERRORS)
def read_audit_model_config(
    audit_id: uuid.UUID, model_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant
) -> dict[str, Any]:
    """The retrained model's config, in the form of the audited model: a supplied ``torch_geometric`` model's PyG
    config (class, constructor arguments, the training recipe), else bind-audit's (``bind-audit/model@1``)."""
    config: dict[str, Any] = pages.get_artifact(session, tenant, audit_id, model_id).config
    return config


@router.post(
    "/{audit_id}/models/{model_id}/register",
    status_code=status.HTTP_201_CREATED,
    response_model=RegisteredModel,
    responses=_ERRORS,
    dependencies=[trailed("model.register")],
)
def register_audit_model(
    audit_id: uuid.UUID,
    model_id: uuid.UUID,
    response: Response,
    session: SessionDep,
    tenant: AuditorTenant,
    body: Annotated[ArtifactRegister | None, Body()] = None,
) -> Any:
    """Register the retrained model as a supplied model of the audit's graph (checked as an upload is), to audit
    or schedule like any other; ``Location`` is the new model. 409 ``weights-not-kept``, ``audit-has-no-graph``
    (a built-in dataset's audit, or a deleted graph)."""
    row = pages.register_artifact(session, tenant, audit_id, model_id, body.name if body else None)
    response.headers["Location"] = f"/v1/models/{row.id}"
    return row
