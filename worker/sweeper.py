"""The sweeper loop: a thread in every worker that runs :func:`app.audits.recovery.sweep_and_send` and
:func:`app.what_ifs.recovery.sweep_and_send` every ``BIND_SWEEP_INTERVAL`` seconds (the first sweep at once)."""

from __future__ import annotations

import logging
import threading

from app.audits.recovery import sweep_and_send
from app.core.publisher import Publisher
from app.core.settings import Settings
from app.what_ifs import recovery as what_ifs
from worker import context

log = logging.getLogger(__name__)


class _Sweeper(threading.Thread):
    def __init__(self, publisher: Publisher, settings: Settings) -> None:
        super().__init__(name="bind-sweeper", daemon=True)
        self.publisher, self.settings = publisher, settings
        self.stopped = threading.Event()

    def run(self) -> None:
        while True:
            try:
                sweep_and_send(self.publisher, self.settings, context.sessions())
                what_ifs.sweep_and_send(self.publisher, self.settings, context.sessions())
            except Exception:  # the database or broker is down: try again next round
                log.warning("sweep failed", exc_info=True)
            if self.stopped.wait(self.settings.sweep_interval):
                return


_sweeper: _Sweeper | None = None


def start(publisher: Publisher, settings: Settings) -> None:
    """Start this process's sweeper thread (once)."""
    global _sweeper
    if _sweeper is None or not _sweeper.is_alive():
        _sweeper = _Sweeper(publisher, settings)
        _sweeper.start()


def stop() -> None:
    if _sweeper is not None:
        _sweeper.stopped.set()
