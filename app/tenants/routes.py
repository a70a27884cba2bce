"""``/v1/keys``: the tenant's API keys, listed, made, revoked and rotated by an admin key."""

from __future__ import annotations

import uuid
from typing import Any

from fastapi import APIRouter, Response, status

from app.core.deps import SessionDep
from app.core.problem_schema import problem_responses
from app.tenants import management
from app.tenants.deps import AdminTenant
from app.tenants.keys import add_key
from app.tenants.schemas import KeyCreate, KeyCreated, KeyList, KeyRead
from app.trail.record import trailed

router = APIRouter(prefix="/keys", tags=["keys"])

_ERRORS = problem_responses(403, 404, 409)


@router.get("", response_model=KeyList, responses=problem_responses(403))
def list_keys(session: SessionDep, tenant: AdminTenant) -> KeyList:
    """Every key of the tenant, revoked ones included, newest first."""
    return KeyList(items=[KeyRead.model_validate(k) for k in management.list_keys(session, tenant.id)])


@router.get("/{key_id}", response_model=KeyRead, responses=problem_responses(403, 404))
def read_key(key_id: uuid.UUID, session: SessionDep, tenant: AdminTenant) -> Any:
    return management.get_key(session, key_id, tenant.id)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=KeyCreated,
    responses=problem_responses(403),
    dependencies=[trailed("key.create")],
)
def create_key(body: KeyCreate, response: Response, session: SessionDep, tenant: AdminTenant) -> Any:
    """A new key of ``role`` for the tenant; the answer holds the key, shown this once."""
    row, key = add_key(session, tenant, body.role)
    response.headers["Location"] = f"/v1/keys/{row.id}"
    return KeyCreated.model_validate({**KeyRead.model_validate(row).model_dump(), "key": key})


@router.post(
    "/{key_id}/revoke",
    response_model=KeyRead,
    responses=_ERRORS,
    dependencies=[trailed("key.revoke", "/keys/{key_id}")],
)
def revoke_key(key_id: uuid.UUID, session: SessionDep, tenant: AdminTenant) -> Any:
    """Revoke a key at once (409 ``last-admin-key`` for the tenant's last active admin key)."""
    return management.revoke_key(session, management.get_key(session, key_id, tenant.id))


@router.post(
    "/{key_id}/rotate",
    status_code=status.HTTP_201_CREATED,
    response_model=KeyCreated,
    responses=_ERRORS,
    dependencies=[trailed("key.rotate", "/keys/{key_id}")],
)
def rotate_key(key_id: uuid.UUID, response: Response, session: SessionDep, tenant: AdminTenant) -> Any:
    """Replace a key by a new one of the same role and revoke it, in one step; the answer holds the new key."""
    row, key = management.rotate_key(session, management.get_key(session, key_id, tenant.id))
    response.headers["Location"] = f"/v1/keys/{row.id}"
    return KeyCreated.model_validate({**KeyRead.model_validate(row).model_dump(), "key": key})
