"""One attempt at a what-if verification: claim the job, load the audit's graph and stored model, retrain without the
set over the seeds (:func:`bind_core.pipeline.verify_what_if`), store the result. Celery-free, like
``app.audits.run``; the worker's task calls :func:`execute`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.audits.failures import problem_for
from app.audits.guard import AuditGuard
from app.audits.model_artifacts import export_form, store_model_artifact
from app.audits.pace import PaceTracker
from app.audits.progress import ProgressReporter
from app.core.db.tables import Audit
from app.core.lease import Lease, LeaseLost
from app.core.settings import Settings
from app.graphs.loading import GraphGone, load_graph
from app.graphs.model_inputs import carry_model_inputs
from app.what_ifs import repository as jobs
from app.what_ifs.repository import JobClaim
from bind_core import AuditCancelled, AuditConfig, DatasetNotFoundError, Graph, TrainedModel
from bind_core.codec import encode
from bind_core.pipeline import VerifiedSet, verify_what_if

log = logging.getLogger(__name__)
STAGE = "verifying"


class Verify(Protocol):
    """:func:`bind_core.pipeline.verify_what_if`'s signature, as the attempt calls it (tests pass a wrapper)."""

    def __call__(
        self,
        weights: bytes,
        model_config: dict[str, Any],
        graph: Graph,
        config: AuditConfig,
        positions: list[int],
        *,
        seeds: list[int],
        random_sets: int,
        device: str = "cpu",
        progress: Callable[[float], None] | None = None,
    ) -> VerifiedSet: ...


@dataclass(frozen=True)
class _Audited:
    """What the job needs of its audit: where its graph is, its config and its stored model."""

    graph_id: uuid.UUID | None
    dataset: str | None
    config: dict[str, Any]
    weights: bytes
    model_config: dict[str, Any]
    model_id: uuid.UUID | None = None
    """The supplied model audited: on another version of its graph, its inputs are carried over."""


def _audited(sessions: sessionmaker[Session], audit_id: uuid.UUID) -> _Audited:
    with sessions() as session:
        row = session.execute(
            select(
                Audit.graph_id,
                Audit.dataset,
                Audit.config,
                Audit.model_weights,
                Audit.model_config,
                Audit.model_id,
                Audit.results["supplied_model"]["carried"].label("carried"),
            ).where(Audit.id == audit_id)
        ).one_or_none()
    if row is None or row.model_weights is None or row.model_config is None:
        raise GraphGone(f"audit {audit_id} or its stored model is gone")
    if row.model_id is None and isinstance(row.carried, dict):  # its inputs were carried: from where is gone
        raise GraphGone(
            f"audit {audit_id} read its graph as the supplied model's registration did, and that model is gone"
        )
    return _Audited(row.graph_id, row.dataset, row.config, row.model_weights, row.model_config, row.model_id)


def execute(
    job_id: str, *, sessions: sessionmaker[Session], settings: Settings, device: str, compute: Verify = verify_what_if
) -> str:
    """Run one attempt at the what-if job ``job_id`` (a no-op for a finished or cancelled job, or one running
    elsewhere).

    Args:
        job_id: the job's id (the task's argument).
        sessions: the worker's sessions.
        settings: the service's settings (heartbeats, attempts, the data root).
        device: where to retrain.
        compute: the verification (tests pass a wrapper).

    Returns:
        ``skipped``, ``succeeded``, ``failed``, ``cancelled`` or ``lost``. Never raises for a problem with the job
        itself (it is recorded on the row); database errors propagate and the sweeper retries the job.
    """
    claim = _claim(job_id, sessions, settings, device)
    if claim is None:
        return "skipped"

    pace = PaceTracker((STAGE,))

    def beat(stage: str | None, progress: float | None) -> Lease:
        with sessions.begin() as session:
            return jobs.beat(session, claim, progress, pace.record() if stage is not None else None)

    reporter = ProgressReporter(
        beat, min_interval=settings.progress_interval, heartbeat_interval=settings.heartbeat_interval
    )
    guard = AuditGuard(
        memory=settings.audit_memory_guard, seconds=settings.audit_max_seconds, address_space=device == "cpu"
    )

    def progress(fraction: float) -> None:
        guard.check()  # the audits' limits (BIND_AUDIT_MEMORY_GUARD, BIND_AUDIT_MAX_SECONDS) hold here too
        pace.observe(STAGE, fraction)
        reporter(STAGE, fraction)

    try:
        with reporter, guard:
            found = _compute(claim, sessions, settings, device, compute, progress)
            reporter.check()
    except AuditCancelled:
        return _cancelled(sessions, claim)
    except LeaseLost:
        log.warning("what-if %s: attempt %d lost its lease", claim.job_id, claim.attempt)
        return "lost"
    except Exception as exc:
        log.warning("what-if %s failed (attempt %d)", claim.job_id, claim.attempt, exc_info=True)
        return _store(sessions, claim, None, _problem(guard.memory_failure(exc) or exc, claim))
    return _store(sessions, claim, encode(found.verification), None, kept=_kept(found, settings))


