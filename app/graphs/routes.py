"""``/v1/graphs``: upload, list, read and delete graphs."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from app.core.deps import SessionDep, SettingsDep
from app.core.pagination import DEFAULT_LIMIT, MAX_LIMIT
from app.core.problem_schema import problem_responses
from app.erasure.service import purge_graph
from app.graphs import service
from app.graphs.schemas import GraphPage, GraphRead
from app.graphs.uploads import receive_upload, remove_folder
from app.tenants.deps import AdminTenant, AuditorTenant, ViewerTenant
from app.trail.record import trailed

router = APIRouter(prefix="/graphs", tags=["graphs"])

_UPLOAD_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "properties": {
                    "nodes": {
                        "type": "string",
                        "format": "binary",
                        "description": "Node table (CSV, TSV or Parquet; CSV/TSV may be gzip or Zstandard compressed).",
                    },
                    "edges": {
                        "type": "string",
                        "format": "binary",
                        "description": "Edge list: two node columns, further columns ignored; may be compressed.",
                    },
                    "npz": {"type": "string", "format": "binary", "description": "Or: one .npz graph archive."},
                    "label": {"type": "string", "description": "Label column of the node table."},
                    "sensitive": {
                        "type": "string",
                        "description": "Sensitive-attribute column, or several comma-separated: their value "
                        "combinations become the (intersectional) groups.",
                    },
                    "features": {
                        "type": "string",
                        "description": "Feature columns, comma-separated (default: all but label, split, node_id). "
                        "Text columns are one-hot encoded, booleans read as 0/1.",
                    },
                    "split": {"type": "string", "description": "Column of train/val/test (default: paper split)."},
                    "node_id": {"type": "string", "description": "Column of node ids the edge list uses."},
                    "unlabeled": {
                        "type": "string",
                        "description": "Label value of unlabeled nodes (e.g. -1); empty cells are unlabeled too.",
                    },
                    "on_unknown_nodes": {
                        "type": "string",
                        "enum": ["error", "drop"],
                        "default": "error",
                        "description": "An edge naming a node absent from the table: refuse the upload or drop it.",
                    },
                    "allow_no_edges": {
                        "type": "boolean",
                        "default": False,
                        "description": "Accept an edge list without edges.",
                    },
                    "impute_missing": {
                        "type": "boolean",
                        "default": False,
                        "description": "Fill missing feature values (numbers: the column's median; text: no category).",
                    },
                    "max_categories": {
                        "type": "integer",
                        "minimum": 1,
                        "default": 20,
                        "description": "Most values of a text feature column that is one-hot encoded.",
                    },
                    "sensitive_bins": {
                        "type": "string",
                        "description": "Groups from a numeric sensitive column: 'age>=25' or bin edges 'age:25,60' "
                        "(several separated by ';').",
                    },
                    "scale": {
                        "type": "boolean",
                        "default": True,
                        "description": "Min-max scale every feature column to [-1, 1], as BIND's code does "
                        "(summary.ingest.scaled keeps each column's range). false keeps the table's own values: "
                        "needed when a model trained on them is audited on this graph.",
                    },
                    "name": {"type": "string", "description": "A name for the graph."},
                },
            }
        }
    },
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=GraphRead,
    openapi_extra={"requestBody": _UPLOAD_BODY},
    responses=problem_responses(400, 413, 415),
    dependencies=[trailed("graph.upload")],
)
async def upload_graph(
    request: Request, response: Response, session: SessionDep, tenant: AuditorTenant, settings: SettingsDep
) -> Any:
    """Upload a graph: a node table and an edge list, or one ``.npz``; validated with bind_core's rules.

    The body is limited to ``BIND_MAX_UPLOAD_BYTES`` (413 past it) and the graph to the configured node,
    edge and column limits (422). Validation errors name the request field at fault (``errors[].field``) with the
    bad ``value`` apart, the file, the column, the rows as a spreadsheet shows them, the offending values and
    their count; their advice names request fields. The summary's ``ingest`` says what
    was encoded, imputed, left unlabeled or dropped.
    """
    # Only the API-key lookup has run on this session: end its transaction so that no database connection
    # is held while a slow client streams the body (the insert below starts a new one).
    await run_in_threadpool(session.rollback)
    folder = Path(await run_in_threadpool(tempfile.mkdtemp, prefix="bind-upload-"))
    try:
        upload = await receive_upload(request, folder, settings.max_upload_bytes)
        parsed = await run_in_threadpool(service.parse_upload, upload, settings)
    finally:
        await run_in_threadpool(remove_folder, folder)
    graph = await run_in_threadpool(service.create_graph, session, tenant, parsed)
    response.headers["Location"] = f"/v1/graphs/{graph.id}"
    return graph


@router.get("", response_model=GraphPage)
def list_graphs(
    session: SessionDep,
    tenant: ViewerTenant,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
    name: Annotated[str | None, Query(max_length=200, description="Only the versions of this name.")] = None,
) -> GraphPage:
    """The tenant's graphs, newest first (with ``name``: that graph's versions, the latest first)."""
    rows, token = service.list_graphs(session, tenant, limit=limit, page_token=page_token, name=name)
    return GraphPage(items=[GraphRead.model_validate(r) for r in rows], next_page_token=token)


@router.get("/{graph_id}", response_model=GraphRead, responses=problem_responses(404))
def read_graph(graph_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Any:
    return service.get_graph(session, tenant, graph_id)


@router.delete(
    "/{graph_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409),
    dependencies=[trailed("graph.delete", "/graphs/{graph_id}", flags={"purge": "graph.purge"})],
)
def delete_graph(
    graph_id: uuid.UUID,
    session: SessionDep,
    tenant: AdminTenant,
    purge: Annotated[bool, Query(description="Also erase every audit of it and all they hold.")] = False,
) -> Response:
    """Delete a graph. Without ``purge``, finished audits of it keep their results and a queued or running audit
    makes it a 409. With ``purge=true``, erase it with its registered models and every audit of it (schedule runs
    included, running ones stopped) and all they hold: results, influence and edge rows, weights, webhook
    deliveries. The trail records the deletion (``graph.delete`` or ``graph.purge``) and nothing of what was erased."""
    if purge:
        purge_graph(session, tenant, graph_id)
    else:
        service.delete_graph(session, tenant, graph_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
