"""The response models of an audit's results, built from the typed results of ``bind_core``
(:mod:`bind_core.pipeline.results`) by :func:`app.core.records.model_for`: one model per dataclass, the same keys, the
field docs as descriptions, served as stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from app.core.records import StoredModel, lenient, model_for
from bind_core.pipeline.results import AuditResults

__all__ = ["AuditResultsRead", "StoredModel", "lenient", "model_for"]


if TYPE_CHECKING:
    AuditResultsRead: TypeAlias = StoredModel
else:
    AuditResultsRead = model_for(AuditResults)
    """``GET /v1/audits/{id}``'s ``results``."""
