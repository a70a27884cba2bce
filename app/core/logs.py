"""Structured logs: one JSON object a line, with the request id (API) or audit id (worker), secrets redacted.

The ids live in context variables, so every log call made while a request or an audit runs carries them
without being passed around. :class:`RedactingFilter` removes API keys, ``Authorization`` values and the
passwords of connection URLs from every record, whatever formatter prints it.
"""

from __future__ import annotations

import json
import logging
import re
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

request_id: ContextVar[str | None] = ContextVar("bind_request_id", default=None)
audit_id: ContextVar[str | None] = ContextVar("bind_audit_id", default=None)

_REDACTIONS = (
    (
        re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?[^\s,\"'}]+"),
        r"\1[REDACTED]",
    ),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"), "Bearer [REDACTED]"),
    (re.compile(r"\bbind_[A-Za-z0-9_-]{8,}"), "bind_[REDACTED]"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/@\s]*):[^@\s]+@"), r"\1:[REDACTED]@"),
)
_MARK = "_bind_logging"


def redact(text: str) -> str:
    """``text`` with API keys, bearer tokens, ``Authorization`` values and URL passwords replaced."""
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites each record's message (arguments merged in) and exception text without secrets."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        record.msg, record.args = redact(message), None
        record.request_id = request_id.get()
        record.audit_id = audit_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "request_id"?, "audit_id"?, "exc"?}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key in ("request_id", "audit_id"):
            value = getattr(record, key, None) or (request_id if key == "request_id" else audit_id).get()
            if value:
                doc[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            doc["exc"] = redact(record.exc_text)
        return json.dumps(doc, default=str)


def configure_logging(log_format: str = "json", level: int = logging.INFO) -> None:
    """One handler on the root logger, to stderr through the redacting filter: JSON lines or plain text.

    Safe to call more than once (the handler is added once per process). Every log line is written once:

    - a plain handler already on the root (``logging.basicConfig``'s, which ``bind-audit`` installs before it
      knows which command runs) is taken off, since every record would otherwise be written twice, plain and
      in ``log_format``;
    - uvicorn's loggers are adopted (:func:`adopt_uvicorn_loggers`): its access line is not written (the
      request middleware, :mod:`app.core.observability`, writes the one access line, with the request id) and
      its other messages go through this handler, in this format.
    """
    root = logging.getLogger()
    adopt_uvicorn_loggers()
    if any(getattr(h, _MARK, False) for h in root.handlers):
        return
    for handler in list(root.handlers):
        if type(handler) is logging.StreamHandler:  # basicConfig's; subclasses (pytest's capture) stay
            root.removeHandler(handler)
    handler = logging.StreamHandler()
    setattr(handler, _MARK, True)
    handler.addFilter(RedactingFilter())
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
    )
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > level:
        root.setLevel(level)


def adopt_uvicorn_loggers() -> None:
    """Silence ``uvicorn.access`` and send ``uvicorn`` and ``uvicorn.error`` to the root logger's handler.

    uvicorn configures its loggers before it calls the app factory, with handlers of its own (plain text, the
    access line on stdout); this runs from the factory, so it undoes that for the process. uvicorn writes an
    access line only while ``uvicorn.access`` has a handler (as with ``--no-access-log``).
    """
    access = logging.getLogger("uvicorn.access")
    access.handlers.clear()
    access.propagate = False
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True


def protect_handlers(logger: logging.Logger | None = None) -> None:
    """Add the redacting filter to every handler of ``logger`` (default: root) that lacks one."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
