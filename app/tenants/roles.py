"""Roles: what an API key may do. Each role may do everything the one before it may.

* ``viewer``: read (graphs, models, audits, their results, reports and exports, schedules, datasets).
* ``auditor``: also upload graphs and models, start and cancel audits, create, pause and resume schedules.
* ``admin``: also manage API keys and webhooks, delete anything, and read the audit trail.

A key's role is fixed when it is made (``bind-audit keys create --role``, ``POST /v1/keys``); rotating a key keeps it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal, cast

from app.core.db.tables import ROLES, Tenant
from app.core.errors import Forbidden

Role = Literal["viewer", "auditor", "admin"]


def as_role(value: str) -> Role:
    """``value`` as a :data:`Role`; ``ValueError`` naming the roles otherwise."""
    if value not in ROLES:
        raise ValueError(f"unknown role {value!r}; one of {', '.join(ROLES)}")
    return cast(Role, value)


def allows(role: str, needed: Role) -> bool:
    """Whether a key of ``role`` may do what needs ``needed`` (an unknown role may do nothing)."""
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)


@dataclass(frozen=True)
class Principal:
    """Who makes a request: the key's tenant, the key's id and its role."""

    tenant: Tenant
    key_id: uuid.UUID
    role: str


class RoleRequired(Forbidden):
    """403: the key's role does not allow this route."""

    title, slug = "Role not allowed", "role-not-allowed"

    def __init__(self, role: str, needed: Role) -> None:
        super().__init__(
            f"This API key's role is {role!r}; this needs {needed!r} or above.",
            extensions={"role": role, "required_role": needed},
        )


def check_role(role: str, needed: Role) -> None:
    """Raise :class:`RoleRequired` unless ``role`` allows ``needed``."""
    if not allows(role, needed):
        raise RoleRequired(role, needed)
