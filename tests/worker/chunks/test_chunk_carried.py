"""A distributed estimate of a supplied model on another version of its graph: each chunk worker loads the version
again, and must read it as the attempt did, its inputs carried over to the registration's (else its per-node terms
would come from features the model was never given)."""

from __future__ import annotations

import dataclasses
import io
import uuid

import torch
from chunkhelp import store_plan
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import now
from app.core.db.tables import Audit, SuppliedModel
from app.core.db.tables import Graph as GraphRow
from app.core.settings import Settings
from app.graphs import loading
from app.influence import chunk_rows as stored
from app.influence import chunks
from bind_core import Graph
from bind_core.data.datasets import save_npz
from bind_core.data.datasets.scaling import column_ranges
from bind_core.influence.distributed.plan import InfluencePlan
from bind_core.training.fit import TrainedModel


def test_a_chunk_reads_the_version_as_the_attempt_did(
    pg: sessionmaker[Session],
    pg_settings: Settings,
    graph_row: tuple[uuid.UUID, uuid.UUID],
    graph: Graph,
    model: TrainedModel,
    the_plan: InfluencePlan,
) -> None:
    tenant_id, registered_on = graph_row  # the model's registration: the graph as given
    raw = graph.x.double().numpy()
    lo, hi = column_ranges(raw)
    lo, hi = lo - 1.0, hi + 3.0  # a later upload with wider ranges (other nodes), min-max scaled by them
    x = torch.from_numpy(2.0 * (raw - lo) / (hi - lo) - 1.0).float()
    scaled = dataclasses.replace(graph, x=x, feature_ranges=tuple(zip(lo, hi, strict=True)))
    buffer = io.BytesIO()
    save_npz(scaled, buffer)
    with pg.begin() as session:
        later = GraphRow(tenant_id=tenant_id, name="g", version=2, summary={}, data=buffer.getvalue(), size_bytes=1)
        supplied = SuppliedModel(
            tenant_id=tenant_id, graph_id=registered_on, name="m", config=model.config_dict(),
            weights=model.to_bytes(), size_bytes=1,
        )  # fmt: skip
        session.add_all([later, supplied])
        session.flush()
        later_id, model_id = later.id, supplied.id
    with pg.begin() as session:
        audit = Audit(
            tenant_id=tenant_id, graph_id=later_id, model_id=model_id, request_hash="h" * 64, state="running",
            attempts=1, heartbeat_at=now(), config={},
        )  # fmt: skip
        session.add(audit)
        session.flush()
        audit_id = audit.id
    plan_id = store_plan(pg, audit_id, the_plan, model)
    with pg() as session:
        source = stored.plan_source(session, plan_id)
    assert source is not None and source.model_id == model_id
    chunks.empty_cache()
    loaded = chunks.load_plan(pg, source, lambda g, d: loading.load_graph(pg, pg_settings, g, d), "cpu")
    assert loaded is not None
    assert torch.allclose(loaded.graph.x, graph.x, atol=1e-5)  # the registration's values, not the scaled upload's
    assert not torch.allclose(loaded.graph.x, scaled.x, atol=1e-2)
    chunks.empty_cache()
