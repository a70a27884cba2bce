"""Per-audit budgets: an audit whose estimated peak memory or work is over this deployment's limits is refused
before it is queued (422 ``resource-limit``), and again by the worker before it trains (for built-in datasets,
whose sizes the API does not know, this is the first check).

The estimate is `bind_core.pipeline.budget.audit_cost`; the limits are ``BIND_AUDIT_MAX_MEMORY`` (bytes) and
``BIND_AUDIT_MAX_WORK`` (flops), 0 turning either off.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from app.core.errors import ProblemError
from app.core.settings import Settings
from bind_core import AuditConfig, ModelConfig
from bind_core.codec import encode
from bind_core.pipeline import AuditCost, GraphSize, audit_cost
from bind_core.pipeline.results import GraphSummary


class ResourceLimitExceeded(ProblemError):
    """An audit is, or would be, over a resource limit of this deployment. ``limits`` says which, what is
    allowed and what was estimated or measured: ``[{"limit", "allowed", "estimated" | "used", "excess"}]``."""

    status, title, slug = 422, "Resource limit exceeded", "resource-limit"

    def __init__(self, detail: str, *, limits: Sequence[Mapping[str, Any]], estimate: Mapping[str, Any] | None = None):
        super().__init__(detail)
        self.limits = [dict(limit) for limit in limits]
        self.estimate = dict(estimate) if estimate is not None else None

    def to_problem(self, instance: str | None = None) -> dict[str, Any]:
        doc = super().to_problem(instance)
        doc["limits"] = self.limits
        if self.estimate is not None:
            doc["estimate"] = self.estimate
        return doc


def gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


def cost_of(
    config: AuditConfig, summary: GraphSummary | Mapping[str, Any], supplied_model: Mapping[str, Any] | None = None
) -> AuditCost:
    """The estimate for ``config`` on a graph with this ``Graph.summary()`` (or its JSON, as stored); a supplied
    model's architecture (its stored config) replaces the requested one, and no training is counted for it."""
    if supplied_model is not None:
        model = ModelConfig.from_dict(dict(supplied_model["model"]))
        config = dataclasses.replace(config, model=model)
    return audit_cost(config, GraphSize.of_summary(summary), trained=supplied_model is not None)


def check_budget(cost: AuditCost, settings: Settings) -> None:
    """Raise `ResourceLimitExceeded` naming every limit ``cost`` is over, with the excess."""
    over: list[dict[str, Any]] = []
    words: list[str] = []
    if settings.audit_max_memory and cost.peak_memory_bytes > settings.audit_max_memory:
        excess = cost.peak_memory_bytes - settings.audit_max_memory
        over.append(
            {
                "limit": "BIND_AUDIT_MAX_MEMORY",
                "allowed": settings.audit_max_memory,
                "estimated": cost.peak_memory_bytes,
                "excess": excess,
            }
        )
        part = max(cost.memory_bytes, key=lambda k: cost.memory_bytes[k])
        words.append(
            f"estimated peak memory {gib(cost.peak_memory_bytes)} is {gib(excess)} over BIND_AUDIT_MAX_MEMORY "
            f"({gib(settings.audit_max_memory)}); the largest part is {part} ({gib(cost.memory_bytes[part])})"
        )
    if settings.audit_max_work and cost.work_flops > settings.audit_max_work:
        excess_work = cost.work_flops - settings.audit_max_work
        over.append(
            {
                "limit": "BIND_AUDIT_MAX_WORK",
                "allowed": settings.audit_max_work,
                "estimated": cost.work_flops,
                "excess": excess_work,
            }
        )
        stage = max(cost.work, key=lambda k: cost.work[k])
        words.append(
            f"estimated work {cost.work_flops:.3g} flops is {excess_work:.3g} over BIND_AUDIT_MAX_WORK "
            f"({settings.audit_max_work:.3g}); the largest part is {stage} ({cost.work[stage]:.3g})"
        )
    if over:
        detail = "The audit is over this deployment's budget: " + "; ".join(words) + "."
        raise ResourceLimitExceeded(detail, limits=over, estimate=encode(cost))
