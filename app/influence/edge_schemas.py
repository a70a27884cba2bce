"""Per-edge influence on bias (ΔΓ of deleting one undirected edge), one page at a time."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from enum import StrEnum

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from app.influence.schemas import name_of

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
    u_group_name: str | None = None
    """The first endpoint's sensitive group as the user's data writes it (the results' ``graph.group_names[u_group]``:
    the value, a bin, or an intersectional group's combination)."""
    v_group_name: str | None = None
    """The second endpoint's, the same way."""

    def named(self, groups: Sequence[str]) -> EdgeRowRead:
        """This row with both endpoints' group names from the graph's ``groups`` names."""
        return self.model_copy(
            update={"u_group_name": name_of(groups, self.u_group), "v_group_name": name_of(groups, self.v_group)}
        )


class EdgePage(BaseModel):
    audit_id: uuid.UUID
    order: EdgeOrder
    sign_convention: str
    items: list[EdgeRowRead]
    next_page_token: str | None = None
