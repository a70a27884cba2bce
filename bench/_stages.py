"""Time and peak memory per stage of a run, for the scale benchmarks.

Each stage records its wall time, its CPU time (this process's and that of the children it reaped meanwhile: the
forked processes that settle deletions, :mod:`bind_core.forks`), the peak resident set size while it ran (Linux's
high-water mark ``VmHWM``, reset at the start of each stage through ``/proc/self/clear_refs``) and the RSS when it
ended. On CUDA the peak of ``torch.cuda.max_memory_allocated`` per stage is recorded too. No thread samples the memory:
a second Python thread would keep the audit from forking (:func:`bind_core.forks.fork_is_safe`), so the benchmark
would measure a path that ``bind-audit run`` does not take.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


def peak_rss_bytes() -> int:
    """This process's resident high-water mark since it was last reset (:func:`reset_peak`)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return rss_bytes()


def reset_peak() -> None:
    """Reset the high-water mark to the current RSS (Linux 4.0 and later; elsewhere it keeps rising)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class StageMeter:
    """``with meter.stage("training"): ...`` records ``seconds`` (wall), ``cpu_seconds`` (CPU time of the process and
    its reaped children: with one torch thread, the figure that a machine shared with other jobs disturbs least),
    ``peak_rss_gb`` and ``end_rss_gb`` of this process, and ``children_peak_rss_gb``: the largest peak of any child
    reaped so far in the run (children share the parent's pages until they write them, so this is not added)."""

    def __init__(self, device: str = "cpu", *, echo: bool = False) -> None:
        self.device = device
        self.echo = echo
        """Print each stage's row as it ends (so that a run stopped by a time limit still says how far it got)."""
        self.stages: dict[str, dict[str, float]] = {}
        self._cuda = device.startswith("cuda") and torch.cuda.is_available()
        self._current: str | None = None
        self._t0 = 0.0
        self._cpu0 = 0.0

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
        reset_peak()
        if self._cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self._t0 = time.perf_counter()
        self._cpu0 = _cpu()

    def end(self) -> None:
        """End the stage started by :meth:`switch`, if any."""
        if self._current is None:
            return
        if self._cuda:
            torch.cuda.synchronize()
        self.stages[self._current] = self._row(time.perf_counter() - self._t0)
        self.stages[self._current]["cpu_seconds"] = _cpu() - self._cpu0
        if self.echo:
            row = self.stages[self._current]
            cuda = f", peak CUDA {row['peak_cuda_gb']:.2f} GiB" if "peak_cuda_gb" in row else ""
            print(
                f"[stage] {self._current}: {row['seconds']:.2f} s, peak RSS {row['peak_rss_gb']:.2f} GiB{cuda}",
                flush=True,
            )
        self._current = None

    def _row(self, seconds: float) -> dict[str, float]:
        row = {
            "seconds": seconds,
            "peak_rss_gb": peak_rss_bytes() / 2**30,
            "end_rss_gb": rss_bytes() / 2**30,
            "children_peak_rss_gb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 2**30,
        }
        if self._cuda:
            row["peak_cuda_gb"] = torch.cuda.max_memory_allocated() / 2**30
        return row

    def close(self) -> dict[str, Any]:
        self.end()
        return self.stages
