"""Fair sharing on the real stack (Postgres, Redis, worker processes): one tenant's backlog does not hold back
another tenant's audit, the per-tenant running limit holds across workers, and a full queue is a 429."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import pytest
from bind_it import WorkerPool, synthetic_npz
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import engine_for, session_factory
from app.core.db.tables import Audit
from app.core.settings import Settings
from app.main import create_app
from app.tenants.keys import create_api_key

pytestmark = pytest.mark.integration

TINY = {"training": {"epochs": 20, "lr": 0.01}, "budgets": [], "validation_sample": 0, "bootstrap": 0}
"""A few seconds on the 2-core machine: training, polish, metrics and the influence estimate."""
BACKLOG = {**TINY, "training": {"epochs": 10000, "lr": 0.01}}
"""Tenant A's backlog in the first test: long enough (several seconds) that the audit running when B submits
is still running then; a TINY audit can end, and the next start, between the check and B's submission."""
CLAIM_SLACK = 5.0
"""Seconds a free worker may take to fetch the next message and claim (Redis poll, the claim's transaction)."""

Tenant = Callable[[], tuple[TestClient, str]]


@pytest.fixture
def sessions(database_url: str) -> sessionmaker[Session]:
    return session_factory(engine_for(database_url))


@pytest.fixture
def new_tenant(api_settings: Settings, sessions: sessionmaker[Session]) -> Iterator[Tenant]:
    """A factory of ``(client, graph id)``: a new tenant's API client and a 200-node graph it uploaded."""
    clients: list[TestClient] = []

    def make() -> tuple[TestClient, str]:
        with sessions.begin() as session:
            key = create_api_key(session, f"fair-{uuid.uuid4().hex[:8]}")
        client = TestClient(create_app(api_settings), headers={"Authorization": f"Bearer {key}"})
        clients.append(client.__enter__())
        upload = client.post("/v1/graphs", files={"npz": ("g.npz", synthetic_npz(200, seed=7))})
        assert upload.status_code == 201, upload.text
        return client, str(upload.json()["id"])

    yield make
    for client in clients:
        for item in client.get("/v1/audits", params={"state": "queued", "limit": 100}).json()["items"]:
            client.post(f"/v1/audits/{item['id']}/cancel")
        client.__exit__(None, None, None)


def submit(client: TestClient, graph_id: str, settings: dict[str, Any] = TINY) -> str:
    response = client.post("/v1/audits", json={"graph_id": graph_id, **settings})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def rows(sessions: sessionmaker[Session], ids: list[str]) -> dict[str, Any]:
    with sessions() as session:
        found = session.execute(
            select(Audit.id, Audit.state, Audit.created_at, Audit.started_at, Audit.finished_at).where(
                Audit.id.in_([uuid.UUID(i) for i in ids])
            )
        ).all()
    return {str(r.id): r for r in found}


def wait_until(check: Callable[[], bool], pool: WorkerPool, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not within {timeout} s\n{pool.logs()}")


def seconds(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def test_a_backlog_delays_another_tenants_audit_by_at_most_one_audit(
    workers: WorkerPool, new_tenant: Tenant, sessions: sessionmaker[Session], api_settings: Settings
) -> None:
    """One worker; tenant A queues 20 audits, tenant B one while A's first runs. B's audit is the next to
    start: no audit of A starts between B's submission and B's start, and B waits at most the rest of the
    audit that was running (first come, first served would make it wait for all 20)."""
    worker = workers.start()
    (a, a_graph), (b, b_graph) = new_tenant(), new_tenant()
    backlog = [submit(a, a_graph, BACKLOG) for _ in range(20)]
    try:
        _backlog_then_b(worker, workers, a, a_graph, b, b_graph, backlog, sessions, api_settings)
    finally:  # leave nothing queued for the next test, whatever happened here
        for audit_id in backlog:
            a.post(f"/v1/audits/{audit_id}/cancel")


def _backlog_then_b(
    worker: Any, workers: WorkerPool, a: TestClient, a_graph: str, b: TestClient, b_graph: str, backlog: list[str],
    sessions: sessionmaker[Session], api_settings: Settings,
) -> None:  # fmt: skip
    wait_until(lambda: rows(sessions, backlog[:1])[backlog[0]].state != "queued", workers, 60, "A's first audit")
    single = submit(b, b_graph)
    wait_until(lambda: rows(sessions, [single])[single].started_at is not None, workers, 90, "B's audit start")
    found = rows(sessions, [*backlog, single])
    mine = found[single]
    started = {i: found[i].started_at for i in backlog if found[i].started_at is not None}
    overtaking = [i for i, at in started.items() if mine.created_at < at < mine.started_at]
    assert overtaking == [], "an audit of A started while B's waited"
    ahead = [found[i] for i, at in started.items() if at <= mine.created_at]
    assert len(ahead) == 1 and ahead[0].finished_at is not None  # exactly the one A audit that was running
    length = seconds(ahead[0].finished_at, ahead[0].started_at)
    wait = seconds(mine.started_at, mine.created_at)
    print(f"\nFAIRNESS: B waited {wait:.2f} s behind A's 19 queued audits; the audit running then took {length:.2f} s; "
          f"B started {seconds(mine.started_at, ahead[0].finished_at):.2f} s after it finished")  # fmt: skip
    assert wait <= length + CLAIM_SLACK
    assert seconds(mine.started_at, ahead[0].finished_at) <= CLAIM_SLACK

    # A full queue on the real stack: 429 with Retry-After from A's finished audits' run times.
    wait_until(lambda: rows(sessions, [single])[single].finished_at is not None, workers, 90, "B's audit end")
    worker.stop()  # the queue stands still while the limit is checked (a running worker would keep draining it)
    queued = sum(1 for r in rows(sessions, backlog).values() if r.state == "queued")
    capped = api_settings.model_copy(update={"tenant_max_queued": queued})
    with TestClient(create_app(capped), headers=dict(a.headers)) as limited:
        refused = limited.post("/v1/audits", json={"graph_id": a_graph, **TINY})
    assert refused.status_code == 429 and refused.json()["type"].endswith("/tenant-queue-full"), refused.text
    assert 1 <= int(refused.headers["retry-after"]) <= int(length) + 30


def test_the_running_limit_holds_across_workers_and_every_audit_runs(
    workers: WorkerPool, new_tenant: Tenant, sessions: sessionmaker[Session]
) -> None:
    """Two workers with ``BIND_TENANT_MAX_RUNNING=1``: tenant A's 3 audits run one at a time (the other
    worker's messages for them are spent doing nothing), yet all finish well before the sweeper would re-send
    a message (``BIND_QUEUED_TIMEOUT`` 60 s): each finished audit sends the message for the next."""
    for _ in range(2):
        workers.start(BIND_TENANT_MAX_RUNNING="1")
    a, a_graph = new_tenant()
    ids = [submit(a, a_graph) for _ in range(3)]
    start = time.monotonic()
    wait_until(lambda: all(r.finished_at is not None for r in rows(sessions, ids).values()), workers, 55, "A's 3")
    print(f"\nRUNNING LIMIT: 3 audits of one tenant on 2 workers in {time.monotonic() - start:.1f} s")
    found = sorted(rows(sessions, ids).values(), key=lambda r: r.started_at)
    assert [r.state for r in found] == ["succeeded"] * 3
    for earlier, later in itertools.pairwise(found):
        assert later.started_at >= earlier.finished_at  # never two at once
