"""Listing, revoking and rotating a tenant's API keys (the CLI's ``bind-audit keys`` and ``/v1/keys``)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.db.session import now
from app.core.db.tables import ApiKey, Tenant
from app.core.errors import Conflict, NotFound
from app.tenants.keys import add_key
from app.tenants.roles import as_role


def list_keys(session: Session, tenant_id: uuid.UUID) -> list[ApiKey]:
    """Every key of the tenant, revoked ones included, newest first."""
    stmt = select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.created_at.desc(), ApiKey.id.desc())
    return list(session.scalars(stmt))


def get_key(session: Session, key_id: uuid.UUID, tenant_id: uuid.UUID | None = None) -> ApiKey:
    """The key ``key_id`` (of ``tenant_id`` when given, so a tenant never reaches another's), locked; or 404."""
    stmt = select(ApiKey).where(ApiKey.id == key_id)
    if tenant_id is not None:
        stmt = stmt.where(ApiKey.tenant_id == tenant_id)
    key = session.scalar(stmt.with_for_update())
    if key is None:
        raise NotFound("key", key_id)
    return key


def revoke_key(session: Session, key: ApiKey) -> ApiKey:
    """Revoke ``key`` at once (its console sessions end too).

    Raises:
        Conflict: ``key-revoked`` if it was revoked already; ``last-admin-key`` if it is the tenant's last active
            admin key (the tenant could no longer manage its keys: make another admin key first).
    """
    if key.revoked_at is not None:
        raise Conflict(f"Key {key.id} was revoked at {key.revoked_at.isoformat()}.", slug="key-revoked")
    if key.role == "admin" and _active_admins(session, key.tenant_id) <= 1:
        raise Conflict(
            "This is the tenant's last active admin key; create another admin key before revoking it.",
            slug="last-admin-key",
        )
    key.revoked_at = now()
    session.flush()
    return key


def rotate_key(session: Session, key: ApiKey) -> tuple[ApiKey, str]:
    """Replace ``key`` by a new key of the same tenant and role, revoking it in the same transaction; return the
    new row and its plaintext (shown once). ``key-revoked`` (409) if it was revoked already."""
    if key.revoked_at is not None:
        raise Conflict(f"Key {key.id} was revoked at {key.revoked_at.isoformat()}.", slug="key-revoked")
    tenant = session.get(Tenant, key.tenant_id)
    assert tenant is not None  # api_keys.tenant_id is a foreign key
    new, plaintext = add_key(session, tenant, as_role(key.role))
    key.revoked_at = now()
    session.flush()
    return new, plaintext


def _active_admins(session: Session, tenant_id: uuid.UUID) -> int:
    """How many active admin keys the tenant has; they are locked, so two revocations cannot both take the last."""
    stmt = select(ApiKey.id).where(ApiKey.tenant_id == tenant_id, ApiKey.role == "admin", ApiKey.revoked_at.is_(None))
    return len(session.scalars(stmt.with_for_update()).all())
