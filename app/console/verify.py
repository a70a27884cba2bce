"""The console's what-if verification: the Verify button under an estimate queues the job (as ``POST
/v1/audits/{id}/what-if`` with ``verify``), and the job's page shows its state while it runs (refreshing, like an
audit's) and then the estimate, the measured effect and the verdict against chance side by side."""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Form
from fastapi.responses import RedirectResponse, Response

from app.audits import service as audits
from app.console.audit_models import what_if_model
from app.console.deps import ConsoleAuditorDep, ConsoleUserDep, check_csrf
from app.console.pages import page, refused
from app.console.verify_view import job_view
from app.console.what_if_form import form_choice, what_if_page
from app.core.deps import BrokerDep, SessionDep
from app.core.errors import ProblemError
from app.trail.record import trailed
from app.what_ifs import service as jobs
from app.what_ifs.choice import choose

router = APIRouter(prefix="/console", include_in_schema=False)
FormText = Annotated[str, Form(max_length=200)]


@router.post("/audits/{audit_id}/what-if/verify", dependencies=[trailed("what_if.verify", "/audits/{audit_id}")])
def verify(
    audit_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleAuditorDep,
    broker: BrokerDep,
    response: Response,
    csrf: FormText = "",
    nodes: Annotated[str, Form(max_length=200_000)] = "",
    top: FormText = "",
    rule: FormText = "",
    random_sets: Annotated[int, Form(ge=1, le=10)] = 3,
) -> Response:
    """Queue the verification of the what-if in the form (its seeds: the audit's, else three; ``random_sets`` random
    sets to compare with) and show its page; on a problem, the what-if page with it."""
    check_csrf(user, csrf)
    audit = audits.get_audit(session, user.tenant, audit_id)
    form = {"nodes": nodes, "top": top, "rule": rule}
    try:
        chosen, chosen_by = choose(session, audit, **form_choice(form))
        job = jobs.create_job(
            session,
            user.tenant,
            audit,
            chosen,
            chosen_by=chosen_by,
            seeds=None,
            random_sets=random_sets,
            publisher=broker,
        )
    except ProblemError as exc:
        if exc.status in (403, 404):
            raise
        refused(response, exc.status)
        return what_if_page(user, audit, form, estimate=None, problem=exc)
    return RedirectResponse(f"/console/audits/{audit_id}/what-ifs/{job.id}", status_code=303)


@router.get("/audits/{audit_id}/what-ifs/{job_id}")
def job_page(audit_id: uuid.UUID, job_id: uuid.UUID, session: SessionDep, user: ConsoleUserDep) -> Response:
    """A what-if verification: state and progress while it runs, then the estimate and the measured effect."""
    job = jobs.get_job(session, user.tenant, audit_id, job_id)
    view = job_view(job)
    return page(
        "what_if_job.html",
        user,
        title=f"Verified what-if · audit {audit_id} · bind-audit",
        audit_id=str(audit_id),
        job=view,
        model=what_if_model(session, audit_id, job_id),
        refresh=view["running"],
    )


@router.post(
    "/audits/{audit_id}/what-ifs/{job_id}/cancel",
    status_code=303,
    dependencies=[trailed("what_if.cancel", "/audits/{audit_id}")],
)
def job_cancel(
    audit_id: uuid.UUID, job_id: uuid.UUID, session: SessionDep, user: ConsoleAuditorDep, csrf: FormText = ""
) -> Response:
    """Cancel a queued or running verification (as ``POST /v1/audits/{id}/what-ifs/{job_id}/cancel``)."""
    check_csrf(user, csrf)
    jobs.cancel_job(session, user.tenant, audit_id, job_id)
    return RedirectResponse(f"/console/audits/{audit_id}/what-ifs/{job_id}", status_code=303)
