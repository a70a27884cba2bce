"""Writing the trail: :func:`append` one entry, and :func:`trailed`, the route dependency that writes one entry for
every request to a state-changing route or to a read of a report or an export.

The entry of an action that succeeds is written in the request's own transaction, so it is committed with what it
records (or not at all). An action refused or failed (a problem answered: 403, 404, 409, 422...) is rolled back,
then its entry is written and committed alone, with the status answered. A request whose key could not be
authenticated (401) has no tenant to file it under and leaves none.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session
from starlette.exceptions import HTTPException

from app.core.db.tables import TrailEvent
from app.core.deps import SessionDep
from app.core.errors import ProblemError
from app.core.logs import request_id

log = logging.getLogger(__name__)

API_PREFIX = "/v1"
TRUE_WORDS = frozenset({"1", "on", "t", "true", "y", "yes"})
"""What pydantic reads as ``True`` for a boolean query parameter (the route's own parsing of a flag)."""


@dataclass(frozen=True)
class Actor:
    """Who acts in a request, as the authentication left it on ``request.state.actor``: the key and its tenant."""

    tenant_id: uuid.UUID
    key_id: uuid.UUID


def actor_of(request: Request) -> Actor | None:
    """The request's authenticated actor (``None`` before or without authentication)."""
    actor = getattr(request.state, "actor", None)
    return actor if isinstance(actor, Actor) else None


def append(
    session: Session,
    *,
    tenant_id: uuid.UUID,
    action: str,
    target: str | None,
    outcome: str,
    actor: str = "key",
    actor_key_id: uuid.UUID | None = None,
    status: int | None = None,
) -> TrailEvent:
    """Add one entry to ``session`` (flushed; the caller commits), stamped with the current request's id."""
    rid = request_id.get()
    event = TrailEvent(
        tenant_id=tenant_id,
        actor=actor,
        actor_key_id=actor_key_id,
        action=action,
        target=target,
        request_id=rid[:64] if rid else None,
        outcome=outcome,
        status=status,
    )
    session.add(event)
    session.flush()
    return event


def status_of(exc: BaseException) -> int:
    """The HTTP status a request that raised ``exc`` is answered with."""
    if isinstance(exc, ProblemError):
        return exc.status
    if isinstance(exc, HTTPException):
        return exc.status_code
    if isinstance(exc, RequestValidationError):
        return 422
    return 500


class _Trailed:
    """The dependency behind :func:`trailed` (one instance per route)."""

    def __init__(self, action: str, target: str | None, flags: dict[str, str]) -> None:
        self._action = action
        self.target = target
        self.flags = flags

    def action(self, request: Request) -> str:
        """The action, or the one a boolean query flag set to true names instead (``?purge=true``)."""
        for flag, action in self.flags.items():
            if request.query_params.get(flag, "").lower() in TRUE_WORDS:
                return action
        return self._action

    def __call__(self, request: Request, response: Response, session: SessionDep) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            actor = actor_of(request)
            if actor is not None:
                self._failed(request, session, actor, status_of(exc))
            raise
        actor = actor_of(request)
        if actor is not None:
            # A route returning its own Response leaves the injected one's status unset: the decorator's is the answer.
            # A console form that shows its refusal on the page sets the injected one's status: the action failed.
            route_status = getattr(request.scope.get("route"), "status_code", None)
            status = response.status_code or route_status or 200
            append(
                session,
                tenant_id=actor.tenant_id,
                actor_key_id=actor.key_id,
                action=self.action(request),
                target=self._target(request, response),
                outcome="succeeded" if status < 400 else "failed",
                status=status,
            )

    def _target(self, request: Request, response: Response | None) -> str | None:
        """The resource acted on: the template filled with the path's parameters, or a new resource's
        ``Location`` (without ``/v1``)."""
        if self.target is not None:
            return self.target.format(**request.path_params)[:300]
        location = response.headers.get("location") if response is not None else None
        return location.removeprefix(API_PREFIX)[:300] if location else None

    def _failed(self, request: Request, session: Session, actor: Actor, status: int) -> None:
        """Roll the action back, then write its entry alone (a failure to write it is logged, not raised over
        the request's own error)."""
        try:
            session.rollback()
            append(
                session,
                tenant_id=actor.tenant_id,
                actor_key_id=actor.key_id,
                action=self.action(request),
                target=self._target(request, None),
                outcome="denied" if status == 403 else "failed",
                status=status,
            )
            session.commit()
        except Exception:
            session.rollback()
            log.warning("could not record the trail entry of a failed %s", self.action(request), exc_info=True)


def trailed(action: str, target: str | None = None, *, flags: dict[str, str] | None = None) -> Any:
    """A route dependency (``dependencies=[trailed("graph.delete", "/graphs/{graph_id}")]``) writing one trail entry
    per request: ``action``, and ``target``, a template filled from the path's parameters (left out: the
    ``Location`` of what the route created); ``flags`` maps a boolean query parameter to the action it makes
    the request (``{"purge": "graph.purge"}``). It must come before the route's role dependency (decorator
    dependencies do), so that a refused role is recorded too."""
    return Depends(_Trailed(action, target, flags or {}), scope="function")
