"""A new, migrated Postgres database for a test module or session, dropped at its end: what the worker, chunk and
integration tests share. The server is ``BIND_TEST_ADMIN_URL`` (default: the local Postgres)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from app.core.db.migrate import upgrade

ADMIN_URL = os.environ.get("BIND_TEST_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@contextmanager
def migrated_database(prefix: str, *, pre_ping: bool = False) -> Iterator[str]:
    """The URL of a new database named ``<prefix>_<random>``, migrated to the head; dropped (its connections closed
    by force) when the block ends. ``pre_ping``: the admin connection survives a restarted server (the fault tests)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT", pool_pre_ping=pre_ping)
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        upgrade(url)
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
