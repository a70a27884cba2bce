"""Time and peak memory per stage of a run, for the scale benchmarks.

A background thread samples the process's resident set size (``/proc/self/statm``) every few milliseconds;
each stage records its wall time, the peak RSS while it ran, and the RSS when it ended. On CUDA the peak of
``torch.cuda.max_memory_allocated`` per stage is recorded too.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


class StageMeter:
    """``with meter.stage("training"): ...`` records ``seconds`` (wall), ``cpu_seconds`` (the process's CPU time:
    with one torch thread, the figure that a machine shared with other jobs disturbs least), ``peak_rss_gb`` and
    ``end_rss_gb``."""

    def __init__(self, interval: float = 0.005, device: str = "cpu") -> None:
        self.interval = interval
        self.device = device
        self.stages: dict[str, dict[str, float]] = {}
        self._cuda = device.startswith("cuda") and torch.cuda.is_available()
        self._current: str | None = None
        self._t0 = 0.0
        self._cpu0 = 0.0
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, rss_bytes())
            time.sleep(self.interval)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.switch(name)
        yield
        self.end()

    def switch(self, name: str) -> None:
        """Start stage ``name`` (ending the current one) unless it is already running: a progress callback."""
        if name == self._current:
            return
        self.end()
        self._current = name
        self._peak = rss_bytes()
        if self._cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self._t0 = time.perf_counter()
        self._cpu0 = time.process_time()

    def end(self) -> None:
        """End the stage started by :meth:`switch`, if any."""
        if self._current is None:
            return
        if self._cuda:
            torch.cuda.synchronize()
        self.stages[self._current] = self._row(time.perf_counter() - self._t0)
        self.stages[self._current]["cpu_seconds"] = time.process_time() - self._cpu0
        self._current = None

    def _row(self, seconds: float) -> dict[str, float]:
        peak = max(self._peak, rss_bytes())
        row = {"seconds": seconds, "peak_rss_gb": peak / 2**30, "end_rss_gb": rss_bytes() / 2**30}
        if self._cuda:
            row["peak_cuda_gb"] = torch.cuda.max_memory_allocated() / 2**30
        return row

    def close(self) -> dict[str, Any]:
        self.end()
        self._stop.set()
        self._thread.join()
        return self.stages
