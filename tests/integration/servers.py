"""Short, always-restored outages of this machine's Postgres and Redis, for the fault tests.

Other test runs share these servers, so each outage lasts seconds and the server is started again in a
``finally`` and waited for, whatever the test did. The commands are the machine's own (see .ci/run).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REDIS_START = [
    "redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1", "--port", "6379", "--save", "",
    "--appendonly", "no", "--dir", "/var/lib/redis", "--logfile", "/var/log/redis/ci.log",
]  # fmt: skip


def _cluster() -> list[str]:
    version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[0]
    return ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main"]


def _wait(probe: list[str], expect: str | None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=5, check=False)
        if result.returncode == 0 and (expect is None or expect in result.stdout):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{probe[0]} did not answer within {timeout}s")


def postgres_up() -> bool:
    return subprocess.run(["pg_isready", "-h", "127.0.0.1"], capture_output=True, check=False).returncode == 0


def redis_up() -> bool:
    result = subprocess.run(["redis-cli", "-h", "127.0.0.1", "ping"], capture_output=True, text=True, check=False)
    return "PONG" in result.stdout


def start_postgres() -> None:
    if not postgres_up():
        subprocess.run([*_cluster(), "start"], check=False, timeout=60)
    _wait(["pg_isready", "-h", "127.0.0.1"], None)


def start_redis() -> None:
    if not redis_up():
        subprocess.run(REDIS_START, check=False, timeout=30)
    _wait(["redis-cli", "-h", "127.0.0.1", "ping"], "PONG")


@contextmanager
def postgres_stopped() -> Iterator[None]:
    """Postgres stopped (fast shutdown: sessions are cut) inside the block, started again after it."""
    try:
        subprocess.run([*_cluster(), "stop", "-m", "fast"], check=True, timeout=60)
        yield
    finally:
        start_postgres()


def restart_redis() -> None:
    """Shut Redis down without saving (every queued message is lost) and start it again at once."""
    try:
        subprocess.run(["redis-cli", "-h", "127.0.0.1", "shutdown", "nosave"], check=False, timeout=30)
        deadline = time.monotonic() + 10
        while redis_up() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        start_redis()
