"""Property-based fuzzing of every operation in ``/openapi.json`` (schemathesis, in-process over ASGI).

Fixed budget: 25 derandomized examples per operation, no deadline. Requests carry a real API key of a
fresh tenant (so they reach the handlers, not only the 401 guard). Every response must not be a 5xx,
must be one of the documented statuses and media types, and its body must match the documented schema.
"""

from __future__ import annotations

from collections.abc import Callable

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

MAX_EXAMPLES = 15


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
