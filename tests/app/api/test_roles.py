"""Roles × routes: every route of the app (``iter_route_contexts(app.routes)``, so a new route cannot escape) is called
with no key and with a viewer, an auditor and an admin key (API) or console session (console). A caller below the
route's role must be refused (401, 403 ``role-not-allowed``, or the console's redirect to sign in); a caller at or
above it must not be. The expected roles are written out here, apart from the code, and every route must have one.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest
from apihelp import assert_problem
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.tenants.keys import create_api_key

ROLES = ("viewer", "auditor", "admin")
CALLERS = ("none", *ROLES)
RANK = {"none": 0, "viewer": 1, "auditor": 2, "admin": 3}

V, A, ADM, PUBLIC = "viewer", "auditor", "admin", "public"
EXPECTED: dict[tuple[str, str], str] = {
    ("GET", "/openapi.json"): PUBLIC, ("GET", "/healthz"): PUBLIC, ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC, ("GET", "/docs"): PUBLIC, ("GET", "/redoc"): PUBLIC,
    ("GET", "/docs-assets/redoc.standalone.js"): PUBLIC,
    ("POST", "/v1/graphs"): A, ("GET", "/v1/graphs"): V, ("GET", "/v1/graphs/{graph_id}"): V,
    ("DELETE", "/v1/graphs/{graph_id}"): ADM,
    ("GET", "/v1/datasets"): V,
    ("POST", "/v1/models"): A, ("GET", "/v1/models"): V, ("GET", "/v1/models/{model_id}"): V,
    ("DELETE", "/v1/models/{model_id}"): ADM, ("POST", "/v1/models/{model_id}/check"): A,
    ("PUT", "/v1/models/{model_id}/outputs/{graph_id}"): A, ("GET", "/v1/models/{model_id}/outputs"): V,
    ("POST", "/v1/audits"): A, ("GET", "/v1/audits"): V, ("GET", "/v1/audits/{audit_id}"): V,
    ("POST", "/v1/audits/{audit_id}/cancel"): A, ("DELETE", "/v1/audits/{audit_id}"): ADM,
    ("GET", "/v1/audits/{audit_id}/influence"): V, ("GET", "/v1/audits/{audit_id}/edges"): V,
    ("GET", "/v1/audits/{audit_id}/report"): V, ("GET", "/v1/audits/{audit_id}/influence.csv"): V,
    ("GET", "/v1/audits/{audit_id}/influence.parquet"): V, ("GET", "/v1/audits/{audit_id}/edges.csv"): V,
    ("GET", "/v1/audits/{audit_id}/edges.parquet"): V, ("GET", "/v1/audits/{audit_id}/export"): V,
    ("GET", "/v1/audits/{audit_id}/profile"): V,
    ("GET", "/v1/audits/{audit_id}/models"): V, ("GET", "/v1/audits/{audit_id}/models/{model_id}/weights"): V,
    ("GET", "/v1/audits/{audit_id}/models/{model_id}/config"): V,
    ("POST", "/v1/audits/{audit_id}/models/{model_id}/register"): A,
    ("POST", "/v1/schedules"): A, ("GET", "/v1/schedules"): V, ("GET", "/v1/schedules/{schedule_id}"): V,
    ("POST", "/v1/schedules/{schedule_id}/pause"): A, ("POST", "/v1/schedules/{schedule_id}/resume"): A,
    ("DELETE", "/v1/schedules/{schedule_id}"): ADM, ("GET", "/v1/schedules/{schedule_id}/runs"): V,
    ("GET", "/v1/schedules/{schedule_id}/report"): V,
    ("POST", "/v1/webhooks"): ADM, ("GET", "/v1/webhooks"): ADM, ("GET", "/v1/webhooks/{webhook_id}"): ADM,
    ("DELETE", "/v1/webhooks/{webhook_id}"): ADM, ("PATCH", "/v1/webhooks/{webhook_id}"): ADM,
    ("GET", "/v1/webhooks/{webhook_id}/deliveries"): ADM,
    ("GET", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}"): ADM, ("POST", "/v1/webhooks/{webhook_id}/ping"): ADM,
    ("POST", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"): ADM,
    ("POST", "/v1/webhooks/{webhook_id}/recover"): ADM, ("POST", "/v1/webhooks/{webhook_id}/rotate-secret"): ADM,
    ("GET", "/v1/keys"): ADM, ("GET", "/v1/keys/{key_id}"): ADM, ("POST", "/v1/keys"): ADM,
    ("POST", "/v1/keys/{key_id}/revoke"): ADM, ("POST", "/v1/keys/{key_id}/rotate"): ADM,
    ("GET", "/v1/events"): ADM, ("GET", "/v1/events/export"): ADM,
    ("GET", "/console"): PUBLIC, ("GET", "/console/sign-in"): PUBLIC, ("POST", "/console/sign-in"): PUBLIC,
    ("POST", "/console/sign-out"): V,
    ("GET", "/console/graphs"): V, ("GET", "/console/audits"): V, ("GET", "/console/audits/{audit_id}"): V,
    ("POST", "/console/audits/{audit_id}/cancel"): A, ("GET", "/console/audits/{audit_id}/report"): V,
    ("GET", "/console/audits/{audit_id}/influence.csv"): V,
    ("GET", "/console/audits/{audit_id}/influence.parquet"): V, ("GET", "/console/audits/{audit_id}/export"): V,
    ("GET", "/console/schedules"): V, ("GET", "/console/schedules/{schedule_id}/report"): V,
    ("GET", "/console/webhooks"): ADM, ("POST", "/console/webhooks"): ADM,
    ("POST", "/console/webhooks/{webhook_id}"): ADM, ("POST", "/console/webhooks/{webhook_id}/delete"): ADM,
    ("POST", "/console/webhooks/{webhook_id}/ping"): ADM, ("POST", "/console/webhooks/{webhook_id}/recover"): ADM,
    ("POST", "/console/webhooks/{webhook_id}/rotate-secret"): ADM,
    ("POST", "/console/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"): ADM,
    ("GET", "/console/graphs/new"): A, ("POST", "/console/graphs/new"): A, ("GET", "/console/graphs/{graph_id}"): V,
    ("POST", "/console/graphs/{graph_id}/audit"): A, ("GET", "/console/compare"): V,
    ("POST", "/console/graphs/{graph_id}/schedule"): A, ("POST", "/console/graphs/{graph_id}/models"): A,
    ("POST", "/console/graphs/{graph_id}/outputs"): A,
    ("POST", "/v1/audits/{audit_id}/what-if"): V, ("POST", "/console/audits/{audit_id}/what-if"): V,
    ("GET", "/console/audits/{audit_id}/models/{model_id}/weights"): V,
    ("GET", "/console/audits/{audit_id}/models/{model_id}/config"): V,
    ("POST", "/console/audits/{audit_id}/models/{model_id}/register"): A,
    ("GET", "/v1/audits/{audit_id}/what-ifs"): V, ("GET", "/v1/audits/{audit_id}/what-ifs/{job_id}"): V,
    ("POST", "/v1/audits/{audit_id}/what-ifs/{job_id}/cancel"): A,
    ("POST", "/console/audits/{audit_id}/what-if/verify"): A,
    ("GET", "/console/audits/{audit_id}/what-ifs/{job_id}"): V,
    ("POST", "/console/audits/{audit_id}/what-ifs/{job_id}/cancel"): A,
}  # fmt: skip
STATIC_MOUNTS = {"/docs-assets", "/docs-assets/vendor"}
"""Static files of the API's documentation pages (public)."""


