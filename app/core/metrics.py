"""Prometheus metrics of the API at ``/metrics``: HTTP requests and latency, and the audit queue from the DB.

Each app has its own registry (several apps live in one test process). Queue depth and audit counts are
read from the database at scrape time (one ``GROUP BY``), so they are right whichever process changed the
rows. Stage durations and outcomes as they happen are observed by the workers (``worker/metrics.py``, on
``BIND_WORKER_METRICS_PORT``).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import AUDIT_STATES, Audit
from app.core.errors import Unauthorized
from app.core.ratelimit import AuthFailureGuard

log = logging.getLogger(__name__)
router = APIRouter(include_in_schema=False)


class AuditCollector(Collector):
    """``bind_audits{state}`` (``queued`` is the queue depth) and ``bind_queue_depth``, from the database."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            with self.sessions() as session:
                counts = dict(session.execute(select(Audit.state, func.count()).group_by(Audit.state)).all())
        except Exception as exc:  # a scrape during a database outage reports nothing rather than failing
            log.warning("metrics: cannot count audits (%s)", type(exc).__name__)
            return
        by_state = GaugeMetricFamily("bind_audits", "Audits in the database by state.", labels=["state"])
        for state in AUDIT_STATES:
            by_state.add_metric([state], float(counts.get(state, 0)))
        yield by_state
        yield GaugeMetricFamily("bind_queue_depth", "Audits queued and not yet claimed.", value=counts.get("queued", 0))


class ApiMetrics:
    """The registry of one app, with its HTTP metrics and the audit collector."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "bind_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "bind_http_request_duration_seconds",
            "Time to the response's first byte, by route template.",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.registry.register(AuditCollector(sessions))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)


def require_metrics_key(request: Request) -> None:
    """Let the scrape through if ``BIND_METRICS_KEY`` is unset or sent as ``Authorization: Bearer <key>``.

    Compared in constant time. A wrong or missing key is a 401 problem and counts as a failed authentication
    of the client's address (the same throttle as API keys).

    Raises:
        Unauthorized: the key is set and was not sent.
    """
    key: SecretStr | None = request.app.state.settings.metrics_key
    if key is None:
        return
    guard: AuthFailureGuard | None = getattr(request.app.state, "auth_failure_guard", None)
    client = request.client.host if request.client else "unknown"
    if guard is not None:
        guard.before(client)
    scheme, _, sent = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(), key.get_secret_value().encode()):
        return
    if guard is not None:
        guard.failed(client)
    raise Unauthorized("The metrics key is required: 'Authorization: Bearer <BIND_METRICS_KEY>'.")


@router.get("/metrics", dependencies=[Depends(require_metrics_key)])
def metrics(request: Request) -> Response:
    """The Prometheus text format (mounted only when ``Settings.metrics_served``; keyed by ``BIND_METRICS_KEY``)."""
    registry: ApiMetrics = request.app.state.metrics
    return Response(generate_latest(registry.registry), media_type=CONTENT_TYPE_LATEST)
