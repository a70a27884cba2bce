"""Property-based fuzzing of every operation in ``/openapi.json`` (schemathesis, in-process over ASGI).

Fixed budget: 25 derandomized examples per operation, no deadline. Requests carry a real API key of a
fresh tenant (so they reach the handlers, not only the 401 guard). Every response must not be a 5xx,
must be one of the documented statuses and media types, and its body must match the documented schema.

Fuzzed ids name no audit, so the audit reads answer 404: ``test_stored_audit_responses_conform`` checks the same
response conformance on a succeeded audit holding a real audit's stored results (issue 17).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit, InfluenceRow
from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.pipeline.audit import AuditConfig, run_audit

MAX_EXAMPLES = 15

NOT_STORED = ("group", "group_name", "label_name")
"""A row's keys the table does not store: the group is its ``grp``; the names come from the stored results."""


@pytest.fixture(scope="module")
def fuzz_auth(new_key_module: Callable[[], dict[str, str]]) -> dict[str, str]:
    return new_key_module()


@pytest.fixture(scope="module")
def new_key_module(client: TestClient) -> Callable[[], dict[str, str]]:
    import uuid

    from app.tenants.keys import create_api_key

    factory = client.app.state.session_factory  # type: ignore[attr-defined]

    def make() -> dict[str, str]:
        with factory.begin() as session:
            key = create_api_key(session, f"fuzz-{uuid.uuid4().hex[:10]}")
        return {"Authorization": f"Bearer {key}"}

    return make


@pytest.fixture(scope="module")
def api_schema(client: TestClient) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_asgi("/openapi.json", client.app)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api_fuzz(case: schemathesis.Case, fuzz_auth: dict[str, str]) -> None:
    headers = dict(case.headers or {})
    headers.update(fuzz_auth)
    case.call_and_validate(
        headers=headers,
        checks=[not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance],
    )


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def stored_audit(
    client: TestClient, fuzz_auth: dict[str, str], graph_npz: bytes, sessions: sessionmaker[Session]
) -> str:
    """A succeeded audit of the fuzzing tenant whose results and influence rows are a tiny real audit's, with
    every stage (intervals, debiasing checked against chance, validation, stability)."""
    config = AuditConfig.from_dict(
        {
            "training": {"epochs": 20}, "bootstrap": 30, "validation_sample": 2, "budgets": [0.05],
            "debias_seeds": [1, 2, 3], "debias_random_sets": 1, "stability_seeds": [10, 11], "stability_k": 4,
        }
    )  # fmt: skip
    result = run_audit(synthetic(100, seed=1, train_per_class=15), config)
    results: dict[str, Any] = json.loads(json.dumps(result.to_dict()))
    graph = client.post(
        "/v1/graphs", headers=fuzz_auth, files={"npz": ("g.npz", graph_npz, "application/octet-stream")}
    )
    assert graph.status_code == 201, graph.text
    audit = client.post("/v1/audits", headers=fuzz_auth, json={"graph_id": graph.json()["id"]})
    audit_id = str(audit.json()["id"])
    with sessions.begin() as session:
        key = uuid.UUID(audit_id)
        session.execute(update(Audit).where(Audit.id == key).values(state="succeeded", results=results))
        session.add_all(
            InfluenceRow(audit_id=key, grp=r.group, **{k: v for k, v in encode(r).items() if k not in NOT_STORED})
            for r in result.influence_rows()
        )
    return audit_id


@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/v1/audits/{audit_id}", None),
        ("/v1/audits/{audit_id}/export", None),
        ("/v1/audits/{audit_id}/influence", {"order": "harmful", "limit": 5}),
        ("/v1/audits", {"state": "succeeded"}),
    ],
)
def test_stored_audit_responses_conform(
    api_schema: schemathesis.BaseSchema,
    fuzz_auth: dict[str, str],
    stored_audit: str,
    path: str,
    query: dict[str, Any] | None,
) -> None:
    operation = api_schema[path]["GET"]
    params = {"audit_id": stored_audit} if "{audit_id}" in path else None
    case = operation.Case(path_parameters=params, query=query, headers=dict(fuzz_auth))
    response = case.call_and_validate(checks=CHECKS)
    assert response.status_code == 200
    body = response.json()
    if path == "/v1/audits/{audit_id}":
        assert body["results"]["debiasing"][0]["against_random"]["verdict"]  # the real results were checked
    if path == "/v1/audits":
        assert any(item["id"] == stored_audit for item in body["items"])
