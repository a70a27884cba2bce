"""Failed authentication is throttled per client address (BIND_AUTH_FAILURE_LIMIT_PER_MINUTE): key guessing
gets 429 problems with ``Retry-After``, other addresses and the per-key limit are unaffected."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from apihelp import assert_problem
from fastapi.testclient import TestClient

from app.core.errors import TooManyRequests
from app.core.ratelimit import AuthFailureGuard, RateLimiter, make_auth_failure_guard
from app.core.settings import Settings
from app.main import create_app


def _address() -> str:
    """A documentation address (2001:db8::/32) of its own per test, so that runs sharing Redis stay apart."""
    return f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"


@pytest.mark.parametrize("redis_backed", [True, False], ids=["redis", "in-process"])
def test_failed_authentications_are_throttled_per_address(
    settings: Settings, new_key: Callable[[], dict[str, str]], redis_backed: bool
) -> None:
    broker = settings.broker_url if redis_backed else "sqla+sqlite:///unused.db"
    limited = settings.model_copy(update={"auth_failure_limit_per_minute": 3, "broker_url": broker})
    app = create_app(limited)
    guessing, other = _address(), _address()
    valid = new_key()
    with TestClient(app, client=(guessing, 40000)) as attacker, TestClient(app, client=(other, 40001)) as bystander:
        assert attacker.get("/v1/graphs", headers=valid).status_code == 200  # successes cost nothing
        bad = [{"Authorization": f"Bearer bind_guess{uuid.uuid4().hex}"}, {}, {"Authorization": "Basic eDp5"}]
        for headers in bad:  # an unknown key, no key, another scheme: three failures
            assert_problem(attacker.get("/v1/graphs", headers=headers), 401, "unauthorized")
        refused = attacker.get("/v1/graphs", headers={"Authorization": f"Bearer bind_guess{uuid.uuid4().hex}"})
        problem = assert_problem(refused, 429, "rate-limited")
        assert 1 <= int(refused.headers["retry-after"]) <= 20 and "failed authentications" in problem["detail"]
        # Once the address is blocked, even a valid key is refused: a guess that hit one learns nothing.
        assert_problem(attacker.get("/v1/graphs", headers=valid), 429, "rate-limited")
        assert_problem(attacker.post("/v1/audits", json={}), 429, "rate-limited")
        # Another address is unaffected, and so are routes without a key.
        assert bystander.get("/v1/graphs", headers=valid).status_code == 200
        assert_problem(bystander.get("/v1/graphs"), 401, "unauthorized")
        assert attacker.get("/healthz").status_code == 200


def test_guard_refills_and_zero_turns_it_off() -> None:
    guard = AuthFailureGuard(RateLimiter(60, namespace="authfail"))  # one failure back per second
    for _ in range(60):
        guard.before("a")
        guard.failed("a")
    with pytest.raises(TooManyRequests) as refused:
        guard.before("a")
    assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "1"
    guard.before("b")  # per address
    limiter = RateLimiter(60)
    assert limiter.peek("k").allowed and limiter.peek("k").allowed and limiter.check("k").allowed  # peek takes nothing
    assert make_auth_failure_guard(0, "redis://x") is None and Settings().auth_failure_limit_per_minute == 30
