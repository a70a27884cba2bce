"""The debiasing stage's retrained models kept to take away (issue 34 item 7): the attempt stores each budget's
weights and config with its results (``model_artifacts``), in the audited model's form, capped in size."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import torch
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.audits import run as runner
from app.audits.engine import Engine
from app.audits.model_artifacts import store_model_artifact
from app.core.db.tables import Audit, ModelArtifact
from app.core.settings import Settings
from bind_core import AuditConfig, Graph, TrainConfig, TrainedModel, run_audit, synthetic, train
from bind_core.pipeline.results import EdgeRow, InfluenceRow

torch.set_num_threads(1)

SMALL = {
    "training": {"epochs": 10, "polish": False},
    "budgets": [2, 4],
    "validation_sample": 0,
    "bootstrap": 0,
    "stages": ["training", "metrics", "influence", "debiasing"],
}


def _artifacts(sessions: sessionmaker[Session], audit_id: uuid.UUID) -> list[ModelArtifact]:
    with sessions() as session:
        rows = list(
            session.scalars(
                select(ModelArtifact).where(ModelArtifact.audit_id == audit_id).order_by(ModelArtifact.budget_index)
            )
        )
        for row in rows:
            _ = row.weights  # the deferred column, before the session closes
        return rows


def _execute(audit_id: uuid.UUID, sessions: sessionmaker[Session], settings: Settings, engine: Engine) -> str:
    return runner.execute(str(audit_id), sessions=sessions, settings=settings, device="cpu", engine=engine).status


def test_each_budgets_retrained_model_is_stored_with_the_results(
    sessions: sessionmaker[Session], settings: Settings, new_audit: Callable[..., uuid.UUID]
) -> None:
    graph = synthetic(80, seed=0)
    audit_id = new_audit(config=SMALL)
    engine = Engine(load=lambda sessions, settings, claim: graph, compute=run_audit)
    assert _execute(audit_id, sessions, settings, engine) == "succeeded"
    rows = _artifacts(sessions, audit_id)
    assert [(r.source, r.budget_index) for r in rows] == [("debias", 0), ("debias", 1)]
    for row in rows:
        assert row.weights is not None and row.note is None
        assert row.size_bytes == len(row.weights) and row.sha256 == hashlib.sha256(row.weights).hexdigest()
        assert row.config["format"] == "bind-audit/model@1"
        TrainedModel.from_bytes(row.weights, row.config)  # loads as any supplied model
    assert rows[0].sha256 != rows[1].sha256  # two budgets, two retrainings
    with sessions() as session:
        audit = session.get(Audit, audit_id)
        assert audit is not None and audit.results is not None
        assert [r["deleted"] for r in audit.results["debiasing"]] == [2, 4]


class _KeepingResult:
    """A computed audit whose debiasing kept one model (a typed double of the attempt's output)."""

    model = None
    config = AuditConfig()

    def to_dict(self) -> dict[str, Any]:
        return {"metrics": {}, "influence_summary": None}

    def influence_rows(self) -> list[InfluenceRow]:
        return []

    def iter_edge_rows(self) -> Iterator[EdgeRow]:
        return iter(())


def _keeping_engine(graph: Graph) -> Engine:
    model = train(graph, TrainConfig(epochs=2, polish=False))

    def compute(graph: Graph, config: Any = None, *, keep: Any = None, **_: Any) -> _KeepingResult:
        assert keep is not None
        keep(0, model)
        return _KeepingResult()

    return Engine(load=lambda sessions, settings, claim: graph, compute=compute)


def test_weights_over_the_cap_are_not_kept_and_the_row_says_why(
    sessions: sessionmaker[Session], settings: Settings, new_audit: Callable[..., uuid.UUID]
) -> None:
    capped = settings.model_copy(update={"model_artifact_max_bytes": 100})
    audit_id = new_audit()
    assert _execute(audit_id, sessions, capped, _keeping_engine(synthetic(60, seed=1))) == "succeeded"
    [row] = _artifacts(sessions, audit_id)
    assert row.weights is None and row.size_bytes > 100 and len(row.sha256) == 64
    assert row.note is not None and "BIND_MODEL_ARTIFACT_MAX_BYTES" in row.note and str(row.size_bytes) in row.note
    assert row.config["format"] == "bind-audit/model@1"  # the config is kept


def test_storing_again_under_the_same_key_replaces_the_row(
    sessions: sessionmaker[Session], new_audit: Callable[..., uuid.UUID], tenant_id: uuid.UUID
) -> None:
    audit_id = new_audit()
    model = train(synthetic(60, seed=1), TrainConfig(epochs=2, polish=False))
    with sessions.begin() as session:
        for _ in range(2):  # an earlier attempt's row, then this one's
            store_model_artifact(
                session, tenant_id=tenant_id, audit_id=audit_id, source="debias", index_or_id=0, model=model,
                max_bytes=10**6,
            )  # fmt: skip
    assert len(_artifacts(sessions, audit_id)) == 1
