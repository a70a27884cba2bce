"""A model's deletions settled on several CPU threads, or forked processes, at once (:mod:`bind_core.threads`,
:mod:`bind_core.forks`), each worker with its own :meth:`~bind_core.influence.step.Stepper.fork`: a model copy, since
``functional_call`` puts the weights it evaluates into the module while it runs; what the threads share (the
curvature, the reducer, the baseline) is read only. The results equal one worker's, bit for bit, and come back in
order on the calling thread."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from bind_core.influence.step import Stepper
from bind_core.threads import check_threads, each_in_order, threads_on

T = TypeVar("T")
R = TypeVar("R")


def settle_each(
    stepper: Stepper,
    units: Sequence[T],
    settle: Callable[[Stepper, T], R],
    put: Callable[[int, R], None],
    *,
    threads: int = 1,
) -> None:
    """``put(i, settle(s, units[i]))`` for every unit, in order, on the calling thread; ``settle`` runs on ``threads``
    threads, each with its own stepper ``s`` (``stepper`` itself and forks of it), as
    :func:`~bind_core.threads.each_in_order` says. On a GPU one thread settles them all: there the deletions are
    batched instead (:mod:`~bind_core.influence.batched`), and threads would each hold a batch's memory.

    Args:
        stepper: the model's stepper.
        units: what each call settles (a deletion, a batch of them).
        settle: settles one unit with a stepper.
        put: receives each unit's result, by its index.
        threads: how many threads settle at once.
    """
    check_threads(threads, "deletion threads")
    count = min(threads_on(stepper.fm.device, threads), len(units))
    steppers = [stepper, *(stepper.fork() for _ in range(count - 1))]
    each_in_order(units, settle, put, steppers)
