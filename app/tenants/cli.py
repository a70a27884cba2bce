"""``bind-audit keys create | list | revoke | rotate``: the operator's key management, on the database directly.

Each change is an entry in the tenant's audit trail with the actor ``cli`` (there is no key behind it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.session import engine_for, session_factory
from app.core.db.tables import ApiKey, Tenant
from app.core.errors import ProblemError
from app.core.settings import get_settings
from app.tenants import management
from app.tenants.keys import create_api_key, find_key
from app.trail.record import append


def _sessions() -> sessionmaker[Session]:
    return session_factory(engine_for(get_settings().database_url))


def cmd_create(args: argparse.Namespace) -> int:
    with _sessions().begin() as session:
        try:
            key = create_api_key(session, args.tenant, args.role)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        row = find_key(session, key)
        assert row is not None
        append(
            session,
            tenant_id=row.tenant_id,
            actor="cli",
            action="key.create",
            target=f"/keys/{row.id}",
            outcome="succeeded",
        )
    print(key)
    print(
        f"({row.role} API key {row.id} for tenant {args.tenant.strip()!r}; it is not stored and will not be shown "
        "again)",
        file=sys.stderr,
    )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with _sessions()() as session:
        tenant = session.scalar(select(Tenant).where(Tenant.name == args.tenant.strip()))
        if tenant is None:
            print(f"error: no tenant {args.tenant.strip()!r}", file=sys.stderr)
            return 2
        for key in management.list_keys(session, tenant.id):
            revoked = f"revoked {key.revoked_at.isoformat()}" if key.revoked_at else "active"
            print(f"{key.id}  {key.prefix}…  {key.role:<7}  created {key.created_at.isoformat()}  {revoked}")
    return 0


def _change(args: argparse.Namespace, action: str, change: Callable[[Session, ApiKey], str | None]) -> int:
    with _sessions()() as session:
        try:
            key = management.get_key(session, args.key_id)
            printed = change(session, key)
        except ProblemError as exc:
            session.rollback()
            print(f"error: {exc.detail or exc.title}", file=sys.stderr)
            return 1
        append(
            session, tenant_id=key.tenant_id, actor="cli", action=action, target=f"/keys/{key.id}", outcome="succeeded"
        )
        session.commit()
    if printed is not None:
        print(printed)
    return 0


def cmd_revoke(args: argparse.Namespace) -> int:
    def revoke(session: Session, key: ApiKey) -> None:
        management.revoke_key(session, key)
        print(f"(key {key.id} revoked)", file=sys.stderr)

    return _change(args, "key.revoke", revoke)


def cmd_rotate(args: argparse.Namespace) -> int:
    def rotate(session: Session, key: ApiKey) -> str:
        new, plaintext = management.rotate_key(session, key)
        print(f"(new {new.role} key {new.id} replaces {key.id}, now revoked; shown once)", file=sys.stderr)
        return plaintext

    return _change(args, "key.rotate", rotate)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "create": cmd_create,
    "list": cmd_list,
    "revoke": cmd_revoke,
    "rotate": cmd_rotate,
}
"""The ``bind-audit keys`` subcommands (the parser is ``app/cli.py``'s, which loads this module only to run one)."""
