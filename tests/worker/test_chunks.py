"""`app.influence.chunks` on a real Postgres database: claiming, reclaiming, storing once, the coordinator, the runner.

The database is created from ``BIND_TEST_ADMIN_URL`` (default the local Postgres), migrated, and dropped at
the end of the module. "Other workers" are simulated in this process under other names, through the
coordinator's ``send`` hook (which runs right after the plan and its chunks are committed).
"""

from __future__ import annotations

import io
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import torch
from sqlalchemy import create_engine, func, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker, undefer

from app.audits import run as runner
from app.audits.progress import Cancelled
from app.core.db.migrate import upgrade
from app.core.db.session import make_engine, now, session_factory
from app.core.db.tables import (
    Audit,
    EdgeInfluenceRow,
    InfluenceChunkRecord,
    InfluencePlanRecord,
    InfluenceRow,
    Tenant,
)
from app.core.db.tables import Graph as GraphRow
from app.core.settings import Settings
from app.influence import chunk_rows as stored
from app.influence import chunks
from app.influence.chunk_rows import ChunkClaim
from app.influence.chunks import Coordinator
from bind_core import Graph
from bind_core.data.datasets import save_npz, synthetic
from bind_core.influence import estimate
from bind_core.influence.estimate import plan
from bind_core.influence.plan import InfluencePlan
from bind_core.training.fit import TrainConfig, TrainedModel, train

