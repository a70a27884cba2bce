"""One attempt at one audit: claim the row, load the graph, run `bind_core`, store the outcome.

Celery-free so that it can be called and tested directly: follow-up tasks (influence chunks, webhook deliveries)
go through the :class:`~app.core.publisher.Publisher` it is given. `app.audits.tasks` is the task's body.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypedDict

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.audits import repository as jobs
from app.audits.budget import check_budget, cost_of
from app.audits.engine import LIBRARY, AuditOutput, Engine
from app.audits.failures import problem_for
from app.audits.guard import AuditGuard, LimitExceeded
from app.audits.model_artifacts import KeptModels, store_kept
from app.audits.pace import PaceTracker
from app.audits.progress import ProgressReporter
from app.audits.repository import Claim
from app.audits.stages import OverallProgress
from app.core.db.tables import Audit, SuppliedModel
from app.core.lease import Lease, LeaseLost
from app.core.logs import audit_id as audit_id_var
from app.core.publisher import Publisher
from app.core.settings import Settings
from app.graphs.loading import GraphGone, load_graph
from app.graphs.model_inputs import carry_model_inputs
from app.influence import chunks
from app.influence.tasks import chunk_sender
from app.integrations.mlflow_log import log_succeeded_audit
from app.supplied.loading import ModelGone, prepare_model
from app.webhooks import events
from app.webhooks.tasks import send_deliveries
from bind_core import (
    AuditCancelled,
    AuditConfig,
    ConfigError,
    DatasetNotFoundError,
    Graph,
)
from bind_core.pipeline import Caveat, planned_stages, retrained_form, weight_names
from bind_core.pipeline.results import EdgeRow, InfluenceRow

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
    engine: Engine = LIBRARY,
) -> Outcome:
    """Run one attempt at the audit whose turn it is (see `app.audits.repository.claim`): the message names
    ``audit_id``, but a free worker takes the next audit in the rotation between tenants (`app.audits.turns`),
    which may be another one; the returned outcome names the audit that ran. Claim, then compute (load the graph,
    run the audit under the guard), then store.

    With ``BIND_INFLUENCE_CHUNKS`` above 1 and a training set of at least ``BIND_INFLUENCE_CHUNK_MIN_TRAIN``
    nodes, the influence estimate's per-node part is split into chunks (`app.influence.chunks`): ``send_chunks``
    sends their tasks to the other workers (default: through ``publisher``), and this one computes whatever
    they have not taken. The webhook deliveries of the outcome are sent through ``publisher``; without one they
    wait for :func:`app.webhooks.delivery.resend_stale`. ``engine`` loads and computes (:data:`LIBRARY`; tests
    pass a double).

    Never raises for a problem with the audit itself: a failure is recorded on the row. Database errors
    propagate: the attempt's heartbeat then stops, and the sweeper retries the audit (at most
    ``BIND_MAX_ATTEMPTS`` attempts in all).
    """
    claim = _claim(audit_id, sessions, settings, device)
    if isinstance(claim, Outcome):
        return claim
    if send_chunks is None and publisher is not None:
        send_chunks = chunk_sender(publisher)
    attempt = Attempt(claim, sessions, settings, device, engine, send_chunks, publisher)
    computed = attempt.compute()
    if isinstance(computed, Exception):
        return _store_failure(attempt, computed, publisher)
    if isinstance(computed, Outcome):
        return computed
    return _store_success(attempt, computed, publisher)


def _claim(audit_id: str, sessions: sessionmaker[Session], settings: Settings, device: str) -> Claim | Outcome:
    """The claimed audit, or the outcome of a message with nothing to run."""
    try:
        key = uuid.UUID(audit_id)
    except ValueError:
        log.error("bind.run_audit got a malformed audit id %r; dropping it", audit_id)
        return Outcome(audit_id, "skipped")
    with sessions.begin() as session:
        claim = jobs.claim(
            session,
            key,
            device=device,
            heartbeat_timeout=settings.heartbeat_timeout,
            max_attempts=settings.max_attempts,
            max_running=settings.tenant_max_running,
        )
    if claim is None:
        log.info(
            "nothing to run for audit %s's message (no queued audit may start; it is finished, cancelled "
            "or running elsewhere)",
            audit_id,
        )
        return Outcome(audit_id, "skipped")
    if claim.audit_id != key:
        log.info("audit %s's message: audit %s has the turn", audit_id, claim.audit_id)
    audit_id_var.set(str(claim.audit_id)[:64])  # the caller (`app.audits.tasks.run_audit`) resets it
    log.info("audit %s: attempt %d on %s", claim.audit_id, claim.attempt, device)
    return claim


class Payload(TypedDict):
    """What :func:`app.audits.repository.succeed` stores of a computed audit (its keyword arguments)."""

    results: dict[str, Any]
    influence: list[InfluenceRow]
    edges: Iterator[EdgeRow]
    weights: bytes | None
    model_config: dict[str, Any] | None


@dataclass
class Computed:
    """A computed audit, ready to store: the stored payload, and the result it came from."""

    payload: Payload
    result: AuditOutput
    kept: KeptModels | None = None
    """Each debiasing budget's retrained model, to store with the results (``model_artifacts``)."""


