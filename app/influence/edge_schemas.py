"""Per-edge influence on bias (ΔΓ of deleting one undirected edge), one page at a time."""

from __future__ import annotations

import uuid
from enum import StrEnum

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

EDGE_SIGN_CONVENTION = (
    "delta = Γ(model retrained without the edge, both directions) − Γ(original model), with Γ = lam·Γ_SP + "
    "(1−lam)·Γ_EO; delta_sp and delta_eo are the same difference for Γ_SP and Γ_EO. Negative: deleting the edge "
    "reduces bias (a harmful edge). Positive: deleting it increases bias (a helpful edge). An edge whose deletion "
    "changes no training loss and no test prediction (affects: false) has delta 0 exactly."
)


class EdgeOrder(StrEnum):
    harmful = "harmful"
    """Most negative delta first (ties: lower position first)."""
    helpful = "helpful"
    """Most positive delta first: exactly the reverse of ``harmful``."""
    edge = "edge"
    """By position: the graph's edge order."""


class EdgeRowRead(BaseModel):
    model_config = ConfigDict(from_attributes=True, populate_by_name=True)

    position: int
    """The edge's place in the graph's edge order (0-based)."""
    u_index: int
    """Index of its first endpoint in the graph (the smaller index)."""
    v_index: int
    """Index of its second endpoint."""
    u_id: int | str = Field(validation_alias=AliasChoices("u_user_id", "u_id"))
    """The first endpoint's id in the user's terms (as ``node_id`` of the influence rows)."""
    v_id: int | str = Field(validation_alias=AliasChoices("v_user_id", "v_id"))
    """The second endpoint's id."""
    u_group: int = Field(validation_alias="u_grp")
    """The first endpoint's sensitive group."""
    v_group: int = Field(validation_alias="v_grp")
    """The second endpoint's sensitive group."""
    within_group: bool
    """Both endpoints are in the same group (false: a cross-group edge)."""
    affects: bool
    """Deleting the edge changes some training loss or test prediction (false: delta is 0 exactly)."""
    delta: float
    delta_sp: float
    delta_eo: float


class EdgePage(BaseModel):
    audit_id: uuid.UUID
    order: EdgeOrder
    sign_convention: str
    items: list[EdgeRowRead]
    next_page_token: str | None = None
