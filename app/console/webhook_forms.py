"""The console's webhooks page (role ``admin``): the tenant's subscriptions with their recent deliveries, a form that
subscribes a URL (``POST /v1/webhooks``: the signing secret shown once, on the page the form redirects to), and on each
subscription forms that change its events and warning codes (``PATCH /v1/webhooks/{id}``) or delete it with its log.
Each goes through the webhooks service with the API's checks and trail entries; a refusal is shown on its form, in
the form's own labels."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.console.cookies import SHOWN_COOKIE, SHOWN_PATH, SHOWN_SECONDS, read_shown, shown_once
from app.console.deps import ConsoleAdminDep, ConsoleUser, check_csrf
from app.console.form_errors import form_refusal
from app.console.pages import clear_cookie, next_query, page, refused, set_cookie
from app.console.views import webhook_row, when
from app.core.deps import BrokerDep, SessionDep, SettingsDep
from app.core.errors import ProblemError, ValidationProblem
from app.core.settings import Settings
from app.trail.record import trailed
from app.webhooks import resend
from app.webhooks import service as webhooks
from app.webhooks.schemas import WebhookCreate, WebhookUpdate
from bind_core.pipeline import WARNING_CODES

router = APIRouter(prefix="/console", include_in_schema=False)

PAGE_SIZE = 20
DELIVERIES_SHOWN = 5
FormText = Annotated[str, Form(max_length=2000)]
FormList = Annotated[list[str], Form(max_length=40)]

EVENTS: dict[str, str] = {
    "audit.succeeded": "an audit finished: its figures, its verdict, and why there is none where it was withheld",
    "audit.failed": "an audit failed: its problem",
    "audit.warned": "a running audit warned, once its model and metrics are in (the codes below narrow it)",
    "schedule.threshold_exceeded": "a scheduled run crossed one of its schedule's alert thresholds",
}
"""The events a subscription takes, each with what it tells the receiver."""


@router.get("/webhooks")
def webhook_list(
    request: Request,
    session: SessionDep,
    user: ConsoleAdminDep,
    settings: SettingsDep,
    page_token: Annotated[str | None, Query(max_length=500)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = PAGE_SIZE,
) -> Response:
    """The tenant's webhooks, each with its most recent deliveries, and the form that subscribes a new one; after
    a form that made a signing secret, that secret, this once."""
    secret = settings.console_secret.get_secret_value()
    shown = read_shown(secret, user.session.key_id, request.cookies.get(SHOWN_COOKIE))
    kind = shown.pop("kind", None) if shown is not None else None
    answer = webhooks_view(
        session,
        user,
        page_token=page_token,
        limit=limit,
        created=shown if kind == "created" else None,
        rotated=shown if kind == "rotated" else None,
    )
    if shown is not None:
        clear_cookie(answer, request, SHOWN_COOKIE, path=SHOWN_PATH)
    return answer


def _show_once(request: Request, settings: Settings, user: ConsoleUser, shown: dict[str, Any]) -> Response:
    """Redirect to the webhooks page, which shows ``shown`` (a new secret) once: a reload of the page sends no form
    again (a second subscription, another rotation) and no longer shows the secret."""
    value = shown_once(settings.console_secret.get_secret_value(), user.session.key_id, shown)
    answer = RedirectResponse(f"/console/webhooks#webhook-{shown['id']}", status_code=303)
    set_cookie(answer, request, SHOWN_COOKIE, value, max_age=SHOWN_SECONDS, path=SHOWN_PATH)
    return answer


@router.post("/webhooks", status_code=303, dependencies=[trailed("webhook.create")])
def webhook_create(
    request: Request,
    session: SessionDep,
    user: ConsoleAdminDep,
    settings: SettingsDep,
    response: Response,
    csrf: FormText = "",
    url: FormText = "",
    events: FormList = [],  # noqa: B006  # FastAPI copies a form default
    warning_codes: FormList = [],  # noqa: B006
) -> Response:
    """Subscribe ``url``, then the webhooks page, which shows the signing secret this once; a refusal on the form."""
    check_csrf(user, csrf)
    form = {"url": url, "events": events, "warning_codes": warning_codes}
    try:
        body = {"url": url.strip(), "events": events, "warning_codes": warning_codes or None}
        row, secret = webhooks.create_webhook(
            session, user.tenant, WebhookCreate.model_validate(body), settings=settings
        )
    except (ValidationError, ProblemError) as exc:
        problem = form_refusal(exc, "The webhook's settings are not valid.")
        refused(response, problem.status)
        return webhooks_view(session, user, form=form, problem=problem)
    response.headers["Location"] = f"/v1/webhooks/{row.id}"  # the trail entry's target, as the API's create records
    return _show_once(request, settings, user, {"kind": "created", "id": str(row.id), "url": row.url, "secret": secret})


@router.post(
    "/webhooks/{webhook_id}", status_code=303, dependencies=[trailed("webhook.update", "/webhooks/{webhook_id}")]
)
def webhook_update(
    webhook_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleAdminDep,
    response: Response,
    csrf: FormText = "",
    events: FormList = [],  # noqa: B006
    warning_codes: FormList = [],  # noqa: B006
) -> Response:
    """Change the subscription's events and warning codes (none ticked: every warned audit); URL and secret stay."""
    check_csrf(user, csrf)
    webhooks.get_webhook(session, user.tenant, webhook_id)  # 404 for another tenant's, before anything
    try:
        body = WebhookUpdate.model_validate({"events": events, "warning_codes": warning_codes or None})
        webhooks.update_webhook(session, user.tenant, webhook_id, body)
    except (ValidationError, ProblemError) as exc:
        edit = {"id": str(webhook_id), "events": events, "warning_codes": warning_codes}
        problem = form_refusal(exc, "The change is not valid; the webhook is as it was.")
        refused(response, problem.status)
        return webhooks_view(session, user, edit=edit, edit_problem=problem)
    return _back_to(webhook_id)


