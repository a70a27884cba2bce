"""One attempt at one audit: claim the row, load the graph, run `bind_core`, store the outcome.

Celery-free so that it can be called and tested directly: follow-up tasks (influence chunks, webhook deliveries)
go through the :class:`~app.core.publisher.Publisher` it is given. `app.audits.tasks` is the task's body.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.audits import repository as jobs
from app.audits.budget import check_budget, cost_of
from app.audits.failures import problem_for
from app.audits.guard import AuditGuard, LimitExceeded
from app.audits.progress import ProgressReporter
from app.audits.repository import Claim
from app.audits.stages import OverallProgress
from app.core.db.tables import SuppliedModel
from app.core.lease import Lease, LeaseLost
from app.core.logs import audit_id as audit_id_var
from app.core.publisher import Publisher
from app.core.settings import Settings
from app.graphs.loading import GraphGone, load_graph
from app.influence import chunks
from app.influence.tasks import chunk_sender
from app.integrations.mlflow_log import log_succeeded_audit
from app.supplied.loading import ModelGone, prepare_model
from app.webhooks import events
from app.webhooks.tasks import send_deliveries
from bind_core import (
    AuditCancelled,
    AuditConfig,
    AuditResult,
    ConfigError,
    DatasetNotFoundError,
    Graph,
    TrainedModel,
    run_audit,
)
from bind_core.pipeline import planned_stages

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """What an attempt did: ``skipped`` (not ours), ``succeeded``, ``failed``, ``cancelled`` or ``lost``."""

    audit_id: str
    status: str
    attempt: int | None = None


def execute(
    audit_id: str,
    *,
    sessions: sessionmaker[Session],
    settings: Settings,
    device: str,
    publisher: Publisher | None = None,
    send_chunks: chunks.SendChunks | None = None,
) -> Outcome:
    """Run one attempt at the audit whose turn it is (see `app.audits.repository.claim`): the message names
    ``audit_id``, but a free worker takes the next audit in the rotation between tenants (`app.audits.turns`),
    which may be another one; the returned outcome names the audit that ran.

    With ``BIND_INFLUENCE_CHUNKS`` above 1 and a training set of at least ``BIND_INFLUENCE_CHUNK_MIN_TRAIN``
    nodes, the influence estimate's per-node part is split into chunks (`app.influence.chunks`): ``send_chunks``
    sends their tasks to the other workers (default: through ``publisher``), and this one computes whatever
    they have not taken. The webhook deliveries of the outcome are sent through ``publisher``; without one they
    wait for :func:`app.webhooks.delivery.resend_stale`.

    Never raises for a problem with the audit itself: a failure is recorded on the row. Database errors
    propagate: the attempt's heartbeat then stops, and the sweeper retries the audit (at most
    ``BIND_MAX_ATTEMPTS`` attempts in all).
    """
    if send_chunks is None and publisher is not None:
        send_chunks = chunk_sender(publisher)
    try:
        key = uuid.UUID(audit_id)
    except ValueError:
        log.error("bind.run_audit got a malformed audit id %r; dropping it", audit_id)
        return Outcome(audit_id, "skipped")
    with sessions.begin() as session:
        claim = jobs.claim(
            session, key, device=device, heartbeat_timeout=settings.heartbeat_timeout,
            max_attempts=settings.max_attempts, max_running=settings.tenant_max_running,
        )  # fmt: skip
    if claim is None:
        log.info("nothing to run for audit %s's message (no queued audit may start; it is finished, cancelled "
                 "or running elsewhere)", audit_id)  # fmt: skip
        return Outcome(audit_id, "skipped")
    if claim.audit_id != key:
        log.info("audit %s's message: audit %s has the turn", audit_id, claim.audit_id)
    audit_id = str(claim.audit_id)
    audit_id_var.set(audit_id[:64])  # the caller (`app.audits.tasks.run_audit`) resets it
    log.info("audit %s: attempt %d on %s", audit_id, claim.attempt, device)

    def beat(stage: str | None, progress: float | None) -> Lease:
        with sessions.begin() as session:
            return jobs.beat(session, claim, stage, progress)

    reporter = ProgressReporter(
        beat, min_interval=settings.progress_interval, heartbeat_interval=settings.heartbeat_interval
    )
    stage: str | None = None
    guard = AuditGuard(
        memory=settings.audit_memory_guard,
        seconds=settings.audit_max_seconds,
        address_space=device == "cpu",
    )
    try:
        with reporter, guard:
            graph = _load_graph(sessions, claim, settings)
            config = AuditConfig.from_dict(claim.config)
            _check_budget(sessions, claim, graph, config, settings)
            overall = OverallProgress(planned_stages(config))

            def progress(current: str, fraction: float) -> None:
                nonlocal stage
                guard.check()
                stage, total = overall(current, fraction)
                reporter(stage, total)

            model, supplied = None, None
            if claim.model_id is not None:
                with sessions() as session:
                    parts = jobs.model_parts(session, claim.model_id)
                progress("training", 0.0)
                model, supplied = prepare_model(
                    parts, claim.model_id, graph, config, device, progress=lambda f: progress("training", f)
                )
            distributed: dict[str, Any] | None = None
            n_chunks = chunks.wanted(settings, graph)
            if n_chunks and "influence" in config.stages:
                result, distributed = _run_distributed(
                    graph, config, claim, model, n_chunks, sessions=sessions, settings=settings, device=device,
                    progress=progress, send_chunks=send_chunks,
                )  # fmt: skip
            else:
                result = run_audit(graph, config, progress=progress, device=device, model=model)
            reporter.check()
            payload = _payload(result)
            if supplied is not None:
                payload["results"]["supplied_model"] = supplied
            if distributed is not None and payload["results"].get("influence_summary") is not None:
                payload["results"]["influence_summary"]["distributed"] = distributed
    except AuditCancelled:
        log.info("audit %s: stopped in stage %s; %d bytes of resident memory added at most", audit_id, stage,
                 guard.added_peak)  # fmt: skip
        return _cancelled(sessions, claim)
    except LeaseLost:
        log.warning("audit %s: attempt %d lost its lease; another attempt owns it", audit_id, claim.attempt)
        return Outcome(audit_id, "lost", claim.attempt)
    except Exception as exc:
        over = exc if isinstance(exc, LimitExceeded) else guard.memory_failure(exc)
        if over is not None:
            log.warning("audit %s stopped in stage %s: %s (resident memory added: %d bytes at most)", audit_id,
                        stage, over, guard.added_peak)  # fmt: skip
        else:
            log.exception("audit %s failed in stage %s (attempt %d)", audit_id, stage, claim.attempt)
        problem = problem_for(_unwrap(over or exc), audit_id=audit_id, stage=stage)
        with sessions.begin() as session:
            lease = jobs.fail(session, claim, problem)
            deliveries = events.audit_finished(session, claim.audit_id) if lease is Lease.HELD else []
        _send(publisher, deliveries)
        return _settled(sessions, claim, lease, "failed")
    with sessions.begin() as session:  # one transaction; a fenced miss has written nothing
        lease = jobs.succeed(session, claim, **payload)
        deliveries = events.audit_finished(session, claim.audit_id) if lease is Lease.HELD else []
    _send(publisher, deliveries)
    outcome = _settled(sessions, claim, lease, "succeeded")
    if outcome.status == "succeeded":
        log_succeeded_audit(settings, audit_id, result.config.to_dict(), payload["results"], payload["influence"])
    return outcome


def _check_budget(
    sessions: sessionmaker[Session], claim: Claim, graph: Graph, config: AuditConfig, settings: Settings
) -> None:
    """The API's budget check again, now that the graph is loaded (a built-in dataset's sizes are known only
    here; the limits may also have changed since the audit was queued)."""
    if not isinstance(graph, Graph):  # a stand-in (the runner's tests)
        return
    supplied = None
    if claim.model_id is not None:
        with sessions() as session:
            supplied = session.scalar(select(SuppliedModel.config).where(SuppliedModel.id == claim.model_id))
    try:
        cost = cost_of(config, graph.summary(), supplied)
    except (KeyError, TypeError, ValueError):
        log.warning("audit %s: its cost could not be estimated; running it unchecked", claim.audit_id, exc_info=True)
        return
    check_budget(cost, settings)


def _run_distributed(
    graph: Graph,
    config: AuditConfig,
    claim: Claim,
    model: TrainedModel | None,
    n_chunks: int,
    *,
    sessions: sessionmaker[Session],
    settings: Settings,
    device: str,
    progress: chunks.Progress,
    send_chunks: chunks.SendChunks | None,
) -> tuple[AuditResult, dict[str, Any] | None]:
    """`run_audit` with the influence estimate's per-node part spread over workers (`app.influence.chunks`): the
    coordinator receives the plan and the model (trained by `run_audit`, or the supplied one) and returns the
    chunks. Also returns how many chunks ran, on which workers and devices."""
    coordinator = chunks.Coordinator(
        sessions, settings, claim.audit_id, claim.attempt, model, graph, device, n_chunks, progress, send_chunks
    )
    result = run_audit(graph, config, progress=progress, device=device, model=model, chunk_runner=coordinator)
    return result, coordinator.record


def _send(publisher: Publisher | None, deliveries: list[uuid.UUID]) -> None:
    """Send the webhook deliveries the outcome's transaction wrote (a lost send is re-sent later)."""
    if publisher is None or not deliveries:
        return
    try:
        send_deliveries(publisher, deliveries)
    except Exception:
        log.warning("could not send %d webhook deliveries; they are re-sent later", len(deliveries), exc_info=True)


