"""docker-compose.yml: the scheduler runs as a service of its own; the workers' scheduler threads are off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]


def test_scheduler_service_and_workers_without_scheduler_threads() -> None:
    services: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    scheduler = services["scheduler"]
    assert scheduler["command"] == ["bind-audit", "scheduler"] and scheduler["restart"] == "unless-stopped"
    assert scheduler["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert scheduler["depends_on"]["redis"]["condition"] == "service_healthy"
    env = scheduler["environment"]
    assert env["BIND_DATABASE_URL"].startswith("postgresql+psycopg://") and env["BIND_BROKER_URL"].startswith(
        "redis://"
    )
    assert float(env["BIND_SCHEDULER_INTERVAL"]) > 0 and "deploy" not in scheduler  # no GPU reservation
    for name in ("worker", "worker-cpu"):
        assert services[name]["environment"]["BIND_SCHEDULER_INTERVAL"] == "0", name
