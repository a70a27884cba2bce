"""The what-if verification job in the worker (``app.what_ifs.run``) on a small synthetic graph: it retrains without
the set and stores what ``bind_core`` measures; a cancel stops it; a lost graph fails it; a dead worker's job is
re-queued by the sweeper and finished by the next attempt; finished jobs are left alone."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest
import torch
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import now
from app.core.db.tables import Audit, Graph, ModelArtifact, WhatIf
from app.core.settings import Settings
from app.what_ifs.recovery import sweep, sweep_and_send
from app.what_ifs.run import execute
from app.what_ifs.schemas import WhatIfJobSummary
from app.what_ifs.tasks import VERIFY_WHAT_IF
from bind_core import AuditConfig
from bind_core.codec import encode
from bind_core.data.datasets import load_npz, save_npz, synthetic
from bind_core.pipeline import VerifiedSet, prepare_for_audit, verify_what_if
from bind_core.training.fit import TrainConfig, train

SEEDS = [1, 2, 3]
POSITIONS = [0, 4, 9]


class RecordingPublisher:
    def __init__(self) -> None:
        self.sent: list[tuple[str, list[str | int], str | None]] = []

    def send(
        self, name: str, args: Sequence[str | int], *, task_id: str | None = None, countdown: float | None = None
    ) -> None:
        self.sent.append((name, list(args), task_id))


@pytest.fixture(scope="module")
def stored() -> tuple[bytes, bytes, dict[str, Any]]:
    """A small synthetic graph (npz bytes) and a model trained on it (safetensors bytes and config)."""
    graph = synthetic(120, seed=0, train_per_class=20)
    model = train(graph, TrainConfig(epochs=30, lr=0.01, polish=False, seed=5))
    buffer = io.BytesIO()
    save_npz(graph, buffer)
    return buffer.getvalue(), model.to_bytes(), model.config_dict()


@pytest.fixture
def new_job(
    sessions: sessionmaker[Session], tenant_id: uuid.UUID, stored: tuple[bytes, bytes, dict[str, Any]]
) -> Callable[..., uuid.UUID]:
    """Insert a succeeded audit of the stored graph and model, and a what-if job of it; return the job's id."""
    data, weights, config = stored

    def make(**values: Any) -> uuid.UUID:
        with sessions.begin() as session:
            graph = Graph(tenant_id=tenant_id, name=f"g-{uuid.uuid4().hex[:6]}", summary={}, data=data, size_bytes=1)
            session.add(graph)
            session.flush()
            audit = Audit(tenant_id=tenant_id, graph_id=graph.id, config={"lam": 0.5}, request_hash="h" * 64,
                          state="succeeded", model_weights=weights, model_config=config)  # fmt: skip
            session.add(audit)
            session.flush()
            job = WhatIf(tenant_id=tenant_id, audit_id=audit.id, chosen_by={"top": 3}, positions=POSITIONS,
                         nodes=POSITIONS, estimate={}, seeds=SEEDS, random_sets=1, state="queued")  # fmt: skip
            for name, value in values.items():
                setattr(job, name, value)
            session.add(job)
            session.flush()
            return job.id

    return make


def _row(sessions: sessionmaker[Session], job_id: uuid.UUID) -> WhatIf:
    with sessions() as session:
        row = session.get(WhatIf, job_id)
        assert row is not None
        return row


def test_a_job_retrains_without_the_set_and_stores_what_bind_core_measures(
    sessions: sessionmaker[Session], settings: Settings, new_job: Callable[..., uuid.UUID], stored: Any
) -> None:
    job = new_job()
    assert execute(str(job), sessions=sessions, settings=settings, device="cpu") == "succeeded"
    row = _row(sessions, job)
    assert (row.state, row.progress, row.attempts, row.error) == ("succeeded", 1.0, 1, None)
    assert row.finished_at is not None and row.device == "cpu" and row.result is not None
    data, weights, config = stored
    direct = verify_what_if(weights, config, load_npz(data), AuditConfig(), POSITIONS, seeds=SEEDS, random_sets=1)
    assert row.result == encode(direct.verification)  # the stored result is the library's, retrained the same way
    assert len(row.result["delta"]["effects"]) == 3 and row.result["chance"]["verdict"]
    with sessions() as session:  # the model retrained without the set is kept, to download or register
        (kept,) = session.scalars(select(ModelArtifact).where(ModelArtifact.audit_id == row.audit_id)).all()
        assert (kept.source, kept.what_if_id) == ("what_if", job) and kept.weights is not None
        weights_kept, config_kept = kept.weights, kept.config
    graph = load_npz(data)
    loaded, _ = prepare_for_audit(weights_kept, config_kept, graph, AuditConfig())  # as a supplied model loads it
    assert direct.retrained is not None
    ours, theirs = loaded.predict_proba(graph), direct.retrained.predict_proba(graph).double()  # loaded as float64
    assert torch.allclose(ours, theirs, rtol=0.0, atol=1e-6)
    # A redelivered message finds it finished and does nothing.
    assert execute(str(job), sessions=sessions, settings=settings, device="cpu") == "skipped"
    assert execute("not-a-uuid", sessions=sessions, settings=settings, device="cpu") == "skipped"


