"""Per-training-node influence on bias (BIND's ΔΓ), one page at a time."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from enum import StrEnum

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

SIGN_CONVENTION = (
    "delta = Γ(model retrained without the node) − Γ(original model), with Γ = lam·Γ_SP + (1−lam)·Γ_EO; "
    "delta_sp and delta_eo are the same difference for Γ_SP and Γ_EO. Negative: deleting the node reduces "
    "bias (a harmful node). Positive: deleting it increases bias (a helpful node)."
)


class InfluenceOrder(StrEnum):
    harmful = "harmful"
    """Most negative delta first (ties: lower position first); the rows without a value (null delta) last, by
    position."""
    helpful = "helpful"
    """Most positive delta first: the reverse of ``harmful`` for the rows with a value; the rows without one last,
    by position, as in ``harmful``."""
    node = "node"
    """By node index in the graph."""


class InfluenceRowRead(BaseModel):
    model_config = ConfigDict(from_attributes=True, populate_by_name=True)

    position: int
    """Rank of the node in the training split (0-based)."""
    node_index: int
    """Index of the node in the graph (0-based)."""
    node_id: int | str = Field(validation_alias=AliasChoices("user_id", "node_id"))
    """The node's id in the user's terms: the value of the upload's ``node_id`` column (text ids as written), else
    the row's position in the node table, counted from 0 (the results' ``graph.node_id_meaning`` says which)."""
    group: int = Field(validation_alias="grp")
    """The node's sensitive group, as the graph's code (``group_name`` is the user's value)."""
    label: int
    """The node's label, as the graph's code (``label_name`` is the user's value)."""
    delta: float | None
    """ΔΓ of deleting the node (negative: harmful); null where no value answers the question (``no_minimum``)."""
    delta_sp: float | None
    """The same for Γ_SP (null with ``delta``)."""
    delta_eo: float | None
    """The same for Γ_EO (null with ``delta``)."""
    settled: bool | None = None
    """The step estimate's (multi-layer and attention models) only: whether the node's steps settled at the proximal
    optimum; false: its value is where they stopped, approximate. Null for the linear estimate, a closed form with
    nothing to settle."""
    no_minimum: bool | None = None
    """True where the node's deletion has no minimum near the given weights (the step estimate's): retraining
    without it carries the weights away, so no value answers the question, and its deltas are null (``settled`` is
    false). Null on every other row (and on rows stored before the flag was kept); never false."""
    group_name: str | None = None
    """The node's sensitive group as the user's data writes it (the results' ``graph.group_names[group]``: the value,
    a bin, or an intersectional group's combination); null only while the audit has no results."""
    label_name: str | None = None
    """The node's label as the user's data writes it (the results' ``graph.class_names[label]``); null only while the
    audit has no results."""

    def named(self, groups: Sequence[str], classes: Sequence[str]) -> InfluenceRowRead:
        """This row with ``group_name`` and ``label_name`` from the graph's ``groups`` and ``classes`` names."""
        return self.model_copy(
            update={"group_name": name_of(groups, self.group), "label_name": name_of(classes, self.label)}
        )


def name_of(names: Sequence[str], code: int) -> str | None:
    """``names[code]``, ``None`` where there is no such name."""
    return names[code] if 0 <= code < len(names) else None


class InfluencePage(BaseModel):
    audit_id: uuid.UUID
    order: InfluenceOrder
    sign_convention: str
    items: list[InfluenceRowRead]
    next_page_token: str | None = None


class WhatIfCreate(BaseModel):
    """Which training nodes to delete, at once: exactly one of ``nodes``, ``top`` and ``rule``; with ``verify``, also
    queue the job that deletes them and retrains to measure the effect."""

    model_config = ConfigDict(extra="forbid")

    nodes: list[int | str] | None = Field(
        default=None, min_length=1, max_length=100_000, description="The user's ids of the training nodes to delete."
    )
    top: int | None = Field(default=None, ge=1, le=100_000, description="Delete the top most harmful training nodes.")
    rule: int | None = Field(
        default=None,
        ge=0,
        le=1000,
        description="Delete the training nodes matching this profile rule (its index in the results' profile.rules).",
    )
    verify: bool = Field(
        default=False,
        description="Also queue a verification job (202, Location: the job): delete the set, retrain over the seeds "
        "and compare with random sets of the same size.",
    )
    seeds: list[int] | None = Field(
        default=None,
        min_length=3,
        max_length=10,
        description="With verify: 3 to 10 distinct training seeds (default: the audit's debias_seeds, else "
        "1, 10, 100).",
    )
    random_sets: int | None = Field(
        default=None, ge=1, le=10, description="With verify: random sets of the same size to compare with (default 3)."
    )

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int] | None) -> list[int] | None:
        if seeds is not None and (len(set(seeds)) != len(seeds) or any(not 0 <= s < 2**31 for s in seeds)):
            raise ValueError("seeds must be distinct integers from 0 to 2**31 - 1")
        return seeds

    @model_validator(mode="after")
    def _only_to_verify(self) -> WhatIfCreate:
        if not self.verify and (self.seeds is not None or self.random_sets is not None):
            raise ValueError("seeds and random_sets are settings of the verification: send them with verify: true")
        return self


class WhatIfRead(BaseModel):
    """The estimated effect on the bias of deleting the chosen training nodes at once, and retraining."""

    audit_id: uuid.UUID
    nodes: list[int | str]
    """The user's ids of the set's members, in the order chosen."""
    size: int
    delta: float | None
    """Estimated ΔΓ (negative: deleting the set reduces bias); null where a member has no value (its deletion has no
    minimum near the given weights: the note says so)."""
    delta_sp: float | None
    delta_eo: float | None
    method: str
    """How it was estimated (the sum of the members' estimates)."""
    note: str
    """How far it can be trusted."""
    sign_convention: str
