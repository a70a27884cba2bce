"""API tests against a real, freshly migrated Postgres database and a real Redis broker.

One database per test session (random name, dropped at the end). Tests stay apart by tenant: each test
gets new tenants, so nothing needs to be rolled back between them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis
from apihelp import npz_bytes
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.migrate import upgrade
from app.core.settings import Settings
from app.main import create_app
from app.tenants.keys import create_api_key

ADMIN_URL = os.environ.get("BIND_TEST_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("BIND_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")


def _admin() -> Engine:
    return create_engine(
        ADMIN_URL, isolation_level="AUTOCOMMIT", pool_pre_ping=True, connect_args={"connect_timeout": 5}
    )


@pytest.fixture(scope="session")
def make_database() -> Iterator[Callable[[], str]]:
    """A factory of empty Postgres databases (dropped when the session ends); returns the URL."""
    admin = _admin()
    try:
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"Postgres is not reachable at {ADMIN_URL} ({exc})")
    created: list[str] = []

    def make() -> str:
        name = f"bind_api_test_{uuid.uuid4().hex[:12]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        created.append(name)
        return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)

    yield make
    with admin.connect() as conn:
        for name in created:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(scope="session")
def database_url(make_database: Callable[[], str]) -> str:
    url = make_database()
    upgrade(url)
    return url


@pytest.fixture(scope="session")
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"Redis is not reachable at {REDIS_URL} ({exc})")
    client.flushdb()
    yield client
    client.flushdb()
    client.close()


@pytest.fixture(scope="session")
def settings(database_url: str, redis_client: redis.Redis, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(
        database_url=database_url,
        broker_url=REDIS_URL,
        data_root=tmp_path_factory.mktemp("data"),
        max_upload_bytes=2 * 1024 * 1024,
        environment="development",
        auth_failure_limit_per_minute=0,  # many tests send bad keys from one address (see test_auth_throttle)
    )


@pytest.fixture(scope="session")
def client(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def sessions(client: TestClient) -> sessionmaker[Session]:
    """Sessions on the app's own engine, for arranging rows directly."""
    factory: sessionmaker[Session] = client.app.state.session_factory  # type: ignore[attr-defined]
    return factory


@pytest.fixture
def new_key(sessions: sessionmaker[Session]) -> Callable[[], dict[str, str]]:
    """Make a new tenant with an API key; returns its ``Authorization`` header."""

    def make() -> dict[str, str]:
        with sessions.begin() as session:
            key = create_api_key(session, f"tenant-{uuid.uuid4().hex[:10]}")
        return {"Authorization": f"Bearer {key}"}

    return make


@pytest.fixture
def auth(new_key: Callable[[], dict[str, str]]) -> dict[str, str]:
    return new_key()


@pytest.fixture
def other_auth(new_key: Callable[[], dict[str, str]]) -> dict[str, str]:
    return new_key()


@pytest.fixture(scope="session")
def graph_npz() -> bytes:
    return npz_bytes()


@pytest.fixture
def graph_id(client: TestClient, auth: dict[str, str], graph_npz: bytes) -> str:
    """An uploaded graph of the ``auth`` tenant."""
    response = client.post("/v1/graphs", headers=auth, files={"npz": ("g.npz", graph_npz)})
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
