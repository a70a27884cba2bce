"""``/v1/models``: register a GNN trained elsewhere (safetensors weights + JSON config) for a graph."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from app.core.deps import SessionDep, SettingsDep
from app.core.errors import ValidationProblem
from app.core.pagination import DEFAULT_LIMIT, MAX_LIMIT
from app.core.problem_schema import problem_responses
from app.graphs.uploads import receive_upload, remove_folder
from app.supplied import service, version_outputs
from app.supplied.schemas import ModelPage, ModelRead, VersionOutputsPage, VersionOutputsRead
from app.tenants.deps import AdminTenant, AuditorTenant, ViewerTenant
from app.trail.record import trailed

router = APIRouter(prefix="/models", tags=["models"])

_UPLOAD_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["weights", "config", "graph_id"],
                "properties": {
                    "weights": {"type": "string", "format": "binary", "description": "safetensors weights."},
                    "config": {
                        "type": "string",
                        "description": "The model's JSON config (a file or a field): this project's form, or a "
                        "torch_geometric.nn.models GCN/GraphSAGE/GIN/GAT with its constructor arguments and loss.",
                    },
                    "graph_id": {"type": "string", "format": "uuid", "description": "The graph it was trained on."},
                    "name": {"type": "string", "description": "A name for the model."},
                    "outputs": {
                        "type": "string",
                        "format": "binary",
                        "description": "Optional: the model's own outputs on the graph, as your code computes them "
                        "(logits, log-probabilities or probabilities): an .npy of every node in the graph's order, or "
                        "a .csv of node ids and outputs. The model as read must give them (422 outputs-differ, with "
                        "what most likely differs); where it does, its inputs are confirmed (fit.outputs).",
                    },
                    "unknown_categories": {
                        "type": "string",
                        "enum": ["refuse", "ignore"],
                        "description": "Audited on a later version of the graph, what a category the model's encoder "
                        "never saw (a one-hot column it lacks) becomes: refuse (default; the audit fails naming it) "
                        "or ignore (its nodes read as none of the model's categories of that column).",
                    },
                },
            }
        }
    },
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelRead,
    openapi_extra={"requestBody": _UPLOAD_BODY},
    responses=problem_responses(400, 413, 415),
    dependencies=[trailed("model.register")],
)
async def register_model(
    request: Request, response: Response, session: SessionDep, tenant: AuditorTenant, settings: SettingsDep
) -> Any:
    """Register a trained GNN for a graph; 422 when the weights are not safetensors, do not fit the config,
    or the config's ``in_dim`` / ``num_classes`` do not fit the graph, or a PyG model asks for options the audit
    cannot reproduce (``unsupported-model``)."""
    await run_in_threadpool(session.rollback)  # hold no connection while the body streams (as for graphs)
    folder = Path(await run_in_threadpool(tempfile.mkdtemp, prefix="bind-model-"))
    try:
        upload = await receive_upload(
            request,
            folder,
            settings.max_upload_bytes,
            file_parts=("weights", "config", "outputs"),
            field_parts=("config", "graph_id", "name", "unknown_categories"),
            what="model",
        )
        fields, files = upload.fields, upload.files
        missing = [k for k in ("weights", "config", "graph_id") if k not in fields and k not in files]
        if missing or "weights" not in files:
            raise ValidationProblem(
                "A model is a weights file, a config and a graph_id.",
                errors=[{"field": k, "message": "required"} for k in missing or ["weights"]],
            )
        try:
            graph_id = uuid.UUID(fields["graph_id"])
        except ValueError as exc:
            raise ValidationProblem(
                "graph_id is not a UUID.", errors=[{"field": "graph_id", "message": "not a UUID"}]
            ) from exc
        weights = await run_in_threadpool(files["weights"].read_bytes)
        raw: bytes | str = (
            await run_in_threadpool(files["config"].read_bytes) if "config" in files else fields["config"]
        )
        outputs = None
        if "outputs" in files:
            outputs = (await run_in_threadpool(files["outputs"].read_bytes), upload.client_names.get("outputs", ""))
        name = fields.get("name")
        unknown_categories = service.parse_unknown_categories(fields.get("unknown_categories"))
    finally:
        await run_in_threadpool(remove_folder, folder)
    row = await run_in_threadpool(
        lambda: service.register(
            session,
            tenant,
            graph_id,
            weights,
            raw,
            name=name if isinstance(name, str) else None,
            unknown_categories=unknown_categories,
            outputs=outputs,
        )
    )
    response.headers["Location"] = f"/v1/models/{row.id}"
    return ModelRead.of(row)


@router.get("", response_model=ModelPage)
def list_models(
    session: SessionDep,
    tenant: ViewerTenant,
    graph_id: uuid.UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> ModelPage:
    """The tenant's models, newest first, optionally of one graph."""
    rows, token = service.list_models(session, tenant, graph_id=graph_id, limit=limit, page_token=page_token)
    return ModelPage(items=[ModelRead.of(r) for r in rows], next_page_token=token)


