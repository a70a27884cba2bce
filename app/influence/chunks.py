"""Distributed influence: the per-training-node part of an estimate split into chunks, run by any worker.

The audit's worker (the *coordinator*) makes the estimate's shared half, the `InfluencePlan` (the Hessian
solve, done once), and hands `run_audit` a ``chunk_runner`` (:class:`Coordinator`) that

1. stores the plan, the model's weights and one ``influence_chunks`` row per chunk, in one transaction
   (fenced on the audit attempt; a new attempt replaces an older one's rows);
2. after the commit, sends a Celery group of chunk tasks (by plan id and chunk index);
3. claims pending chunks itself (``SELECT ... FOR UPDATE SKIP LOCKED``) and computes them while it waits,
   so one worker with concurrency 1 never waits for a task stuck behind its own audit;
4. reclaims chunks whose worker stopped beating (``BIND_HEARTBEAT_TIMEOUT``), so a dead worker is never
   waited on; returns when every chunk is ``done``, with their results; deletes the rows.

A chunk task (:func:`execute_chunk`, in any worker) loads the graph as the runner does, rebuilds the model
from the stored weights, claims its chunk (skipping one that is done or held by a live worker, or whose
audit attempt is over), computes it and stores the result once: the write matches only a chunk not yet
``done``, and a chunk computed twice gives the same numbers anyway, so nothing is corrupted by a race.

Celery-free, like `app.audits.run`; `app.influence.tasks` holds the task and the sender, `worker.tasks` registers it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from sqlalchemy.orm import Session, sessionmaker

from app.core.lease import LeaseLost
from app.core.settings import Settings
from app.graphs.model_inputs import carry_model_inputs
from app.influence.chunk_rows import (
    ChunkClaim,
    DoneChunk,
    PlanSource,
    claim_chunk,
    counts,
    create_plan,
    delete_plan,
    done_chunks,
    is_claimable,
    plan_parts,
    plan_source,
    release,
    store,
    touch,
)
from bind_core import Graph, TrainedModel
from bind_core.influence.distributed import (
    ChunkContext,
    InfluenceChunk,
    InfluencePlan,
    chunk_bounds,
    chunk_context,
    estimate_chunk,
)

log = logging.getLogger(__name__)

Progress = Callable[[str, float], None]
"""The audit's progress callback (``progress(stage, fraction)``); raises when the audit is no longer ours."""

SendChunks = Callable[[uuid.UUID, list[int]], None]
"""Sends one chunk task per index of a stored plan (after the commit that stored it)."""

LoadGraph = Callable[[uuid.UUID | None, str | None], Graph]
"""Loads an audit's graph from its ``graph_id`` or ``dataset``, as the runner does."""


def worker_name() -> str:
    """This process, as recorded on the chunks it computes: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def wanted(settings: Settings, graph: Graph) -> int:
    """How many chunks the audit of ``graph`` splits its influence estimate into (0: not split)."""
    if settings.influence_chunks <= 1:
        return 0
    num_train = int(graph.train_idx.numel())
    if num_train < max(settings.influence_chunk_min_train, 2):
        return 0
    return min(settings.influence_chunks, num_train)


# ---------------------------------------------------------------------------------------------- computing


class ChunkLease:
    """A thread that keeps a claimed chunk's heartbeat fresh while it is computed (a context manager)."""

    def __init__(self, sessions: sessionmaker[Session], claim: ChunkClaim, interval: float) -> None:
        self._sessions, self._claim, self._interval = sessions, claim, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bind-chunk-lease", daemon=True)
        self.lost = False

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                with self._sessions.begin() as session:
                    held = touch(session, self._claim)
            except Exception:  # a missed beat is retried; a long outage lets another worker take the chunk
                log.warning("chunk heartbeat failed", exc_info=True)
                continue
            if not held:
                self.lost = True
                return

    def __enter__(self) -> ChunkLease:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Loaded:
    """A plan with the graph and the model it was made for, ready to compute chunks."""

    plan_id: uuid.UUID
    plan: InfluencePlan
    model: TrainedModel
    graph: Graph
    fm: ChunkContext


