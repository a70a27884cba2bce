"""``/console``: sign in with an API key, then the tenant's graphs, audits (with their reports and exports),
schedules and webhooks as server-rendered pages (the webhooks' in ``app/console/webhook_forms.py``).

The key's role applies as in the API: any role reads, cancelling needs ``auditor``, the webhooks page ``admin``.
Cancelling, signing in and out and every read of a report or an export leave an entry in the audit trail.

Authentication is a signed session cookie (``app/console/cookies.py``, ``app/console/deps.py``); every form POST
carries the session's CSRF token. Pages read through the features' services with the signed-in tenant, so the
console sees exactly what the tenant's API key sees; reports and exports are the API's own route functions.
"""

from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from app.audits import service as audits
from app.console import audit_models, outputs_form, schedule_form, verify, webhook_forms, workbench
from app.console.compare import metric_rows, node_comparison
from app.console.cookies import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    SIGN_IN_SECONDS,
    new_session,
    new_sign_in,
    same_token,
    sign_in_token,
)
from app.console.deps import (
    SIGN_IN_PATH,
    ConsoleAuditorDep,
    ConsoleUserDep,
    SignInRequired,
    check_csrf,
)
from app.console.detail import audit_sections
from app.console.headlines import headlines
from app.console.pages import clear_cookie, next_query, page, set_cookie
from app.console.problems import problem_page
from app.console.verify_view import verification_rows
from app.console.views import audit_row, audit_verdict, graph_row, schedule_row
from app.console.what_if_form import rule_options
from app.core.db.tables import AUDIT_STATES
from app.core.deps import SessionDep, SettingsDep
from app.core.errors import Forbidden
from app.core.problems import serve_problem_pages
from app.core.ratelimit import AuthFailureGuard
from app.graphs import service as graphs
from app.reports import routes as reports
from app.schedules import routes as schedule_routes
from app.schedules import service as schedules
from app.tenants.keys import find_key
from app.trail.record import append, trailed

router = APIRouter(prefix="/console", include_in_schema=False)

PAGE_SIZE = 20
SPARK_RUNS = 30
HOME = "/console/audits"
PageToken = Annotated[str | None, Query(max_length=500)]
Limit = Annotated[int, Query(ge=1, le=200)]


def install(app: FastAPI) -> None:
    """Mount the console on ``app``: its routes, and a redirect to sign in wherever a session is missing."""
    app.include_router(workbench.router)
    app.include_router(schedule_form.router)
    app.include_router(audit_models.router)
    app.include_router(outputs_form.router)
    app.include_router(verify.router)
    app.include_router(webhook_forms.router)
    app.include_router(router)

    async def to_sign_in(_: Request, __: Exception) -> Response:
        return RedirectResponse(SIGN_IN_PATH, status_code=303)

    app.add_exception_handler(SignInRequired, to_sign_in)
    serve_problem_pages(app, "/console", problem_page)  # an unknown id, a bad form...: a page, not problem+json


def _sign_in_page(request: Request, settings: SettingsDep, *, error: str | None, status_code: int) -> Response:
    value, token = new_sign_in(settings.console_secret.get_secret_value())
    response = page(
        "sign_in.html", None, status_code=status_code, title="Sign in · bind-audit", form_csrf=token, error=error
    )
    set_cookie(response, request, SIGN_IN_COOKIE, value, max_age=SIGN_IN_SECONDS)
    return response


@router.get("")
def home() -> Response:
    return RedirectResponse(HOME, status_code=303)


@router.get("/sign-in")
def sign_in_form(request: Request, settings: SettingsDep) -> Response:
    """The sign-in form (and the short-lived cookie holding its CSRF token)."""
    return _sign_in_page(request, settings, error=None, status_code=200)