def _claim(job_id: str, sessions: sessionmaker[Session], settings: Settings, device: str) -> JobClaim | None:
    try:
        key = uuid.UUID(job_id)
    except ValueError:
        log.error("%s got a malformed what-if id %r; dropping it", STAGE, job_id)
        return None
    with sessions.begin() as session:
        claim = jobs.claim(
            session,
            key,
            device=device,
            heartbeat_timeout=settings.heartbeat_timeout,
            max_attempts=settings.max_attempts,
        )
    if claim is None:
        log.info("nothing to run for what-if %s (finished, cancelled or running elsewhere)", job_id)
    return claim


def _compute(
    claim: JobClaim,
    sessions: sessionmaker[Session],
    settings: Settings,
    device: str,
    compute: Verify,
    progress: Callable[[float], None],
) -> VerifiedSet:
    audited = _audited(sessions, claim.audit_id)
    progress(0.0)
    graph = load_graph(sessions, settings, audited.graph_id, audited.dataset)
    graph, _ = carry_model_inputs(  # a supplied model on another version: read it as its audit did
        sessions,
        lambda graph_id: load_graph(sessions, settings, graph_id, None),
        graph,
        audited.graph_id,
        audited.model_id,
    )
    return compute(
        audited.weights,
        audited.model_config,
        graph,
        AuditConfig.from_dict(audited.config),
        claim.positions,
        seeds=claim.seeds,
        random_sets=claim.random_sets,
        device=device,
        progress=progress,
    )


def _problem(exc: BaseException, claim: JobClaim) -> dict[str, Any]:
    """The problem document of a failed attempt (a missing graph reads like a missing dataset)."""
    if isinstance(exc, GraphGone):
        exc = DatasetNotFoundError(str(exc))
    problem = problem_for(exc, audit_id=str(claim.audit_id), stage=STAGE)
    problem["instance"] = f"/v1/audits/{claim.audit_id}/what-ifs/{claim.job_id}"
    return problem


@dataclass(frozen=True)
class _Kept:
    """The model retrained without the set (the first seed's), to keep with the job (``model_artifacts``)."""

    model: TrainedModel
    max_bytes: int


def _kept(found: VerifiedSet, settings: Settings) -> _Kept | None:
    """What a verification keeps: the model it retrained without the set, when it has one."""
    return None if found.retrained is None else _Kept(found.retrained, settings.model_artifact_max_bytes)


def _store(
    sessions: sessionmaker[Session],
    claim: JobClaim,
    result: dict[str, Any] | None,
    error: dict[str, Any] | None,
    *,
    kept: _Kept | None = None,
) -> str:
    """Finish the attempt: the result or the problem, and (with the result, in the same transaction, only while
    this attempt holds the job) the retrained model, downloadable and registrable as the audit's models are."""
    with sessions.begin() as session:
        lease = jobs.finish(session, claim, result=result, error=error)
        if lease is Lease.HELD and kept is not None:
            _keep_model(session, claim, kept)
    if lease is Lease.CANCELLED:
        return _cancelled(sessions, claim)
    if lease is Lease.LOST:
        return "lost"
    status = "failed" if error is not None else "succeeded"
    log.info("what-if %s: %s (attempt %d)", claim.job_id, status, claim.attempt)
    return status


def _keep_model(session: Session, claim: JobClaim, kept: _Kept) -> None:
    """Keep the verification's retrained model in the audited model's form (:func:`store_model_artifact`)."""
    tenant_id = session.scalar(select(Audit.tenant_id).where(Audit.id == claim.audit_id))
    if tenant_id is None:
        return  # the audit was erased meanwhile: nothing to keep it with
    form, names = export_form(session, claim.audit_id)
    store_model_artifact(
        session,
        tenant_id=tenant_id,
        audit_id=claim.audit_id,
        source="what_if",
        index_or_id=claim.job_id,
        model=kept.model,
        max_bytes=kept.max_bytes,
        form=form,
        names=names,
    )


def _cancelled(sessions: sessionmaker[Session], claim: JobClaim) -> str:
    with sessions.begin() as session:
        jobs.close_cancelled(session, claim)
    log.info("what-if %s: cancelled during attempt %d", claim.job_id, claim.attempt)
    return "cancelled"
