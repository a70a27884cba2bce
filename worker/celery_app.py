"""The Celery application of the worker: ``python -m celery -A worker.celery_app worker --pool=solo``.

No result backend: the audit row is the truth. Messages are acknowledged only after the task returns
(``acks_late``), one at a time (prefetch 1), and handed back if the worker process dies; a worker killed
with SIGKILL is covered by the sweeper, which re-queues audits whose heartbeat went stale.
"""

from __future__ import annotations

from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, worker_ready, worker_shutdown

from app.db.session import ensure_sqlite_dir
from app.logs import JsonFormatter, RedactingFilter
from app.settings import Settings, get_settings
from worker import context


def create_celery(settings: Settings) -> Celery:
    """A Celery app for ``settings.broker_url`` with the delivery guarantees the audit jobs rely on."""
    if settings.broker_url.startswith("sqla+"):
        ensure_sqlite_dir(settings.broker_url)
    celery = Celery("bind-audit", broker=settings.broker_url, include=["worker.tasks", "worker.webhooks"])
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
context.device()  # a worker that cannot honour BIND_DEVICE refuses to start
if get_settings().torch_threads:
    import torch

    torch.set_num_threads(get_settings().torch_threads)


@after_setup_logger.connect  # type: ignore[untyped-decorator]  # Celery ships no type hints
@after_setup_task_logger.connect  # type: ignore[untyped-decorator]
def _structured_logs(logger: Any, **_: Any) -> None:
    """Celery's handlers: secrets redacted always; one JSON object a line (with the audit id) by default."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
        if get_settings().log_format == "json":
            handler.setFormatter(JsonFormatter())


@worker_ready.connect  # type: ignore[untyped-decorator]  # Celery ships no type hints
def _start_sweeper(**_: Any) -> None:
    from worker.metrics import serve
    from worker.sweeper import start_sweeper

    start_sweeper(app, get_settings())
    if get_settings().metrics_enabled:
        serve(get_settings().worker_metrics_port)


@worker_shutdown.connect  # type: ignore[untyped-decorator]  # Celery ships no type hints
def _stop_sweeper(**_: Any) -> None:
    from worker.sweeper import stop_sweeper

    stop_sweeper()


@worker_ready.connect  # type: ignore[untyped-decorator]  # Celery ships no type hints
def _start_scheduler(**_: Any) -> None:
    from worker.scheduler import start_scheduler

    start_scheduler(app, get_settings())


@worker_shutdown.connect  # type: ignore[untyped-decorator]  # Celery ships no type hints
def _stop_scheduler(**_: Any) -> None:
    from worker.scheduler import stop_scheduler

    stop_scheduler()
