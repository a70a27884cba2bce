"""``BIND_ENVIRONMENT=production`` refuses to start the API, with a message naming each unsafe setting and its fix;
development (the default) starts with anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from app.core.production import UnsafeSettings, check_production, unsafe_reasons
from app.core.settings import Settings
from app.main import create_app

ROOT = Path(__file__).resolve().parents[3]
SAFE: dict[str, Any] = {
    "environment": "production",
    "database_url": "postgresql+psycopg://bind@db.internal/bind",
    "console_secret": SecretStr("q8Zr1vN3-wX5tY7uJ9kL0mP2oQ4sR6aB"),
    "metrics_key": SecretStr("metrics-key-0123456789"),
    "cors_origins": ["https://audits.example.org"],
}


def production(**changes: Any) -> Settings:
    return Settings(_env_file=None, **(SAFE | changes))  # type: ignore[call-arg]  # pydantic-settings' init-only option


def test_safe_production_settings_start() -> None:
    assert unsafe_reasons(production()) == []
    create_app(production())  # nothing connects until used


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"database_url": "sqlite:///./var/bind.db"}, "BIND_DATABASE_URL is SQLite"),
        ({"webhook_allow_private": True}, "BIND_WEBHOOK_ALLOW_PRIVATE is on"),
        ({"cors_origins": ["https://a.example.org", "*"]}, "BIND_CORS_ORIGINS allows '*'"),
        ({"metrics_key": None}, "/metrics has no key"),
        ({"console_secret": SecretStr("changethis" * 4)}, "BIND_CONSOLE_SECRET is a placeholder"),
        ({"console_secret": SecretStr("a" * 40)}, "BIND_CONSOLE_SECRET is a placeholder"),
    ],
)
def test_each_unsafe_setting_refuses_the_start(changes: dict[str, Any], named: str) -> None:
    with pytest.raises(UnsafeSettings, match="BIND_ENVIRONMENT=production refuses to start") as refused:
        create_app(production(**changes))
    assert len(refused.value.reasons) == 1 and refused.value.reasons[0].startswith(named)


def test_a_missing_console_secret_and_everything_at_once() -> None:
    settings = Settings(_env_file=None, environment="production")  # type: ignore[call-arg]
    reasons = unsafe_reasons(settings)
    assert [r.split(" ")[0] for r in reasons] == ["BIND_DATABASE_URL", "BIND_CONSOLE_SECRET", "/metrics"]
    assert "is not set" in reasons[1]
    assert unsafe_reasons(production(metrics_key=None, metrics_enabled=False)) == []  # metrics off: fine


def test_development_starts_with_anything() -> None:
    loose = {"webhook_allow_private": True, "database_url": "sqlite:///:memory:", "cors_origins": ["*"]}
    settings = Settings(_env_file=None, **loose)  # type: ignore[call-arg]  # no console secret, no metrics key
    check_production(settings)
    create_app(settings)


def test_the_server_prints_the_reasons_and_exits(tmp_path: Path) -> None:
    """What an operator sees: uvicorn's factory fails with every reason listed, and the process exits non-zero."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIND_")}
    env |= {"BIND_ENVIRONMENT": "production", "BIND_DATABASE_URL": f"sqlite:///{tmp_path}/b.db",
            "PYTHONPATH": str(ROOT)}  # fmt: skip
    code = "from app.main import create_app; create_app()"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "BIND_ENVIRONMENT=production refuses to start with these settings" in done.stderr
    for named in ("BIND_DATABASE_URL is SQLite", "BIND_CONSOLE_SECRET is not set", "/metrics has no key"):
        assert named in done.stderr