def app_routes(app: Any) -> tuple[list[tuple[str, str]], set[str]]:
    """Every ``(method, path)`` the app serves (HEAD left out: Starlette adds it to GET), and its mounts."""
    routes, mounts = [], set()
    for route in iter_route_contexts(app.routes):
        if route.methods is None:
            mounts.add(route.path)
            continue
        routes += [(method, route.path) for method in sorted(route.methods) if method != "HEAD"]
    return routes, mounts


class Caller:
    """One role of one tenant: an API key, and a browser signed in to the console with it."""

    def __init__(self, client: TestClient, key: str | None) -> None:
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.browser = TestClient(client.app, follow_redirects=False)
        self.csrf = ""
        if key is not None:
            self.sign_in(key)

    def sign_in(self, key: str) -> None:
        form = re.search(r'name="csrf" value="([^"]+)"', self.browser.get("/console/sign-in").text)
        assert form is not None
        signed = self.browser.post("/console/sign-in", data={"api_key": key, "csrf": form.group(1)})
        assert signed.status_code == 303, signed.text
        page = re.search(r'name="csrf" value="([^"]+)"', self.browser.get("/console/audits").text)
        assert page is not None
        self.csrf = page.group(1)

    def call(self, method: str, path: str) -> httpx.Response:
        url = re.sub(r"\{[a-z_]+\}", lambda _: str(uuid.uuid4()), path)
        if path.startswith("/console"):
            data = {"csrf": self.csrf} if method == "POST" else None
            return self.browser.request(method, url, data=data)
        return self.browser.request(method, url, headers=self.headers)