def compute(
    sessions: sessionmaker[Session], claim: ChunkClaim, loaded: Loaded, heartbeat_interval: float
) -> tuple[bool, float]:
    """Compute a claimed chunk under its lease and store it; ``(stored, seconds)``.

    ``stored`` is ``False`` when another worker had already stored it. On an error the chunk is released
    (so that another worker, or the coordinator, takes it at once) and the error raised.
    """
    start = time.perf_counter()
    try:
        with ChunkLease(sessions, claim, heartbeat_interval):
            chunk = estimate_chunk(loaded.plan, loaded.model, loaded.graph, claim.start, claim.stop, fm=loaded.fm)
        data = chunk.to_bytes()
    except BaseException:
        try:
            with sessions.begin() as session:
                release(session, claim)
        except Exception:
            log.warning("could not release chunk %d of plan %s", claim.index, claim.plan_id, exc_info=True)
        raise
    seconds = time.perf_counter() - start
    with sessions.begin() as session:
        stored = store(session, claim, data, seconds)
    return stored, seconds


_cache: Loaded | None = None
_cache_lock = threading.Lock()


def load_plan(sessions: sessionmaker[Session], source: PlanSource, load_graph: LoadGraph, device: str) -> Loaded | None:
    """The plan, graph and model of ``source`` (kept for the next chunk of the same plan in this process)."""
    global _cache
    with _cache_lock:
        if _cache is not None and _cache.plan_id == source.plan_id:
            return _cache
    with sessions() as session:
        parts = plan_parts(session, source.plan_id)
    if parts is None:
        return None
    plan_bytes, weights, config = parts
    graph = load_graph(source.graph_id, source.dataset)
    graph, _ = carry_model_inputs(  # read the version as the attempt did: a supplied model's inputs carried over
        sessions, lambda graph_id: load_graph(graph_id, None), graph, source.graph_id, source.model_id
    )
    model = TrainedModel.from_bytes(weights, config)
    model.module.to(device)
    plan = InfluencePlan.from_bytes(plan_bytes)
    loaded = Loaded(source.plan_id, plan, model, graph, chunk_context(plan, model, graph))
    with _cache_lock:
        _cache = loaded
    return loaded


def execute_chunk(
    plan_id: str,
    index: int,
    *,
    sessions: sessionmaker[Session],
    settings: Settings,
    device: str,
    load_graph: LoadGraph,
    worker: str | None = None,
) -> str:
    """The chunk task: compute chunk ``index`` of plan ``plan_id`` if it is still wanted and free.

    Returns ``computed``, ``duplicate`` (computed, but another worker stored it first), ``skipped`` (done,
    or held by a live worker) or ``gone`` (the plan was deleted, or its audit attempt is over). Errors in
    the computation propagate after the chunk is released.
    """
    global _cache
    try:
        key = uuid.UUID(plan_id)
    except ValueError:
        log.error("bind.influence_chunk got a malformed plan id %r; dropping it", plan_id)
        return "gone"
    worker = worker or worker_name()
    with sessions() as session:
        source = plan_source(session, key)
        free = source is not None and is_claimable(session, key, index, settings.heartbeat_timeout)
    if source is None:
        with _cache_lock:
            _cache = None
        return "gone"
    if not free:
        log.info("chunk %d of plan %s: done or held by a live worker; skipped", index, plan_id)
        return "skipped"
    loaded = load_plan(sessions, source, load_graph, device)
    if loaded is None:
        return "gone"
    with sessions.begin() as session:
        if plan_source(session, key) is None:
            return "gone"
        claim = claim_chunk(
            session, key, worker=worker, device=device, lease_timeout=settings.heartbeat_timeout, index=index
        )
    if claim is None:
        log.info("chunk %d of plan %s: done or held by a live worker; skipped", index, plan_id)
        return "skipped"
    stored, seconds = compute(sessions, claim, loaded, settings.heartbeat_interval)
    log.info(
        "chunk %d of plan %s (positions %d..%d): %.3fs%s",
        index,
        plan_id,
        claim.start,
        claim.stop - 1,
        seconds,
        "" if stored else ", already stored by another worker",
    )
    return "computed" if stored else "duplicate"


# ---------------------------------------------------------------------------------------------- coordinating


