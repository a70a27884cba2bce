"""One renderer for every error: RFC 9457 ``application/problem+json``, never a stack trace.

A part of the app that people read in a browser (the console, ``/console``) registers its own page for the same
problem with :func:`serve_problem_pages`: the status, headers and wording stay the API's, only the rendering differs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from app.core.errors import (
    PROBLEM_CONTENT_TYPE,
    ProblemError,
    ServiceUnavailable,
    ValidationProblem,
    bind_error_problem,
)
from bind_core import BindError

logger = logging.getLogger("app.core.errors")

_HTTP_SLUGS = {
    400: "bad-request",
    401: "unauthorized",
    404: "not-found",
    405: "method-not-allowed",
    413: "payload-too-large",
    415: "unsupported-media-type",
}


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


class ProblemResponse(JSONResponse):
    media_type = PROBLEM_CONTENT_TYPE


ProblemPage = Callable[[Request, ProblemError], Response]
"""Renders a problem as a page for a person (an HTML response with the problem's status and headers)."""


def serve_problem_pages(app: FastAPI, prefix: str, render: ProblemPage) -> None:
    """Answer every error on ``prefix`` and the paths under it with ``render`` instead of ``problem+json``."""
    app.state.problem_pages = {**getattr(app.state, "problem_pages", {}), prefix.rstrip("/"): render}


def problem_response(request: Request, error: ProblemError) -> Response:
    """Render ``error`` for ``request`` (its path becomes the problem's ``instance``): a problem document, or the
    page registered for the path's prefix (:func:`serve_problem_pages`)."""
    path = request.url.path
    pages: dict[str, ProblemPage] = getattr(request.app.state, "problem_pages", {})
    for prefix, render in pages.items():
        if path == prefix or path.startswith(prefix + "/"):
            return render(request, error)
    return ProblemResponse(error.to_problem(instance=path), status_code=error.status, headers=error.headers)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] in {"body", "query", "path", "header", "cookie"} and len(parts) > 1:
        parts = parts[1:]
    return ".".join(parts)


def _message(error: Any) -> str:
    """pydantic's message without the prefix it puts before a validator's own sentence (``Value error, ``)."""
    return str(error.get("msg", "")).removeprefix("Value error, ")


async def _on_problem(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProblemError)
    return problem_response(request, exc)


async def _on_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    for e in exc.errors():  # FastAPI locates a JSON syntax error as ("body", <character offset>): no field
        if e.get("type") == "json_invalid":
            at = e.get("loc", ())[-1:] or ("?",)
            why = (e.get("ctx") or {}).get("error", "")
            return problem_response(
                request, ValidationProblem(f"The body is not valid JSON (at character {at[0]}: {why}).")
            )
    errors = [{"field": _field(e.get("loc", ())), "message": _message(e)} for e in exc.errors()]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5]) or None
    return problem_response(request, ValidationProblem(detail, errors=errors))


async def _on_bind_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BindError)
    return problem_response(request, bind_error_problem(exc))


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on ``request``'s path, sorted: the ``Allow`` header of a 405.

    Starlette's router answers 405 with the methods of the first route whose path matched only, so
    ``PUT /v1/graphs`` said ``Allow: POST`` although ``GET`` is served too. Here the app's routes are asked
    whether they fully match the path with each method in turn (``matches`` is public and also looks
    inside included routers).
    """
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    ]


async def _on_http(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    try:
        title = HTTPStatus(exc.status_code).phrase
    except ValueError:
        title = "HTTP error"
    detail = exc.detail if isinstance(exc.detail, str) and exc.detail != title else None
    headers = dict(exc.headers or {})
    if exc.status_code == 405 and (methods := allowed_methods(request)):
        headers["Allow"] = ", ".join(methods)
    error = ProblemError(
        detail,
        status=exc.status_code,
        title=title,
        slug=_HTTP_SLUGS.get(exc.status_code, "http-error"),
        headers=headers or None,
    )
    return problem_response(request, error)


DATABASE_RETRY_AFTER = 5
"""Seconds a client is told to wait (``Retry-After``) when the database cannot be reached."""


async def _on_database_unavailable(request: Request, exc: Exception) -> Response:
    logger.warning("database unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__)
    error = ServiceUnavailable(
        "The database cannot be reached; try again shortly.",
        slug="database-unavailable",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
    )
    return problem_response(request, error)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(request, ProblemError("The server failed to handle this request."))


def install_problem_handlers(app: FastAPI) -> None:
    """Register the renderers on ``app``."""
    app.add_exception_handler(ProblemError, _on_problem)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(BindError, _on_bind_error)
    app.add_exception_handler(StarletteHTTPException, _on_http)
    # Connection lost, refused or timed out (server down, restarting, pool exhausted): 503, not 500.
    for db_error in (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError):
        app.add_exception_handler(db_error, _on_database_unavailable)
    app.add_exception_handler(Exception, _on_unexpected)