def test_a_cancel_stops_the_job_at_its_next_progress_report(
    sessions: sessionmaker[Session], settings: Settings, new_job: Callable[..., uuid.UUID]
) -> None:
    job = new_job()
    calls: list[float] = []

    def cancelling(*args: Any, progress: Callable[[float], None], **kwargs: Any) -> VerifiedSet:
        def report(fraction: float) -> None:
            calls.append(fraction)
            if len(calls) == 2:
                with sessions.begin() as session:
                    session.execute(update(WhatIf).where(WhatIf.id == job).values(state="cancelled"))
            progress(fraction)

        return verify_what_if(*args, progress=report, **kwargs)

    assert execute(str(job), sessions=sessions, settings=settings, device="cpu", compute=cancelling) == "cancelled"
    row = _row(sessions, job)
    assert row.state == "cancelled" and row.result is None and row.finished_at is not None
    assert 2 <= len(calls) < 20  # stopped long before the (2 + 1)·3 retrainings were done


def test_a_deleted_graph_fails_the_job_with_a_problem(
    sessions: sessionmaker[Session], settings: Settings, new_job: Callable[..., uuid.UUID]
) -> None:
    job = new_job()
    with sessions.begin() as session:
        audit = session.get(WhatIf, job).audit_id  # type: ignore[union-attr]
        graph = session.get(Audit, audit).graph_id  # type: ignore[union-attr]
        session.execute(update(Audit).where(Audit.id == audit).values(graph_id=None))
        session.execute(delete(Graph).where(Graph.id == graph))
    assert execute(str(job), sessions=sessions, settings=settings, device="cpu") == "failed"
    row = _row(sessions, job)
    assert row.state == "failed" and row.error is not None and row.error["status"] == 422
    assert row.error["instance"] == f"/v1/audits/{audit}/what-ifs/{job}"


def test_a_dead_workers_job_is_requeued_and_finished_by_the_next_attempt(
    sessions: sessionmaker[Session], settings: Settings, new_job: Callable[..., uuid.UUID]
) -> None:
    stale = now() - timedelta(seconds=600)
    dead = new_job(state="running", attempts=1, heartbeat_at=stale, progress=0.4)
    alive = new_job(state="running", attempts=1, heartbeat_at=now())
    lost = new_job(updated_at=stale)
    poison = new_job(state="running", attempts=3, heartbeat_at=stale)
    done = new_job(state="succeeded", heartbeat_at=stale, updated_at=stale)
    publisher = RecordingPublisher()
    found = sweep_and_send(publisher, settings, sessions)
    assert (found.requeued, found.resent, found.abandoned) == ([dead], [lost], [poison])
    assert sorted(publisher.sent) == sorted([(VERIFY_WHAT_IF, [str(j)], str(j)) for j in (dead, lost)])
    states = [_row(sessions, j).state for j in (dead, alive, lost, poison, done)]
    assert states == ["queued", "running", "queued", "failed", "succeeded"]
    assert "what-if-abandoned" in str(_row(sessions, poison).error)
    again = sweep(sessions, heartbeat_timeout=settings.heartbeat_timeout, queued_timeout=settings.queued_timeout)
    assert (again.requeued, again.resent, again.abandoned) == ([], [], [])  # touched: left alone this time
    assert execute(str(dead), sessions=sessions, settings=settings, device="cpu") == "succeeded"
    row = _row(sessions, dead)
    assert (row.state, row.attempts) == ("succeeded", 2) and row.result is not None


def test_the_audits_time_limit_holds_for_a_verification(
    sessions: sessionmaker[Session], settings: Settings, new_job: Callable[..., uuid.UUID]
) -> None:
    job = new_job()
    hurried = settings.model_copy(update={"audit_max_seconds": 0.05})
    assert execute(str(job), sessions=sessions, settings=hurried, device="cpu") == "failed"
    row = _row(sessions, job)
    assert row.error is not None and row.error["limits"][0]["limit"] == "BIND_AUDIT_MAX_SECONDS", row.error
    assert row.result is None


def test_a_running_job_records_its_pace(
    sessions: sessionmaker[Session], settings: Settings, new_job: Callable[..., uuid.UUID]
) -> None:
    """Each progress write carries the retrainings' pace, from which the job's read says its time left."""
    job = new_job()
    seen: list[tuple[dict[str, Any] | None, Any]] = []

    def watched(*args: Any, progress: Callable[[float], None], **kwargs: Any) -> VerifiedSet:
        def report(fraction: float) -> None:
            progress(fraction)
            if 0.3 < fraction < 0.7 and not seen:
                row = _row(sessions, job)
                seen.append((row.pace, WhatIfJobSummary.model_validate(row).time_left))

        return verify_what_if(*args, progress=report, **kwargs)

    assert execute(str(job), sessions=sessions, settings=settings, device="cpu", compute=watched) == "succeeded"
    ((pace, left),) = seen
    assert pace is not None and pace["stage"] == "verifying" and 0.3 < pace["fraction"] < 0.7 and pace["after"] == []
    assert left is not None and left.basis  # a few hundredths of a second in: "has just begun", no figure yet
    assert WhatIfJobSummary.model_validate(_row(sessions, job)).time_left is None  # finished: none
