"""Who may do what, how often, and what is written down: tenant isolation on every operation of the
OpenAPI document, per-key rate limits, secrets kept out of logs, database outages as 503 problems, and
the observability surface (``/metrics``, ``X-Request-ID``)."""

from __future__ import annotations

import io
import json
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from apihelp import assert_problem, npz_bytes
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy.engine import make_url

from app.core.logs import JsonFormatter, RedactingFilter, redact
from app.core.ratelimit import RateLimiter
from app.core.settings import Settings
from app.main import create_app


def _operations() -> list[tuple[str, str]]:
    """Every (method, path) of the API with a path parameter, read from its own OpenAPI document."""
    schema = create_app(Settings(database_url="sqlite:///:memory:", metrics_enabled=False)).openapi()
    return [(m.upper(), p) for p, ops in schema["paths"].items() if "{" in p for m in ops]


OPERATIONS = _operations()


@pytest.fixture(scope="module")
def owned(client: TestClient, new_key_module: Callable[[], dict[str, str]]) -> dict[str, Any]:
    """One resource of each kind, owned by a tenant of its own; path parameter name → id."""
    from bind_core.data.datasets import load_npz
    from bind_core.training.fit import TrainConfig, train

    auth = new_key_module()
    data = npz_bytes(num_nodes=60)
    graph = client.post("/v1/graphs", headers=auth, files={"npz": ("owned.npz", data)}).json()
    audit = client.post("/v1/audits", headers=auth, json={"graph_id": graph["id"]}).json()
    model = train(load_npz(io.BytesIO(data)), TrainConfig(epochs=2, polish=False))
    registered = client.post(
        "/v1/models", headers=auth, files={"weights": ("m.safetensors", model.to_bytes())},
        data={"config": json.dumps(model.config_dict()), "graph_id": graph["id"]},
    ).json()  # fmt: skip
    schedule = client.post("/v1/schedules", headers=auth, json={"graph_name": "owned", "interval_seconds": 3600})
    hook = client.post("/v1/webhooks", headers=auth, json={"url": "http://hooks.test/", "events": ["audit.failed"]})
    ids = {"graph_id": graph["id"], "audit_id": audit["id"], "model_id": registered.get("id")}
    ids |= {"schedule_id": schedule.json().get("id"), "webhook_id": hook.json().get("id")}
    ids["key_id"] = client.post("/v1/keys", headers=auth, json={"role": "viewer"}).json().get("id")
    ids["job_id"] = _what_if(client, audit["id"])
    ids["delivery_id"] = client.post(f"/v1/webhooks/{ids['webhook_id']}/ping", headers=auth).json().get("id")
    return {"auth": auth, "ids": ids}


def _what_if(client: TestClient, audit_id: str) -> str:
    """A what-if verification job of the owner's audit (a row: verifying needs a finished audit)."""
    from app.core.db.tables import Audit, WhatIf

    factory = client.app.state.session_factory  # type: ignore[attr-defined]
    with factory.begin() as session:
        audit = session.get(Audit, uuid.UUID(audit_id))
        assert audit is not None
        job = WhatIf(
            tenant_id=audit.tenant_id, audit_id=audit.id, chosen_by={"top": 1}, positions=[0], nodes=[0],
            estimate={}, seeds=[1, 2, 3], random_sets=1, state="queued",
        )  # fmt: skip
        session.add(job)
        session.flush()
        return str(job.id)


@pytest.fixture(scope="module")
def new_key_module(client: TestClient) -> Callable[[], dict[str, str]]:
    from app.tenants.keys import create_api_key

    factory = client.app.state.session_factory  # type: ignore[attr-defined]

    def make() -> dict[str, str]:
        with factory.begin() as session:
            key = create_api_key(session, f"sec-{uuid.uuid4().hex[:10]}")
        return {"Authorization": f"Bearer {key}"}

    return make


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_another_tenants_resource_is_404(
    client: TestClient, owned: dict[str, Any], new_key_module: Callable[[], dict[str, str]], method: str, path: str
) -> None:
    """Tenant B names tenant A's ids on every operation and verb: 404, and A's resource is untouched."""
    params = {name.strip("{}") for name in path.split("/") if name.startswith("{")}
    missing = sorted(p for p in params if not owned["ids"].get(p))
    assert not missing, f"no owned resource for {missing}: extend the `owned` fixture"
    url = path.format(**owned["ids"])
    body = {"json": {}} if method in ("POST", "PATCH") else {}
    assert_problem(client.request(method, url, headers=new_key_module(), **body), 404)
    owner_view = path.split("}")[0] + "}"
    assert client.get(owner_view.format(**owned["ids"]), headers=owned["auth"]).status_code == 200


def test_rate_limit_per_key(settings: Settings, new_key_module: Callable[[], dict[str, str]]) -> None:
    with TestClient(create_app(settings.model_copy(update={"rate_limit_per_minute": 3}))) as limited:
        first, second = new_key_module(), new_key_module()
        assert [limited.get("/v1/graphs", headers=first).status_code for _ in range(3)] == [200] * 3
        refused = limited.get("/v1/graphs", headers=first)
        assert_problem(refused, 429, "rate-limited")
        assert int(refused.headers["retry-after"]) >= 1
        assert limited.get("/v1/graphs", headers=second).status_code == 200  # buckets are per key