@router.get("/{model_id}", response_model=ModelRead, responses=problem_responses(404))
def read_model(model_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> ModelRead:
    """The model, with what its registration found reading it on its graph (``warnings``, ``fit``)."""
    return ModelRead.of(service.get_model(session, tenant, model_id))


@router.post(
    "/{model_id}/check",
    response_model=ModelRead,
    responses=problem_responses(404),
    dependencies=[trailed("model.check", "/models/{model_id}")],
)
async def check_model_again(model_id: uuid.UUID, session: SessionDep, tenant: AuditorTenant) -> ModelRead:
    """Read the model on its graph again, as its registration did, and keep what that finds (``warnings``,
    ``warning_codes``, ``fit``): for a model registered before the reading was kept, or since the checks changed.
    A graph above 200,000 nodes is not read (``fit_not_checked`` says so); 422 ``invalid-model`` where the model
    predicts values that are not finite on it."""
    row = await run_in_threadpool(service.read_again, session, tenant, model_id)
    return ModelRead.of(row)


@router.delete(
    "/{model_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404),
    dependencies=[trailed("model.delete", "/models/{model_id}")],
)
def delete_model(model_id: uuid.UUID, session: SessionDep, tenant: AdminTenant) -> Response:
    """Delete a model; audits of it keep their results."""
    service.delete_model(session, tenant, model_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


_OUTPUTS_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["outputs"],
                "properties": {
                    "outputs": {
                        "type": "string",
                        "format": "binary",
                        "description": "The model's own outputs on this version of its graph, as the deployed "
                        "pipeline feeds it this version (logits, log-probabilities or probabilities): an .npy of every "
                        "node in the version's order, or a .csv of node ids and outputs.",
                    }
                },
            }
        }
    },
}


@router.put(
    "/{model_id}/outputs/{graph_id}",
    response_model=VersionOutputsRead,
    openapi_extra={"requestBody": _OUTPUTS_BODY},
    responses=problem_responses(400, 404, 413, 415),
    dependencies=[trailed("model.outputs", "/models/{model_id}")],
)
async def put_version_outputs(
    model_id: uuid.UUID,
    graph_id: uuid.UUID,
    request: Request,
    session: SessionDep,
    tenant: AuditorTenant,
    settings: SettingsDep,
) -> VersionOutputsRead:
    """Keep the model's own outputs on a version of its graph (replacing any given before), so that its audits on
    that version confirm the inputs they carry over: compared now where the graph has at most 200,000 nodes (422
    ``outputs-differ`` where the model as an audit reads that version does not give them, with what most likely
    differs; ``invalid-outputs`` where they do not read), else by its first audit there."""
    await run_in_threadpool(version_outputs.require_owned, session, tenant, model_id, graph_id)  # 404 before a stream
    await run_in_threadpool(session.rollback)  # hold no connection while the body streams
    folder = Path(await run_in_threadpool(tempfile.mkdtemp, prefix="bind-outputs-"))
    try:
        upload = await receive_upload(
            request, folder, settings.max_upload_bytes, file_parts=("outputs",), field_parts=(), what="outputs"
        )
        if "outputs" not in upload.files:
            raise ValidationProblem(
                "The outputs are a file part named outputs.", errors=[{"field": "outputs", "message": "required"}]
            )
        data = await run_in_threadpool(upload.files["outputs"].read_bytes)
        name = upload.client_names.get("outputs", "") or "outputs"
    finally:
        await run_in_threadpool(remove_folder, folder)
    row, number = await run_in_threadpool(
        lambda: version_outputs.put_outputs(session, tenant, model_id, graph_id, data, name)
    )
    return VersionOutputsRead.of(row, number)


@router.get("/{model_id}/outputs", response_model=VersionOutputsPage, responses=problem_responses(404))
def list_version_outputs(
    model_id: uuid.UUID,
    session: SessionDep,
    tenant: ViewerTenant,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> VersionOutputsPage:
    """The model's own outputs kept for versions of its graph, newest first, each with what comparing them found."""
    rows, token = version_outputs.list_outputs(session, tenant, model_id, limit=limit, page_token=page_token)
    return VersionOutputsPage(items=[VersionOutputsRead.of(r, v) for r, v in rows], next_page_token=token)
