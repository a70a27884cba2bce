"""``/healthz`` (the process answers) and ``/readyz`` (the database and the broker answer)."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine, text

from app.core.deps import BrokerDep
from app.core.errors import ServiceUnavailable
from app.core.problem_schema import problem_responses
from app.core.publisher import BrokerClient

router = APIRouter(tags=["health"])

CHECK_TIMEOUT = 5.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Always 200 while the process serves requests."""
    return {"status": "ok"}


def _ping_database(engine: Engine) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def _ping_broker(broker: BrokerClient) -> None:
    broker.ping()


async def _check(func: Any, arg: Any) -> str:
    try:
        with anyio.fail_after(CHECK_TIMEOUT):
            await run_in_threadpool(func, arg)
    except TimeoutError:
        return "timeout"
    except Exception as exc:
        return f"error: {type(exc).__name__}"
    return "ok"


@router.get("/readyz", responses=problem_responses(503))
async def readyz(request: Request, broker: BrokerDep) -> dict[str, Any]:
    """200 when the database answers ``SELECT 1`` and the broker accepts a connection; 503 otherwise."""
    checks = {
        "database": await _check(_ping_database, request.app.state.engine),
        "broker": await _check(_ping_broker, broker),
    }
    if any(v != "ok" for v in checks.values()):
        failing = ", ".join(k for k, v in checks.items() if v != "ok")
        raise ServiceUnavailable(
            f"Not ready: {failing} unreachable.",
            errors=[{"field": k, "message": v} for k, v in checks.items() if v != "ok"],
        )
    return {"status": "ok", "checks": checks}
