"""What a worker process does when it starts and stops, as Celery signal handlers (imported by Celery through
the app's ``include``): refuse to start on a device it cannot use, set torch's threads, structured logs, and
the background loops (sweeper, scheduler) and the metrics endpoint.
"""

from __future__ import annotations

from typing import Any

import torch
from celery.signals import after_setup_logger, after_setup_task_logger, worker_ready, worker_shutdown

from app.core.logs import JsonFormatter, RedactingFilter
from app.core.publisher import CeleryPublisher
from app.core.settings import get_settings
from worker import context, metrics, scheduler, sweeper
from worker.celery_app import app

context.device()  # a worker that cannot honour BIND_DEVICE refuses to start
if get_settings().torch_threads:
    torch.set_num_threads(get_settings().torch_threads)


@after_setup_logger.connect
@after_setup_task_logger.connect
def _structured_logs(logger: Any, **_: Any) -> None:
    """Celery's handlers: secrets redacted always; one JSON object a line (with the audit id) by default."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
        if get_settings().log_format == "json":
            handler.setFormatter(JsonFormatter())


@worker_ready.connect
def _start_loops(**_: Any) -> None:
    settings = get_settings()
    publisher = CeleryPublisher(app)
    sweeper.start(publisher, settings)
    scheduler.start(publisher, settings)
    if settings.metrics_enabled:
        metrics.serve(settings.worker_metrics_port)


@worker_shutdown.connect
def _stop_loops(**_: Any) -> None:
    sweeper.stop()
    scheduler.stop()
