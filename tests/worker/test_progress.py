"""`app.audits.progress.ProgressReporter`: throttling, stage changes, cancellation and lost leases."""

from __future__ import annotations

import pytest

from app.audits.progress import Cancelled, ProgressReporter
from app.core.lease import Lease, LeaseLost


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_throttles_within_a_stage_but_writes_every_stage_change() -> None:
    writes: list[tuple[str | None, float | None]] = []
    clock = Clock()
    reporter = ProgressReporter(lambda s, p: writes.append((s, p)) or Lease.HELD, min_interval=0.5, clock=clock)
    reporter("training", 0.1)
    clock.t = 0.2
    reporter("training", 0.2)  # throttled
    reporter("metrics", 0.0)  # a new stage is always written
    clock.t = 0.8
    reporter("metrics", 1.5)  # clamped to 1
    assert writes == [("training", 0.1), ("metrics", 0.0), ("metrics", 1.0)]


@pytest.mark.parametrize(("lease", "error"), [(Lease.CANCELLED, Cancelled), (Lease.LOST, LeaseLost)])
def test_raises_once_the_audit_is_no_longer_ours(lease: Lease, error: type[Exception]) -> None:
    reporter = ProgressReporter(lambda s, p: lease, min_interval=0.0)
    with pytest.raises(error):
        reporter("training", 0.1)
    with pytest.raises(error):
        reporter.check()


def test_a_failed_write_does_not_abort_the_audit() -> None:
    def broken(stage: str | None, progress: float | None) -> Lease:
        raise OSError("database is locked")

    reporter = ProgressReporter(broken, min_interval=0.0)
    reporter("training", 0.1)
    assert reporter.lease is Lease.HELD
