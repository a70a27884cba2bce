"""Progress reporting from inside `run_audit`: throttled writes, a heartbeat thread and cancellation.

`run_audit` calls ``progress(stage, fraction)``. The reporter writes stage and progress to the audit row at
most every ``min_interval`` seconds (always on a change of stage), and a background heartbeat keeps
``heartbeat_at`` fresh even while a stage runs long between callbacks. Each write is a short transaction
fenced on ``(state='running', attempts=<this attempt>)``; when it matches no row, the audit was cancelled or
another worker took it over, and the next callback raises to abort `run_audit`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

from app.core.lease import Lease, LeaseLost
from bind_core import AuditCancelled

log = logging.getLogger(__name__)


class Cancelled(AuditCancelled):
    """The audit's state became ``cancelled`` while it ran (bind_core's cancellation, raised by the callback)."""


# beat(stage, progress): touch heartbeat_at (and stage/progress when given) and report the lease.
Beat = Callable[[str | None, float | None], Lease]


class ProgressReporter:
    """The ``progress`` callback handed to `run_audit`, plus a heartbeat thread while used as a context.

    Args:
        beat: the fenced write.
        min_interval: least seconds between two progress writes of the same stage.
        heartbeat_interval: seconds between heartbeats from the background thread.
        clock: monotonic clock (injectable for tests).
    """

    def __init__(
        self,
        beat: Beat,
        *,
        min_interval: float = 0.5,
        heartbeat_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._beat = beat
        self._min_interval = min_interval
        self._heartbeat_interval = heartbeat_interval
        self._clock = clock
        self._lock = threading.Lock()
        self._last_write = float("-inf")
        self._last_stage: str | None = None
        self._lease = Lease.HELD
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def lease(self) -> Lease:
        return self._lease

    def __call__(self, stage: str, fraction: float) -> None:
        self.check()
        now = self._clock()
        if stage == self._last_stage and now - self._last_write < self._min_interval:
            return
        self._last_stage, self._last_write = stage, now
        self._write(stage, min(max(float(fraction), 0.0), 1.0))
        self.check()

    def check(self) -> None:
        """Raise `Cancelled` or `LeaseLost` when a write has found the audit is no longer ours."""
        if self._lease is Lease.CANCELLED:
            raise Cancelled
        if self._lease is Lease.LOST:
            raise LeaseLost

    def _write(self, stage: str | None, fraction: float | None) -> None:
        with self._lock:
            if self._lease is not Lease.HELD:
                return
            try:
                self._lease = self._beat(stage, fraction)
            except Exception:  # a lost progress write must not fail the audit; the next one retries
                log.warning("progress write failed", exc_info=True)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self._heartbeat_interval):
            self._write(None, None)
            if self._lease is not Lease.HELD:
                return

    def __enter__(self) -> ProgressReporter:
        self._thread = threading.Thread(target=self._heartbeat, name="bind-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
