"""The per-audit guard: the address-space cap, the resident-memory watchdog and the wall-clock limit, each
undone when the audit ends; and the ``resource-limit`` problem they lead to."""

from __future__ import annotations

import gc
import resource
import time

import pytest
import torch

from app.audits.failures import problem_for
from app.audits.guard import AuditGuard, LimitExceeded, is_allocation_failure

MiB = 1024**2


def _wait_tripped(guard: AuditGuard, timeout: float = 5.0) -> LimitExceeded:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            guard.check()
        except LimitExceeded as exc:
            return exc
        time.sleep(0.02)
    raise AssertionError("the guard did not trip")


def test_an_allocation_past_the_cap_fails_and_the_cap_is_lifted_after() -> None:
    before = resource.getrlimit(resource.RLIMIT_AS)
    with AuditGuard(memory=64 * MiB, seconds=0, address_space=True) as guard:
        with pytest.raises((MemoryError, RuntimeError)) as caught:
            torch.empty(512 * MiB, dtype=torch.uint8).fill_(1)
        over = guard.memory_failure(caught.value)
    assert over is not None and over.limit == "BIND_AUDIT_MEMORY_GUARD" and over.allowed == 64 * MiB
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    big = torch.empty(512 * MiB, dtype=torch.uint8).fill_(1)  # the worker goes on: the same size fits again
    assert int(big[-1]) == 1


def test_the_watchdog_trips_on_resident_memory() -> None:
    # Earlier tests' garbage freed while the guard runs would offset what this test adds (the guard measures
    # the process's resident size): collect it first, and add well past the limit.
    gc.collect()
    with AuditGuard(memory=32 * MiB, seconds=0, address_space=False, interval=0.02) as guard:
        held = torch.ones(256 * MiB, dtype=torch.uint8)  # touched: resident
        over = _wait_tripped(guard)
        assert guard.added_peak > 32 * MiB  # what it saw when it tripped (the tensor may still be filling)
        del held
    assert over.limit == "BIND_AUDIT_MEMORY_GUARD" and over.used > over.allowed == 32 * MiB


def test_the_watchdog_trips_on_wall_clock_time() -> None:
    with AuditGuard(memory=0, seconds=0.2, address_space=False, interval=0.02) as guard:
        guard.check()  # not yet
        over = _wait_tripped(guard)
    assert over.limit == "BIND_AUDIT_MAX_SECONDS" and over.used > 0.2


def test_no_limits_no_thread_no_cap() -> None:
    before = resource.getrlimit(resource.RLIMIT_AS)
    with AuditGuard(memory=0, seconds=0, address_space=True) as guard:
        assert resource.getrlimit(resource.RLIMIT_AS) == before
        guard.check()
    assert guard.memory_failure(MemoryError()) is None


def test_allocation_failures_are_recognised() -> None:
    assert is_allocation_failure(MemoryError())
    assert is_allocation_failure(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8"))
    assert not is_allocation_failure(RuntimeError("shape mismatch"))


def test_a_limit_is_a_resource_limit_problem() -> None:
    exc = LimitExceeded("BIND_AUDIT_MAX_SECONDS", 10.0, 12.5, "the audit ran 12 s, over BIND_AUDIT_MAX_SECONDS (10 s)")
    doc = problem_for(exc, audit_id="a1", stage="influence")
    assert doc["type"].endswith("/resource-limit") and doc["status"] == 422 and doc["stage"] == "influence"
    assert doc["limits"] == [{"limit": "BIND_AUDIT_MAX_SECONDS", "allowed": 10.0, "used": 12.5, "excess": 2.5}]
    assert doc["instance"] == "/v1/audits/a1" and "over BIND_AUDIT_MAX_SECONDS" in doc["detail"]
