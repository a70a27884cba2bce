"""Who is signed in to the console: the session cookie read, its key still active, its tenant and role; the role
each page or form needs (the API's roles, ``app/tenants/roles.py``); and the CSRF check every form POST makes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.console.cookies import SESSION_COOKIE, ConsoleSession, read_session, same_token
from app.core.db.tables import Tenant
from app.core.deps import SessionDep, SettingsDep
from app.core.errors import Forbidden, TooManyRequests
from app.core.ratelimit import RateLimiter
from app.tenants.keys import active_key
from app.tenants.roles import check_role
from app.trail.record import Actor

SIGN_IN_PATH = "/console/sign-in"


class SignInRequired(Exception):
    """No valid session: the console answers with a redirect to the sign-in page (see ``app/console/routes.py``)."""


@dataclass(frozen=True)
class ConsoleUser:
    """The signed-in tenant, the role of the key signed in with, and the session (its CSRF token goes into every
    form)."""

    tenant: Tenant
    session: ConsoleSession
    role: str

    def shell(self) -> dict[str, str | None]:
        """What the layout of every page shows of the user: the tenant's name, the role, the CSRF token of the
        sign-out form."""
        return {"tenant": self.tenant.name, "role": self.role, "csrf": self.session.csrf}


def get_console_user(request: Request, session: SessionDep, settings: SettingsDep) -> ConsoleUser:
    """The tenant behind the request's session cookie; :class:`SignInRequired` when there is none, it is forged or
    expired, or its API key was revoked since. Requests count against the API key's rate limit (the same bucket
    as the API's requests with that key): 429 past it."""
    signed = read_session(settings.console_secret.get_secret_value(), request.cookies.get(SESSION_COOKIE))
    key = active_key(session, signed.key_id) if signed is not None else None
    tenant = session.get(Tenant, key.tenant_id) if key is not None else None
    if signed is None or key is None or tenant is None:
        raise SignInRequired()
    limiter: RateLimiter | None = getattr(request.app.state, "rate_limiter", None)
    if limiter is not None:
        decision = limiter.check(key.key_hash)  # the API's bucket is keyed on hash_key(key), the same digest
        if not decision.allowed:
            raise TooManyRequests(
                f"Rate limit of {int(limiter.capacity)} requests per minute for this API key exceeded.",
                headers={"Retry-After": str(decision.retry_after)},
            )
    request.state.actor = Actor(tenant_id=tenant.id, key_id=key.id)  # for the trail
    user = ConsoleUser(tenant=tenant, session=signed, role=key.role)
    # For an error page (app/console/problems.py): rendered after the request's database session has closed.
    request.state.console_shell = user.shell()
    return user


def check_csrf(user: ConsoleUser, token: str | None) -> None:
    """403 unless a form's ``csrf`` field is the session's token."""
    if not same_token(user.session.csrf, token):
        raise Forbidden("The form's CSRF token is missing or does not match this session; reload the page.")


ConsoleUserDep = Annotated[ConsoleUser, Depends(get_console_user)]


def console_auditor(user: ConsoleUserDep) -> ConsoleUser:
    """The signed-in user when the key is an ``auditor`` or ``admin`` key; 403 ``role-not-allowed`` otherwise."""
    check_role(user.role, "auditor")
    return user


def console_admin(user: ConsoleUserDep) -> ConsoleUser:
    """The signed-in user when the key is an ``admin`` key; 403 ``role-not-allowed`` otherwise."""
    check_role(user.role, "admin")
    return user


ConsoleAuditorDep = Annotated[ConsoleUser, Depends(console_auditor)]
ConsoleAdminDep = Annotated[ConsoleUser, Depends(console_admin)]
