"""Per request: an id (``X-Request-ID``, kept from the client when it is short and plain), one access-log
line, and the HTTP metrics. A pure ASGI middleware, so streamed bodies are not buffered."""

from __future__ import annotations

import logging
import re
import time
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.logs import request_id
from app.core.metrics import ApiMetrics

log = logging.getLogger("app.access")
_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestContextMiddleware:
    def __init__(self, app: ASGIApp, metrics: ApiMetrics | None = None) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        rid = given if _SAFE_ID.match(given) else uuid.uuid4().hex
        token = request_id.set(rid)
        start = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message)["X-Request-ID"] = rid
                if self.metrics is not None:
                    self.metrics.observe(scope["method"], _route(scope), status, time.perf_counter() - start)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            log.info("%s %s %d %.1f ms", scope["method"], scope["path"], status, 1000 * elapsed)
            request_id.reset(token)


def _route(scope: Scope) -> str:
    """The matched path as a template (``/v1/audits/{audit_id}``), so labels stay few; else ``unmatched``.

    Built from the request path and its path parameters: with nested routers the matched route's own
    ``path`` lacks the prefixes.
    """
    if scope.get("route") is None:
        return "unmatched"
    path = str(scope.get("path", ""))
    for name, value in (scope.get("path_params") or {}).items():
        path = path.replace(f"/{value}", "/{" + str(name) + "}", 1)
    return path
