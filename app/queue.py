"""The API's thin Celery client: it sends audits by task name and never imports the worker.

Tasks are sent only after the audit row is committed (:func:`app.deps.get_session` runs the
after-commit hooks). If the broker is down then, the send is logged and the row stays ``queued``: the
response still succeeds and the worker's sweeper re-sends queued audits it finds.
"""

from __future__ import annotations

import logging
import uuid

from celery import Celery

from app.db.session import ensure_sqlite_dir

RUN_AUDIT_TASK = "bind.run_audit"
"""The worker's task name; its only argument is the audit id as a string."""

logger = logging.getLogger("app.queue")


class AuditQueue:
    """Sends ``bind.run_audit`` messages to ``broker_url`` (Redis, or kombu's SQLAlchemy transport)."""

    def __init__(self, broker_url: str, *, timeout: float = 3.0) -> None:
        if broker_url.startswith("sqla+"):
            ensure_sqlite_dir(broker_url)
        self.broker_url = broker_url
        self.timeout = timeout
        self.celery = Celery("bind-audit-api", broker=broker_url, set_as_current=False)
        self.celery.conf.update(
            broker_connection_timeout=timeout,
            broker_connection_retry_on_startup=False,
            task_publish_retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.5},
        )
        if broker_url.startswith(("redis://", "rediss://")):
            self.celery.conf.broker_transport_options = {
                "socket_connect_timeout": timeout,
                "socket_timeout": timeout,
            }

    def send_audit(self, audit_id: uuid.UUID) -> bool:
        """Send the audit's task (its Celery task id is the audit id); ``False`` if the broker refused."""
        try:
            self.celery.send_task(RUN_AUDIT_TASK, args=[str(audit_id)], task_id=str(audit_id))
        except Exception:
            logger.warning("could not enqueue audit %s; it stays queued for the sweeper", audit_id, exc_info=True)
            return False
        return True

    def ping(self) -> None:
        """Raise if the broker cannot be reached within the timeout."""
        with self.celery.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=self.timeout)
