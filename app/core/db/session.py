"""Engines and sessions for Postgres (``postgresql+psycopg://``) and SQLite (the embedded default).

The API opens one session per request through :func:`app.core.deps.get_session`; the worker opens its own
with :func:`session_factory` (``with factory() as session, session.begin(): ...``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from sqlalchemy import CursorResult, Engine, Executable, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from bind_core.codec import json_safe

_AFTER_COMMIT = "bind_after_commit"


def ensure_sqlite_dir(url: str) -> None:
    """Create the folder of a file-backed SQLite URL (``sqlite:///./var/bind.db``, ``sqla+sqlite:///...``)."""
    parsed = make_url(url.removeprefix("sqla+"))
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)


def json_dumps(value: Any) -> str:
    """JSON for the database: NaN and ±inf become ``null`` (Postgres refuses them in JSON/JSONB)."""
    return json.dumps(json_safe(value), allow_nan=False)


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for ``url`` with the settings this service relies on.

    SQLite: foreign keys on (for the ``ON DELETE`` rules), WAL, a busy timeout, and ``BEGIN IMMEDIATE``
    transactions that SQLAlchemy controls (so SAVEPOINTs work and concurrent writers wait, not fail).
    Postgres: a short connect timeout and a pre-ping, so an outage fails fast instead of hanging requests.
    Both: JSON columns store NaN and ±inf as ``null`` (:func:`json_dumps`), the same on either backend.
    """
    kwargs.setdefault("json_serializer", json_dumps)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        ensure_sqlite_dir(url)
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, **kwargs)
        _configure_sqlite(engine)
        return engine
    connect_args = {"connect_timeout": 5} if parsed.get_backend_name() == "postgresql" else {}
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args, **kwargs)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # let SQLAlchemy emit BEGIN itself
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front: two deferred transactions that both read and then
        # write would deadlock ("database is locked") instead of waiting their turn. Our transactions are
        # short (no transaction spans an audit's computation), so serialising them costs little.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded attributes after commit (responses are built from them)."""
    return sessionmaker(engine, expire_on_commit=False)


def after_commit(session: Session, callback: Callable[[], object]) -> None:
    """Queue ``callback`` to run after ``session`` commits (see :func:`run_after_commit`)."""
    session.info.setdefault(_AFTER_COMMIT, []).append(callback)


def run_after_commit(session: Session) -> None:
    """Run, once, the callbacks queued on ``session``; call it right after a successful commit."""
    for callback in session.info.pop(_AFTER_COMMIT, []):
        callback()


@lru_cache(maxsize=8)
def engine_for(url: str) -> Engine:
    """One shared engine per URL in this process (the worker's entry point)."""
    return make_engine(url)


def now() -> datetime:
    """The current time, timezone-aware UTC (what every timestamp column stores)."""
    return datetime.now(UTC)


def rowcount(session: Session, statement: Executable) -> int:
    """Execute an ``UPDATE``/``DELETE`` and return how many rows it touched (a fenced write checks it)."""
    result = session.execute(statement)
    assert isinstance(result, CursorResult)
    return result.rowcount