def _load_graph(sessions: sessionmaker[Session], claim: Claim, settings: Settings) -> Graph:
    return load_graph(sessions, settings, claim.graph_id, claim.dataset)


def _payload(result: AuditResult) -> dict[str, Any]:
    """What `jobs.succeed` stores, prepared before its transaction (an error here fails the audit); the edge rows
    are made a batch at a time while they are inserted (they can be millions)."""
    model = getattr(result, "model", None)
    return {
        "results": result.to_dict(),
        "influence": result.influence_rows(),
        "edges": result.iter_edge_rows(),
        "weights": None if model is None else model.to_bytes(),
        "model_config": None if model is None else model.config_dict(),
    }


def _settled(sessions: sessionmaker[Session], claim: Claim, lease: Lease, status: str) -> Outcome:
    if lease is Lease.CANCELLED:
        return _cancelled(sessions, claim)
    if lease is Lease.LOST:
        log.warning("audit %s: attempt %d lost its lease before storing", claim.audit_id, claim.attempt)
        return Outcome(str(claim.audit_id), "lost", claim.attempt)
    log.info("audit %s: %s (attempt %d)", claim.audit_id, status, claim.attempt)
    return Outcome(str(claim.audit_id), status, claim.attempt)


def _cancelled(sessions: sessionmaker[Session], claim: Claim) -> Outcome:
    with sessions.begin() as session:
        jobs.close_cancelled(session, claim)
    log.info("audit %s: cancelled during attempt %d", claim.audit_id, claim.attempt)
    return Outcome(str(claim.audit_id), "cancelled", claim.attempt)


def _unwrap(exc: BaseException) -> BaseException:
    """A `GraphGone` is reported like a missing dataset: the input the audit names is not there."""
    if isinstance(exc, GraphGone):
        return DatasetNotFoundError(str(exc))
    if isinstance(exc, ModelGone):
        return ConfigError(str(exc))
    return exc
