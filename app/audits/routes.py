"""``/v1/audits``: start, read, list and cancel audits, and page through their influence estimates (of training
nodes and, when attributed, of edges). The what-if and its verification jobs are ``app/what_ifs/routes.py``."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response, status

from app.audits import service
from app.audits.schemas import AuditCreate, AuditPage, AuditRead, AuditState, AuditSummary
from app.core.deps import BrokerDep, SessionDep, SettingsDep
from app.core.pagination import DEFAULT_LIMIT, MAX_LIMIT
from app.core.problem_schema import problem_responses
from app.erasure.service import delete_audit as erase_audit
from app.influence.edge_pages import edge_page
from app.influence.edge_schemas import EDGE_SIGN_CONVENTION, EdgeOrder, EdgePage, EdgeRowRead
from app.influence.pages import influence_page
from app.influence.rows import code_names
from app.influence.schemas import SIGN_CONVENTION, InfluenceOrder, InfluencePage, InfluenceRowRead
from app.tenants.deps import AdminTenant, AuditorTenant, ViewerTenant
from app.trail.record import trailed

router = APIRouter(prefix="/audits", tags=["audits"])

LimitQuery = Annotated[int, Query(ge=1, le=MAX_LIMIT)]
TokenQuery = Annotated[str | None, Query(max_length=500)]


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=AuditRead,
    responses=problem_responses(409),
    dependencies=[trailed("audit.create")],
)
def create_audit(
    body: AuditCreate,
    response: Response,
    session: SessionDep,
    tenant: AuditorTenant,
    settings: SettingsDep,
    broker: BrokerDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=255)] = None,
) -> Any:
    """Queue an audit of an uploaded graph or a built-in dataset; poll ``Location`` for its state.

    With an ``Idempotency-Key`` header, repeating the same request returns the same audit (with
    ``Idempotent-Replayed: true``); the same key with another body is a 409.
    """
    audit, created = service.create_audit(
        session, tenant, body, settings=settings, publisher=broker, idempotency_key=idempotency_key
    )
    response.headers["Location"] = f"/v1/audits/{audit.id}"
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    return audit


@router.get("", response_model=AuditPage)
def list_audits(
    session: SessionDep,
    tenant: ViewerTenant,
    graph_id: uuid.UUID | None = None,
    state: AuditState | None = None,
    limit: LimitQuery = DEFAULT_LIMIT,
    page_token: TokenQuery = None,
) -> AuditPage:
    """The tenant's audits, newest first, optionally of one graph or in one state."""
    rows, token = service.list_audits(
        session, tenant, graph_id=graph_id, state=state, limit=limit, page_token=page_token
    )
    return AuditPage(items=[AuditSummary.model_validate(r) for r in rows], next_page_token=token)


@router.get("/{audit_id}", response_model=AuditRead, responses=problem_responses(404))
def read_audit(audit_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Any:
    """State, stage and progress; when succeeded the results, when failed the problem that stopped it."""
    return service.get_audit(session, tenant, audit_id)


@router.post(
    "/{audit_id}/cancel",
    response_model=AuditRead,
    responses=problem_responses(404, 409),
    dependencies=[trailed("audit.cancel", "/audits/{audit_id}")],
)
def cancel_audit(audit_id: uuid.UUID, session: SessionDep, tenant: AuditorTenant) -> Any:
    """Cancel a queued or running audit (a running one stops at its next progress report)."""
    return service.cancel_audit(session, tenant, audit_id)


@router.delete(
    "/{audit_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404),
    dependencies=[trailed("audit.delete", "/audits/{audit_id}")],
)
def delete_audit(audit_id: uuid.UUID, session: SessionDep, tenant: AdminTenant) -> Response:
    """Erase an audit with its results, influence and edge rows, weights and webhook deliveries, in any state
    (a running one stops at its next write). The trail keeps only that it was erased."""
    erase_audit(session, tenant, audit_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/{audit_id}/influence",
    response_model=InfluencePage,
    responses=problem_responses(404, 409),
    dependencies=[trailed("influence.read", "/audits/{audit_id}")],
)
def read_influence(
    audit_id: uuid.UUID,
    session: SessionDep,
    tenant: ViewerTenant,
    order: InfluenceOrder = InfluenceOrder.harmful,
    limit: LimitQuery = DEFAULT_LIMIT,
    page_token: TokenQuery = None,
) -> InfluencePage:
    """Each training node's estimated effect on bias: ``harmful`` (most negative delta first), ``helpful``
    (most positive first) or by ``node`` index. A node without a value (null deltas, ``no_minimum`` true: its
    deletion has no minimum near the weights) comes last in ``harmful`` and ``helpful``, by position. 409 until the
    audit has influence estimates."""
    audit = service.get_audit(session, tenant, audit_id)
    rows, token = influence_page(session, audit, order=order, limit=limit, page_token=page_token)
    groups, classes = code_names(audit)
    return InfluencePage(
        audit_id=audit.id,
        order=order,
        sign_convention=SIGN_CONVENTION,
        items=[InfluenceRowRead.model_validate(r).named(groups, classes) for r in rows],
        next_page_token=token,
    )


@router.get(
    "/{audit_id}/edges",
    response_model=EdgePage,
    responses=problem_responses(404, 409),
    dependencies=[trailed("edges.read", "/audits/{audit_id}")],
)
def read_edges(
    audit_id: uuid.UUID,
    session: SessionDep,
    tenant: ViewerTenant,
    order: EdgeOrder = EdgeOrder.harmful,
    limit: LimitQuery = DEFAULT_LIMIT,
    page_token: TokenQuery = None,
) -> EdgePage:
    """Each undirected edge's estimated effect on bias (an audit run with ``edges: true``): ``harmful`` (most
    negative delta first), ``helpful`` (most positive first) or by ``edge`` position. 409 ``audit-not-succeeded``
    until the audit succeeded, ``edges-not-computed`` when it did not attribute edges (the detail says why)."""
    audit = service.get_audit(session, tenant, audit_id)
    rows, token = edge_page(session, audit, order=order, limit=limit, page_token=page_token)
    groups, _ = code_names(audit)
    return EdgePage(
        audit_id=audit.id,
        order=order,
        sign_convention=EDGE_SIGN_CONVENTION,
        items=[EdgeRowRead.model_validate(r).named(groups) for r in rows],
        next_page_token=token,
    )