@pytest.fixture
def callers(client: TestClient, sessions: sessionmaker[Session]) -> dict[str, Caller]:
    """No key, and one key of each role, all of one new tenant."""
    name = f"roles-{uuid.uuid4().hex[:10]}"
    with sessions.begin() as session:
        keys = {"admin": create_api_key(session, name)}
        keys |= {role: create_api_key(session, name, role) for role in ("viewer", "auditor")}
    return {caller: Caller(client, keys.get(caller)) for caller in CALLERS}


def refused(path: str, response: httpx.Response) -> bool:
    """Whether the answer refuses the caller: a 401, a 403 for the role (a problem in the API, a page saying so in
    the console), or the console sending it to sign in."""
    if response.status_code == 401:
        return True
    if response.status_code == 403 and response.headers.get("content-type", "").startswith("application/problem"):
        return bool(response.json().get("type", "").endswith("/role-not-allowed"))
    if response.status_code == 403 and response.headers.get("content-type", "").startswith("text/html"):
        return path.startswith("/console") and "<code>role-not-allowed</code>" in response.text
    return path.startswith("/console") and response.headers.get("location") == "/console/sign-in"


def test_every_route_has_an_expected_role(client: TestClient) -> None:
    routes, mounts = app_routes(client.app)
    assert len(routes) == len(set(routes)) > 50
    assert [r for r in routes if r not in EXPECTED] == [], "a route without an expected role: add it to EXPECTED"
    assert [r for r in EXPECTED if r not in routes] == [], "EXPECTED names a route the app does not serve"
    assert mounts == STATIC_MOUNTS


def test_no_role_reaches_past_its_routes(client: TestClient, callers: dict[str, Caller]) -> None:
    """0 escalations: every route × every caller; sign-out is called last (it ends the console session)."""
    routes, _ = app_routes(client.app)
    routes.sort(key=lambda r: r == ("POST", "/console/sign-out"))
    escalations, lockouts = [], []
    for method, path in routes:
        needed = EXPECTED[(method, path)]
        for name, caller in callers.items():
            response = caller.call(method, path)
            if needed == PUBLIC:
                if refused(path, response):
                    lockouts.append((method, path, name, response.status_code))
                continue
            allowed = RANK[name] >= RANK[needed]
            if (method, path) == ("POST", "/console/sign-out"):
                # Both answers redirect to the sign-in page; only a signed-in caller's clears the session cookie.
                passed = 'bind_console=""' in response.headers.get("set-cookie", "")
            else:
                passed = not refused(path, response)
            if allowed and not passed:
                lockouts.append((method, path, name, response.status_code))
            if passed and not allowed:
                escalations.append((method, path, name, response.status_code))
    assert escalations == []
    assert lockouts == []


def test_a_refused_role_is_a_problem_naming_both_roles(callers: dict[str, Caller]) -> None:
    body = assert_problem(callers["viewer"].call("POST", "/v1/graphs"), 403, "role-not-allowed")
    assert (body["role"], body["required_role"]) == ("viewer", "auditor")
    page = callers["auditor"].call("GET", "/console/webhooks")  # the console: the same, as a page
    assert page.status_code == 403 and page.headers["content-type"].startswith("text/html")
    assert "role is &#39;auditor&#39;; this needs &#39;admin&#39; or above" in page.text
    assert '<a href="/console/audits" id="back">' in page.text  # not back to the webhooks it may not see


def test_the_console_shows_each_role_only_what_it_may_use(client: TestClient, callers: dict[str, Caller]) -> None:
    for name in ROLES:
        page = callers[name].browser.get("/console/audits")
        assert page.status_code == 200
        assert f'<span id="role">{name}</span>' in page.text
        assert ('href="/console/webhooks"' in page.text) == (name == "admin")
