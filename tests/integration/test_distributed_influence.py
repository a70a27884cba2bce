"""Distributed influence with two real workers: the chunks of one audit are computed by both processes, and
the influence values equal those of the same audit run by one worker without chunks.

The pair and the reference worker listen on Redis databases of their own (``BIND_TEST_SPLIT_REDIS_URL``,
default DB 10, and ``BIND_TEST_WHOLE_REDIS_URL``, DB 9), so the two audits run at the same time, each on the
workers meant for it, and no other test session sharing this Redis eats their messages. Each audit's task is
sent there by the test (the API also sends it to the integration tests' broker, where no worker of this
module listens).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
import torch
from bind_it import WorkerPool, make_audit_body, wait_for_audit
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.audits.tasks import send_run_audit
from app.core.db.session import engine_for, session_factory
from app.core.db.tables import InfluenceChunkRecord, InfluencePlanRecord, InfluenceRow
from app.core.publisher import BrokerClient
from app.core.settings import Settings

pytestmark = pytest.mark.integration

CHUNKS = 8
SPLIT_BROKER = os.environ.get("BIND_TEST_SPLIT_REDIS_URL", "redis://127.0.0.1:6379/10")
WHOLE_BROKER = os.environ.get("BIND_TEST_WHOLE_REDIS_URL", "redis://127.0.0.1:6379/9")
SPLIT = {"BIND_INFLUENCE_CHUNKS": str(CHUNKS), "BIND_INFLUENCE_CHUNK_MIN_TRAIN": "1", "BIND_BROKER_URL": SPLIT_BROKER}
WHOLE = {"BIND_INFLUENCE_CHUNKS": "0", "BIND_BROKER_URL": WHOLE_BROKER}


@pytest.fixture(scope="module")
def brokers() -> Iterator[None]:
    """The two Redis databases, empty before and after."""
    clients = [redis.Redis.from_url(url) for url in (SPLIT_BROKER, WHOLE_BROKER)]
    for client in clients:
        client.flushdb()
    yield
    for client in clients:
        client.flushdb()
        client.close()


def audit_body(graph_id: str) -> dict[str, object]:
    # A two-layer GCN: its per-node terms cost enough (about 10 ms a node here) for a second worker to take
    # chunks while the first computes; no debiasing, validation or bootstrap, to keep the audit short.
    # the influence function's per-node terms are what the chunks spread (the step estimator runs in one worker)
    return make_audit_body(graph_id, epochs=50, budgets=[], bootstrap=0, model={"layers": 2}, estimator="linear")


def deltas(settings: Settings, audit_id: str) -> torch.Tensor:
    with session_factory(engine_for(settings.database_url))() as session:
        rows = session.execute(
            select(InfluenceRow.position, InfluenceRow.delta, InfluenceRow.delta_sp, InfluenceRow.delta_eo)
            .where(InfluenceRow.audit_id == uuid.UUID(audit_id))
            .order_by(InfluenceRow.position)
        ).all()
    assert [r.position for r in rows] == list(range(len(rows)))
    return torch.tensor([[r.delta, r.delta_sp, r.delta_eo] for r in rows], dtype=torch.float64)


def submit(client: TestClient, graph_id: str, broker: str) -> str:
    response = client.post("/v1/audits", json=audit_body(graph_id))
    assert response.status_code == 202, response.text
    audit_id = str(response.json()["id"])
    assert send_run_audit(BrokerClient(broker), uuid.UUID(audit_id))
    return audit_id


def test_two_workers_split_the_influence_of_one_audit_and_match_one_worker(
    client: TestClient, graph_id: str, workers: WorkerPool, api_settings: Settings, brokers: None
) -> None:
    pair = [workers.start(**SPLIT), workers.start(**SPLIT)]
    workers.start(**WHOLE)
    split_id = submit(client, graph_id, SPLIT_BROKER)
    whole_id = submit(client, graph_id, WHOLE_BROKER)
    split = wait_for_audit(client, split_id, {"succeeded", "failed"}, timeout=150, pool=workers)
    assert split["state"] == "succeeded", split["error"]
    whole = wait_for_audit(client, whole_id, {"succeeded", "failed"}, timeout=150, pool=workers)
    assert whole["state"] == "succeeded", whole["error"]

    summary = split["results"]["influence_summary"]
    distributed = summary["distributed"]
    assert distributed["chunks"] == CHUNKS == summary["timings"]["chunks"]
    pids = {int(w["worker"].rsplit(":", 1)[1]) for w in distributed["workers"]}
    assert pids == {w.process.pid for w in pair}, (distributed, workers.logs())  # both processes computed chunks
    assert sum(w["chunks"] for w in distributed["workers"]) == CHUNKS
    assert sum(w["nodes"] for w in distributed["workers"]) == summary["count"]
    assert {w["device"] for w in distributed["workers"]} == {"cpu"}
    assert f"influence split into {CHUNKS} chunks" in workers.logs(tail=10**9)
    assert "distributed" not in whole["results"]["influence_summary"]
    assert whole["results"]["influence_summary"]["timings"]["chunks"] == 1
    with session_factory(engine_for(api_settings.database_url))() as session:  # cleaned up after the audit
        assert session.scalar(select(func.count()).select_from(InfluencePlanRecord)) == 0
        assert session.scalar(select(func.count()).select_from(InfluenceChunkRecord)) == 0

    ours, reference = deltas(api_settings, split_id), deltas(api_settings, whole_id)
    assert ours.shape == reference.shape == (summary["count"], 3)
    assert torch.allclose(ours, reference, rtol=1e-9, atol=1e-15), (ours - reference).abs().max()
    assert split["results"]["metrics"]["test"] == whole["results"]["metrics"]["test"]