@router.post("/sign-in")
def sign_in(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    api_key: Annotated[str, Form(max_length=200)] = "",
    csrf: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    """Check the API key as the API does (failures throttled per address); on success set the session cookie."""
    secret = settings.console_secret.get_secret_value()
    if not same_token(sign_in_token(secret, request.cookies.get(SIGN_IN_COOKIE)), csrf):
        raise Forbidden("The sign-in form's CSRF token is missing or expired; reload the sign-in page.")
    guard: AuthFailureGuard | None = getattr(request.app.state, "auth_failure_guard", None)
    client = request.client.host if request.client else "unknown"
    if guard is not None:
        guard.before(client)
    key = find_key(session, api_key.strip())
    if key is None:
        if guard is not None:
            guard.failed(client)
        return _sign_in_page(request, settings, error="That API key is unknown or revoked.", status_code=401)
    append(
        session,
        tenant_id=key.tenant_id,
        actor_key_id=key.id,
        action="console.sign_in",
        target=None,
        outcome="succeeded",
        status=303,
    )
    value, _ = new_session(secret, key.id, settings.console_session_seconds)
    response = RedirectResponse(HOME, status_code=303)
    set_cookie(response, request, SESSION_COOKIE, value, max_age=settings.console_session_seconds)
    clear_cookie(response, request, SIGN_IN_COOKIE)
    return response


@router.post("/sign-out", status_code=303, dependencies=[trailed("console.sign_out")])
def sign_out(request: Request, user: ConsoleUserDep, csrf: Annotated[str, Form(max_length=200)] = "") -> Response:
    """End the session: the cookie is cleared (CSRF-checked, so another site cannot sign a user out)."""
    check_csrf(user, csrf)
    response = RedirectResponse(SIGN_IN_PATH, status_code=303)
    clear_cookie(response, request, SESSION_COOKIE)
    return response


@router.get("/graphs")
def graph_list(
    session: SessionDep,
    user: ConsoleUserDep,
    page_token: PageToken = None,
    limit: Limit = PAGE_SIZE,
    name: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    """The tenant's graphs, one row per version, newest first (``name``: every version of one graph)."""
    rows, token = graphs.list_graphs(session, user.tenant, limit=limit, page_token=page_token, name=name)
    return page(
        "graphs.html",
        user,
        title="Graphs · bind-audit",
        graphs=[graph_row(g) for g in rows],
        name=name,
        next_query=next_query({"name": name, "limit": limit}, token),
    )


@router.get("/audits")
def audit_list(
    session: SessionDep,
    user: ConsoleUserDep,
    page_token: PageToken = None,
    limit: Limit = PAGE_SIZE,
    state: Annotated[str | None, Query(pattern="^(" + "|".join(AUDIT_STATES) + ")$")] = None,
    graph: Annotated[uuid.UUID | None, Query()] = None,
) -> Response:
    """The tenant's audits, newest first (``state``, ``graph``: only those), with state, stage, progress and the
    headline figures; refreshes while any is running."""
    rows, token = audits.list_audits(
        session, user.tenant, graph_id=graph, state=state, limit=limit, page_token=page_token
    )
    heads = headlines(session, rows)
    shown = [audit_row(a) | heads.get(a.id, {}) for a in rows]
    following = next_query({"state": state, "graph": str(graph) if graph else None, "limit": limit}, token)
    return page(
        "audits.html",
        user,
        title="Audits · bind-audit",
        audits=shown,
        state=state,
        graph=str(graph) if graph else None,
        states=AUDIT_STATES,
        refresh=any(a["running"] for a in shown),
        next_query=following,
    )


@router.get("/compare")
def compare(
    session: SessionDep,
    user: ConsoleUserDep,
    a: Annotated[uuid.UUID, Query()],
    b: Annotated[uuid.UUID, Query()],
) -> Response:
    """Two of the tenant's audits side by side: metrics with intervals and differences, the overlap of their most
    harmful training nodes and the nodes whose estimates moved most."""
    first, second = audits.get_audit(session, user.tenant, a), audits.get_audit(session, user.tenant, b)
    return page(
        "compare.html",
        user,
        title="Compare audits · bind-audit",
        a=audit_row(first) | {"verdict": audit_verdict(first)},
        b=audit_row(second) | {"verdict": audit_verdict(second)},
        metrics=metric_rows(first.results or {}, second.results or {}),
        nodes=node_comparison(session, first, second),
    )


@router.get("/audits/{audit_id}")
def audit_detail(
    audit_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleUserDep,
    model_error: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """One audit: state, stage, progress, its problem if it failed, links to its report and exports, and each
    debiasing budget's retrained model (``model_error``: why registering one failed, by its problem's slug)."""
    audit = audits.get_audit(session, user.tenant, audit_id)
    row = audit_row(audit) | headlines(session, [audit]).get(audit.id, {})
    return page(
        "audit.html",
        user,
        title=f"Audit {audit_id} · bind-audit",
        audit=row,
        refresh=row["running"],
        verdict=audit_verdict(audit),
        detail=audit_sections(audit.results) if audit.state == "succeeded" else None,
        models=audit_models.budget_models(session, audit),
        model_error=audit_models.REGISTER_ERRORS.get(model_error or ""),
        rule_options=rule_options(audit),
        verifications=verification_rows(session, user.tenant, audit),
    )


@router.post("/audits/{audit_id}/cancel", status_code=303, dependencies=[trailed("audit.cancel", "/audits/{audit_id}")])
def audit_cancel(
    audit_id: uuid.UUID, session: SessionDep, user: ConsoleAuditorDep, csrf: Annotated[str, Form(max_length=200)] = ""
) -> Response:
    """Cancel a queued or running audit (as ``POST /v1/audits/{id}/cancel``)."""
    check_csrf(user, csrf)
    audits.cancel_audit(session, user.tenant, audit_id)
    return RedirectResponse(f"/console/audits/{audit_id}", status_code=303)


@router.get("/audits/{audit_id}/report", dependencies=[trailed("report.read", "/audits/{audit_id}")])
def audit_report(audit_id: uuid.UUID, session: SessionDep, user: ConsoleUserDep) -> Response:
    """The audit's report, as ``GET /v1/audits/{id}/report`` serves it."""
    return reports.read_report(audit_id, session, user.tenant)


@router.get("/audits/{audit_id}/influence.csv", dependencies=[trailed("export.influence_csv", "/audits/{audit_id}")])
def audit_csv(audit_id: uuid.UUID, session: SessionDep, user: ConsoleUserDep) -> Response:
    return reports.read_influence_csv(audit_id, session, user.tenant)


@router.get(
    "/audits/{audit_id}/influence.parquet",
    dependencies=[trailed("export.influence_parquet", "/audits/{audit_id}")],
)
def audit_parquet(audit_id: uuid.UUID, session: SessionDep, user: ConsoleUserDep) -> Response:
    return reports.read_influence_parquet(audit_id, session, user.tenant)


@router.get("/audits/{audit_id}/export", dependencies=[trailed("export.model_card", "/audits/{audit_id}")])
def audit_export(audit_id: uuid.UUID, session: SessionDep, user: ConsoleUserDep) -> Response:
    """The model card export as JSON, as a download."""
    card = reports.read_export(audit_id, session, user.tenant)
    return JSONResponse(card, headers={"Content-Disposition": f'attachment; filename="model-card-{audit_id}.json"'})


@router.get("/schedules")
def schedule_list(
    session: SessionDep, user: ConsoleUserDep, page_token: PageToken = None, limit: Limit = PAGE_SIZE
) -> Response:
    """The tenant's schedules: their latest values against the thresholds and a sparkline of recent runs."""
    rows, token = schedules.list_schedules(session, user.tenant, limit=limit, page_token=page_token)
    shown = [
        schedule_row(
            s, schedules.history(session, s, limit=SPARK_RUNS), schedules.model_label(session, s, with_id=False)
        )
        for s in rows
    ]
    return page(
        "schedules.html",
        user,
        title="Schedules · bind-audit",
        schedules=shown,
        next_query=next_query({"limit": limit}, token),
    )


@router.get("/schedules/{schedule_id}/report", dependencies=[trailed("report.read", "/schedules/{schedule_id}")])
def schedule_report(schedule_id: uuid.UUID, session: SessionDep, user: ConsoleUserDep) -> Response:
    """The schedule's history page, as ``GET /v1/schedules/{id}/report`` serves it."""
    return schedule_routes.schedule_report(schedule_id, session, user.tenant)
