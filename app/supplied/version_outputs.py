"""A supplied model's own outputs on later versions of its graph (``PUT /v1/models/{id}/outputs/{graph_id}``).

A deployed model is audited on each new snapshot of its graph with its inputs carried over to its registration's
(each column by name, scaled as at registration: :func:`bind_core.pipeline.carry_inputs`). Its owner's outputs on a
snapshot, as the deployed pipeline feeds it that snapshot, confirm that carry as its registration's outputs confirmed
the first graph's inputs; where they differ, the pipeline feeds the model otherwise (a scaler fitted again on the
new snapshot, another encoding), which is refused at upload, or fails the audit that compares them. On a graph small
enough for a registration to read (:data:`~app.supplied.fit.CHECK_MAX_NODES`) they are compared when uploaded;
above it they are kept and the model's first audit on that version compares them (``match`` null until then).
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, defer

from app.core.db.tables import Graph, SuppliedModel, Tenant, VersionOutputs
from app.core.errors import Conflict, NotFound, ValidationProblem, bind_error_problem
from app.core.pagination import newest_first
from app.graphs.loading import graph_bytes
from app.graphs.model_inputs import carry_to, registration
from app.supplied.fit import check_on_graph, too_large
from app.supplied.loading import matched
from bind_core import BindError
from bind_core.data.datasets import load_npz


def put_outputs(
    session: Session, tenant: Tenant, model_id: uuid.UUID, graph_id: uuid.UUID, data: bytes, name: str
) -> tuple[VersionOutputs, int]:
    """Keep the model's own outputs on the graph version ``graph_id`` (replacing any given before), compared with
    the model as an audit reads that version where the graph is small enough (CPU-heavy: call from a worker thread).
    Returns the row kept and the version's number.

    Raises:
        NotFound: no such model, or no such graph, for the tenant.
        ValidationProblem: the graph is not a version of the model's graph (``graph_id``); the outputs do not read
            (``invalid-outputs``) or the model as read there does not give them (``outputs-differ``); the version
            does not give the model its inputs (``model-does-not-fit``).
    """
    model, version = require_owned(session, tenant, model_id, graph_id)
    number = version.version
    registered = session.scalar(select(Graph.name).where(Graph.id == model.graph_id))
    if version.name != registered:
        message = f"not a version of {registered!r}, the graph the model was registered for"
        raise ValidationProblem(
            f"Graph {graph_id} ({version.name!r}) is {message}.", errors=[{"field": "graph_id", "message": message}]
        )
    match = None if too_large(version.summary) is not None else _compared(session, model, graph_id, data, name)
    session.execute(
        delete(VersionOutputs).where(VersionOutputs.model_id == model_id, VersionOutputs.graph_id == graph_id)
    )
    row = VersionOutputs(
        model_id=model_id,
        graph_id=graph_id,
        tenant_id=tenant.id,
        outputs=data,
        outputs_name=name[:200],
        size_bytes=len(data),
        match=match,
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError as exc:  # another upload for the same version was kept meanwhile
        session.rollback()
        raise Conflict(
            "Other outputs of this model on this version were kept at the same moment: send them again to replace "
            "those.",
            slug="outputs-conflict",
        ) from exc
    return row, number


def require_owned(
    session: Session, tenant: Tenant, model_id: uuid.UUID, graph_id: uuid.UUID
) -> tuple[SuppliedModel, Graph]:
    """The tenant's model and graph (checked before an upload is read, so that another tenant's ids are a 404 and
    not a stream).

    Raises:
        NotFound: either is not the tenant's.
    """
    model = session.scalar(
        select(SuppliedModel).where(SuppliedModel.id == model_id, SuppliedModel.tenant_id == tenant.id)
    )
    if model is None:
        raise NotFound("model", model_id)
    version = session.scalar(select(Graph).where(Graph.id == graph_id, Graph.tenant_id == tenant.id))
    if version is None:
        raise NotFound("graph", graph_id)
    return model, version


def _compared(
    session: Session, model: SuppliedModel, graph_id: uuid.UUID, data: bytes, name: str
) -> dict[str, object] | None:
    """The match of the outputs with the model as an audit reads the version (its inputs carried over where it is
    not the registration's own graph), as its registration compares them."""
    version_bytes, registered_bytes = graph_bytes(session, graph_id), graph_bytes(session, model.graph_id)
    if version_bytes is None or registered_bytes is None:  # deleted meanwhile: the first audit fails as it would
        return None
    graph, carried = load_npz(version_bytes), None
    registered = registration(session, model.id)
    if registered is not None and graph_id != registered.graph_id:
        try:
            graph, carried = carry_to(graph, load_npz(registered_bytes), registered)
        except BindError as exc:
            raise bind_error_problem(exc) from exc
    check = check_on_graph(model.weights, model.config, graph, (data, name), carried=carried)
    return None if check.fit is None else check.fit.get("outputs")


def list_outputs(
    session: Session, tenant: Tenant, model_id: uuid.UUID, *, limit: int, page_token: str | None
) -> tuple[list[tuple[VersionOutputs, int]], str | None]:
    """The outputs kept for the model's graph versions, newest first, each with its graph's version number.

    Raises:
        NotFound: no such model for the tenant.
    """
    if (
        session.scalar(
            select(SuppliedModel.id).where(SuppliedModel.id == model_id, SuppliedModel.tenant_id == tenant.id)
        )
        is None
    ):
        raise NotFound("model", model_id)
    stmt = select(VersionOutputs).options(defer(VersionOutputs.outputs)).where(VersionOutputs.model_id == model_id)
    rows, token = newest_first(session, stmt, VersionOutputs, kind="version-outputs", limit=limit, token=page_token)
    of_rows = select(Graph.id, Graph.version).where(Graph.id.in_([r.graph_id for r in rows]))
    versions = {graph_id: version for graph_id, version in session.execute(of_rows)}
    return [(row, versions.get(row.graph_id, 0)) for row in rows], token


def given_on(session: Session, model_id: uuid.UUID, graph_id: uuid.UUID) -> tuple[str, dict[str, Any] | None] | None:
    """The model's name and what comparing its outputs kept for the version ``graph_id`` found (``None``: not yet
    compared), or ``None`` where none are kept."""
    row = session.execute(
        select(SuppliedModel.name, VersionOutputs.match)
        .join(SuppliedModel, SuppliedModel.id == VersionOutputs.model_id)
        .where(VersionOutputs.model_id == model_id, VersionOutputs.graph_id == graph_id)
    ).one_or_none()
    return None if row is None else (row.name, row.match)


def matched_on(session: Session, graph_id: uuid.UUID, model_ids: list[uuid.UUID]) -> dict[uuid.UUID, bool]:
    """For each of ``model_ids`` with outputs kept for the version ``graph_id``: whether comparing them found a match
    (``False``: not yet compared)."""
    rows = session.execute(
        select(VersionOutputs.model_id, VersionOutputs.match).where(
            VersionOutputs.graph_id == graph_id, VersionOutputs.model_id.in_(model_ids)
        )
    )
    return {model_id: matched(match) is not None for model_id, match in rows}