@router.post(
    "/webhooks/{webhook_id}/delete",
    status_code=303,
    dependencies=[trailed("webhook.delete", "/webhooks/{webhook_id}")],
)
def webhook_delete(
    webhook_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleAdminDep,
    response: Response,
    csrf: FormText = "",
    confirm: FormText = "",
) -> Response:
    """Delete the subscription and its delivery log (pending retries dropped), once ``confirm`` is ticked."""
    check_csrf(user, csrf)
    webhooks.get_webhook(session, user.tenant, webhook_id)
    if confirm != "yes":
        why = "tick the box to confirm: the webhook and its delivery log are deleted for good"
        problem = ValidationProblem("Nothing was deleted.", errors=[{"field": "confirm", "message": why}])
        refused(response, problem.status)
        return webhooks_view(session, user, edit={"id": str(webhook_id)}, edit_problem=problem)
    webhooks.delete_webhook(session, user.tenant, webhook_id)
    return RedirectResponse("/console/webhooks", status_code=303)


@router.post(
    "/webhooks/{webhook_id}/ping", status_code=303, dependencies=[trailed("webhook.ping", "/webhooks/{webhook_id}")]
)
def webhook_ping(
    webhook_id: uuid.UUID, session: SessionDep, user: ConsoleAdminDep, broker: BrokerDep, csrf: FormText = ""
) -> Response:
    """Send the webhook a test event (``POST /v1/webhooks/{id}/ping``); back to it, where its log shows how it went."""
    check_csrf(user, csrf)
    resend.ping(session, user.tenant, webhook_id, publisher=broker)
    return _back_to(webhook_id)


@router.post(
    "/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver",
    status_code=303,
    dependencies=[trailed("webhook.redeliver", "/webhooks/{webhook_id}/deliveries/{delivery_id}")],
)
def webhook_redeliver(
    webhook_id: uuid.UUID,
    delivery_id: uuid.UUID,
    session: SessionDep,
    user: ConsoleAdminDep,
    broker: BrokerDep,
    csrf: FormText = "",
) -> Response:
    """Send a finished delivery again (``POST …/deliveries/{id}/redeliver``); back to its webhook. One still being
    sent is the API's 409, as a page."""
    check_csrf(user, csrf)
    resend.redeliver(session, user.tenant, webhook_id, delivery_id, publisher=broker)
    return _back_to(webhook_id)


