"""`app.influence.chunks` on a real Postgres database: a chunk task, and the coordinator alone, without a broker,
with other workers (simulated in this process under other names, through its ``send`` hook, which runs right after
the plan and its chunks are committed), and cancelled."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
import torch
from chunkhelp import LEASE, chunk_rows, claim, store_plan
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.audits.progress import Cancelled
from app.core.db.session import now
from app.core.db.tables import Audit, InfluenceChunkRecord, InfluencePlanRecord
from app.core.settings import Settings
from app.graphs import loading
from app.influence import chunk_rows as stored
from app.influence import chunks
from app.influence.chunks import Coordinator
from bind_core import Graph
from bind_core.influence import estimate
from bind_core.influence.distributed.plan import InfluencePlan
from bind_core.training.fit import TrainedModel


def test_a_chunk_task_computes_skips_and_gives_up(
    pg: sessionmaker[Session],
    pg_settings: Settings,
    running_audit: Callable[..., uuid.UUID],
    the_plan: InfluencePlan,
    model: TrainedModel,
    graph: Graph,
) -> None:
    audit_id = running_audit()
    plan_id = store_plan(pg, audit_id, the_plan, model)
    loads: list[uuid.UUID | None] = []

    def load_graph(graph_id: uuid.UUID | None, dataset: str | None) -> Graph:
        loads.append(graph_id)
        return loading.load_graph(pg, pg_settings, graph_id, dataset)

    def run(index: int, worker: str = "w2:1") -> str:
        return chunks.execute_chunk(
            str(plan_id), index, sessions=pg, settings=pg_settings, device="cpu", load_graph=load_graph, worker=worker
        )

    chunks.empty_cache()
    assert run(2) == "computed"
    assert run(2) == "skipped"  # done
    assert run(3) == "computed"
    assert len(loads) == 1  # the graph and model are kept for the next chunk of the same plan
    rows = chunk_rows(pg, plan_id)
    assert [r.status for r in rows] == ["pending", "pending", "done", "done"]
    assert rows[2].worker == "w2:1" and rows[2].seconds is not None and rows[2].seconds > 0
    whole = estimate(model, graph)
    from bind_core.influence.distributed.plan import InfluenceChunk

    got = InfluenceChunk.from_bytes(rows[2].result or b"")
    expect = whole.parts["iid"][got.start : got.stop]
    assert torch.allclose(got.iid, expect, rtol=1e-9, atol=1e-15)

    with pg.begin() as session:
        session.execute(update(Audit).where(Audit.id == audit_id).values(state="cancelled"))
    assert run(0) == "gone"  # its audit is over
    assert chunk_rows(pg, plan_id)[0].status == "pending"
    assert chunks.execute_chunk(
        str(uuid.uuid4()), 0, sessions=pg, settings=pg_settings, device="cpu", load_graph=load_graph
    ) == "gone"  # fmt: skip


def coordinator(
    pg: sessionmaker[Session],
    settings: Settings,
    audit_id: uuid.UUID,
    model: TrainedModel,
    graph: Graph,
    *,
    send: chunks.SendChunks | None = None,
    progress: chunks.Progress | None = None,
    seen: list[float] | None = None,
    n: int = 4,
) -> Coordinator:
    deadline = time.monotonic() + 60  # a coordinator that waits for a chunk forever fails instead of hanging

    def report(stage: str, fraction: float) -> None:
        assert stage == "influence"
        assert time.monotonic() < deadline, "the coordinator is still waiting for chunks"
        if seen is not None:
            seen.append(fraction)

    return Coordinator(
        pg, settings, audit_id, 1, model, graph, "cpu", n, progress or report, send, worker="coordinator:1", poll=0.02
    )


def test_alone_the_coordinator_computes_every_chunk_and_matches_the_single_run(
    pg: sessionmaker[Session],
    pg_settings: Settings,
    running_audit: Callable[..., uuid.UUID],
    model: TrainedModel,
    graph: Graph,
) -> None:
    sent: list[tuple[uuid.UUID, list[int]]] = []
    seen: list[float] = []
    run = coordinator(
        pg, pg_settings, running_audit(), model, graph, send=lambda p, i: sent.append((p, i)), seen=seen, n=5
    )
    split = estimate(model, graph, chunk_runner=run)
    whole = estimate(model, graph)
    assert torch.allclose(split.delta, whole.delta, rtol=1e-9, atol=1e-15)
    assert len(sent) == 1 and sent[0][1] == [0, 1, 2, 3, 4]
    assert seen == pytest.approx([0.5 + 0.1 * k for k in range(1, 6)])  # the stage's second half, chunk by chunk
    assert run.record is not None and run.record["chunks"] == 5 and run.record["reclaimed"] == 0
    assert run.record["workers"] == [
        {"worker": "coordinator:1", "device": "cpu", "chunks": 5, "nodes": graph.train_idx.numel(),
         "seconds": pytest.approx(run.record["workers"][0]["seconds"])},
    ]  # fmt: skip
    with pg() as session:  # the rows are gone once the estimate is complete
        assert session.scalar(select(func.count()).where(InfluencePlanRecord.id == sent[0][0])) == 0
        assert session.scalar(select(func.count()).where(InfluenceChunkRecord.plan_id == sent[0][0])) == 0


def test_without_a_broker_the_coordinator_computes_every_chunk(
    pg: sessionmaker[Session],
    pg_settings: Settings,
    running_audit: Callable[..., uuid.UUID],
    model: TrainedModel,
    graph: Graph,
) -> None:
    def send(plan_id: uuid.UUID, indices: list[int]) -> None:
        raise ConnectionError("redis is down")

    run = coordinator(pg, pg_settings, running_audit(), model, graph, send=send, n=3)
    split = estimate(model, graph, chunk_runner=run)
    assert torch.allclose(split.delta, estimate(model, graph).delta, rtol=1e-9, atol=1e-15)
    assert run.record is not None and [w["chunks"] for w in run.record["workers"]] == [3]


def test_other_workers_chunks_are_used_and_a_dead_ones_reclaimed(
    pg: sessionmaker[Session],
    pg_settings: Settings,
    running_audit: Callable[..., uuid.UUID],
    model: TrainedModel,
    graph: Graph,
) -> None:
    """Chunk 0 is computed by a live worker (slowly: the coordinator must wait for it, not redo it), chunk 1
    by a worker that dies holding it (the coordinator reclaims it after the lease), chunk 2 by a third
    worker at once; the coordinator does chunk 3."""
    chunks.empty_cache()
    helpers: list[threading.Thread] = []

    def load_graph(graph_id: uuid.UUID | None, dataset: str | None) -> Graph:
        return loading.load_graph(pg, pg_settings, graph_id, dataset)

    def send(plan_id: uuid.UUID, indices: list[int]) -> None:
        slow = claim(pg, plan_id, "slow:2", index=0)
        dead = claim(pg, plan_id, "dead:3", index=1)
        assert slow is not None and dead is not None
        with pg() as session:
            source = stored.plan_source(session, plan_id)
        assert source is not None
        loaded = chunks.load_plan(pg, source, load_graph, "cpu")
        assert loaded is not None

        def finish_slowly() -> None:
            time.sleep(0.5)  # the heartbeat thread keeps its claim alive meanwhile (lease 2 s)
            chunks.compute(pg, slow, loaded, pg_settings.heartbeat_interval)

        helpers.append(threading.Thread(target=finish_slowly))
        helpers[-1].start()
        with pg.begin() as session:  # the dead worker beat once, LEASE + 1 s ago
            session.execute(
                update(InfluenceChunkRecord)
                .where(InfluenceChunkRecord.plan_id == plan_id, InfluenceChunkRecord.idx == 1)
                .values(heartbeat_at=now() - timedelta(seconds=LEASE + 1))
            )
        assert chunks.execute_chunk(
            str(plan_id), 2, sessions=pg, settings=pg_settings, device="cpu", load_graph=load_graph, worker="fast:4"
        ) == "computed"  # fmt: skip

    run = coordinator(pg, pg_settings, running_audit(), model, graph, send=send)
    split = estimate(model, graph, chunk_runner=run)
    for helper in helpers:
        helper.join()
    assert torch.allclose(split.delta, estimate(model, graph).delta, rtol=1e-9, atol=1e-15)
    assert run.record is not None
    by_worker = {w["worker"]: w["chunks"] for w in run.record["workers"]}
    assert by_worker == {"slow:2": 1, "coordinator:1": 2, "fast:4": 1}
    assert run.record["reclaimed"] == 1  # chunk 1, taken from the dead worker


def test_a_cancelled_audit_stops_the_wait_and_leaves_no_rows(
    pg: sessionmaker[Session],
    pg_settings: Settings,
    running_audit: Callable[..., uuid.UUID],
    model: TrainedModel,
    graph: Graph,
) -> None:
    plan_ids: list[uuid.UUID] = []

    def send(plan_id: uuid.UUID, indices: list[int]) -> None:
        plan_ids.append(plan_id)
        for i in indices:  # a live worker holds every chunk and never finishes
            assert claim(pg, plan_id, f"busy:{i}", index=i) is not None

    calls = 0

    def progress(stage: str, fraction: float) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # what the audit's progress reporter does once a beat has seen `cancelled`
            raise Cancelled

    run = coordinator(pg, pg_settings, running_audit(), model, graph, send=send, progress=progress)
    with pytest.raises(Cancelled):
        estimate(model, graph, chunk_runner=run)
    with pg() as session:
        assert session.scalar(select(func.count()).where(InfluencePlanRecord.id == plan_ids[0])) == 0
        assert session.scalar(select(func.count()).where(InfluenceChunkRecord.plan_id == plan_ids[0])) == 0
