"""Rendering a console page: the console's templates over the shared shell (``bind_core/reporting/templates``),
autoescaped, served with the console's Content Security Policy."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from fastapi import Request, Response
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader

from app.console.cookies import COOKIE_PATH
from app.console.deps import ConsoleUser
from bind_core.reporting import environment

# Same origin only: no script at all (pages refresh with <meta http-equiv="refresh">), inline styles and SVG,
# forms posting back to the console, never framed.
CONSOLE_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)


@cache
def templates() -> Environment:
    """The console's templates first, then the shared ones (``page.html``, ``macros.html``)."""
    return environment(PackageLoader("app.console", "templates"))


SIGNED_OUT: dict[str, str | None] = {"tenant": None, "role": None, "csrf": None}
"""The layout's user on a page for no one signed in: no navigation bar."""


def page(template: str, user: ConsoleUser | None, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    """``template`` rendered for ``user`` (``None`` on the sign-in page) as an HTML response that is never cached."""
    return render_page(template, user.shell() if user else SIGNED_OUT, status_code=status_code, **context)


def render_page(
    template: str, shell: Mapping[str, str | None], *, status_code: int = 200, **context: Any
) -> HTMLResponse:
    """``template`` rendered with the layout's user (:meth:`ConsoleUser.shell`, or :data:`SIGNED_OUT`)."""
    body = templates().get_template(template).render(**shell, **context)
    headers = {"Content-Security-Policy": CONSOLE_CSP, "Cache-Control": "no-store"}
    return HTMLResponse(body, status_code=status_code, headers=headers)


def next_query(query: dict[str, Any], token: str | None) -> dict[str, Any] | None:
    """The next page's query parameters (``None`` on the last page; ``query``'s ``None`` values left out); the
    template URL-encodes them."""
    if token is None:
        return None
    return {**{k: v for k, v in query.items() if v is not None}, "page_token": token}


def refused(response: Response, status: int) -> None:
    """Record on ``response`` (the route's injected one, which the audit trail reads) that a form's action was refused
    with ``status`` where the route shows the refusal on a page of its own: the trail then writes the action as
    failed, with that status, not as a success."""
    response.status_code = status


def set_cookie(
    response: Response, request: Request, name: str, value: str, *, max_age: int, path: str = COOKIE_PATH
) -> None:
    """Set one of the console's cookies: ``HttpOnly``, ``SameSite=Strict``, ``Secure`` over HTTPS."""
    response.set_cookie(
        name, value, max_age=max_age, path=path, secure=_secure(request), httponly=True, samesite="strict"
    )


def clear_cookie(response: Response, request: Request, name: str, *, path: str = COOKIE_PATH) -> None:
    """Clear one of the console's cookies (set with :func:`set_cookie` on ``path``)."""
    response.delete_cookie(name, path=path, secure=_secure(request), httponly=True, samesite="strict")


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"
