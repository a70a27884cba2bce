"""One access-log line per request, in the configured format, from a real API process.

Two ways the API runs: ``bind-audit serve`` (whose command line sets up plain logging before the API starts:
:func:`app.cli.configure_cli_logging`, then :func:`app.cli.api_server`) and ``uvicorn --factory`` (the
Dockerfile and docker-compose, uvicorn's access log on by default). Before the fix, each request was logged
by uvicorn (plain) and by the app (JSON), and under ``serve`` the app's line twice more (plain and JSON).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVE = """
import sys
from app.cli import api_server, configure_cli_logging
configure_cli_logging()
api_server("127.0.0.1", int(sys.argv[1])).run()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_api_and_request(launcher: str, log_format: str, folder: Path, path: str, request_id: str) -> list[str]:
    """Start the API, ``GET path`` once with ``request_id``, stop it; returns every line it wrote."""
    port = _free_port()
    command = {
        "serve": [sys.executable, "-c", SERVE, str(port)],
        "uvicorn": [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory", "--host", "127.0.0.1",
                    "--port", str(port)],
    }[launcher]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BIND_LOG_FORMAT": log_format,
           "BIND_DATABASE_URL": f"sqlite:///{folder}/bind.db",
           "BIND_BROKER_URL": f"sqla+sqlite:///{folder}/b.db"}  # fmt: skip
    output = folder / "out.log"
    with output.open("wb") as sink:
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                assert process.poll() is None, output.read_text()
                assert time.monotonic() < deadline, "the API did not answer within 60 s"
                try:
                    httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.2)
            response = httpx.get(f"http://127.0.0.1:{port}{path}", headers={"X-Request-ID": request_id}, timeout=10)
            assert response.status_code == 404
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
    return output.read_text().splitlines()


@pytest.mark.heavy  # 29 s here
@pytest.mark.parametrize("launcher", ["serve", "uvicorn"])
@pytest.mark.parametrize("log_format", ["json", "text"])
def test_one_access_line_per_request_in_the_configured_format(launcher: str, log_format: str, tmp_path: Path) -> None:
    path, request_id = f"/no-such-page-{uuid.uuid4().hex}", uuid.uuid4().hex
    lines = run_api_and_request(launcher, log_format, tmp_path, path, request_id)
    about = [line for line in lines if path in line]
    assert len(about) == 1, "\n".join(lines)
    started = [line for line in lines if "Started server process" in line]
    assert len(started) == 1, "\n".join(lines)
    if log_format == "json":
        record = json.loads(about[0])
        assert record["logger"] == "app.access" and record["request_id"] == request_id
        assert record["message"].startswith(f"GET {path} 404 ")
        assert json.loads(started[0])["logger"] == "uvicorn.error"  # uvicorn's own messages in JSON too
    else:
        assert not about[0].startswith("{") and f" INFO app.access GET {path} 404 " in about[0]
        assert " INFO uvicorn.error Started server process" in started[0]
    assert not [line for line in lines if line.startswith("INFO:")], "no line in uvicorn's own format"
