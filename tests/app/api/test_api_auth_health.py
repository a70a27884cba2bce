"""API keys, health checks, headers, framework errors and the OpenAPI document."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import pytest
from apihelp import assert_problem
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.base import utcnow
from app.core.db.tables import ApiKey
from app.core.settings import Settings
from app.main import create_app
from app.tenants.keys import authenticate, create_api_key, hash_key

_ANY = uuid.UUID(int=0x1200A234AA2A4A01AD858690A0D6E212)  # no such resource; fixed, so xdist workers collect alike
V1_ROUTES = [
    ("get", "/v1/graphs"),
    ("post", "/v1/graphs"),
    ("get", f"/v1/graphs/{_ANY}"),
    ("delete", f"/v1/graphs/{_ANY}"),
    ("get", "/v1/datasets"),
    ("get", "/v1/audits"),
    ("post", "/v1/audits"),
    ("get", f"/v1/audits/{_ANY}"),
    ("post", f"/v1/audits/{_ANY}/cancel"),
    ("get", f"/v1/audits/{_ANY}/influence"),
]


@pytest.mark.parametrize(
    "authorization", [None, "Bearer", "Basic dXNlcjpwYXNz", "Bearer bind_unknownkey1234567890", "Bearer x"]
)
@pytest.mark.parametrize(("method", "path"), V1_ROUTES)
def test_401_without_a_valid_key(client: TestClient, method: str, path: str, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = client.request(method, path, headers=headers)
    assert_problem(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


def test_keys_are_stored_hashed_and_can_be_revoked(
    client: TestClient, sessions: sessionmaker[Session], new_key: Callable[[], dict[str, str]]
) -> None:
    with sessions.begin() as session:
        key = create_api_key(session, "hash-check")
        assert key.startswith("bind_") and len(key) > 40
        row = session.query(ApiKey).filter(ApiKey.key_hash == hash_key(key)).one()
        assert key not in (row.prefix + row.key_hash) and row.prefix == key[:13]
        assert authenticate(session, key) is not None
        assert authenticate(session, key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    headers = {"Authorization": f"Bearer {key}"}
    assert client.get("/v1/graphs", headers=headers).status_code == 200
    with sessions.begin() as session:
        session.execute(update(ApiKey).where(ApiKey.id == row.id).values(revoked_at=utcnow()))
    assert_problem(client.get("/v1/graphs", headers=headers), 401)


def test_same_tenant_gets_several_keys(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        a, b = create_api_key(session, "two-keys"), create_api_key(session, "two-keys", "viewer")
        tenant_a, tenant_b = authenticate(session, a), authenticate(session, b)
        assert tenant_a is not None and tenant_b is not None and tenant_a.id == tenant_b.id
        with pytest.raises(ValueError, match="give the new key's role"):
            create_api_key(session, "two-keys")  # the first key alone may leave its role out (admin)


def test_healthz(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200, response.text
    assert response.json()["checks"] == {"database": "ok", "broker": "ok"}


def test_readyz_503_when_broker_and_database_are_down(settings: Settings) -> None:
    down = settings.model_copy(
        update={
            "broker_url": "redis://127.0.0.1:1/0",
            "database_url": "postgresql+psycopg://postgres@127.0.0.1:1/none",
        }
    )
    with TestClient(create_app(down)) as down_client:
        problem = assert_problem(down_client.get("/readyz"), 503, "service-unavailable")
        assert {e["field"] for e in problem["errors"]} == {"database", "broker"}
        assert down_client.get("/healthz").status_code == 200


def test_security_headers(client: TestClient, auth: dict[str, str]) -> None:
    response = client.get("/v1/graphs", headers=auth)
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["cache-control"] == "no-store"
    assert "access-control-allow-origin" not in client.get("/healthz", headers={"Origin": "https://x.dev"}).headers


def test_cors_only_when_configured(settings: Settings) -> None:
    app = create_app(settings.model_copy(update={"cors_origins": ["https://ui.example"]}))
    with TestClient(app) as cors_client:
        response = cors_client.get("/healthz", headers={"Origin": "https://ui.example"})
        assert response.headers["access-control-allow-origin"] == "https://ui.example"


def test_framework_errors_are_problems(client: TestClient, auth: dict[str, str]) -> None:
    assert_problem(client.get("/v1/nothing-here", headers=auth), 404, "not-found")
    response = client.put("/v1/graphs", headers=auth)
    assert_problem(response, 405, "method-not-allowed")
    assert response.headers["allow"] == "GET, POST"  # was "POST": only the first route that matched the path


def test_every_405_allows_what_the_openapi_document_lists(client: TestClient, auth: dict[str, str]) -> None:
    """For every path of the API, a method it does not serve gets 405 and an ``Allow`` of exactly those it does."""
    paths = client.get("/openapi.json").json()["paths"]
    assert len(paths) > 20
    for template, operations in paths.items():
        path = re.sub(r"\{[^}]+\}", str(uuid.uuid4()), template)
        served = sorted(m.upper() for m in operations)
        unserved = next(m for m in ("PATCH", "PUT") if m not in served)
        response = client.request(unserved, path, headers=auth)
        assert_problem(response, 405, "method-not-allowed")
        assert response.headers["allow"] == ", ".join(served), template
    problem = assert_problem(client.get("/v1/graphs/not-a-uuid", headers=auth), 422, "validation-error")
    assert problem["errors"][0]["field"] == "graph_id"
    problem = assert_problem(client.get("/v1/graphs?limit=0", headers=auth), 422)
    assert problem["errors"][0]["field"] == "limit"


def test_unexpected_errors_are_500_problems_without_details(settings: Settings, auth: dict[str, str]) -> None:
    app = create_app(settings)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("secret internals")

    with TestClient(app, raise_server_exceptions=False) as boom_client:
        response = boom_client.get("/boom")
        assert_problem(response, 500, "internal-error")
        assert "secret" not in response.text


def test_openapi_declares_problems(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert "Problem" in schema["components"]["schemas"]
    upload = schema["paths"]["/v1/graphs"]["post"]
    for status in ("401", "413", "422"):
        assert "application/problem+json" in upload["responses"][status]["content"]
    assert "multipart/form-data" in upload["requestBody"]["content"]
    assert "409" in schema["paths"]["/v1/audits/{audit_id}/influence"]["get"]["responses"]
    assert client.get("/docs").status_code == 200
