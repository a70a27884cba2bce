"""Scheduled audits (``/v1/schedules``) and their runs, the history of the bias metrics over time."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

MetricName = Literal["delta_sp", "delta_eo", "gamma"]


class Thresholds(BaseModel):
    """Alert thresholds on the test-set metrics: a run whose value exceeds one emits
    ``schedule.threshold_exceeded``."""

    model_config = ConfigDict(extra="forbid")

    delta_sp: StrictFloat | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    delta_eo: StrictFloat | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    gamma: StrictFloat | None = Field(default=None, ge=0.0, allow_inf_nan=False)


class ScheduleCreate(BaseModel):
    """What to audit (a graph by name, whose latest version each run takes, or a built-in dataset; a supplied model
    on the latest version of the graph it was registered for), how (``audit``: the body of ``POST /v1/audits``
    without its source) and when (an interval or a cron)."""

    model_config = ConfigDict(extra="forbid")

    graph_name: str | None = Field(default=None, min_length=1, max_length=200)
    dataset: str | None = Field(default=None, min_length=1, max_length=100)
    model_id: uuid.UUID | None = Field(
        default=None,
        description="A supplied model (POST /v1/models) each run audits as given on the latest version of the graph "
        "it was registered for (graph_name may be left out, or must be that graph's name); each version must have "
        "the model's feature columns, label and classes (a run whose version does not fails with "
        "model-does-not-fit).",
    )
    audit: dict[str, Any] = Field(default_factory=dict, description="Audit settings (model, training, budgets...).")
    interval_seconds: StrictInt | None = Field(default=None, ge=1, le=366 * 86400)
    cron: str | None = Field(default=None, min_length=1, max_length=100, description="Five fields, in UTC.")
    thresholds: Thresholds | None = None

    @model_validator(mode="after")
    def _one_each(self) -> Self:
        if self.model_id is not None and self.dataset is not None:
            raise ValueError("a supplied model (model_id) is audited on its own graph's versions: leave dataset out")
        if self.model_id is None and (self.graph_name is None) == (self.dataset is None):
            raise ValueError("give exactly one of graph_name and dataset (or model_id)")
        if (self.interval_seconds is None) == (self.cron is None):
            raise ValueError("give exactly one of interval_seconds and cron")
        return self


class ScheduleRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    graph_name: str | None
    dataset: str | None
    model_id: uuid.UUID | None = None
    """The supplied model each run audits on the latest version of ``graph_name``; null: each run trains one."""
    settings: dict[str, Any]
    interval_seconds: int | None
    cron: str | None
    thresholds: dict[str, Any] | None
    state: Literal["active", "paused"]
    next_run_at: datetime
    """The next slot (for a paused schedule: where it stood when paused)."""
    created_at: datetime
    updated_at: datetime


class SchedulePage(BaseModel):
    items: list[ScheduleRead]
    next_page_token: str | None = None


class Breach(BaseModel):
    metric: MetricName
    value: float
    threshold: float


class RunRead(BaseModel):
    """One slot of a schedule: its audit and, once it succeeded, the test-set bias metrics."""

    slot_time: datetime
    audit_id: uuid.UUID
    state: str
    graph_version: int | None
    accuracy: float | None = None
    """The test-set accuracy (null until the audit succeeded)."""
    delta_sp: float | None
    delta_eo: float | None
    gamma: float | None
    breaches: list[Breach]
    """The thresholds this run exceeded (empty until it succeeded)."""
    withheld: str | None = None
    """Why the run has no verdict, where it has none (``results.summary.withheld``): a supplied model that fits this
    version's training nodes no better than a constant (drift, or inputs other than it was trained on), outputs in
    another order; its figures are as measured, not a finding."""
    inputs_confirmed: bool | None = None
    """A supplied model's run: whether the model's own outputs on this version (``PUT
    /v1/models/{id}/outputs/{graph_id}``) confirmed the inputs the audit carried over (``false``: none were given, or
    the run is not done); null for a model each run trains."""
    warning_codes: list[str] | None = None
    """The run's warning codes (null for a run from before them, or with none known yet)."""
    failure: str | None = None
    """A failed run's problem in words (``model-does-not-fit: this version lacks the model's column(s) 'income'``)."""


class RunPage(BaseModel):
    schedule_id: uuid.UUID
    items: list[RunRead]
    """Newest slot first."""
    next_page_token: str | None = None
