"""The CPU threads of ``bind-audit run``: torch's own (``--threads``) and those that settle a multi-layer model's
deletions at once (``--deletion-threads``), each chosen so as not to oversubscribe the cores (docs/cli.md,
"Threads")."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Collection

import torch

from bind_core.errors import ConfigError

SMALL_GRAPH_NODES = 100_000
"""Below this many nodes ``bind-audit run`` uses one torch thread unless ``--threads`` says otherwise."""
THREADS_HELP = (
    "torch CPU threads (0: torch's default, one per physical core). Default: 1 for graphs under "
    f"{SMALL_GRAPH_NODES:,} nodes, whose operations are too small to share out (an Income audit on a busy 2-core "
    "machine: 12 s with 1 thread, 2 min 20 s with torch's default, same results); for larger graphs the idle "
    "cores (the CPUs this process may use less those busy over a quarter of a second), at least 1 and at most "
    "torch's default"
)
SAMPLE_SECONDS = 0.25
"""How long :func:`busy_cores` watches the CPUs' counters."""


def default_threads(
    num_nodes: int, *, cpus: int | None = None, load: float | None = None, torch_default: int | None = None
) -> int:
    """The torch CPU threads of ``bind-audit run`` without ``--threads``: a count that does not oversubscribe.

    torch's default is one thread per physical core, whoever else uses them; its OpenMP threads meet at the end
    of every parallel operation, so one thread descheduled by other work stalls the rest, and on a small graph
    (an operation of microseconds) that waiting is most of the time. Hence one thread below
    :data:`SMALL_GRAPH_NODES` nodes, and above it the idle cores: ``cpus`` (default: the CPUs this process may
    run on) less ``load`` (default: :func:`busy_cores`), rounded, at least 1 and at most ``torch_default``
    (default: ``torch.get_num_threads()`` before any change).
    """
    if num_nodes < SMALL_GRAPH_NODES:
        return 1
    if torch_default is None:
        torch_default = torch.get_num_threads()
    return max(1, min(torch_default, _idle_cores(cpus, load)))


def default_deletion_threads(torch_threads: int, *, cpus: int | None = None, load: float | None = None) -> int:
    """The threads that settle a multi-layer model's deletions at once (:mod:`bind_core.influence.threads`) without
    ``--deletion-threads``: the idle cores (as :func:`default_threads` counts them) shared out among threads of
    ``torch_threads`` each, at least 1. A deletion's operations are too small for torch's own threads to share, but
    the deletions are independent."""
    return max(1, _idle_cores(cpus, load) // max(1, torch_threads))


def _idle_cores(cpus: int | None, load: float | None) -> int:
    """``cpus`` (default: the CPUs this process may run on) less ``load`` (default: :func:`busy_cores`), rounded;
    may be 0 or less on a busy machine."""
    if cpus is None:
        cpus = len(_own_cpus()) or os.cpu_count() or 1
    if load is None:
        load = busy_cores()
    return cpus - round(load)


def _own_cpus() -> set[int]:
    """The CPUs this process may run on (empty where the platform does not say)."""
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()


def busy_cores(
    seconds: float = SAMPLE_SECONDS,
    *,
    cpus: Collection[int] | None = None,
    read: Callable[[], str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """How many of this process's CPUs other work keeps busy now: the share of their time not idle over ``seconds``
    (the kernel's counters in ``/proc/stat``, read before and after; this process sleeps between), summed over the
    CPUs. Not the 1-minute load average: it lags a minute behind, so an audit started just after other work (the
    previous audit of a script that runs several) counted that work as still running and took one core of two.
    Where ``/proc/stat`` cannot be read (not Linux), the 1-minute load average; 0.0 where neither exists.
    ``cpus``: the CPUs counted (default: this process's, else every CPU listed); ``read`` returns the counters' text
    (tests)."""
    read = read or _proc_stat
    try:
        before = _cpu_times(read())
        sleep(seconds)
        after = _cpu_times(read())
    except (OSError, ValueError):
        return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return _busy(before, after, cpus if cpus is not None else _own_cpus() or set(after))


def _proc_stat() -> str:
    with open("/proc/stat", encoding="ascii") as f:
        return f.read()


def _cpu_times(text: str) -> dict[int, tuple[int, int]]:
    """Each CPU's (busy, total) time in ``/proc/stat``'s text (``cpuN user nice system idle iowait irq softirq steal
    ...``; idle and iowait are idle, guest time is already counted in user time)."""
    times: dict[int, tuple[int, int]] = {}
    for line in text.splitlines():
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        ticks = [int(f) for f in fields[:8]]
        idle = ticks[3] + ticks[4]
        times[int(name[3:])] = (sum(ticks) - idle, sum(ticks))
    if not times:
        raise ValueError("no CPU lines")
    return times


def _busy(before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], cpus: Collection[int]) -> float:
    """The busy share of each of ``cpus`` between the two readings, summed (a CPU without ticks in between counts
    as idle)."""
    total = 0.0
    for cpu in cpus:
        if cpu not in before or cpu not in after:
            continue
        busy, ticks = after[cpu][0] - before[cpu][0], after[cpu][1] - before[cpu][1]
        total += busy / ticks if ticks > 0 else 0.0
    return total


def add_thread_options(p: argparse.ArgumentParser) -> None:
    """``--threads`` and ``--deletion-threads``."""
    p.add_argument("--threads", type=int, default=None, metavar="N", help=THREADS_HELP)
    p.add_argument(
        "--deletion-threads",
        type=int,
        default=None,
        metavar="N",
        help="workers sharing out independent work: a multi-layer model's deletions and the validation's "
        "re-optimisations (in forked processes with one torch thread, else on threads), its Hessians' rows (threads), "
        "the debiasing's check against chance (forked processes); Adam's epochs run on --threads times N torch "
        "threads. The results do not depend on it. Default: the idle cores divided by the torch threads, at least 1",
    )


def set_threads(args: argparse.Namespace, nodes: int) -> int:
    """Set torch's threads; return the deletion threads (both printed). The busy cores are read once, for both."""
    load = busy_cores() if args.threads is None or args.deletion_threads is None else None
    threads = default_threads(nodes, load=load) if args.threads is None else args.threads
    if threads > 0:
        torch.set_num_threads(threads)
    deletions: int | None = args.deletion_threads
    if deletions is None:
        deletions = default_deletion_threads(torch.get_num_threads(), load=load)
    elif deletions < 1:
        raise ConfigError(f"--deletion-threads: {deletions!r} must be >= 1")
    chosen = [
        flag
        for flag, value in (("--threads", args.threads), ("--deletion-threads", args.deletion_threads))
        if value is None
    ]
    print(
        f"torch threads: {torch.get_num_threads()}, deletion threads: {deletions}"
        + (f" ({', '.join(chosen)} to change)" if chosen else ""),
        file=sys.stderr,
    )
    return deletions
