"""``/v1/audits/{id}/what-if`` (the estimate, answered at once, and with ``verify`` the job that checks it) and
``/v1/audits/{id}/what-ifs`` (the verification jobs: read, list, cancel)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status

from app.audits.service import get_audit
from app.core.deps import BrokerDep, SessionDep
from app.core.pagination import DEFAULT_LIMIT, MAX_LIMIT
from app.core.problem_schema import problem_responses
from app.influence.schemas import SIGN_CONVENTION, WhatIfCreate, WhatIfRead
from app.tenants.deps import AuditorTenant, PrincipalDep, ViewerTenant
from app.tenants.roles import check_role
from app.trail.record import append, trailed
from app.what_ifs import service
from app.what_ifs.choice import choose
from app.what_ifs.schemas import WhatIfJobPage, WhatIfJobRead, WhatIfJobSummary
from bind_core.codec import encode

router = APIRouter(prefix="/audits", tags=["audits"])  # nested under audits, as the what-if always was


def job_location(audit_id: uuid.UUID, job_id: uuid.UUID) -> str:
    """The job's URL path."""
    return f"/v1/audits/{audit_id}/what-ifs/{job_id}"


@router.post(
    "/{audit_id}/what-if",
    response_model=WhatIfRead | WhatIfJobRead,
    responses={**problem_responses(404, 409), 202: {"model": WhatIfJobRead, "description": "verify: the queued job"}},
    dependencies=[trailed("what_if.estimate", "/audits/{audit_id}")],
)
def what_if(
    audit_id: uuid.UUID,
    body: WhatIfCreate,
    response: Response,
    session: SessionDep,
    tenant: ViewerTenant,
    principal: PrincipalDep,
    broker: BrokerDep,
) -> Any:
    """The estimated ΔΓ, ΔΓ_SP and ΔΓ_EO of deleting the chosen training nodes at once (the user's ids in ``nodes``,
    the ``top`` most harmful, or the members of profile ``rule``): the sum of the members' estimates, answered at
    once. 422 names ids that are not training nodes of the audit; 409 until the audit has influence estimates.

    With ``verify: true`` (role auditor; the trail also records ``what_if.verify``) it also queues a job that deletes
    the set, retrains over ``seeds`` and compares with ``random_sets`` random sets of the same size: 202,
    ``Location`` the job. 409 when the audit did not succeed or kept no model; 422 ``too-many-nodes`` beyond half
    the training nodes."""
    audit = get_audit(session, tenant, audit_id)
    chosen, chosen_by = choose(session, audit, nodes=body.nodes, top=body.top, rule=body.rule)
    if not body.verify:
        return WhatIfRead(audit_id=audit.id, sign_convention=SIGN_CONVENTION, **encode(chosen.estimate))
    check_role(principal.role, "auditor")
    job = service.create_job(
        session,
        tenant,
        audit,
        chosen,
        chosen_by=chosen_by,
        seeds=body.seeds,
        random_sets=body.random_sets,
        publisher=broker,
    )
    target = job_location(audit.id, job.id).removeprefix("/v1")
    append(
        session,
        tenant_id=tenant.id,
        action="what_if.verify",
        target=target,
        outcome="succeeded",
        actor_key_id=principal.key_id,
        status=202,
    )
    response.status_code = status.HTTP_202_ACCEPTED
    response.headers["Location"] = job_location(audit.id, job.id)
    return WhatIfJobRead.model_validate(job)


@router.get("/{audit_id}/what-ifs", response_model=WhatIfJobPage, responses=problem_responses(404))
def list_what_ifs(
    audit_id: uuid.UUID,
    session: SessionDep,
    tenant: ViewerTenant,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
) -> WhatIfJobPage:
    """The audit's what-if verification jobs, newest first."""
    audit = get_audit(session, tenant, audit_id)
    rows, token = service.list_jobs(session, tenant, audit.id, limit=limit, page_token=page_token)
    return WhatIfJobPage(items=[WhatIfJobSummary.model_validate(r) for r in rows], next_page_token=token)


@router.get("/{audit_id}/what-ifs/{job_id}", response_model=WhatIfJobRead, responses=problem_responses(404))
def read_what_if(audit_id: uuid.UUID, job_id: uuid.UUID, session: SessionDep, tenant: ViewerTenant) -> Any:
    """State and progress; when succeeded the estimate and the measured effect side by side, when failed the
    problem that stopped it."""
    return service.get_job(session, tenant, audit_id, job_id)


@router.post(
    "/{audit_id}/what-ifs/{job_id}/cancel",
    response_model=WhatIfJobRead,
    responses=problem_responses(404, 409),
    dependencies=[trailed("what_if.cancel", "/audits/{audit_id}")],
)
def cancel_what_if(audit_id: uuid.UUID, job_id: uuid.UUID, session: SessionDep, tenant: AuditorTenant) -> Any:
    """Cancel a queued or running verification (a running one stops at its next progress report)."""
    return service.cancel_job(session, tenant, audit_id, job_id)