@router.post(
    "/webhooks/{webhook_id}/recover",
    status_code=303,
    dependencies=[trailed("webhook.recover", "/webhooks/{webhook_id}")],
)
def webhook_recover(
    webhook_id: uuid.UUID, session: SessionDep, user: ConsoleAdminDep, broker: BrokerDep, csrf: FormText = ""
) -> Response:
    """Send every failed delivery of the webhook again (``POST /v1/webhooks/{id}/recover``); back to it."""
    check_csrf(user, csrf)
    resend.recover(session, user.tenant, webhook_id, since=None, publisher=broker)
    return _back_to(webhook_id)


OVERLAPS: dict[str, int] = {"a day": 86400, "an hour": 3600, "a week": 7 * 86400, "none (it leaked)": 0}
"""How long a rotated secret keeps signing beside the new one, as the rotate form offers it (the first: the default)."""


@router.post(
    "/webhooks/{webhook_id}/rotate-secret",
    status_code=303,
    dependencies=[trailed("webhook.rotate_secret", "/webhooks/{webhook_id}")],
)
def webhook_rotate(
    webhook_id: uuid.UUID,
    request: Request,
    session: SessionDep,
    user: ConsoleAdminDep,
    settings: SettingsDep,
    csrf: FormText = "",
    overlap: FormText = "",
) -> Response:
    """A new signing secret (``POST /v1/webhooks/{id}/rotate-secret``), then the webhooks page, which shows it this
    once; the old one signs beside it for the overlap chosen."""
    check_csrf(user, csrf)
    seconds = OVERLAPS.get(overlap, OVERLAPS["a day"])
    row, secret = webhooks.rotate_secret(session, user.tenant, webhook_id, overlap_seconds=seconds)
    until = row.previous_secret_expires_at
    shown = {"kind": "rotated", "id": str(row.id), "url": row.url, "secret": secret}
    return _show_once(request, settings, user, shown | {"until": when(until) if until else None})


def webhooks_view(
    session: Session,
    user: ConsoleUser,
    *,
    page_token: str | None = None,
    limit: int = PAGE_SIZE,
    form: dict[str, Any] | None = None,
    problem: ProblemError | None = None,
    created: dict[str, str] | None = None,
    rotated: dict[str, Any] | None = None,
    edit: dict[str, Any] | None = None,
    edit_problem: ProblemError | None = None,
) -> Response:
    """The webhooks page: with ``problem``, the new webhook's form shows it (``form``: its fields as sent); with
    ``created``, the new subscription's secret; with ``rotated``, a rotated one's; with ``edit_problem``, the form
    of the subscription ``edit["id"]`` shows it (``edit``: its fields as sent)."""
    rows, token = webhooks.list_webhooks(session, user.tenant, limit=limit, page_token=page_token)
    shown = [
        webhook_row(w, webhooks.deliveries(session, w, limit=DELIVERIES_SHOWN))
        | {"failed": webhooks.failed_count(session, w)}
        for w in rows
    ]
    failed = problem or edit_problem
    return page(
        "webhooks.html",
        user,
        status_code=failed.status if failed else 200,
        title="Webhooks · bind-audit",
        webhooks=shown,
        next_query=next_query({"limit": limit}, token),
        events=EVENTS,
        codes=WARNING_CODES,
        form=form or {"events": ["audit.succeeded"], "warning_codes": []},
        problem=_shown(problem),
        created=created,
        rotated=rotated,
        overlaps=list(OVERLAPS),
        edit=edit or {},
        edit_problem=_shown(edit_problem),
    )


def _back_to(webhook_id: uuid.UUID) -> Response:
    """Back to the webhooks page, at the webhook acted on (its log shows what the action queued)."""
    return RedirectResponse(f"/console/webhooks#webhook-{webhook_id}", status_code=303)


def _shown(problem: ProblemError | None) -> dict[str, Any] | None:
    if problem is None:
        return None
    return {"detail": problem.detail or problem.title, "errors": problem.errors}
