"""Per-process resources of a worker: its database sessions and its device, created on first use."""

from __future__ import annotations

from functools import lru_cache

from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import engine_for, session_factory
from app.core.settings import get_settings
from worker.device import resolve_device


@lru_cache(maxsize=1)
def sessions() -> sessionmaker[Session]:
    """The worker's session factory for ``BIND_DATABASE_URL``."""
    return session_factory(engine_for(get_settings().database_url))


@lru_cache(maxsize=1)
def device() -> str:
    """The torch device of this worker (``BIND_DEVICE``), resolved once."""
    return resolve_device(get_settings().device)
