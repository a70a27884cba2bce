"""Who makes a request: its API key authenticated (its rate limit and the client's failed attempts checked), and
its role checked against the one the route needs (``ViewerTenant``, ``AuditorTenant``, ``AdminTenant``).

Every ``/v1`` route takes one of those three (``tests/app/api/test_roles.py`` walks every route with every
role). The key is also left on ``request.state.actor`` for the audit trail (``app/trail/record.py``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.core.db.tables import Tenant
from app.core.deps import SessionDep
from app.core.errors import TooManyRequests, Unauthorized
from app.core.ratelimit import AuthFailureGuard, RateLimiter
from app.tenants.keys import find_key, hash_key
from app.tenants.roles import Principal, check_role
from app.trail.record import Actor

_bearer = HTTPBearer(auto_error=False, description="An API key from `bind-audit keys create --tenant NAME`.")


def get_principal(
    request: Request, session: SessionDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Principal:
    """The key in ``Authorization: Bearer <key>``, its tenant and role; 401 otherwise, 429 past the key's rate
    or past the client address's failed authentications."""
    guard: AuthFailureGuard | None = getattr(request.app.state, "auth_failure_guard", None)
    client = request.client.host if request.client else "unknown"
    if guard is not None:
        guard.before(client)
    key = find_key(session, credentials.credentials) if credentials is not None else None
    tenant = session.get(Tenant, key.tenant_id) if key is not None else None
    if key is None or tenant is None or credentials is None:
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
    request.state.actor = Actor(tenant_id=tenant.id, key_id=key.id)  # for the trail
    return Principal(tenant=tenant, key_id=key.id, role=key.role)


PrincipalDep = Annotated[Principal, Depends(get_principal)]


def viewer(principal: PrincipalDep) -> Tenant:
    """The tenant of a key of any role."""
    check_role(principal.role, "viewer")
    return principal.tenant


def auditor(principal: PrincipalDep) -> Tenant:
    """The tenant of an ``auditor`` or ``admin`` key; 403 ``role-not-allowed`` for a viewer."""
    check_role(principal.role, "auditor")
    return principal.tenant


def admin(principal: PrincipalDep) -> Tenant:
    """The tenant of an ``admin`` key; 403 ``role-not-allowed`` otherwise."""
    check_role(principal.role, "admin")
    return principal.tenant


ViewerTenant = Annotated[Tenant, Depends(viewer)]
AuditorTenant = Annotated[Tenant, Depends(auditor)]
AdminTenant = Annotated[Tenant, Depends(admin)]
