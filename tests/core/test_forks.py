"""Work in forked processes (:mod:`bind_core.forks`): results in order and the same as here, errors raised here,
children reaped however it ends, and forks only where forking is safe."""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Iterator

import pytest
import torch

from bind_core.forks import _dumps, each_in_forks, fork_is_safe
from bind_core.threads import each_in_order

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")


def _children() -> set[int]:
    """The pids of this process's living children (Linux: /proc)."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.add(int(entry))
    return found


@pytest.fixture(autouse=True)
def _no_child_left() -> Iterator[None]:
    before = _children()
    yield
    assert _children() <= before  # every child forked here was reaped


def test_results_come_back_in_order_from_several_processes() -> None:
    got: list[tuple[int, tuple[str, int, int]]] = []

    def work(state: str, unit: int) -> tuple[str, int, int]:
        return state, unit * unit, os.getpid()

    each_in_forks(list(range(40)), work, lambda i, r: got.append((i, r)), ["a", "b", "c"])
    assert [(i, square) for i, (_, square, _) in got] == [(i, i * i) for i in range(40)]
    pids = {pid for _, (_, _, pid) in got}
    assert len(pids) >= 2 and os.getpid() not in pids  # the children did the work
    assert {state for _, (state, _, _) in got} <= {"a", "b", "c"}


def test_tensor_results_equal_the_calling_process_bit_for_bit() -> None:
    torch.manual_seed(0)
    a = torch.randn(64, 64, dtype=torch.float64)

    def work(_: None, unit: int) -> torch.Tensor:
        x = a
        for _ in range(unit % 5 + 1):
            x = torch.tanh(x @ a / 8)
        return x.sum(0)

    here = [work(None, u) for u in range(12)]
    there: list[torch.Tensor] = []
    each_in_forks(list(range(12)), work, lambda _, r: there.append(r), [None, None])
    assert all(torch.equal(x, y) for x, y in zip(here, there, strict=True))


def test_a_view_is_sent_without_its_whole_storage() -> None:
    big = torch.arange(1_000_000, dtype=torch.float64)
    view = big[10:13]
    assert len(_dumps(view)) < 2_000 < len(pickle.dumps(view))
    assert torch.equal(pickle.loads(_dumps(view)), view)


def test_an_exception_that_does_not_pickle_still_reaches_the_caller() -> None:
    class Local(Exception):  # a local class does not pickle
        pass

    def work(_: None, unit: int) -> int:
        if unit == 2:
            raise Local("unit 2 failed")
        return unit

    with pytest.raises(RuntimeError, match="Local: unit 2 failed"):
        each_in_forks(list(range(6)), work, lambda i, r: None, [None, None])


def test_a_child_that_dies_is_reported() -> None:
    def work(_: None, unit: int) -> int:
        if unit == 3:
            os._exit(7)
        return unit

    with pytest.raises(RuntimeError, match="died while working on unit 3"):
        each_in_forks(list(range(8)), work, lambda i, r: None, [None, None])


def test_forks_only_where_it_is_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        torch.set_num_threads(1)
        assert not fork_is_safe()  # another thread might hold a lock that the child would inherit held
        monkeypatch.setattr(threading, "active_count", lambda: 1)  # earlier tests may have left idle threads here
        assert fork_is_safe()
        torch.set_num_threads(2)
        assert not fork_is_safe()  # OpenMP threads do not survive a fork
    finally:
        stop.set()
        other.join()
        torch.set_num_threads(before)


def test_each_in_order_forks_by_default_where_safe(monkeypatch: pytest.MonkeyPatch) -> None:
    import bind_core.threads as threads

    pids: list[int] = []
    monkeypatch.setattr(threads, "fork_is_safe", lambda: True)
    each_in_order([0, 1, 2, 3], lambda _, u: os.getpid(), lambda _, pid: pids.append(pid), [None, None])
    assert os.getpid() not in pids
    pids.clear()
    monkeypatch.setattr(threads, "fork_is_safe", lambda: False)
    each_in_order([0, 1, 2, 3], lambda _, u: os.getpid(), lambda _, pid: pids.append(pid), [None, None])
    assert set(pids) == {os.getpid()}  # threads
