"""The one way code sends a task: :class:`Publisher`, a task name and its arguments. Names are defined once,
beside their handlers (``app/<feature>/tasks.py``); the worker registers those handlers under the same names.

The API holds a :class:`BrokerClient` (its own light Celery app that never imports the worker); the worker
wraps its Celery app in a :class:`CeleryPublisher` and passes it to what sends follow-up tasks. Tasks are sent
only after the rows they name are committed (:func:`app.core.deps.get_session` runs the after-commit hooks).
If the broker is down then, the send is logged and the row stays as it was: the worker's sweeper re-sends
queued audits, and stale webhook deliveries are re-sent by the scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from celery import Celery

from app.core.db.session import ensure_sqlite_dir


class Publisher(Protocol):
    """Sends the task ``name`` with JSON ``args``; raises if the broker refused."""

    def send(
        self, name: str, args: Sequence[str | int], *, task_id: str | None = None, countdown: float | None = None
    ) -> None: ...


class CeleryPublisher:
    """A :class:`Publisher` over a Celery app (the worker's: the same broker and task routing)."""

    def __init__(self, celery: Celery) -> None:
        self.celery = celery

    def send(
        self, name: str, args: Sequence[str | int], *, task_id: str | None = None, countdown: float | None = None
    ) -> None:
        self.celery.send_task(name, args=list(args), task_id=task_id, countdown=countdown)


class BrokerClient(CeleryPublisher):
    """The API's publisher: a Celery client of ``broker_url`` (Redis, or kombu's SQLAlchemy transport) with
    short timeouts, so that a request never waits long on a broker that is down."""

    def __init__(self, broker_url: str, *, timeout: float = 3.0) -> None:
        if broker_url.startswith("sqla+"):
            ensure_sqlite_dir(broker_url)
        self.broker_url = broker_url
        self.timeout = timeout
        celery = Celery("bind-audit-api", broker=broker_url, set_as_current=False)
        celery.conf.update(
            broker_connection_timeout=timeout,
            broker_connection_retry_on_startup=False,
            task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.5},
        )
        if broker_url.startswith(("redis://", "rediss://")):
            celery.conf.broker_transport_options = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
        super().__init__(celery)

    def ping(self) -> None:
        """Raise if the broker cannot be reached within the timeout."""
        with self.celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=math.ceil(self.timeout))  # kombu's stub: whole seconds
