"""``bind-audit``: argument handling, ``run`` forwarding, ``migrate``, ``keys`` (create, list, rotate, revoke) on
SQLite, and ``serve`` refusing unsafe production settings."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app import cli
from app.core.db.session import make_engine, session_factory
from app.core.db.tables import ROLES, ApiKey, TrailEvent
from app.core.settings import get_settings
from app.tenants.keys import authenticate


@pytest.fixture
def sqlite_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'var' / 'bind.db'}"
    monkeypatch.setenv("BIND_DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def test_run_forwards_everything_to_bind_core(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    import bind_core.cli

    monkeypatch.setattr(bind_core.cli, "main", lambda argv: seen.append(argv) or 0)
    assert cli.main(["run", "--dataset", "income", "-h"]) == 0
    assert seen == [["--dataset", "income", "-h"]]


def test_worker_command_passes_extra_celery_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def execv(path: str, argv: list[str]) -> None:
        calls.append(argv)
        raise SystemExit(0)  # the real execv never returns

    monkeypatch.setattr(os, "execv", execv)
    with pytest.raises(SystemExit):
        cli.main(["worker", "--loglevel", "DEBUG", "--", "-n", "gpu0@%h"])
    assert calls == [[sys.executable, *cli.WORKER_ARGV, "--loglevel=DEBUG", "-n", "gpu0@%h"]]
    assert "--pool=solo" in cli.WORKER_ARGV and "--concurrency=1" in cli.WORKER_ARGV


def test_migrate_then_keys_create_prints_a_working_key(sqlite_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["migrate"]) == 0
    assert cli.main(["keys", "create", "--tenant", "acme"]) == 0
    key = capsys.readouterr().out.strip().splitlines()[-1]
    engine = make_engine(sqlite_env)
    with session_factory(engine)() as session:
        tenant = authenticate(session, key)
        assert tenant is not None and tenant.name == "acme"
        assert session.scalar(select(func.count()).select_from(ApiKey)) == 1
    engine.dispose()


def test_serve_and_keys_need_their_arguments() -> None:
    with pytest.raises(SystemExit):
        cli.main(["keys", "create"])
    with pytest.raises(SystemExit):
        cli.main([])


def test_keys_list_rotate_and_revoke_with_roles_and_a_trail(
    sqlite_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["migrate"]) == 0
    assert cli.main(["keys", "create", "--tenant", "acme"]) == 0  # the first key: admin
    assert cli.main(["keys", "create", "--tenant", "acme"]) == 2  # later keys need their role
    assert "give the new key's role" in capsys.readouterr().err
    assert cli.main(["keys", "create", "--tenant", "acme", "--role", "viewer"]) == 0
    viewer_key = capsys.readouterr().out.strip().splitlines()[-1]
    assert cli.main(["keys", "list", "--tenant", "acme"]) == 0
    listed = [line.split() for line in capsys.readouterr().out.strip().splitlines()]
    assert sorted(row[2] for row in listed) == ["admin", "viewer"] and all(row[-1] == "active" for row in listed)
    admin_id = next(row[0] for row in listed if row[2] == "admin")
    viewer_id = next(row[0] for row in listed if row[2] == "viewer")

    assert cli.main(["keys", "revoke", admin_id]) == 1  # the tenant's last admin key
    assert "last active admin key" in capsys.readouterr().err
    assert cli.main(["keys", "rotate", viewer_id]) == 0
    new_key = capsys.readouterr().out.strip()
    assert cli.main(["keys", "revoke", viewer_id]) == 1  # rotating revoked it already
    engine = make_engine(sqlite_env)
    with session_factory(engine)() as session:
        assert authenticate(session, viewer_key) is None and authenticate(session, new_key) is not None
        roles = session.scalars(select(ApiKey.role).where(ApiKey.revoked_at.is_(None))).all()
        assert sorted(roles) == ["admin", "viewer"]
        trail = session.execute(select(TrailEvent.action, TrailEvent.actor, TrailEvent.outcome)).all()
        assert sorted(trail) == sorted([("key.create", "cli", "succeeded")] * 2 + [("key.rotate", "cli", "succeeded")])
    engine.dispose()
    assert cli.main(["keys", "list", "--tenant", "nobody"]) == 2


def test_serve_refuses_unsafe_production_settings(
    sqlite_env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BIND_ENVIRONMENT", "production")
    get_settings.cache_clear()
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "refuses to start" in err and "BIND_DATABASE_URL is SQLite" in err and "BIND_CONSOLE_SECRET" in err


def test_the_parser_offers_the_roles_of_the_tables() -> None:
    assert cli.KEY_ROLES == ROLES
