"""A what-if verification job as the API serves it: the set, the estimate, the state and, when done, what retraining
without the set measured against chance (:class:`bind_core.debiasing.verify.Verification`)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WrapValidator, computed_field

from app.audits.result_schemas import lenient
from app.audits.schemas import StoredProblem, TimeLeftRead, time_left_read

WhatIfState = Literal["queued", "running", "succeeded", "failed", "cancelled"]

VERIFY_SIGN_CONVENTION = (
    "effects = Γ(retrained without the set, seed s) − Γ(retrained on the unchanged graph, seed s), per seed, with "
    "Γ = lam·Γ_SP + (1−lam)·Γ_EO; delta_sp and delta_eo the same for Γ_SP and Γ_EO. Negative: deleting the set "
    "reduced bias. advantage = mean effect of random sets of the same size − the set's mean effect (positive: "
    "the set did better than chance)."
)


class EstimateRead(BaseModel):
    """The what-if's estimate (the sum of the members' estimated effects)."""

    size: int
    delta: float | None
    """Null where a member has no value (its deletion has no minimum near the given weights: the note says so)."""
    delta_sp: float | None
    delta_eo: float | None
    method: str
    note: str


class SpreadRead(BaseModel):
    """An effect measured once per seed."""

    effects: list[float]
    """One per seed, in the seeds' order."""
    mean: float
    std: float


class ChanceRead(BaseModel):
    """The set's effect on Γ against random sets of its size (``bind_core.debiasing.chance``)."""

    noise_floor: float
    """Standard deviation of Γ over the seeds on the unchanged graph."""
    random_means: list[float]
    random_mean: float
    random_std: float
    advantage: float
    yardstick: float
    beats_random: bool
    reduces_bias: bool
    verdict: str


class VerificationRead(BaseModel):
    """What deleting the set and retraining did, over the seeds."""

    size: int
    seeds: list[int]
    random_sets: int
    gamma_before: SpreadRead
    """Γ on the unchanged graph, per seed."""
    delta: SpreadRead
    """The actual ΔΓ per seed."""
    delta_sp: SpreadRead
    delta_eo: SpreadRead
    chance: ChanceRead


class ChosenBy(BaseModel):
    """How the set was chosen: the user's ``nodes`` (their count), the ``top`` most harmful, or a profile ``rule``."""

    nodes: int | None = None
    top: int | None = None
    rule: int | None = None
    conditions: list[str] | None = None
    """The rule's conditions, in words."""


class WhatIfJobSummary(BaseModel):
    """A what-if verification job, as listed (``GET`` one adds the set, the estimate and the result)."""

    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    audit_id: uuid.UUID
    state: WhatIfState
    progress: float
    """0 to 1, over the retrainings."""
    attempts: int
    size: int
    seeds: list[int]
    random_sets: int
    chosen_by: Annotated[ChosenBy, WrapValidator(lenient)]
    error: Annotated[StoredProblem | None, WrapValidator(lenient)]
    """When failed: an RFC 9457 problem document."""
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    pace: dict[str, Any] | None = Field(None, exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def time_left(self) -> TimeLeftRead | None:
        """While it runs: how long its retrainings have left, at their pace so far (``app.audits.pace``); null
        otherwise, and in its first 2 s and 5%."""
        return time_left_read(self.state, self.pace)


class WhatIfJobRead(WhatIfJobSummary):
    """A what-if verification job with its set, the estimate and, when succeeded, the measured effect."""

    nodes: list[int | str]
    """The user's ids of the deleted training nodes."""
    estimate: Annotated[EstimateRead, WrapValidator(lenient)]
    result: Annotated[VerificationRead | None, WrapValidator(lenient)]
    sign_convention: str = VERIFY_SIGN_CONVENTION


class WhatIfJobPage(BaseModel):
    items: list[WhatIfJobSummary]
    next_page_token: str | None = None