@dataclass
class Attempt:
    """One attempt's compute step: load the graph, check the budget, prepare a supplied model and run the audit,
    with progress, heartbeats and the resource guard."""

    claim: Claim
    sessions: sessionmaker[Session]
    settings: Settings
    device: str
    engine: Engine
    send_chunks: chunks.SendChunks | None
    publisher: Publisher | None = None
    stage: str | None = None
    pace: PaceTracker | None = None
    guard: AuditGuard = field(init=False)

    def __post_init__(self) -> None:
        self.guard = AuditGuard(
            memory=self.settings.audit_memory_guard,
            seconds=self.settings.audit_max_seconds,
            address_space=self.device == "cpu",
        )

    @property
    def audit_id(self) -> str:
        return str(self.claim.audit_id)

    def compute(self) -> Computed | Outcome | Exception:
        """The computed audit; the outcome of a cancelled or lost attempt; or the exception that failed it."""

        def beat(stage: str | None, progress: float | None) -> Lease:
            pace = self.pace.record() if stage is not None and self.pace is not None else None
            with self.sessions.begin() as session:
                return jobs.beat(session, self.claim, stage, progress, pace)

        reporter = ProgressReporter(
            beat, min_interval=self.settings.progress_interval, heartbeat_interval=self.settings.heartbeat_interval
        )
        try:
            with reporter, self.guard:
                computed = self._run(reporter)
                reporter.check()
                return computed
        except AuditCancelled:
            log.info(
                "audit %s: stopped in stage %s; %d bytes of resident memory added at most",
                self.audit_id,
                self.stage,
                self.guard.added_peak,
            )
            return _cancelled(self.sessions, self.claim)
        except LeaseLost:
            if _erased(self.sessions, self.claim):  # a distributed estimate's plan went with the erased audit
                return _cancelled(self.sessions, self.claim)
            log.warning(
                "audit %s: attempt %d lost its lease; another attempt owns it", self.audit_id, self.claim.attempt
            )
            return Outcome(self.audit_id, "lost", self.claim.attempt)
        except Exception as exc:
            return exc

    def _run(self, reporter: ProgressReporter) -> Computed:
        claim, sessions = self.claim, self.sessions
        graph = self.engine.load(sessions, self.settings, claim)
        config = AuditConfig.from_dict(claim.config)
        _check_budget(sessions, claim, graph, config, self.settings)
        plan = planned_stages(config)
        overall = OverallProgress(plan)
        with sessions() as session:
            self.pace = PaceTracker(plan, earlier=jobs.earlier_timings(session, claim))

        def progress(current: str, fraction: float) -> None:
            self.guard.check()
            self.stage, total = overall(current, fraction)
            if current == self.stage and self.pace is not None:  # not a sub-step, nor an earlier stage's loop
                self.pace.observe(current, fraction)
            reporter(self.stage, total)

        model, supplied, parts = None, None, None
        if claim.model_id is not None:
            with sessions() as session:
                parts = jobs.model_parts(session, claim.model_id)
                confirmed, pending = jobs.registered_outputs(session, claim.model_id, claim.graph_id)
            progress("training", 0.0)
            graph, carried = carry_model_inputs(
                sessions,
                lambda graph_id: load_graph(sessions, self.settings, graph_id, None),
                graph,
                claim.graph_id,
                claim.model_id,
            )
            model, supplied = prepare_model(
                parts,
                claim.model_id,
                graph,
                config,
                self.device,
                progress=lambda f: progress("training", f),
                carried=carried,
                confirmed=confirmed,
                outputs=pending,
            )
            if pending is not None and (supplied.get("outputs") or {}).get("matches"):
                with sessions.begin() as session:  # the registry says so, and later audits take it as found
                    jobs.confirm_outputs(session, claim.model_id, claim.graph_id, supplied["outputs"])
        kept = _sink(parts, self.settings, graph)
        distributed: dict[str, Any] | None = None
        n_chunks = chunks.wanted(self.settings, graph)
        coordinator = None
        if n_chunks and "influence" in config.stages:
            coordinator = chunks.Coordinator(
                sessions,
                self.settings,
                claim.audit_id,
                claim.attempt,
                model,
                graph,
                self.device,
                n_chunks,
                progress,
                self.send_chunks,
            )
        result = self.engine.compute(
            graph,
            config,
            progress=progress,
            device=self.device,
            model=model,
            chunk_runner=coordinator,
            keep=kept,
            deletion_threads=self.settings.deletion_threads,
            on_warnings=self._store_warnings,
        )
        if coordinator is not None:
            distributed = coordinator.record
        payload = _payload(result)
        if supplied is not None:
            payload["results"]["supplied_model"] = supplied
        if distributed is not None and payload["results"].get("influence_summary") is not None:
            payload["results"]["influence_summary"]["distributed"] = distributed
        return Computed(payload, result, kept)

    def _store_warnings(self, warnings: list[Caveat]) -> None:
        """The warnings known once the model and its metrics are in, stored while the audit runs with the
        ``audit.warned`` webhooks' deliveries (not again where an earlier attempt stored the same); a failed write
        does not stop the audit (its results carry them), and a lost lease is found by the next progress write."""
        try:
            with self.sessions.begin() as session:
                before = jobs.stored_warnings(session, self.claim)
                lease = jobs.warn(session, self.claim, warnings)
                new = lease is Lease.HELD and before != warnings
                deliveries = events.audit_warned(session, self.claim.audit_id) if new else []
        except Exception:
            log.warning("audit %s: could not store its early warnings", self.audit_id, exc_info=True)
            return
        _send(self.publisher, deliveries)


