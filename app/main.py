"""The application factory: ``uvicorn --factory app.main:create_app``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.utils import get_openapi
from sqlalchemy import Engine

from app.audits import model_artifact_routes as audit_models
from app.audits import routes as audits
from app.console import routes as console
from app.core import health
from app.core.db.session import make_engine, session_factory
from app.core.docs_ui.pages import install_docs
from app.core.logs import configure_logging
from app.core.metrics import ApiMetrics
from app.core.metrics import router as metrics_router
from app.core.middleware import SecurityHeadersMiddleware
from app.core.observability import RequestContextMiddleware
from app.core.problem_schema import problem_responses, problem_schemas
from app.core.problems import install_problem_handlers
from app.core.production import check_production
from app.core.publisher import BrokerClient
from app.core.ratelimit import make_auth_failure_guard, make_rate_limiter
from app.core.settings import Settings, get_settings
from app.datasets import routes as datasets
from app.events import routes as events
from app.graphs import routes as graphs
from app.reports import routes as reports
from app.schedules import routes as schedules
from app.supplied import routes as models
from app.tenants import routes as keys
from app.webhooks import routes as webhooks
from app.what_ifs import routes as what_ifs

DESCRIPTION = """Audit graph neural networks for unfairness with BIND (Dong et al., AAAI 2023): train a GNN
on your graph, measure its bias, estimate each training node's influence on that bias, debias by deleting
the most harmful nodes and validate the estimates. Every error is an RFC 9457 problem document."""


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API for ``settings`` (default: from the environment). Nothing connects until used.

    Raises:
        UnsafeSettings: ``BIND_ENVIRONMENT=production`` with settings unsafe there (``app/core/production.py``).
    """
    settings = settings or get_settings()
    check_production(settings)
    configure_logging(settings.log_format)
    engine = make_engine(settings.database_url)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        engine.dispose()

    app = FastAPI(
        title="bind-audit",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc come from install_docs: no CDN, a strict CSP
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    _install_state(app, settings, engine)
    _install_middleware(app, settings)
    _install_routes(app, settings)
    _install_openapi(app)
    install_docs(app, "/openapi.json")
    return app


def _install_state(app: FastAPI, settings: Settings, engine: Engine) -> None:
    """What the routes share through ``app.state``: the settings, the database, the broker, the limits, the
    metrics."""
    app.state.settings = settings
    app.state.engine = engine
    app.state.session_factory = session_factory(engine)
    app.state.broker = BrokerClient(settings.broker_url)
    app.state.rate_limiter = make_rate_limiter(settings.rate_limit_per_minute, settings.broker_url)
    app.state.auth_failure_guard = make_auth_failure_guard(settings.auth_failure_limit_per_minute, settings.broker_url)
    app.state.metrics = ApiMetrics(app.state.session_factory) if settings.metrics_served else None


def _install_middleware(app: FastAPI, settings: Settings) -> None:
    """Problem documents for every error, the security headers, CORS where configured, and the request context."""
    install_problem_handlers(app)
    app.add_middleware(SecurityHeadersMiddleware)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
            expose_headers=["Location", "Idempotent-Replayed", "Retry-After", "X-Request-ID"],
        )
    app.add_middleware(RequestContextMiddleware, metrics=app.state.metrics)


ROUTERS = (graphs, datasets, models, audits, audit_models, what_ifs, reports, schedules, webhooks, keys, events)
"""The feature modules whose routers serve ``/v1``."""


def _install_routes(app: FastAPI, settings: Settings) -> None:
    """``/v1``, the health checks, the console and, when served, the metrics."""
    v1 = APIRouter(prefix="/v1", responses=problem_responses(400, 401, 403, 422, 429, 500, 503))
    for module in ROUTERS:
        v1.include_router(module.router)
    app.include_router(v1)
    app.include_router(health.router)
    console.install(app)
    if settings.metrics_served:
        app.include_router(metrics_router)


def _install_openapi(app: FastAPI) -> None:
    """Add the problem schemas that the routes' ``responses`` refer to."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
            schema.setdefault("components", {}).setdefault("schemas", {}).update(problem_schemas())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to customise the schema
