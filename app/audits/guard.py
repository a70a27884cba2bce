"""The hard limits on one running audit: memory it may add to the worker process, and wall-clock time.

Two mechanisms, both undone when the audit ends, so the worker lives on and takes the next job:

* a **watchdog thread** samples the process's resident memory (psutil) every ``interval`` seconds and the
  clock; once the audit has added more than ``memory`` bytes over the resident size it started at, or run
  ``seconds``, the guard *trips*, and the audit's next progress report raises `LimitExceeded` (bind_core
  reports from inside every long loop, so that is within about one step);
* on the CPU, an **address-space cap** (``RLIMIT_AS``, soft limit only) at the process's virtual size when the
  audit starts plus ``memory``: a single allocation past it (a dense Hessian of a huge model) fails at once with
  a `MemoryError` or torch's "can't allocate memory" instead of growing until the kernel kills the worker. Not
  used with CUDA, whose driver reserves far more address space than it uses.
"""

from __future__ import annotations

import logging
import resource
import threading
import time
from types import TracebackType

import psutil

log = logging.getLogger(__name__)


class LimitExceeded(Exception):
    """A running audit went past a limit: ``limit`` is the setting's name, ``allowed`` and ``used`` its value
    and what the audit reached (bytes or seconds)."""

    def __init__(self, limit: str, allowed: float, used: float, message: str) -> None:
        self.limit, self.allowed, self.used = limit, allowed, used
        super().__init__(message)


def is_allocation_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed (under the address-space cap, or for want of memory)."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)


class AuditGuard:
    """Guards one audit while used as a context; :meth:`check` raises once a limit is past.

    Args:
        memory: bytes the audit may add to the process (0: no memory guard).
        seconds: wall-clock seconds (0: no time limit).
        address_space: also cap the address space (CPU workers).
        interval: seconds between two samples.
    """

    def __init__(self, *, memory: int, seconds: float, address_space: bool, interval: float = 0.1) -> None:
        self.memory, self.seconds, self.interval = memory, seconds, interval
        self.address_space = address_space and memory > 0
        self._process = psutil.Process()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tripped: LimitExceeded | None = None
        self._saved_limit: tuple[int, int] | None = None
        self.base_rss = 0
        self.peak_rss = 0
        self._start = 0.0

    @property
    def added_peak(self) -> int:
        """The most resident memory the audit added over its starting size, as sampled."""
        return max(0, self.peak_rss - self.base_rss)

    def check(self) -> None:
        if self._tripped is not None:
            raise self._tripped

    def memory_failure(self, exc: BaseException) -> LimitExceeded | None:
        """The `LimitExceeded` to report for an allocation failure under the cap, else None."""
        if not (self.address_space and is_allocation_failure(exc)):
            return None
        used = max(self.added_peak, self.memory)
        message = f"an allocation would take the audit past BIND_AUDIT_MEMORY_GUARD ({self.memory} bytes): {exc}"
        return LimitExceeded("BIND_AUDIT_MEMORY_GUARD", self.memory, used, message[:500])

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            rss = self._process.memory_info().rss
            self.peak_rss = max(self.peak_rss, rss)
            elapsed = time.monotonic() - self._start
            if self._tripped is not None:
                continue
            if self.memory and rss - self.base_rss > self.memory:
                self._tripped = LimitExceeded(
                    "BIND_AUDIT_MEMORY_GUARD",
                    self.memory,
                    rss - self.base_rss,
                    f"the audit added {rss - self.base_rss} bytes of resident memory to its worker, over "
                    f"BIND_AUDIT_MEMORY_GUARD ({self.memory} bytes)",
                )
            elif self.seconds and elapsed > self.seconds:
                self._tripped = LimitExceeded(
                    "BIND_AUDIT_MAX_SECONDS",
                    self.seconds,
                    elapsed,
                    f"the audit ran {elapsed:.0f} s, over BIND_AUDIT_MAX_SECONDS ({self.seconds:g} s)",
                )
            if self._tripped is not None:
                log.warning("resource guard tripped: %s", self._tripped)

    def __enter__(self) -> AuditGuard:
        info = self._process.memory_info()
        self.base_rss = self.peak_rss = info.rss
        self._start = time.monotonic()
        if self.memory or self.seconds:  # started first: its stack is not taken from the capped space
            self._thread = threading.Thread(target=self._sample, name="bind-guard", daemon=True)
            self._thread.start()
        if self.address_space:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            cap = self._process.memory_info().vms + self.memory
            if hard == resource.RLIM_INFINITY or cap < hard:
                self._saved_limit = (soft, hard)
                resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._saved_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, self._saved_limit)
            self._saved_limit = None
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
