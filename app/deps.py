"""Dependencies shared by the routes, defined once as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from app.db.models import Tenant
from app.db.session import run_after_commit
from app.errors import TooManyRequests, Unauthorized
from app.queue import AuditQueue
from app.ratelimit import AuthFailureGuard, RateLimiter
from app.security import authenticate, hash_key
from app.settings import Settings


def get_settings(request: Request) -> Settings:
    """The settings the app was created with (``create_app(settings)``)."""
    settings: Settings = request.app.state.settings
    return settings


def get_queue(request: Request) -> AuditQueue:
    queue: AuditQueue = request.app.state.queue
    return queue


def get_session(request: Request) -> Iterator[Session]:
    """One session per request: committed once when the route returns, rolled back if it raises.

    Services only ``flush()``. Callbacks registered with :func:`app.db.session.after_commit` run after the commit
    (sending a Celery task, for instance), so a job never refers to a row that is not there yet.
    """
    factory: sessionmaker[Session] = request.app.state.session_factory
    with factory() as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        session.commit()
        run_after_commit(session)


SettingsDep = Annotated[Settings, Depends(get_settings)]
# "function" scope: the commit runs when the route returns, before the response is sent, so a failed
# commit becomes a 500 instead of a 2xx for a row that does not exist.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
QueueDep = Annotated[AuditQueue, Depends(get_queue)]

_bearer = HTTPBearer(auto_error=False, description="An API key from `bind-audit keys create --tenant NAME`.")


def get_tenant(
    request: Request, session: SessionDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Tenant:
    """The tenant whose API key is in ``Authorization: Bearer <key>``; 401 otherwise, 429 past the key's rate
    or past the client address's failed authentications."""
    guard: AuthFailureGuard | None = getattr(request.app.state, "auth_failure_guard", None)
    client = request.client.host if request.client else "unknown"
    if guard is not None:
        guard.before(client)
    tenant = authenticate(session, credentials.credentials) if credentials is not None else None
    if tenant is None or credentials is None:
        if guard is not None:
            guard.failed(client)
        raise Unauthorized() if credentials is None else Unauthorized("The API key is unknown or revoked.")
    limiter: RateLimiter | None = getattr(request.app.state, "rate_limiter", None)
    if limiter is not None:
        decision = limiter.check(hash_key(credentials.credentials))
        if not decision.allowed:
            raise TooManyRequests(
                f"Rate limit of {int(limiter.capacity)} requests per minute for this API key exceeded.",
                headers={"Retry-After": str(decision.retry_after)},
            )
    return tenant


TenantDep = Annotated[Tenant, Depends(get_tenant)]
