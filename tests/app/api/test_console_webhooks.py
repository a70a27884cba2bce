"""The console's webhook forms (admin): subscribe a URL (its secret shown once, on the answering page), change a
subscription's events and warning codes, delete it; each refusal on its form in the form's words, each action in
the audit trail (a refused one as failed); CSRF and tenants as everywhere."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from test_console import Tenant

from app.console.cookies import read_shown, shown_once
from app.core.db.tables import Graph, TrailEvent, Webhook, WebhookDelivery
from app.webhooks.signing import sign


@pytest.fixture
def tenant(client: TestClient, sessions: sessionmaker[Session]) -> Callable[..., Tenant]:
    return lambda **kw: Tenant(client, sessions, **kw)


def _hooks(sessions: sessionmaker[Session], tenant_id: uuid.UUID) -> list[Webhook]:
    with sessions() as session:
        return list(session.scalars(select(Webhook).where(Webhook.tenant_id == tenant_id)))


def _trail(sessions: sessionmaker[Session], tenant_id: uuid.UUID) -> list[tuple[str, str | None, str, int]]:
    with sessions() as session:
        rows = session.scalars(
            select(TrailEvent).where(TrailEvent.tenant_id == tenant_id).order_by(TrailEvent.created_at)
        )
        return [(e.action, e.target, e.outcome, e.status) for e in rows if e.action.startswith("webhook.")]


def test_subscribe_change_and_delete_a_webhook(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    user = tenant()
    user.sign_in()
    token = user.form_token("/console/webhooks")
    empty = user.browser.get("/console/webhooks").text
    assert 'id="webhook-form"' in empty and 'value="training_fit"' in empty and "No webhook yet." in empty
    form = {"csrf": token, "url": "https://8.8.8.8/hook", "events": ["audit.warned", "audit.failed"],
            "warning_codes": ["training_fit", "unseen_categories"]}  # fmt: skip
    made = user.browser.post("/console/webhooks", data=form)
    (hook,) = _hooks(sessions, user.id)
    # the form redirects to the page that shows the secret, so a reload of that page sends nothing again
    assert made.status_code == 303 and made.headers["location"] == f"/console/webhooks#webhook-{hook.id}"
    assert "whsec" not in made.text
    created = user.browser.get("/console/webhooks")
    assert created.status_code == 200 and created.headers["cache-control"] == "no-store"
    secret = re.search(r'<code id="webhook-secret">([^<]+)</code>', created.text)
    assert secret is not None
    assert (hook.url, hook.events, hook.warning_codes) == (
        "https://8.8.8.8/hook",
        ["audit.failed", "audit.warned"],
        ["training_fit", "unseen_categories"],
    )
    # the secret shown is the one deliveries are signed with, and it is never shown again
    assert sign("m", 1, b"{}", hook.secret) == sign("m", 1, b"{}", secret.group(1))
    again = user.browser.get("/console/webhooks").text
    assert secret.group(1) not in again and "<b>audit.warned only for</b>: training_fit, unseen_categories" in again
    assert len(_hooks(sessions, user.id)) == 1
    # its form shows what it takes; a change keeps URL and secret
    edit = again[again.index(f'id="webhook-edit-{hook.id}"') :].split("</form>")[0]
    assert re.search(r'value="audit.warned" checked', edit) and not re.search(r'value="audit.succeeded" checked', edit)
    changed = user.browser.post(f"/console/webhooks/{hook.id}", data={"csrf": token, "events": ["audit.warned"]})
    assert changed.status_code == 303 and changed.headers["location"] == f"/console/webhooks#webhook-{hook.id}"
    (after,) = _hooks(sessions, user.id)
    assert (after.events, after.warning_codes, after.secret) == (["audit.warned"], None, hook.secret)  # filter lifted
    # a change the API refuses is refused on its form, the webhook as it was
    refused = user.browser.post(
        f"/console/webhooks/{hook.id}", data={"csrf": token, "events": ["audit.failed"], "warning_codes": ["drift"]}
    )
    assert refused.status_code == 422 and f'id="webhook-error-{hook.id}"' in refused.text
    assert "<code>audit.warned only for</code>: unknown warning code(s) &#39;drift&#39;" in refused.text
    assert "<details open>" in refused.text and _hooks(sessions, user.id)[0].events == ["audit.warned"]
    # deleting asks to confirm
    unconfirmed = user.browser.post(f"/console/webhooks/{hook.id}/delete", data={"csrf": token})
    assert unconfirmed.status_code == 422 and "Nothing was deleted." in unconfirmed.text
    assert len(_hooks(sessions, user.id)) == 1
    deleted = user.browser.post(f"/console/webhooks/{hook.id}/delete", data={"csrf": token, "confirm": "yes"})
    assert deleted.status_code == 303 and _hooks(sessions, user.id) == []
    target = f"/webhooks/{hook.id}"
    assert _trail(sessions, user.id) == [
        ("webhook.create", target, "succeeded", 303),
        ("webhook.update", target, "succeeded", 303),
        ("webhook.update", target, "failed", 422),
        ("webhook.delete", target, "failed", 422),
        ("webhook.delete", target, "succeeded", 303),
    ]


def test_a_refused_subscription_is_said_on_the_form(
    tenant: Callable[..., Tenant], sessions: sessionmaker[Session]
) -> None:
    """The form's own labels for a body's rule; the service's refusal (a private address) as it is; what was typed
    stays in the form; nothing is created and the trail says the attempt failed."""
    user = tenant()
    user.sign_in()
    token = user.form_token("/console/webhooks")
    no_events = user.browser.post("/console/webhooks", data={"csrf": token, "url": "https://8.8.8.8/h"})
    assert no_events.status_code == 422 and 'id="webhook-error"' in no_events.text
    assert "<code>Events</code>:" in no_events.text and 'value="https://8.8.8.8/h"' in no_events.text
    codes_alone = {"csrf": token, "url": "https://8.8.8.8/h", "events": ["audit.failed"], "warning_codes": ["other"]}
    said = user.browser.post("/console/webhooks", data=codes_alone).text
    assert "warning_codes filters the audit.warned event" in said
    assert re.search(r'value="other" checked', said)  # the ticked code stays ticked
    private = user.browser.post(
        "/console/webhooks", data={"csrf": token, "url": "http://127.0.0.1/h", "events": ["audit.failed"]}
    )
    assert private.status_code == 422 and "BIND_WEBHOOK_ALLOW_PRIVATE" in private.text
    assert _hooks(sessions, user.id) == []
    assert [t[2:] for t in _trail(sessions, user.id)] == [("failed", 422)] * 3


def test_webhook_forms_need_the_csrf_token_and_the_tenants_own_webhook(
    tenant: Callable[..., Tenant], sessions: sessionmaker[Session]
) -> None:
    owner, other = tenant(), tenant()
    owner.sign_in()
    other.sign_in()
    with sessions.begin() as session:
        hook = Webhook(tenant_id=owner.id, url="https://example.org/h", events=["audit.failed"], secret="s")
        session.add(hook)
        session.flush()
        hook_id = hook.id
    token = owner.form_token("/console/webhooks")
    assert owner.browser.post("/console/webhooks", data={"url": "https://8.8.8.8/h"}).status_code == 403
    assert owner.browser.post(f"/console/webhooks/{hook_id}/delete", data={"confirm": "yes"}).status_code == 403
    theirs = other.form_token("/console/webhooks")
    for path in (f"/console/webhooks/{hook_id}", f"/console/webhooks/{hook_id}/delete"):
        answer = other.browser.post(path, data={"csrf": theirs, "events": ["audit.warned"], "confirm": "yes"})
        assert answer.status_code == 404
    assert [h.events for h in _hooks(sessions, owner.id)] == [["audit.failed"]]
    assert owner.browser.post(f"/console/webhooks/{hook_id}", data={"csrf": token, "events": []}).status_code == 422


def test_any_console_form_refused_on_its_page_is_a_failed_action_in_the_trail(
    tenant: Callable[..., Tenant], sessions: sessionmaker[Session]
) -> None:
    """The schedule form shows its refusal on the graph's page (422): the trail says the action failed, as the API's
    own refusal would; a schedule made is recorded with the redirect's status."""
    user = tenant()
    user.sign_in()
    with sessions.begin() as session:
        graph = Graph(tenant_id=user.id, name="g", version=1, summary={"nodes": 10}, data=b"", size_bytes=1)
        session.add(graph)
        session.flush()
        graph_id = graph.id
    token = user.form_token(f"/console/graphs/{graph_id}")
    bad = user.browser.post(f"/console/graphs/{graph_id}/schedule", data={"csrf": token, "every": "fortnight"})
    assert bad.status_code == 422
    good = user.browser.post(f"/console/graphs/{graph_id}/schedule", data={"csrf": token, "every": "day"})
    assert good.status_code == 303
    with sessions() as session:
        rows = session.scalars(
            select(TrailEvent)
            .where(TrailEvent.tenant_id == user.id, TrailEvent.action == "schedule.create")
            .order_by(TrailEvent.created_at)
        )
        assert [(e.outcome, e.status) for e in rows] == [("failed", 422), ("succeeded", 303)]