ADMIN_URL = os.environ.get("BIND_TEST_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
LEASE = 2.0  # seconds without a heartbeat after which a running chunk may be claimed again


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A new, migrated Postgres database, dropped at the end of the module."""
    name = f"bind_chunks_{uuid.uuid4().hex[:12]}"
    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="module")
def pg(pg_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(pg_url)
    yield session_factory(engine)
    engine.dispose()


@pytest.fixture
def pg_settings(pg_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=pg_url, broker_url=f"sqla+sqlite:///{tmp_path / 'broker.db'}", progress_interval=0.0,
        heartbeat_interval=0.05, heartbeat_timeout=LEASE, influence_chunks=4, influence_chunk_min_train=1,
    )  # fmt: skip


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(200, seed=3, train_per_class=40)


@pytest.fixture(scope="module")
def model(graph: Graph) -> TrainedModel:
    return train(graph, TrainConfig(epochs=40, seed=0, polish_max_iter=200))


@pytest.fixture(scope="module")
def the_plan(model: TrainedModel, graph: Graph) -> InfluencePlan:
    return plan(model, graph)


@pytest.fixture(scope="module")
def graph_row(pg: sessionmaker[Session], graph: Graph) -> tuple[uuid.UUID, uuid.UUID]:
    """A tenant and the graph stored as an upload: ``(tenant_id, graph_id)``."""
    buffer = io.BytesIO()
    save_npz(graph, buffer)
    with pg.begin() as session:
        tenant = Tenant(name=f"t-{uuid.uuid4().hex[:6]}")
        session.add(tenant)
        session.flush()
        row = GraphRow(tenant_id=tenant.id, name="g", summary={}, data=buffer.getvalue(), size_bytes=1)
        session.add(row)
        session.flush()
        return tenant.id, row.id


@pytest.fixture
def running_audit(pg: sessionmaker[Session], graph_row: tuple[uuid.UUID, uuid.UUID]) -> Callable[..., uuid.UUID]:
    """Insert an audit of the stored graph (``running``, attempt 1 unless told) and return its id."""

    def make(**values: Any) -> uuid.UUID:
        fields: dict[str, Any] = {"state": "running", "attempts": 1, "heartbeat_at": now(), "config": {}}
        fields.update(values)
        with pg.begin() as session:
            audit = Audit(tenant_id=graph_row[0], graph_id=graph_row[1], request_hash="h" * 64, **fields)
            session.add(audit)
            session.flush()
            return audit.id

    return make


def store_plan(
    pg: sessionmaker[Session], audit_id: uuid.UUID, the_plan: InfluencePlan, model: TrainedModel, n: int = 4
) -> uuid.UUID:
    from bind_core.influence.plan import chunk_bounds

    with pg.begin() as session:
        return stored.create_plan(
            session, audit_id=audit_id, attempt=1, plan=the_plan.to_bytes(), weights=model.to_bytes(),
            model_config=model.config_dict(), bounds=chunk_bounds(the_plan.num_train, n),
        )  # fmt: skip


def claim(pg: sessionmaker[Session], plan_id: uuid.UUID, worker: str, **kwargs: Any) -> ChunkClaim | None:
    with pg.begin() as session:
        return stored.claim_chunk(session, plan_id, worker=worker, device="cpu", lease_timeout=LEASE, **kwargs)


def chunk_rows(pg: sessionmaker[Session], plan_id: uuid.UUID) -> list[InfluenceChunkRecord]:
    query = select(InfluenceChunkRecord).where(InfluenceChunkRecord.plan_id == plan_id).order_by("idx")
    with pg() as session:
        return list(session.scalars(query.options(undefer(InfluenceChunkRecord.result))))


# ------------------------------------------------------------------------------------------ the rows


def test_concurrent_claims_skip_each_others_locked_rows(
    pg: sessionmaker[Session], running_audit: Callable[..., uuid.UUID], the_plan: InfluencePlan, model: TrainedModel
) -> None:
    plan_id = store_plan(pg, running_audit(), the_plan, model, n=3)
    with pg.begin() as first:  # holds its row locked until it commits
        a = stored.claim_chunk(first, plan_id, worker="a", device="cpu", lease_timeout=LEASE)
        b = claim(pg, plan_id, "b")  # another transaction, meanwhile: skips the locked row, does not wait
        c = claim(pg, plan_id, "c", newest_first=True)
    assert a is not None and b is not None and c is not None
    assert (a.index, b.index, c.index) == (0, 1, 2)
    assert claim(pg, plan_id, "d") is None  # all three running with fresh heartbeats
    assert [(r.status, r.worker, r.claims) for r in chunk_rows(pg, plan_id)] == [
        ("running", "a", 1), ("running", "b", 1), ("running", "c", 1),
    ]  # fmt: skip


def test_a_stale_claim_is_reclaimed_and_the_old_holder_fenced(
    pg: sessionmaker[Session], running_audit: Callable[..., uuid.UUID], the_plan: InfluencePlan, model: TrainedModel
) -> None:
    plan_id = store_plan(pg, running_audit(), the_plan, model, n=2)
    dead = claim(pg, plan_id, "dead", index=0)
    assert dead is not None and dead.token == 1
    assert claim(pg, plan_id, "other", index=0) is None  # fresh heartbeat: held by a live worker
    with pg.begin() as session:
        assert stored.touch(session, dead)
        session.execute(
            update(InfluenceChunkRecord)
            .where(InfluenceChunkRecord.plan_id == plan_id, InfluenceChunkRecord.idx == 0)
            .values(heartbeat_at=now() - timedelta(seconds=LEASE + 1))
        )
    taken = claim(pg, plan_id, "other", index=0)
    assert taken is not None and taken.token == 2 and taken.worker == "other"
    with pg.begin() as session:
        assert not stored.touch(session, dead)  # the dead worker's heartbeat no longer counts
        stored.release(session, dead)  # nor does its release
        assert stored.touch(session, taken)
    assert chunk_rows(pg, plan_id)[0].status == "running"
    with pg.begin() as session:
        stored.release(session, taken)
    row = chunk_rows(pg, plan_id)[0]
    assert (row.status, row.worker) == ("pending", None)


def test_a_result_is_stored_once(
    pg: sessionmaker[Session], running_audit: Callable[..., uuid.UUID], the_plan: InfluencePlan, model: TrainedModel
) -> None:
    plan_id = store_plan(pg, running_audit(), the_plan, model, n=2)
    first = claim(pg, plan_id, "first", index=1)
    assert first is not None
    with pg.begin() as session:
        session.execute(update(InfluenceChunkRecord).values(heartbeat_at=now() - timedelta(seconds=LEASE + 1)))
    second = claim(pg, plan_id, "second", index=1)
    assert second is not None
    with pg.begin() as session:
        assert stored.store(session, second, b"from second", 0.5)
    with pg.begin() as session:
        assert not stored.store(session, first, b"from first", 0.7)  # the slow one finishes: nothing written
    assert claim(pg, plan_id, "third", index=1) is None  # done chunks are never claimed again
    with pg() as session:
        done = stored.done_chunks(session, plan_id)
        assert stored.counts(session, plan_id) == (1, 2)
    assert [(d.index, d.result, d.worker, d.claims) for d in done] == [(1, b"from second", "second", 2)]


def test_a_plan_belongs_to_its_running_attempt(
    pg: sessionmaker[Session], running_audit: Callable[..., uuid.UUID], the_plan: InfluencePlan, model: TrainedModel
) -> None:
    audit_id = running_audit()
    old = store_plan(pg, audit_id, the_plan, model)
    finished = store_plan(pg, running_audit(), the_plan, model)
    with pg() as session:
        assert stored.plan_source(session, old) is not None
    with pg.begin() as session:
        session.execute(update(Audit).where(Audit.id == audit_id).values(attempts=2))
    with pg() as session:
        assert stored.plan_source(session, old) is None  # a newer attempt owns the audit
    with pg.begin() as session:
        session.execute(update(Audit).where(Audit.id == audit_id).values(attempts=1))
        gone = session.scalar(select(InfluencePlanRecord.audit_id).where(InfluencePlanRecord.id == finished))
        session.execute(update(Audit).where(Audit.id == gone).values(state="succeeded"))
    new = store_plan(pg, audit_id, the_plan, model)  # replaces the audit's old plan, drops the finished audit's
    with pg() as session:
        left = set(session.scalars(select(InfluencePlanRecord.id)))
        assert new in left and old not in left and finished not in left
        assert session.scalar(select(func.count()).where(InfluenceChunkRecord.plan_id == old)) == 0


# ------------------------------------------------------------------------------------------ computing


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
        return runner.load_graph(pg, pg_settings, graph_id, dataset)

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
    from bind_core.influence.plan import InfluenceChunk

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
        return runner.load_graph(pg, pg_settings, graph_id, dataset)

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


# ------------------------------------------------------------------------------------------ the runner

AUDIT_CONFIG = {
    "training": {"epochs": 30, "lr": 0.01, "polish_max_iter": 200},
    "budgets": [],
    "validation_sample": 0,
    "bootstrap": 0,
}


def test_the_runner_splits_influence_and_stores_what_one_worker_would(
    pg: sessionmaker[Session],
    pg_settings: Settings,
    running_audit: Callable[..., uuid.UUID],
    graph: Graph,
) -> None:
    """The same audit run whole and split (the chunk tasks run at once by "another worker"): the same
    influence rows to 1e-9, and the split one records where its chunks ran."""
    chunks.empty_cache()
    settings_whole = pg_settings.model_copy(update={"influence_chunks": 0})
    sent: list[int] = []

    def send(plan_id: uuid.UUID, indices: list[int]) -> None:
        for i in indices[:2]:
            sent.append(i)
            chunks.execute_chunk(
                str(plan_id), i, sessions=pg, settings=pg_settings, device="cpu", worker="other:9",
                load_graph=lambda g, d: runner.load_graph(pg, pg_settings, g, d),
            )  # fmt: skip

    results: dict[str, Any] = {}
    rows: dict[str, list[float]] = {}
    for name, settings, sender in (("whole", settings_whole, None), ("split", pg_settings, send)):
        audit_id = running_audit(state="queued", attempts=0, config=AUDIT_CONFIG)
        outcome = runner.execute(str(audit_id), sessions=pg, settings=settings, device="cpu", send_chunks=sender)
        assert outcome.status == "succeeded"
        with pg() as session:
            audit = session.get(Audit, audit_id)
            assert audit is not None and audit.results is not None
            results[name] = audit.results
            rows[name] = list(
                session.scalars(
                    select(InfluenceRow.delta).where(InfluenceRow.audit_id == audit_id).order_by(InfluenceRow.position)
                )
            )
    assert sent == [0, 1]
    assert len(rows["split"]) == len(rows["whole"]) == graph.train_idx.numel()
    assert torch.allclose(torch.tensor(rows["split"]), torch.tensor(rows["whole"]), rtol=1e-9, atol=1e-15)
    assert "distributed" not in results["whole"]["influence_summary"]
    distributed = results["split"]["influence_summary"]["distributed"]
    assert distributed["chunks"] == 4 and distributed["reclaimed"] == 0
    assert {w["worker"]: w["chunks"] for w in distributed["workers"]} == {"other:9": 2, chunks.worker_name(): 2}
    assert results["split"]["timings"]["training"] > 0
    split, whole = ({k: v for k, v in results[n]["training"].items() if k != "seconds"} for n in ("split", "whole"))
    assert split == whole  # trained by the runner, not by run_audit: the same training


def test_the_runner_stores_every_edge_whole_or_split(
    pg: sessionmaker[Session],
    pg_settings: Settings,
    running_audit: Callable[..., uuid.UUID],
    graph: Graph,
) -> None:
    """With ``edges`` the runner stores one row per undirected edge, the same whether the node estimate's per-node
    terms ran whole or in chunks (the edges reuse the plan made before the chunks either way)."""
    chunks.empty_cache()
    stored_rows: dict[str, list[tuple[int, int, int, float]]] = {}
    for name, settings in (("whole", pg_settings.model_copy(update={"influence_chunks": 0})), ("split", pg_settings)):
        audit_id = running_audit(state="queued", attempts=0, config={**AUDIT_CONFIG, "edges": True})
        outcome = runner.execute(str(audit_id), sessions=pg, settings=settings, device="cpu", send_chunks=None)
        assert outcome.status == "succeeded"
        with pg() as session:
            audit = session.get(Audit, audit_id)
            assert audit is not None and audit.results is not None
            section = audit.results["edges"]
            assert section["computed"] and section["shared_solve"] and section["edges"] == graph.num_edges
            row = EdgeInfluenceRow
            query = select(row.position, row.u_index, row.v_index, row.delta).where(row.audit_id == audit_id)
            stored_rows[name] = [tuple(r) for r in session.execute(query.order_by(row.position))]
            assert section["top_harmful"][0]["delta"] == min(r[3] for r in stored_rows[name])
    whole, split = stored_rows["whole"], stored_rows["split"]
    assert len(whole) == len(split) == graph.num_edges
    assert [r[:3] for r in whole] == [r[:3] for r in split]
    assert torch.allclose(
        torch.tensor([r[3] for r in split]), torch.tensor([r[3] for r in whole]), rtol=1e-9, atol=1e-15
    )
