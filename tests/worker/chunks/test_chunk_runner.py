"""The audit runner with influence split into chunks, on a real Postgres database: it stores what one worker would,
for nodes and for edges, whole or split."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import torch
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.audits import run as runner
from app.core.db.tables import Audit, EdgeInfluenceRow, InfluenceRow
from app.core.settings import Settings
from app.graphs import loading
from app.influence import chunks
from bind_core import Graph

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
                load_graph=lambda g, d: loading.load_graph(pg, pg_settings, g, d),
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
