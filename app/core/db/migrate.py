"""Run the Alembic migrations from Python (``bind-audit serve``, the tests and the compose service)."""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Sequence
from pathlib import Path

from alembic import command
from alembic.config import Config

ROOT = Path(__file__).resolve().parents[3]


def alembic_config(database_url: str) -> Config:
    """The repository's ``alembic.ini`` pointed at ``database_url``."""
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.set_main_option("script_location", str(ROOT / "migrations"))
    cfg.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    """Migrate ``database_url`` up to ``revision`` (an empty database gets every table)."""
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base", *, x: Sequence[str] = ()) -> None:
    """Migrate ``database_url`` down to ``revision`` (``base`` drops every table); ``x``: the command line's ``-x``
    arguments (``KEY=VALUE``), e.g. ``undefined_rows=delete`` for migration 0013's downgrade."""
    cfg = alembic_config(database_url)
    if x:
        cfg.cmd_opts = Namespace(x=list(x))
    command.downgrade(cfg, revision)
