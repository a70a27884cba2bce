"""The Celery application of the worker: ``python -m celery -A worker.celery_app worker --pool=solo``.

This module holds the Celery instance and nothing else: the tasks are registered in :mod:`worker.tasks`, the
start-up and shut-down hooks (logging, device check, sweeper, scheduler, metrics) in :mod:`worker.startup`;
Celery imports both when a worker starts (``include``). Importing this module has no side effect beyond
creating the app, so the standalone scheduler can send tasks through it without becoming a worker.

No result backend: the audit row is the truth. Messages are acknowledged only after the task returns
(``acks_late``), one at a time (prefetch 1), and handed back if the worker process dies; a worker killed
with SIGKILL is covered by the sweeper, which re-queues audits whose heartbeat went stale.
"""

from __future__ import annotations

from celery import Celery

from app.core.db.session import ensure_sqlite_dir
from app.core.settings import Settings, get_settings


def create_celery(settings: Settings) -> Celery:
    """A Celery app for ``settings.broker_url`` with the delivery guarantees the audit jobs rely on."""
    if settings.broker_url.startswith("sqla+"):
        ensure_sqlite_dir(settings.broker_url)
    celery = Celery("bind-audit", broker=settings.broker_url, include=["worker.tasks", "worker.startup"])
    celery.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,
        result_backend=settings.result_backend,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=True,
        worker_send_task_events=False,
        task_track_started=False,
    )
    if settings.broker_url.startswith(("redis://", "rediss://")):
        # A message unacknowledged this long is delivered again. An audit may legitimately run for hours;
        # the sweeper, not this timeout, recovers from dead workers.
        celery.conf.broker_transport_options = {"visibility_timeout": 12 * 3600}
    elif settings.broker_url.startswith("sqla+sqlite"):
        # kombu passes these to create_engine: wait for the API's writes instead of failing on a lock.
        celery.conf.broker_transport_options = {"connect_args": {"timeout": 30}}
    return celery


app = create_celery(get_settings())