def _sink(parts: tuple[bytes, dict[str, Any]] | None, settings: Settings, graph: Graph) -> KeptModels:
    """Where the debiasing stage's retrained models go: exported in the audited model's form (a supplied model's:
    its config, with the graph's classes where it names them, and parameter names; else bind-audit's) and capped at
    ``BIND_MODEL_ARTIFACT_MAX_BYTES``."""
    classes = graph.summary().class_names or []
    form, names = (None, None) if parts is None else (retrained_form(parts[1], classes), weight_names(parts[0]))
    return KeptModels(form, names, settings.model_artifact_max_bytes)


def _store_failure(attempt: Attempt, exc: Exception, publisher: Publisher | None) -> Outcome:
    """Record why the attempt failed (a problem document), and tell the webhooks."""
    claim, guard, stage = attempt.claim, attempt.guard, attempt.stage
    over = exc if isinstance(exc, LimitExceeded) else guard.memory_failure(exc)
    if over is not None:
        log.warning(
            "audit %s stopped in stage %s: %s (resident memory added: %d bytes at most)",
            attempt.audit_id,
            stage,
            over,
            guard.added_peak,
        )
    else:
        log.error("audit %s failed in stage %s (attempt %d)", attempt.audit_id, stage, claim.attempt, exc_info=exc)
    problem = problem_for(_unwrap(over or exc), audit_id=attempt.audit_id, stage=stage)
    with attempt.sessions.begin() as session:
        lease = jobs.fail(session, claim, problem)
        deliveries = events.audit_finished(session, claim.audit_id) if lease is Lease.HELD else []
    _send(publisher, deliveries)
    return _settled(attempt.sessions, claim, lease, "failed")


def _store_success(attempt: Attempt, computed: Computed, publisher: Publisher | None) -> Outcome:
    """Store the results, the influence and edge rows, the weights and the debiasing budgets' retrained models in one
    transaction (a fenced miss writes
    nothing), tell the webhooks and log the audit to MLflow when configured."""
    claim, payload = attempt.claim, computed.payload
    with attempt.sessions.begin() as session:
        lease = jobs.succeed(session, claim, **payload)
        if lease is Lease.HELD and computed.kept is not None:
            store_kept(session, claim.audit_id, computed.kept)
        deliveries = events.audit_finished(session, claim.audit_id) if lease is Lease.HELD else []
    _send(publisher, deliveries)
    outcome = _settled(attempt.sessions, claim, lease, "succeeded")
    if outcome.status == "succeeded":
        log_succeeded_audit(
            attempt.settings,
            attempt.audit_id,
            computed.result.config.to_dict(),
            payload["results"],
            payload["influence"],
        )
    return outcome


def _check_budget(
    sessions: sessionmaker[Session], claim: Claim, graph: Graph, config: AuditConfig, settings: Settings
) -> None:
    """The API's budget check again, now that the graph is loaded (a built-in dataset's sizes are known only
    here; the limits may also have changed since the audit was queued)."""
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


def _send(publisher: Publisher | None, deliveries: list[uuid.UUID]) -> None:
    """Send the webhook deliveries the outcome's transaction wrote (a lost send is re-sent later)."""
    if publisher is None or not deliveries:
        return
    try:
        send_deliveries(publisher, deliveries)
    except Exception:
        log.warning("could not send %d webhook deliveries; they are re-sent later", len(deliveries), exc_info=True)


def _payload(result: AuditOutput) -> Payload:
    """What `jobs.succeed` stores, prepared before its transaction (an error here fails the audit); the edge rows
    are made a batch at a time while they are inserted (they can be millions)."""
    model = result.model
    influence = result.influence_rows()
    jobs.check_influence_rows(influence)
    return {
        "results": result.to_dict(),
        "influence": influence,
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


def _erased(sessions: sessionmaker[Session], claim: Claim) -> bool:
    """Whether the audit's row is gone (``DELETE /v1/audits/{id}``, a graph's purge, retention)."""
    with sessions() as session:
        return session.scalar(select(Audit.id).where(Audit.id == claim.audit_id)) is None


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
