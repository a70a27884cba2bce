"""The scheduler loop (:func:`app.schedules.scheduler.tick_and_send` every ``BIND_SCHEDULER_INTERVAL``
seconds): a thread in every worker by default, or a process of its own (``bind-audit scheduler``, i.e.
``python -m worker.scheduler``). It needs the database and the broker, not a GPU nor the datasets."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from sqlalchemy.orm import Session, sessionmaker

from app.core.logs import configure_logging
from app.core.publisher import CeleryPublisher, Publisher
from app.core.settings import Settings, get_settings
from app.schedules.scheduler import tick_and_send
from worker import context
from worker.celery_app import app as celery

log = logging.getLogger("app.schedules.scheduler")  # the tick's logger: one name for the loop and the tick


def run_until(stopped: threading.Event, publisher: Publisher, sessions: sessionmaker[Session], interval: float) -> None:
    """Tick every ``interval`` seconds until ``stopped`` is set; a failed tick is logged and tried again."""
    while not stopped.is_set():
        try:
            tick_and_send(publisher, sessions)
        except Exception:  # the database or broker is down: try again next tick
            log.warning("scheduler tick failed", exc_info=True)
        if stopped.wait(interval):
            return


class _Scheduler(threading.Thread):
    def __init__(self, publisher: Publisher, settings: Settings) -> None:
        super().__init__(name="bind-scheduler", daemon=True)
        self.publisher, self.settings = publisher, settings
        self.stopped = threading.Event()

    def run(self) -> None:
        run_until(self.stopped, self.publisher, context.sessions(), self.settings.scheduler_interval)


_scheduler: _Scheduler | None = None


def start(publisher: Publisher, settings: Settings) -> None:
    """Start this process's scheduler thread (once), unless ``BIND_SCHEDULER_INTERVAL`` is 0."""
    global _scheduler
    if settings.scheduler_interval > 0 and (_scheduler is None or not _scheduler.is_alive()):
        _scheduler = _Scheduler(publisher, settings)
        _scheduler.start()


def stop() -> None:
    if _scheduler is not None:
        _scheduler.stopped.set()


def main(argv: Sequence[str] | None = None) -> int:
    """``bind-audit scheduler``: the scheduler as a process of its own, until SIGTERM or Ctrl-C.

    Workers may keep their scheduler threads or turn them off (``BIND_SCHEDULER_INTERVAL=0`` in their
    environment). It sends through the workers' Celery app: the same broker and task routing.
    """
    parser = argparse.ArgumentParser(prog="bind-audit scheduler", description="Run the scheduler as a process.")
    parser.add_argument(
        "--interval", type=float, default=None, help="seconds between two ticks (default: BIND_SCHEDULER_INTERVAL)"
    )
    args = parser.parse_args(argv)
    settings = get_settings()
    interval = settings.scheduler_interval if args.interval is None else args.interval
    if interval <= 0:
        parser.error("the interval must be above 0 (BIND_SCHEDULER_INTERVAL or --interval)")
    configure_logging(settings.log_format)
    stopped = threading.Event()

    def stop_on(signum: int, _: FrameType | None) -> None:
        log.info("scheduler: %s, stopping after this tick", signal.Signals(signum).name)
        stopped.set()

    signal.signal(signal.SIGTERM, stop_on)
    signal.signal(signal.SIGINT, stop_on)
    log.info("scheduler started: a tick every %g s", interval)
    run_until(stopped, CeleryPublisher(celery), context.sessions(), interval)
    log.info("scheduler stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
