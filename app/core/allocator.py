"""glibc's allocator settings for the processes that run audits (the CLI, the worker it starts, the benchmarks).

An audit of a large graph allocates float64 activations of hundreds of megabytes many times over (every L-BFGS
evaluation of the polish, every Adam epoch). Above glibc's mmap threshold (32 MiB at most by default) each such
block is a fresh mapping, faulted in 4 KiB at a time and unmapped on release, so the kernel zeroes and maps the
same memory again on every pass: on the 10⁶-node two-layer SAGE of docs/SCALE.md one evaluation of the polish took
2.65 s, 1.2 s of it system time and 379,000 page faults. With the thresholds below the heap keeps those blocks and
reuses them: 1.51 s, no faults. The price is a process that keeps its peak memory until it exits (a worker runs
one audit at a time and needs that peak again for the next).

The settings can only be given before the process starts (``GLIBC_TUNABLES``), so :func:`reexec_tuned` restarts
the process once with them. An operator's own ``GLIBC_TUNABLES`` always wins; set it empty to opt out.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping

MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736"
"""Blocks up to 4 GiB come from the heap, and the heap is trimmed only when 64 GiB at its top are free."""


def tuned_environment(env: Mapping[str, str], *, libc: str | None = None) -> dict[str, str] | None:
    """``env`` with :data:`MALLOC_TUNABLES` as ``GLIBC_TUNABLES``, or ``None`` when nothing is to change: the C
    library is not glibc (``libc``: as :func:`platform.libc_ver` names it, default this process's), or
    ``GLIBC_TUNABLES`` is already set (the operator's choice, empty included)."""
    name = platform.libc_ver()[0] if libc is None else libc
    if name != "glibc" or "GLIBC_TUNABLES" in env:
        return None
    return {**env, "GLIBC_TUNABLES": MALLOC_TUNABLES}


def reexec_tuned() -> None:
    """Replace this process by the same command line with :func:`tuned_environment`'s settings, when it has any to
    add; returns (doing nothing) otherwise. Call it first thing in an entry point: nothing before it survives."""
    env = tuned_environment(os.environ)
    if env is None or not sys.executable:  # an embedded interpreter has no command line to run again
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)
    except OSError:  # the interpreter cannot be run again from here: go on with the default allocator
        return
