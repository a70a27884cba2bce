"""An audit whose request skips stages (``stages`` of ``POST /v1/audits``) runs only those it names, end to end
through the worker's attempt on a small real graph."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from app.audits import run as runner
from app.audits.engine import Engine
from app.audits.schemas import AuditCreate
from app.core.db.tables import Audit
from app.core.settings import Settings
from bind_core import AuditConfig, run_audit, synthetic


def test_an_audit_without_influence_runs_training_and_metrics_only(
    sessions: sessionmaker[Session], settings: Settings, new_audit: Callable[..., uuid.UUID]
) -> None:
    request = AuditCreate.model_validate(
        {"dataset": "-", "stages": ["training", "metrics"], "training": {"epochs": 20}, "bootstrap": 0}
    )
    audit_id = new_audit(config=AuditConfig.from_dict(request.config_dict()).to_dict())
    graph = synthetic(80, seed=0)
    engine = Engine(load=lambda sessions, settings, claim: graph, compute=run_audit)
    outcome = runner.execute(str(audit_id), sessions=sessions, settings=settings, device="cpu", engine=engine)
    assert outcome.status == "succeeded"
    with sessions() as session:
        audit = session.get_one(Audit, audit_id)
        results = audit.results
    assert results is not None and list(results["timings"]) == ["training", "metrics"]
    assert results["influence_summary"] is None and not results["debiasing"] and results["validation"] is None
