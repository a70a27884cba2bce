"""End-to-end fixtures: a fresh Postgres database, a Redis DB number, real Celery worker processes.

* ``BIND_TEST_ADMIN_URL`` (default ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``): where to
  create (and at the end drop) a database with a random name, migrated with Alembic.
* ``BIND_TEST_WORKER_REDIS_URL`` (default ``redis://127.0.0.1:6379/14``): the broker, flushed before and after.

The API runs in-process (FastAPI's TestClient); workers are ``python -m celery -A worker.celery_app worker``
subprocesses with ``BIND_*`` settings in their environment. Heartbeats and sweeps are fast here (0.5 s /
1 s) so that a killed worker is noticed in seconds.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
from bind_it import ROOT, SHARED_DATASETS, WorkerPool, synthetic_npz
from fastapi.testclient import TestClient
from pgtemp import migrated_database

from app.core.db.session import engine_for, session_factory
from app.core.settings import Settings
from app.main import create_app
from app.tenants.keys import create_api_key

# Not the API tests' DB 13: a worker here would consume the messages those tests inspect.
REDIS_URL = os.environ.get("BIND_TEST_WORKER_REDIS_URL", "redis://127.0.0.1:6379/14")

WORKER_ENV = {
    "BIND_DEVICE": "cpu",
    "BIND_PROGRESS_INTERVAL": "0.2",
    "BIND_HEARTBEAT_INTERVAL": "0.5",
    "BIND_HEARTBEAT_TIMEOUT": "4",
    "BIND_QUEUED_TIMEOUT": "60",
    "BIND_SWEEP_INTERVAL": "1",
}


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A new, migrated Postgres database; dropped at the end of the session."""
    with migrated_database("bind_it", pre_ping=True) as url:  # the admin connection survives test_faults
        try:
            yield url
        finally:
            engine_for.cache_clear()


@pytest.fixture(scope="session")
def broker_url() -> Iterator[str]:
    """A Redis database number of its own, empty before and after."""
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    yield REDIS_URL
    client.flushdb()
    client.close()


@pytest.fixture(scope="session")
def api_settings(database_url: str, broker_url: str) -> Settings:
    data_root = SHARED_DATASETS if SHARED_DATASETS.is_dir() else None
    # Schedules every second or two make the scheduler tests fast; the default floor is 60 s.
    return Settings(database_url=database_url, broker_url=broker_url, data_root=data_root, schedule_min_interval=1)


@pytest.fixture(scope="session")
def client(api_settings: Settings) -> Iterator[TestClient]:
    """The API, authenticated as the tenant ``it-tenant``."""
    with session_factory(engine_for(api_settings.database_url)).begin() as session:
        key = create_api_key(session, f"it-tenant-{uuid.uuid4().hex[:6]}")
    with TestClient(create_app(api_settings), headers={"Authorization": f"Bearer {key}"}) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def workers(database_url: str, broker_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerPool]:
    """Worker processes on the test database and broker. Their data root is an empty folder."""
    folder = tmp_path_factory.mktemp("workers")
    (folder / "empty-data-root").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIND_")}
    env.update(WORKER_ENV)
    env["BIND_DATABASE_URL"], env["BIND_BROKER_URL"] = database_url, broker_url
    env["BIND_DATA_ROOT"] = str(folder / "empty-data-root")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    pool = WorkerPool(env, folder)
    yield pool
    pool.stop_all()


@pytest.fixture(scope="session")
def graph_id(client: TestClient) -> str:
    """A ~300-node synthetic graph uploaded as ``.npz``."""
    response = client.post("/v1/graphs", files={"npz": ("toy.npz", synthetic_npz(), "application/octet-stream")},
                           data={"name": "toy"})  # fmt: skip
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
