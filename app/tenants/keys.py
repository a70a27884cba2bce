"""API keys: ``bind_<43 url-safe chars>``, stored as the SHA-256 of the whole key, shown once; each with a role
(``app/tenants/roles.py``). Made, listed, revoked and rotated here, for the CLI and ``/v1/keys`` alike."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from app.core.db.tables import ApiKey, Tenant
from app.tenants.roles import Role, as_role

KEY_SCHEME = "bind_"
PREFIX_LENGTH = len(KEY_SCHEME) + 8
"""Stored in clear for lookup: the scheme and the first 8 random characters."""


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_prefix(key: str) -> str:
    return key[:PREFIX_LENGTH]


def get_or_create_tenant(session: Session, name: str) -> Tenant:
    tenant = session.scalar(select(Tenant).where(Tenant.name == name))
    if tenant is None:
        tenant = Tenant(name=name)
        session.add(tenant)
        session.flush()
    return tenant


def create_api_key(session: Session, tenant_name: str, role: str | None = None) -> str:
    """Create a key of ``role`` for ``tenant_name`` (and the tenant if it is new); return the plaintext key.

    ``role`` may be left out for the tenant's first key only, which is then ``admin`` (someone must be able to
    make the others); any later key needs it (``ValueError`` otherwise). The plaintext is not stored and cannot
    be shown again. Only flushes: the caller commits, e.g.
    ``with factory.begin() as session: key = create_api_key(session, "acme")``.
    """
    if not tenant_name.strip():
        raise ValueError("tenant name must not be empty")
    tenant = get_or_create_tenant(session, tenant_name.strip())
    if role is None and session.scalar(select(exists().where(ApiKey.tenant_id == tenant.id))):
        raise ValueError(f"tenant {tenant.name!r} has keys already: give the new key's role (viewer, auditor or admin)")
    return add_key(session, tenant, as_role(role or "admin"))[1]


def add_key(session: Session, tenant: Tenant, role: Role) -> tuple[ApiKey, str]:
    """A new key of ``role`` for ``tenant``: the stored row (flushed) and the plaintext, shown once."""
    key = KEY_SCHEME + secrets.token_urlsafe(32)
    row = ApiKey(tenant_id=tenant.id, prefix=key_prefix(key), key_hash=hash_key(key), role=role)
    session.add(row)
    session.flush()
    return row, key


def find_key(session: Session, key: str) -> ApiKey | None:
    """The active (not revoked) stored key matching ``key``, or ``None`` (constant-time compare)."""
    if not key.startswith(KEY_SCHEME) or len(key) < PREFIX_LENGTH or len(key) > 200:
        return None
    digest = hash_key(key)
    candidates = session.scalars(
        select(ApiKey).where(ApiKey.prefix == key_prefix(key), ApiKey.revoked_at.is_(None))
    ).all()
    for candidate in candidates:
        if hmac.compare_digest(candidate.key_hash, digest):
            return candidate
    return None


def authenticate(session: Session, key: str) -> Tenant | None:
    """The tenant owning ``key``, or ``None`` if the key is unknown or revoked (constant-time compare)."""
    found = find_key(session, key)
    return session.get(Tenant, found.tenant_id) if found is not None else None


def active_key(session: Session, key_id: uuid.UUID) -> ApiKey | None:
    """The stored key ``key_id`` while it is not revoked (a console session rests on it)."""
    return session.scalar(select(ApiKey).where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None)))