def test_send_a_test_event_and_a_delivery_again(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    """*Send a test event* queues a ``webhook.ping`` shown in the log; *Send it again* is offered on a finished
    delivery and sends it again; one still pending is the API's 409, as a page."""
    user = tenant()
    user.sign_in()
    with sessions.begin() as session:
        hook = Webhook(tenant_id=user.id, url="https://example.org/h", events=["audit.failed"], secret="s")
        session.add(hook)
        session.flush()
        failed = WebhookDelivery(webhook_id=hook.id, event="audit.failed", payload={"type": "audit.failed"},
                                 state="failed", attempts=8, response_status=500)  # fmt: skip
        session.add(failed)
        session.flush()
        hook_id, failed_id = hook.id, failed.id
    token = user.form_token("/console/webhooks")
    page = user.browser.get("/console/webhooks").text
    assert f'action="/console/webhooks/{hook_id}/deliveries/{failed_id}/redeliver"' in page
    assert f'id="webhook-recover-{hook_id}"' in page and "1 delivery failed after every retry" in page
    pinged = user.browser.post(f"/console/webhooks/{hook_id}/ping", data={"csrf": token})
    assert pinged.status_code == 303 and pinged.headers["location"] == f"/console/webhooks#webhook-{hook_id}"
    with sessions() as session:
        rows = {
            d.event: d for d in session.scalars(select(WebhookDelivery).where(WebhookDelivery.webhook_id == hook_id))
        }
    ping = rows["webhook.ping"]
    assert ping.state == "pending" and ping.payload["data"]["webhook_id"] == str(hook_id)
    page = user.browser.get("/console/webhooks").text
    assert "<td class=l>webhook.ping</td>" in page
    assert f"/deliveries/{ping.id}/redeliver" not in page  # still being sent: nothing to send again
    pending = user.browser.post(f"/console/webhooks/{hook_id}/deliveries/{ping.id}/redeliver", data={"csrf": token})
    assert pending.status_code == 409 and "still being sent" in pending.text
    again = user.browser.post(f"/console/webhooks/{hook_id}/deliveries/{failed_id}/redeliver", data={"csrf": token})
    assert again.status_code == 303
    with sessions() as session:
        resent = session.get(WebhookDelivery, failed_id)
        assert resent is not None and (resent.state, resent.attempts) == ("pending", 0)
    assert f'id="webhook-recover-{hook_id}"' not in user.browser.get("/console/webhooks").text  # none failed now
    with sessions.begin() as session:
        session.add_all(
            WebhookDelivery(webhook_id=hook_id, event="audit.failed", payload={}, state="failed") for _ in range(2)
        )
    assert "2 deliveries failed after every retry" in user.browser.get("/console/webhooks").text
    recovered = user.browser.post(f"/console/webhooks/{hook_id}/recover", data={"csrf": token})
    assert recovered.status_code == 303
    with sessions() as session:
        left = select(WebhookDelivery).where(WebhookDelivery.webhook_id == hook_id, WebhookDelivery.state == "failed")
        assert list(session.scalars(left)) == []
    assert user.browser.post(f"/console/webhooks/{hook_id}/ping", data={}).status_code == 403  # CSRF


def test_rotate_the_secret_from_the_console(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    """The new secret shown once, on the answering page, with how long the old one signs beside it."""
    user = tenant()
    user.sign_in()
    with sessions.begin() as session:
        hook = Webhook(tenant_id=user.id, url="https://example.org/h", events=["audit.failed"], secret="whsec_old")
        session.add(hook)
        session.flush()
        hook_id = hook.id
    token = user.form_token("/console/webhooks")
    page = user.browser.get("/console/webhooks").text
    assert f'id="webhook-rotate-{hook_id}"' in page and "<option>a day</option>" in page
    done = user.browser.post(f"/console/webhooks/{hook_id}/rotate-secret", data={"csrf": token, "overlap": "an hour"})
    assert done.status_code == 303 and done.headers["location"] == f"/console/webhooks#webhook-{hook_id}"
    rotated = user.browser.get("/console/webhooks")
    assert rotated.status_code == 200 and rotated.headers["cache-control"] == "no-store"
    secret = re.search(r'<code id="webhook-secret">([^<]+)</code>', rotated.text)
    assert secret is not None and "the old one also signs every delivery until" in rotated.text
    with sessions() as session:
        row = session.get(Webhook, hook_id)
        assert row is not None and (row.secret, row.previous_secret) == (secret.group(1), "whsec_old")
    again = user.browser.get("/console/webhooks").text
    assert secret.group(1) not in again and "(the secret replaced last keeps signing until" in again
    user.browser.post(f"/console/webhooks/{hook_id}/rotate-secret", data={"csrf": token, "overlap": "none (it leaked)"})
    leaked = user.browser.get("/console/webhooks")
    assert "the old one no longer signs anything" in leaked.text
    assert user.browser.cookies.get("bind_console_shown", path="/console/webhooks") is None  # cleared once shown
    # a secret carried for one session's key is shown to that session only
    key = user.browser.app.state.settings.console_secret.get_secret_value()  # type: ignore[attr-defined]
    mine, theirs = uuid.uuid4(), uuid.uuid4()
    carried = shown_once(key, mine, {"kind": "rotated", "id": str(hook_id), "url": "u", "secret": "x1"})
    assert read_shown(key, mine, carried) == {"kind": "rotated", "id": str(hook_id), "url": "u", "secret": "x1"}
    assert read_shown(key, theirs, carried) is None and read_shown("another-key" * 4, mine, carried) is None
    assert user.browser.post(f"/console/webhooks/{hook_id}/rotate-secret", data={}).status_code == 403  # CSRF