@dataclass
class Coordinator:
    """The ``chunk_runner`` the runner hands `run_audit` (see the module docstring).

    ``progress(stage, fraction)`` is the audit's progress callback: called with ``"influence"`` as chunks
    complete, and while waiting, it raises `Cancelled` or `LeaseLost` when the audit is no longer this
    attempt's, which stops the wait. After a successful call, ``record`` says how the work was spread.
    """

    sessions: sessionmaker[Session]
    settings: Settings
    audit_id: uuid.UUID
    attempt: int
    model: TrainedModel | None
    """The model the plan was made for; ``None``: the one `run_audit` passes in with the plan."""
    graph: Graph
    device: str
    chunks: int
    progress: Progress
    send: SendChunks | None = None
    worker: str = field(default_factory=worker_name)
    poll: float = 0.2
    record: dict[str, Any] | None = None

    def __call__(self, plan: InfluencePlan, model: TrainedModel | None = None) -> list[InfluenceChunk]:
        self.model = model or self.model
        if self.model is None:
            raise ValueError("the coordinator needs the model the influence plan was made for")
        bounds = chunk_bounds(plan.num_train, self.chunks)
        weights, config = self.model.to_bytes(), self.model.config_dict()
        with self.sessions.begin() as session:
            plan_id = create_plan(
                session,
                audit_id=self.audit_id,
                attempt=self.attempt,
                plan=plan.to_bytes(),
                weights=weights,
                model_config=config,
                bounds=bounds,
            )
        log.info("audit %s: influence split into %d chunks (plan %s)", self.audit_id, len(bounds), plan_id)
        try:
            self._send(plan_id, len(bounds))
            return self._run(plan_id, plan)
        finally:
            try:
                with self.sessions.begin() as session:
                    delete_plan(session, plan_id)
            except Exception:  # left for the next plan's clean-up
                log.warning("could not delete influence plan %s", plan_id, exc_info=True)

    def _send(self, plan_id: uuid.UUID, n: int) -> None:
        if self.send is None:
            return
        try:
            self.send(plan_id, list(range(n)))
        except Exception:  # the broker is down: this worker computes every chunk itself
            log.warning("could not send the chunk tasks of plan %s; computing them here", plan_id, exc_info=True)

    def _run(self, plan_id: uuid.UUID, plan: InfluencePlan) -> list[InfluenceChunk]:
        loaded: Loaded | None = None
        while True:
            with self.sessions.begin() as session:
                claim = claim_chunk(
                    session,
                    plan_id,
                    worker=self.worker,
                    device=self.device,
                    lease_timeout=self.settings.heartbeat_timeout,
                    newest_first=True,
                )
            if claim is not None:
                if loaded is None:
                    model = self.model
                    assert model is not None  # set at the top of __call__
                    fm = chunk_context(plan, model, self.graph)
                    loaded = Loaded(plan_id, plan, model, self.graph, fm)
                compute(self.sessions, claim, loaded, self.settings.heartbeat_interval)
            with self.sessions() as session:
                done, total = counts(session, plan_id)
            if total == 0:  # deleted by a newer attempt at the audit (or with the audit)
                raise LeaseLost
            # raises `Cancelled` or `LeaseLost` when the audit was cancelled or taken over meanwhile
            self.progress("influence", 0.5 + 0.5 * done / total)
            if done == total:
                break
            if claim is None:
                time.sleep(self.poll)
        with self.sessions() as session:
            rows = done_chunks(session, plan_id)
        self.record = _record(rows, self.worker)
        return [InfluenceChunk.from_bytes(r.result) for r in rows]


def _record(rows: list[DoneChunk], coordinator: str) -> dict[str, Any]:
    """How the chunks were spread: per worker (and device) the chunks and seconds it computed."""
    by: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows:
        key = (r.worker or "?", r.device or "?")
        entry = by.setdefault(key, {"worker": key[0], "device": key[1], "chunks": 0, "nodes": 0, "seconds": 0.0})
        entry["chunks"] += 1
        entry["nodes"] += r.stop - r.start
        entry["seconds"] += float(r.seconds or 0.0)
    return {
        "chunks": len(rows),
        "coordinator": coordinator,
        "workers": sorted(by.values(), key=lambda e: (e["worker"], e["device"])),
        "reclaimed": sum(1 for r in rows if r.claims > 1),
    }


def empty_cache() -> None:
    """Forget the plan kept by :func:`load_plan` (a worker does before each audit it runs, to free memory)."""
    global _cache
    with _cache_lock:
        _cache = None
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
