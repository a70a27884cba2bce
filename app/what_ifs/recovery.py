"""Recovery of stuck what-if jobs, run by the worker's sweeper with the audits' (``worker/sweeper.py``): a running job
whose heartbeat is older than ``BIND_HEARTBEAT_TIMEOUT`` (its worker died) goes back to ``queued`` and its task is
sent again; a queued job untouched for ``BIND_QUEUED_TIMEOUT`` (its message was lost) is re-sent; a dead worker's
job with ``BIND_MAX_ATTEMPTS`` attempts behind it is failed. Each step is one conditional ``UPDATE ... RETURNING``,
as in :mod:`app.audits.recovery`."""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import and_, update
from sqlalchemy.orm import Session, sessionmaker

from app.audits.recovery import Sweep
from app.core.db.session import now
from app.core.db.tables import WhatIf
from app.core.errors import ProblemError
from app.core.publisher import Publisher
from app.core.settings import Settings
from app.what_ifs.tasks import VERIFY_WHAT_IF

log = logging.getLogger(__name__)


def sweep(
    sessions: sessionmaker[Session], *, heartbeat_timeout: float, queued_timeout: float, max_attempts: int = 3
) -> Sweep:
    """Find stuck what-if jobs, mark them for re-sending (touching ``updated_at``) and commit.

    Args:
        sessions: the worker's sessions.
        heartbeat_timeout: seconds after which a running job's worker is presumed dead.
        queued_timeout: seconds after which a queued job's message is presumed lost.
        max_attempts: a dead worker's job with this many attempts is failed instead.

    Returns:
        The jobs re-queued, re-sent and abandoned (the caller sends the tasks).
    """
    t = now()
    dead = and_(WhatIf.state == "running", WhatIf.heartbeat_at < t - timedelta(seconds=heartbeat_timeout))
    problem = ProblemError(
        f"The worker verifying this what-if stopped without a result {max_attempts} times; it is not retried again.",
        status=500,
        title="What-if abandoned",
        slug="what-if-abandoned",
    ).to_problem()
    with sessions.begin() as session:
        abandoned = session.scalars(
            update(WhatIf)
            .where(dead, WhatIf.attempts >= max_attempts)
            .values(state="failed", error=problem, finished_at=t, updated_at=t)
            .returning(WhatIf.id)
        ).all()
        requeued = session.scalars(
            update(WhatIf).where(dead).values(state="queued", updated_at=t).returning(WhatIf.id)
        ).all()
        resent = session.scalars(
            update(WhatIf)
            .where(WhatIf.state == "queued", WhatIf.updated_at < t - timedelta(seconds=queued_timeout))
            .values(updated_at=t)
            .returning(WhatIf.id)
        ).all()
    return Sweep(list(requeued), list(resent), list(abandoned))


def sweep_and_send(publisher: Publisher, settings: Settings, sessions: sessionmaker[Session]) -> Sweep:
    """One sweep, then the task of every job it re-queued or re-sent.

    Args:
        publisher: the broker's client.
        settings: the timeouts and attempts.
        sessions: the worker's sessions.

    Returns:
        What the sweep found.
    """
    found = sweep(
        sessions,
        heartbeat_timeout=settings.heartbeat_timeout,
        queued_timeout=settings.queued_timeout,
        max_attempts=settings.max_attempts,
    )
    for job_id in found.abandoned:
        log.error("what-if %s: its worker died %d times; failed, not retried", job_id, settings.max_attempts)
    for job_id in found.requeued:
        log.warning("what-if %s: heartbeat older than %ss; re-queued", job_id, settings.heartbeat_timeout)
    for job_id in [*found.requeued, *found.resent]:
        publisher.send(VERIFY_WHAT_IF, [str(job_id)], task_id=str(job_id))
    return found
