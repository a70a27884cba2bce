"""The distributed influence estimate's task: one chunk of a stored plan. The worker registers
:func:`run_chunk` under :data:`INFLUENCE_CHUNK` (``worker/tasks.py``); the audit's coordinator sends the
chunks through :func:`chunk_sender`.
"""

from __future__ import annotations

import uuid

from sqlalchemy.orm import Session, sessionmaker

from app.core.publisher import Publisher
from app.core.settings import Settings
from app.graphs.loading import load_graph
from app.influence.chunks import SendChunks, execute_chunk

INFLUENCE_CHUNK = "bind.influence_chunk"
"""One chunk of a distributed influence estimate; its arguments are the plan id (a string) and the index."""


def chunk_sender(publisher: Publisher) -> SendChunks:
    """Sends one chunk task per index of a stored plan (task id ``<plan>:<index>``)."""

    def send(plan_id: uuid.UUID, indices: list[int]) -> None:
        for i in indices:
            publisher.send(INFLUENCE_CHUNK, [str(plan_id), i], task_id=f"{plan_id}:{i}")

    return send


def run_chunk(plan_id: str, index: int, *, sessions: sessionmaker[Session], settings: Settings, device: str) -> str:
    """Compute chunk ``index`` of the plan, unless it is done, held by a live worker or no longer wanted
    (see :func:`app.influence.chunks.execute_chunk`)."""
    return execute_chunk(
        plan_id,
        int(index),
        sessions=sessions,
        settings=settings,
        device=device,
        load_graph=lambda graph_id, dataset: load_graph(sessions, settings, graph_id, dataset),
    )
