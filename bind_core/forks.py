"""Independent pieces of CPU work in forked processes, their results handed back in order to the calling process.

Threads (:func:`bind_core.threads.each_in_order`) share the GIL: a deletion is a few hundred small tensor operations,
and the Python between them (the dispatcher's argument parsing, the autograd graph's bookkeeping) runs under the GIL
the threads share, so two threads settle a 20,000-node two-layer GCN's deletions 1.5 times as fast as one, not twice.
Forked processes share nothing at run time: each child is a copy of the caller made by ``fork()`` (copy-on-write, so
the model, the graph and the curvature are not copied unless written) and runs its pieces on its own interpreter.

How it runs:

* The parent forks one child per state and hands out the units one at a time, by index, over a pipe; a child sends
  each result back over another pipe (``pickle``: these are the library's own results, made by the child the parent
  forked, never a user's bytes) and gets the next index. So a slow unit does not hold the others up.
* The parent calls ``put(i, result)`` in order of ``i``, on the calling thread, as the results arrive.
* An exception in a child comes back as the child's exception (or, if it cannot be pickled, a :class:`RuntimeError`
  naming it) and is raised in the parent; an exception from ``put`` propagates. Either way, and if a child dies, the
  children are killed and reaped before it propagates. A child whose parent dies is killed too (Linux) or ends at
  its next result (the pipe is closed).
* A child leaves with ``os._exit`` after its last unit: no ``atexit`` handlers, no flushing of buffers it inherited.

When it is safe (:func:`fork_is_safe`): ``fork()`` copies only the calling thread, so a lock another thread holds at
that moment stays held in the child forever; and after torch has run a parallel region on several intra-op threads,
the child's OpenMP runtime waits for threads it no longer has (measured: a child hangs on its first matrix product).
Forks are used only from a process with one Python thread and one torch thread, before CUDA has started, on a platform
with ``fork()``; elsewhere the work runs on threads (or, for work that draws from torch's global generator, one piece
at a time: :func:`each_self_seeded`). The results are the same either way, bit for bit: each piece's arithmetic does
not depend on where it runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import pickle
import select
import signal
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

S = TypeVar("S")
T = TypeVar("T")
R = TypeVar("R")

_HEADER = struct.Struct("<q")
"""A message's length in bytes (a unit's index from the parent, a pickled result from a child)."""
_STOP = -1
"""The index that tells a child to leave."""
_PR_SET_PDEATHSIG = 1
_RESET_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)


def fork_is_safe() -> bool:
    """Whether :func:`each_in_forks` may fork here: a platform with ``fork()``, a process whose only Python thread is
    the calling one (no other thread's lock can be caught held), torch on one intra-op thread (a child of a process
    whose OpenMP threads have run hangs on its first parallel operation), and CUDA not started (a child cannot use
    its parent's CUDA context)."""
    return (
        hasattr(os, "fork")
        and threading.active_count() == 1
        and threading.current_thread() is threading.main_thread()
        and torch.get_num_threads() == 1
        and not torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
    )


def each_in_forks(
    units: Sequence[T],
    work: Callable[[S, T], R],
    put: Callable[[int, R], None],
    states: Sequence[S],
) -> None:
    """``put(i, work(state, units[i]))`` for every unit, in order, in the calling process, with ``work`` running in
    one forked child per state in ``states`` (the module docstring says how). The caller checks
    :func:`fork_is_safe` first.

    Args:
        units: the pieces of work.
        work: does one piece with a state; its result must pickle.
        put: receives each piece's result, by its index.
        states: one per child; at least one.
    """
    if not states:
        raise ValueError("each_in_forks needs at least one state")
    children: list[_Child] = []
    try:
        for state in states[: len(units)]:
            children.append(_Child.fork(state, units, work))
        _collect(children, len(units), put)
    finally:
        for child in children:
            child.end()


class _Child:
    """One forked child, from the parent's side: its pid, the pipe it reads indices from, the pipe its results come
    back on, and the index it is working on (``None``: idle or gone)."""

    def __init__(self, pid: int, orders: int, results: int) -> None:
        self.pid = pid
        self.orders = orders
        self.results = results
        self.busy: int | None = None

    @classmethod
    def fork(cls, state: Any, units: Sequence[Any], work: Callable[[Any, Any], Any]) -> _Child:
        """Fork a child that serves ``work(state, units[i])`` for each index ``i`` it is sent."""
        order_r, order_w = os.pipe()
        result_r, result_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: it never returns
            code = 1
            try:
                os.close(order_w)
                os.close(result_r)
                _die_with_parent()
                for number in _RESET_SIGNALS:  # the caller's handlers (a worker's shutdown) are not the child's
                    signal.signal(number, signal.SIG_DFL)
                _serve(state, units, work, order_r, result_w)
                code = 0
            finally:
                os._exit(code)
        os.close(order_r)
        os.close(result_w)
        return cls(pid, order_w, result_r)

    def send(self, index: int) -> None:
        """Give the child unit ``index`` (or :data:`_STOP`)."""
        self.busy = None if index == _STOP else index
        with contextlib.suppress(BrokenPipeError):
            os.write(self.orders, _HEADER.pack(index))

    def end(self) -> None:
        """Kill the child if it still runs, reap it and close its pipes."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        for fd in (self.orders, self.results):
            with contextlib.suppress(OSError):
                os.close(fd)


def _collect(children: list[_Child], count: int, put: Callable[[int, Any], None]) -> None:
    """The parent's loop: hand out indices, gather results, ``put`` them in order."""
    following = 0
    for child in children:
        child.send(following)
        following += 1
    done: dict[int, Any] = {}
    emitted = 0
    by_fd = {child.results: child for child in children}
    while emitted < count:
        ready, _, _ = select.select(list(by_fd), [], [])
        for fd in ready:
            child = by_fd[fd]
            index, ok, value = _receive(fd, child)
            if not ok:
                raise value
            done[index] = value
            child.send(following if following < count else _STOP)
            following += 1
            if child.busy is None:
                del by_fd[fd]
        while emitted in done:
            put(emitted, done.pop(emitted))
            emitted += 1


def _receive(fd: int, child: _Child) -> tuple[int, bool, Any]:
    """One message from a child: ``(index, True, result)`` or ``(index, False, exception)``."""
    header = _read(fd, _HEADER.size)
    if header is None:
        raise RuntimeError(f"a worker process (pid {child.pid}) died while working on unit {child.busy}")
    (size,) = _HEADER.unpack(header)
    payload = _read(fd, size)
    if payload is None:
        raise RuntimeError(f"a worker process (pid {child.pid}) died while sending unit {child.busy}")
    message: tuple[int, bool, Any] = pickle.loads(payload)  # the forked child's own result
    return message


def _read(fd: int, size: int) -> bytes | None:
    """Exactly ``size`` bytes from ``fd``, or ``None`` at end of file."""
    chunks = bytearray()
    while len(chunks) < size:
        chunk = os.read(fd, min(size - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks.extend(chunk)
    return bytes(chunks)


def _serve(state: Any, units: Sequence[Any], work: Callable[[Any, Any], Any], orders: int, results: int) -> None:
    """The child's loop: read an index, do that unit, send its result (or its exception), until told to stop."""
    while True:
        header = _read(orders, _HEADER.size)
        if header is None:
            return
        (index,) = _HEADER.unpack(header)
        if index == _STOP:
            return
        try:
            message = _dumps((index, True, work(state, units[index])))
        except Exception as error:  # sent to the parent, which raises it
            message = _dumps_error(index, error)
        try:
            os.write(results, _HEADER.pack(len(message)))
            _write_all(results, message)
        except BrokenPipeError:  # the parent is gone
            return


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _dumps(message: Any) -> bytes:
    """``message`` pickled, each tensor that views a larger storage saved as a compact copy (a plain pickle of a view
    carries its whole storage)."""
    buffer = io.BytesIO()
    _CompactPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(message)
    return buffer.getvalue()


def _dumps_error(index: int, error: Exception) -> bytes:
    """``(index, False, error)`` pickled; an exception that does not pickle is sent as a :class:`RuntimeError` that
    names it."""
    try:
        return _dumps((index, False, error))
    except Exception:  # any pickling failure
        return _dumps((index, False, RuntimeError(f"{type(error).__name__}: {error}")))


class _CompactPickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if (
            isinstance(obj, torch.Tensor)
            and obj.layout == torch.strided
            and (obj.untyped_storage().nbytes() > obj.numel() * obj.element_size() or not obj.is_contiguous())
        ):
            return _identity, (obj.detach().clone(memory_format=torch.contiguous_format),)
        return NotImplemented


def _identity(value: Any) -> Any:
    return value


def _die_with_parent() -> None:
    """Ask Linux to kill this child when its parent dies (elsewhere the child ends at its next result instead)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def self_seeded_processes(processes: int, units: int) -> int:
    """How many processes :func:`each_self_seeded` runs ``units`` pieces in, given ``processes``: at most one per
    piece, and one (the calling process) where forking is not safe. The audit's rule for the check against chance
    divides its cost by this."""
    return min(processes, units) if processes > 1 and units > 1 and fork_is_safe() else 1


def each_self_seeded(
    units: Sequence[T],
    work: Callable[[T, Callable[[], None] | None], R],
    put: Callable[[int, R], None],
    *,
    processes: int = 1,
    hold: Callable[[], None] | None = None,
) -> None:
    """``put(i, work(units[i], …))`` for every unit, in order, for work that draws from torch's global generator after
    seeding it itself (a retraining: :func:`bind_core.training.fit.train` seeds it with its recipe's seed). Such work
    cannot share threads (they would share the generator, so each result would depend on timing), but forked
    children each have their own: the units run in ``processes`` children where :func:`fork_is_safe`, else one at a
    time here. Either way the results are the same, bit for bit, and torch's global generator is left as it was
    before, so what follows draws the same numbers however the units ran.

    Args:
        units: the pieces of work.
        work: ``work(unit, hold)`` does one piece; ``hold`` is this call's ``hold`` where the piece runs here (it
            may report progress inside), ``None`` in a child.
        put: receives each piece's result, by its index.
        processes: forked children at most.
        hold: a progress checkpoint (it may raise to abort), passed to ``work`` here.
    """
    with torch.random.fork_rng(devices=[]):
        children = self_seeded_processes(processes, len(units))
        if children > 1:
            each_in_forks(units, lambda _, unit: work(unit, None), put, [None] * children)
            return
        for i, unit in enumerate(units):
            put(i, work(unit, hold))
