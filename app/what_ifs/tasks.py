"""The what-if verification's task: its name and how it is sent. The worker registers
:func:`app.what_ifs.run.execute` under :data:`VERIFY_WHAT_IF` (``worker/tasks.py``)."""

from __future__ import annotations

import logging
import uuid

from app.core.publisher import Publisher

VERIFY_WHAT_IF = "bind.verify_what_if"
"""The verification task's name; its only argument is the job id as a string (also its Celery task id)."""

log = logging.getLogger(__name__)


def send_verify(publisher: Publisher, job_id: uuid.UUID) -> bool:
    """Send the job's task; ``False`` (logged) if the broker refused: the row stays queued and the sweeper re-sends
    it.

    Args:
        publisher: the broker's client.
        job_id: the what-if job.

    Returns:
        Whether the task was sent.
    """
    try:
        publisher.send(VERIFY_WHAT_IF, [str(job_id)], task_id=str(job_id))
    except Exception:
        log.warning("could not enqueue what-if %s; it stays queued for the sweeper", job_id, exc_info=True)
        return False
    return True
