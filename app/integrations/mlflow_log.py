"""Logging a succeeded audit to MLflow when ``BIND_MLFLOW_TRACKING_URI`` is set (extra: ``mlflow``).

Called by the worker after the audit's results are stored; a failure here is logged as a warning and never
fails the audit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from app.core.settings import Settings
from bind_core.pipeline.results import InfluenceRow
from bind_core.reporting import log_audit

log = logging.getLogger(__name__)


def log_succeeded_audit(
    settings: Settings,
    audit_id: str,
    config: dict[str, Any],
    results: dict[str, Any],
    influence_rows: Sequence[InfluenceRow] | None,
) -> str | None:
    """Log the audit as an MLflow run (params, metrics with interval bounds, report and influence CSV).

    Args:
        settings: the deployment's settings (``mlflow_tracking_uri``, ``mlflow_experiment``).
        audit_id: the audit's id (the run's name and tag).
        config: the audit's settings (``AuditConfig.to_dict()``).
        results: its results (``AuditResult.to_dict()``).
        influence_rows: every training node's row (``AuditResult.influence_rows()``), or ``None``.

    Returns:
        The MLflow run id, or ``None`` when no tracking URI is configured or logging failed.
    """
    uri = settings.mlflow_tracking_uri
    if not uri:
        return None
    try:
        return log_audit(
            uri,
            config,
            results,
            influence_rows,
            experiment=settings.mlflow_experiment,
            run_name=f"audit {audit_id}",
            tags={"bind.audit_id": audit_id},
        )
    except Exception as exc:  # MLflow missing, unreachable, or refusing: the audit stays succeeded
        log.warning("audit %s: logging to MLflow at %s failed (%s: %s)", audit_id, uri, type(exc).__name__, exc)
        return None
