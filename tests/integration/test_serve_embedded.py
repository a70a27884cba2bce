"""``bind-audit serve`` with no configuration: SQLite, a broker in a SQLite file, one worker; Ctrl-C or SIGTERM
stops both (the worker finishes its audit first) and leaves no process behind."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from bind_it import ROOT, make_audit_body, synthetic_npz

pytestmark = pytest.mark.integration

Served = tuple[subprocess.Popen[bytes], str, dict[str, str], Path]
"""The ``serve`` process, its base URL, its environment and its working folder."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from app.cli import main; sys.exit(main())", *args]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BIND_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    port = free_port()
    log = tmp_path / "serve.log"
    children: list[psutil.Process] = []
    with log.open("wb") as out:
        process = subprocess.Popen(cli("serve", "--port", str(port), "--grace", "60"), cwd=tmp_path, env=env,
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200 and "ready." in log.read_text():
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, log.read_text()[-3000:]
            time.sleep(0.3)
        else:
            raise AssertionError(f"serve did not become ready:\n{log.read_text()[-3000:]}")
        children = psutil.Process(process.pid).children(recursive=True)
        yield process, base, env, tmp_path
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for child in children:  # a failed test must not leave a worker behind
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()


def test_serve_runs_an_audit_and_stops_on_ctrl_c(
    served: tuple[subprocess.Popen[bytes], str, dict[str, str], Path],
) -> None:
    process, base, env, cwd = served
    assert (cwd / "var" / "bind.db").is_file() and (cwd / "var" / "broker.db").is_file()
    key = subprocess.run(cli("keys", "create", "--tenant", "demo"), cwd=cwd, env=env, check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        graph = client.post("/v1/graphs", files={"npz": ("toy.npz", synthetic_npz(), "application/octet-stream")})
        assert graph.status_code == 201, graph.text
        body = make_audit_body(graph.json()["id"])
        audit_id = client.post("/v1/audits", json=body).json()["id"]
        deadline = time.monotonic() + 120
        while (audit := client.get(f"/v1/audits/{audit_id}").json())["state"] in ("queued", "running"):
            assert time.monotonic() < deadline, audit
            time.sleep(0.3)
        assert audit["state"] == "succeeded", audit["error"]
        assert client.get(f"/v1/audits/{audit_id}/influence", params={"limit": 5}).json()["items"]

    children = psutil.Process(process.pid).children(recursive=True)
    assert children, "serve started no worker"
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does (the worker has a group of its own)
    assert process.wait(timeout=30) == 0
    _, alive = psutil.wait_procs(children, timeout=5)
    assert alive == [], "the worker outlived serve"


def test_sigterm_drains_the_worker_and_leaves_no_process(served: Served) -> None:
    """SIGTERM to ``serve`` alone, as Docker and systemd send it, while an audit runs: the API stops, the
    worker finishes that audit (Celery's warm shutdown) and exits, ``serve`` exits 0, no child is left."""
    process, base, env, cwd = served
    children = psutil.Process(process.pid).children(recursive=True)
    assert children, "serve started no worker"
    key = subprocess.run(cli("keys", "create", "--tenant", "demo"), cwd=cwd, env=env, check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        graph = client.post("/v1/graphs", files={"npz": ("toy.npz", synthetic_npz(), "application/octet-stream")})
        assert graph.status_code == 201, graph.text
        audit_id = client.post("/v1/audits", json=make_audit_body(graph.json()["id"])).json()["id"]
        deadline = time.monotonic() + 60
        while client.get(f"/v1/audits/{audit_id}").json()["state"] == "queued":
            assert time.monotonic() < deadline, "the audit never started"
            time.sleep(0.1)
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=90) == 0
    print(f"\nSIGTERM: serve exited 0 {time.monotonic() - signalled:.1f} s after the signal")
    _, alive = psutil.wait_procs(children, timeout=5)
    assert alive == [], f"outlived serve: {alive}"
    with sqlite3.connect(cwd / "var" / "bind.db") as db:
        state = db.execute("SELECT state FROM audits WHERE id = ?", (uuid.UUID(audit_id).hex,)).fetchone()
    assert state == ("succeeded",)  # drained, not killed