def test_in_process_token_bucket() -> None:
    limiter = RateLimiter(60)  # 60 a minute: one token back per second
    decisions = [limiter.check("k") for _ in range(61)]
    assert all(d.allowed for d in decisions[:60]) and not decisions[60].allowed
    assert decisions[60].retry_after == 1
    assert limiter.check("other").allowed
    assert RateLimiter(0).check("k").allowed  # 0 turns limits off


def test_no_secrets_in_logs(
    settings: Settings, new_key_module: Callable[[], dict[str, str]], caplog: pytest.LogCaptureFixture
) -> None:
    """Key creation, authenticated and failing requests at DEBUG: neither the key nor the DB password appears."""
    password = "pw-" + uuid.uuid4().hex  # Postgres here trusts loopback, so any password connects
    url = make_url(settings.database_url).set(password=password).render_as_string(hide_password=False)
    caplog.set_level(logging.DEBUG)
    with TestClient(create_app(settings.model_copy(update={"database_url": url}))) as app_client:
        auth = new_key_module()
        key = auth["Authorization"].removeprefix("Bearer ")
        assert app_client.get("/v1/graphs", headers=auth).status_code == 200
        app_client.get(f"/v1/audits/{uuid.uuid4()}", headers=auth)
        app_client.post("/v1/audits", headers=auth, json={"graph_id": "nope"})
        logging.getLogger("test").info("dsn %s with Authorization: Bearer %s", url, key)  # what a careless log does
    formatter, redactor = JsonFormatter(), RedactingFilter()
    lines = []
    for record in caplog.records:
        redactor.filter(record)
        lines.append(formatter.format(record))
    text = "\n".join(lines)
    assert key not in text and password not in text
    assert "[REDACTED]" in text
    assert key not in caplog.text.replace(f"Bearer {key}", "")  # only the deliberately careless line had it


def test_redact() -> None:
    assert (
        redact("postgresql+psycopg://bind:s3cret@db:5432/bind") == "postgresql+psycopg://bind:[REDACTED]@db:5432/bind"
    )
    assert "abc.def" not in redact("Authorization: Bearer abc.def")
    assert "bind_0123456789abcdef" not in redact("key=bind_0123456789abcdef")
    assert redact("'authorization': 'Basic dXNlcg=='") == "'authorization': '[REDACTED]'"


def test_database_unreachable_is_a_503_problem(settings: Settings) -> None:
    down = settings.model_copy(update={"database_url": "postgresql+psycopg://postgres@127.0.0.1:1/none"})
    with TestClient(create_app(down)) as app_client:
        response = app_client.get("/v1/graphs", headers={"Authorization": "Bearer bind_" + "x" * 43})
        assert_problem(response, 503, "database-unavailable")
        assert response.headers["retry-after"] == "5"
        assert_problem(app_client.get("/readyz"), 503)


def test_metrics_and_request_ids(client: TestClient, auth: dict[str, str]) -> None:
    response = client.get("/v1/graphs", headers=auth | {"X-Request-ID": "trace-42"})
    assert response.headers["x-request-id"] == "trace-42"
    generated = client.get("/v1/graphs", headers=auth | {"X-Request-ID": "bad id\twith tab"}).headers["x-request-id"]
    assert len(generated) == 32 and generated.isalnum()
    text = client.get("/metrics").text
    assert 'bind_http_requests_total{method="GET",route="/v1/graphs",status="200"}' in text
    assert "bind_http_request_duration_seconds_bucket" in text
    assert 'bind_audits{state="queued"}' in text and "bind_queue_depth" in text
    assert "/metrics" not in client.get("/openapi.json").json()["paths"]


def test_metrics_key(settings: Settings, auth: dict[str, str]) -> None:
    """With ``BIND_METRICS_KEY`` set, ``/metrics`` answers only that bearer key; API keys do not open it."""
    key = "m" * 32
    with TestClient(create_app(settings.model_copy(update={"metrics_key": SecretStr(key)}))) as keyed:
        for headers in ({}, {"Authorization": "Bearer " + "x" * 32}, {"Authorization": f"Basic {key}"}, auth):
            response = keyed.get("/metrics", headers=headers)
            assert_problem(response, 401, "unauthorized")
            assert response.headers["www-authenticate"] == "Bearer"
        response = keyed.get("/metrics", headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 200 and "bind_http_requests_total" in response.text


PRODUCTION = {"environment": "production", "console_secret": SecretStr("Vq3-Lm8Zt1Rk6Wx0Bn4Hs9Jd2Fy7Gc5P")}
"""Production with a console secret of its own (without one the API refuses to start: test_production.py)."""


@pytest.mark.parametrize(
    ("update", "served"),
    [
        ({}, True),  # development, no key: open, as before
        ({**PRODUCTION, "metrics_key": SecretStr("k" * 16)}, True),
        ({**PRODUCTION, "metrics_enabled": False}, False),
        ({"metrics_enabled": False}, False),
    ],
)
def test_metrics_are_served_only_when_configured(settings: Settings, update: dict[str, Any], served: bool) -> None:
    """In production, metrics without a key refuse the start instead (``tests/app/core/test_production.py``)."""
    with TestClient(create_app(settings.model_copy(update=update))) as app_client:
        headers = {"Authorization": f"Bearer {'k' * 16}"}
        response = app_client.get("/metrics", headers=headers)
        if served:
            assert response.status_code == 200, response.text
        else:
            assert_problem(response, 404, "not-found")
