"""The deployment files, checked without Docker (no engine runs on the CI machine): parsed and inspected."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_compose_has_the_services_with_health_checks(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) >= {"api", "worker", "worker-cpu", "postgres", "redis", "migrate"}
    assert services["postgres"]["image"].startswith("postgres:16")
    assert services["redis"]["image"].startswith("redis:7")
    for name in ("api", "worker", "worker-cpu", "postgres", "redis"):
        assert services[name]["healthcheck"]["test"], name
    assert "/healthz" in " ".join(services["api"]["healthcheck"]["test"])


def test_migrate_runs_once_before_api_and_workers(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["migrate"]["command"] == ["bind-audit", "migrate"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("api", "worker", "worker-cpu"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully", name
        assert depends["redis"]["condition"] == "service_healthy", name


def test_gpu_worker_reserves_a_gpu_and_the_cpu_worker_is_a_profile(compose: dict[str, Any]) -> None:
    services = compose["services"]
    devices = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["capabilities"] == ["gpu"]
    assert services["worker"]["build"]["args"]["TORCH_VARIANT"] == "cuda"
    assert services["worker"]["environment"]["BIND_DEVICE"] == "cuda"
    assert services["worker-cpu"]["profiles"] == ["cpu"]
    assert services["worker-cpu"]["environment"]["BIND_DEVICE"] == "cpu"
    assert "deploy" not in services["worker-cpu"]


def test_every_bind_service_points_at_postgres_and_redis(compose: dict[str, Any]) -> None:
    for name in ("api", "worker", "worker-cpu", "migrate"):
        env = compose["services"][name]["environment"]
        assert env["BIND_DATABASE_URL"].startswith("postgresql+psycopg://"), name
        assert env["BIND_BROKER_URL"].startswith("redis://redis:6379"), name


def test_dockerfile_is_slim_non_root_with_a_torch_variant() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert re.search(r"^ARG TORCH_VARIANT=cpu$", text, re.M)
    users = re.findall(r"^USER (\S+)$", text, re.M)
    assert users and users[-1] not in ("root", "0")
    assert "torch==${TORCH_VERSION}" in text


def test_ci_script_is_executable_bash_and_runs_the_readme_command() -> None:
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in text
    assert text.rstrip().endswith("scripts/check")
    checks = (ROOT / "scripts" / "check").read_text()
    assert os.access(ROOT / "scripts" / "check", os.X_OK)
    for step in ("ruff check", "ruff format --check", "mypy", "lint-imports", "pytest"):
        assert step in checks
    assert "scripts/check" in (ROOT / "README.md").read_text()
    subprocess.run(["bash", "-n", str(script)], check=True)
