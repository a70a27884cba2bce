"""An audit's graph as a worker loads it: the uploaded one from the database, or a built-in dataset."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import Graph as GraphRow
from app.core.settings import Settings
from bind_core import DatasetNotFoundError, Graph
from bind_core.data.datasets import load, load_npz


class GraphGone(LookupError):
    """The graph an audit names was deleted (or it names none)."""


def graph_bytes(session: Session, graph_id: uuid.UUID) -> bytes | None:
    """The stored npz of an uploaded graph (``None`` if it was deleted)."""
    return session.scalar(select(GraphRow.data).where(GraphRow.id == graph_id))


def load_graph(
    sessions: sessionmaker[Session], settings: Settings, graph_id: uuid.UUID | None, dataset: str | None
) -> Graph:
    """An audit's graph: the uploaded one (from the database) or the built-in dataset (from the data root)."""
    if graph_id is not None:
        with sessions() as session:
            data = graph_bytes(session, graph_id)
        if data is None:
            raise GraphGone(f"graph {graph_id} was deleted")
        return load_npz(data)
    if dataset is None:
        raise GraphGone("the audit names neither a graph nor a dataset")
    if settings.data_root is None:
        raise DatasetNotFoundError(f"dataset {dataset!r}: this worker has no data root (BIND_DATA_ROOT)")
    return load(dataset, settings.data_root)
