"""`app.audits.pace`: a running audit's time left, from its stage's pace and an earlier run of the same request; the
worker records the pace on the audit row and the API reads it back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker
from test_runner import FakeResult, Progress, fake_audit, get, run  # noqa: F401  (fake_audit: a fixture)

from app.audits.pace import PaceTracker, time_left
from app.audits.schemas import AuditSummary
from app.core.db.tables import Audit

T0 = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def _pace(fraction: float, spent: float, after: list[str], earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "stage": "influence",
        "started_at": T0.isoformat(),
        "fraction": fraction,
        "at": (T0 + timedelta(seconds=spent)).isoformat(),
        "after": after,
        "earlier": earlier,
    }


def test_the_running_stage_is_carried_to_its_end_at_its_pace() -> None:
    # 25% in 30 s: 90 s left as of the report, 80 s ten seconds later
    last = time_left(_pace(0.25, 30.0, []), T0 + timedelta(seconds=40))
    assert last is not None and last.stage_seconds == pytest.approx(80.0) and last.seconds == pytest.approx(80.0)
    assert "no stage follows" in last.basis
    # past its pace, never below 0
    late = time_left(_pace(0.25, 30.0, []), T0 + timedelta(seconds=500))
    assert late is not None and late.stage_seconds == 0.0


def test_later_stages_come_only_from_an_earlier_run_of_the_same_request() -> None:
    unknown = time_left(_pace(0.5, 10.0, ["debiasing", "validation"]), T0 + timedelta(seconds=10))
    assert unknown is not None and unknown.stage_seconds == pytest.approx(10.0) and unknown.seconds is None
    assert "(debiasing, validation) are not estimated" in unknown.basis
    earlier = {"audit_id": "a1", "same": "schedule", "seconds": {"training": 5.0, "debiasing": 20.0, "validation": 7.5}}
    known = time_left(_pace(0.5, 10.0, ["debiasing", "validation"], earlier), T0 + timedelta(seconds=10))
    assert known is not None and known.seconds == pytest.approx(10.0 + 27.5)
    assert "as long as they took in audit a1 (the same schedule)" in known.basis
    # an earlier run that skipped one of them does not say how long it takes
    partial = {"audit_id": "a1", "same": "request", "seconds": {"debiasing": 20.0}}
    missing = time_left(_pace(0.5, 10.0, ["debiasing", "validation"], partial), T0 + timedelta(seconds=10))
    assert missing is not None and missing.seconds is None


@pytest.mark.parametrize(("fraction", "spent"), [(0.01, 60.0), (0.5, 1.0)])
def test_a_stage_just_begun_has_no_pace_yet(fraction: float, spent: float) -> None:
    found = time_left(_pace(fraction, spent, []), T0 + timedelta(seconds=spent))
    assert found is not None and (found.seconds, found.stage_seconds) == (None, None)
    assert "has just begun" in found.basis


def test_a_stage_just_begun_is_timed_by_an_earlier_run_where_there_is_one() -> None:
    earlier = {"audit_id": "a1", "same": "request", "seconds": {"influence": 30.0, "debiasing": 20.0}}
    found = time_left(_pace(0.01, 1.0, ["debiasing"], earlier), T0 + timedelta(seconds=4))
    assert found is not None and found.stage_seconds == pytest.approx(26.0) and found.seconds == pytest.approx(46.0)
    assert "has just begun: it and the stages after it as long as they took in audit a1" in found.basis
    # one that did not run a stage to come says nothing of the whole audit
    partial = {"audit_id": "a1", "same": "request", "seconds": {"influence": 30.0}}
    unknown = time_left(_pace(0.01, 1.0, ["debiasing"], partial), T0 + timedelta(seconds=4))
    assert unknown is not None and (unknown.seconds, unknown.stage_seconds) == (None, None)


def test_no_pace_or_a_malformed_one_says_nothing() -> None:
    assert time_left(None, T0) is None
    assert time_left({"stage": "influence"}, T0) is None


@dataclass
class Clock:
    t: datetime = T0

    def __call__(self) -> datetime:
        return self.t


def test_the_tracker_starts_a_stage_when_it_changes_and_ignores_steps_outside_the_plan() -> None:
    clock = Clock()
    pace = PaceTracker(("training", "metrics", "influence"), clock=clock)
    assert pace.record() is None
    pace.observe("training", 0.1)
    clock.t = T0 + timedelta(seconds=5)
    pace.observe("training", 0.6)
    pace.observe("fine_tune", 0.9)  # a sub-step
    record = pace.record()
    assert record is not None
    assert (record["stage"], record["fraction"], record["after"]) == ("training", 0.6, ["metrics", "influence"])
    assert record["started_at"] == T0.isoformat() and record["at"] == clock.t.isoformat()
    clock.t = T0 + timedelta(seconds=9)
    pace.observe("influence", 0.0)
    record = pace.record()
    assert record is not None and record["started_at"] == clock.t.isoformat() and record["after"] == []


@dataclass
class TimedResult(FakeResult):
    def to_dict(self) -> dict[str, Any]:
        timings = {"training": 1.5, "influence": 4.0, "debiasing": 12.0, "validation": 3.0}
        return super().to_dict() | {"timings": timings}


def test_the_worker_records_its_pace_and_finds_an_earlier_run_of_the_request(
    sessions: sessionmaker[Session],
    settings: Any,
    new_audit: Any,
    fake_audit: Any,  # noqa: F811 (the fixture)
) -> None:
    seen: list[dict[str, Any] | None] = []
    summaries: list[AuditSummary] = []

    def body(progress: Progress) -> FakeResult:
        progress("training", 0.5)
        progress("influence", 0.5)
        progress("training", 0.9)  # a helper reusing the training loop: not the running stage
        with sessions() as session:
            audit = session.get(Audit, current[0])
            assert audit is not None
            seen.append(audit.pace)
            summaries.append(AuditSummary.model_validate(audit))
        return TimedResult()

    fake_audit(body)
    current = [new_audit()]
    assert run(current[0], sessions, settings).status == "succeeded"
    first = seen[0]
    assert first is not None
    assert (first["stage"], first["fraction"], first["after"]) == ("influence", 0.5, ["debiasing", "validation"])
    assert first["earlier"] is None  # no earlier run of this request
    said = summaries[0].time_left
    assert said is not None and said.seconds is None and "has just begun" in said.basis  # 0.5 in under 2 s
    assert summaries[0].model_dump(mode="json")["time_left"]["basis"] == said.basis
    assert "pace" not in summaries[0].model_dump(mode="json")

    first_id = current[0]
    current[0] = new_audit()  # the same request_hash
    assert run(current[0], sessions, settings).status == "succeeded"
    earlier = seen[1]
    assert earlier is not None and earlier["earlier"] == {
        "audit_id": str(first_id),
        "same": "request",
        "seconds": {"training": 1.5, "influence": 4.0, "debiasing": 12.0, "validation": 3.0},
    }
    # done: no time left is said; another request finds no earlier run
    assert AuditSummary.model_validate(get(sessions, current[0])).time_left is None
    current[0] = new_audit(request_hash="x" * 64)
    assert run(current[0], sessions, settings).status == "succeeded"
    assert seen[2] is not None and seen[2]["earlier"] is None


def test_a_new_attempt_starts_without_the_last_ones_pace(
    sessions: sessionmaker[Session],
    settings: Any,
    new_audit: Any,
    fake_audit: Any,  # noqa: F811 (the fixture)
) -> None:
    seen: list[dict[str, Any] | None] = []

    def body(progress: Progress) -> FakeResult:
        with sessions() as session:
            audit = session.get(Audit, audit_id)
            assert audit is not None
            seen.append(audit.pace)
        return FakeResult()

    fake_audit(body)
    audit_id = new_audit()
    with sessions.begin() as session:  # a dead attempt's pace, as a worker that died left it
        session.execute(
            update(Audit).where(Audit.id == audit_id).values(pace=_pace(0.5, 10.0, []), attempts=1, state="running")
        )
    assert run(audit_id, sessions, settings).status == "succeeded"
    assert seen == [None] and get(sessions, audit_id).attempts == 2
