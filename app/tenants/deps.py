"""The tenant of a request: its API key authenticated, its rate limit and the client's failed attempts checked."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.core.db.tables import Tenant
from app.core.deps import SessionDep
from app.core.errors import TooManyRequests, Unauthorized
from app.core.ratelimit import AuthFailureGuard, RateLimiter
from app.tenants.keys import authenticate, hash_key

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
