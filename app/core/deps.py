"""Dependencies shared by the routes, defined once as ``Annotated`` aliases."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import run_after_commit
from app.core.publisher import BrokerClient
from app.core.settings import Settings


def get_settings(request: Request) -> Settings:
    """The settings the app was created with (``create_app(settings)``)."""
    settings: Settings = request.app.state.settings
    return settings


def get_broker(request: Request) -> BrokerClient:
    """The app's publisher (:class:`~app.core.publisher.BrokerClient`)."""
    broker: BrokerClient = request.app.state.broker
    return broker


def get_session(request: Request) -> Iterator[Session]:
    """One session per request: committed once when the route returns, rolled back if it raises.

    Services only ``flush()``. Callbacks registered with :func:`app.core.db.session.after_commit` run after the commit
    (sending a Celery task, for instance), so a job never refers to a row that is not there yet.
    """
    factory: sessionmaker[Session] = request.app.state.session_factory
    with factory() as session:
        try:
            yield session
        except BaseException:
            session.rollback()
            raise
        session.commit()
        run_after_commit(session)


SettingsDep = Annotated[Settings, Depends(get_settings)]
# "function" scope: the commit runs when the route returns, before the response is sent, so a failed
# commit becomes a 500 instead of a 2xx for a row that does not exist.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
BrokerDep = Annotated[BrokerClient, Depends(get_broker)]
