"""Independent pieces of CPU work on several threads, their results handed back in order on the calling thread.

The estimate's deletions (:mod:`bind_core.influence.threads`) and a dense Hessian's rows
(:func:`bind_core.training.hessian.dense_hessian_by_rows`) are each many independent pieces of a few hundred small
tensor operations: too small for torch's intra-op threads to share out (their OpenMP threads meet at the end of every
operation, and that wait is most of the time), but independent of one another. torch releases the GIL inside each
operation, so the pieces themselves can run on threads: on a 2-core machine two threads settle a 20,000-node
two-layer GCN's deletions 1.5 times as fast as one, and form its Hessian's rows 1.5 times as fast (docs/SCALE.md,
"Deletions and Hessian rows on several threads"). The results are the same as one thread's, bit for bit: each piece's
arithmetic does not depend on which thread runs it.

Results come back in order, on the calling thread, so a progress callback (which may write to a database, or stop
the work by raising) runs where it would without threads.

Where forking is safe (:func:`bind_core.forks.fork_is_safe`: one Python thread, one torch thread, no CUDA, as
``bind-audit run`` runs) :func:`each_in_order` runs the pieces in forked processes instead, which share no GIL (the
deletions 1.7 times as fast as one worker against 1.5 on threads; docs/SCALE.md, "Deletions in forked processes").
:func:`intra_op_times` gives the same cores to work that does not split into pieces and is not iterated on (the
curvature's Jacobian blocks), never to Adam's epochs or L-BFGS, whose weights would then depend on the threads.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TypeVar

import torch

from bind_core.errors import ConfigError
from bind_core.forks import each_in_forks, fork_is_safe

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")


def check_threads(threads: int, what: str = "threads") -> None:
    """Refuse a thread count that is not an integer of at least 1 (``what`` names it in the message)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"{what}: {threads!r} must be an integer >= 1")


def threads_on(device: torch.device, threads: int) -> int:
    """The threads to use on ``device``: ``threads`` on a CPU, one elsewhere. A GPU batches such pieces instead (the
    deletions, :mod:`bind_core.influence.batched`; a Hessian's rows in blocks), and threads would each hold a batch's
    memory."""
    return threads if device.type == "cpu" else 1


def each_in_order(
    units: Sequence[T],
    work: Callable[[S, T], R],
    put: Callable[[int, R], None],
    states: Sequence[S],
    *,
    processes: bool | None = None,
) -> None:
    """``put(i, work(state, units[i]))`` for every unit, in order, on the calling thread, with ``work`` running on one
    thread per state in ``states`` (each thread's own, e.g. a model copy that must not be shared), or in one forked
    process per state (:mod:`bind_core.forks`). With one state, or one unit, all of it runs here. An exception from
    ``work`` or ``put`` stops the work: units not yet started are dropped, and those running finish (threads) or are
    killed (processes) before it propagates.

    Args:
        units: the pieces of work.
        work: does one piece with a state.
        put: receives each piece's result, by its index.
        states: one per thread; at least one.
        processes: ``None`` (default): forked processes where :func:`~bind_core.forks.fork_is_safe`, which is faster
            (no GIL shared between them), else threads; ``True``: processes (the caller has checked that it is safe;
            ``work``'s results must pickle, and what ``work`` changes in its state stays in the child); ``False``:
            threads. The results are the same, bit for bit.
    """
    if not states:
        raise ValueError("each_in_order needs at least one state")
    if len(states) == 1 or len(units) < 2:
        for i, unit in enumerate(units):
            put(i, work(states[0], unit))
        return
    if processes or (processes is None and fork_is_safe()):
        each_in_forks(units, work, put, states)
        return
    free: queue.SimpleQueue[S] = queue.SimpleQueue()
    for state in states[: len(units)]:
        free.put(state)

    def run(unit: T) -> R:
        state = free.get()
        try:
            return work(state, unit)
        finally:
            free.put(state)

    # A new thread's MKL and OpenMP start at all the cores: set them to the caller's torch threads, so that each
    # thread's products run as they would on the calling thread (not 2 threads × all cores).
    pool = ThreadPoolExecutor(
        min(len(states), len(units)),
        thread_name_prefix="bind-work",
        initializer=torch.set_num_threads,
        initargs=(torch.get_num_threads(),),
    )
    try:
        futures = [pool.submit(run, unit) for unit in units]
        for i, future in enumerate(futures):
            put(i, future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@contextmanager
def intra_op_times(device: torch.device, threads: int) -> Iterator[None]:
    """torch's intra-op threads multiplied by ``threads`` while the block runs, on a CPU (elsewhere, and for one,
    nothing changes), then as they were: for work that does not split into independent pieces (the curvature's
    Jacobian blocks, :mod:`bind_core.influence.gaussnewton`), on the cores the pieces would otherwise share. torch's
    thread count is the process's, so a host running torch on other threads meanwhile sees it too.

    Not for iterations (Adam's epochs, L-BFGS): where the BLAS splits a product's sum over its threads (MKL on an
    Intel Xeon splits a weight gradient's ``Aᵀ·B`` over the rows) its rounding depends on them, and Adam, which
    divides each step by the gradient's own scale, turns that rounding in a near-zero gradient into weights apart by
    10⁻⁵ after 40 epochs (tests/core/influence/test_threads.py). Adam's epochs ran here once (2.4–2.8 → 1.9–2.2 ms an
    epoch on two threads for a 20,000-node two-layer GCN, docs/SCALE.md), with the same weights on an AMD EPYC,
    whose MKL does not split those sums; the weights an audit attributes must not depend on a speed setting."""
    if threads == 1 or device.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(before * threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
