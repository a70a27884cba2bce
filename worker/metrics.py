"""A worker's own Prometheus endpoint (``BIND_WORKER_METRICS_PORT``): stage durations and outcomes.

The worker observes what it runs: each audit's outcome, its wall time in the worker, and, for a succeeded
audit, the per-stage timings ``bind_core`` put in its results (training, metrics, influence, debiasing,
validation). The API's ``/metrics`` covers the queue (from the database) and HTTP; each worker process
serves its own registry, so scrape every worker. Unset port: nothing is served or observed.
"""

from __future__ import annotations

import logging
import uuid

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Audit

log = logging.getLogger(__name__)

REGISTRY = CollectorRegistry()
_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)
STAGE_SECONDS = Histogram(
    "bind_audit_stage_seconds",
    "Seconds per audit stage of succeeded audits.",
    ["stage"],
    registry=REGISTRY,
    buckets=_BUCKETS,
)
AUDIT_SECONDS = Histogram(
    "bind_audit_attempt_seconds",
    "Wall seconds of one attempt in the worker, by outcome.",
    ["outcome"],
    registry=REGISTRY,
    buckets=_BUCKETS,
)
OUTCOMES = Counter(
    "bind_audit_attempts",
    "Attempts by outcome (succeeded, failed, cancelled, lost, skipped).",
    ["outcome"],
    registry=REGISTRY,
)
_serving = False


def serve(port: int | None) -> None:
    """Start the endpoint on ``port`` (once per process); ``None`` does nothing."""
    global _serving
    if port is None or _serving:
        return
    start_http_server(port, addr="0.0.0.0", registry=REGISTRY)
    _serving = True
    log.info("worker metrics on :%d/metrics", port)


def observe(audit_id: str, outcome: str, seconds: float, sessions: sessionmaker[Session]) -> None:
    """Record one attempt; never raises (metrics must not fail an audit)."""
    if not _serving:
        return
    try:
        OUTCOMES.labels(outcome).inc()
        AUDIT_SECONDS.labels(outcome).observe(seconds)
        if outcome != "succeeded":
            return
        with sessions() as session:
            results = session.scalar(select(Audit.results).where(Audit.id == uuid.UUID(audit_id)))
        timings = (results or {}).get("timings") or {}
        for stage, value in timings.items():
            if isinstance(value, int | float):
                STAGE_SECONDS.labels(str(stage)).observe(float(value))
    except Exception as exc:
        log.warning("metrics: could not observe audit %s (%s)", audit_id, type(exc).__name__)
