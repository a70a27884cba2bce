"""Alembic environment: the URL comes from ``-x url=``, the caller's Config, or the app's settings."""

from __future__ import annotations

from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import Connection, event

from app.core.db import tables  # noqa: F401  (its import puts every table on Base.metadata)
from app.core.db.base import Base
from app.core.db.session import make_engine
from app.core.settings import Settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    return url or Settings().database_url


def _configure(connection: Connection | None = None, url: str | None = None) -> None:
    context.configure(
        connection=connection,
        url=url,
        target_metadata=target_metadata,
        render_as_batch=True,  # SQLite alters tables by copying them
        compare_type=True,
    )


def run_migrations_offline() -> None:
    _configure(url=_url())
    with context.begin_transaction():
        context.run_migrations()


def _without_foreign_keys(dbapi_connection: Any, _record: Any) -> None:
    """SQLite alters a table by copying it and dropping the old one (``render_as_batch``); with foreign keys
    enforced, dropping ``audits`` would cascade to every influence row, edge row and what-if of every audit. The
    pragma is set per connection, outside a transaction, and only here: the app's connections keep them."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=OFF")
    cursor.close()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _without_foreign_keys)  # after the app's own listener, which turns them on
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
