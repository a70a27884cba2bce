"""Helpers of the end-to-end tests: worker processes, audit requests, polling."""

from __future__ import annotations

import io
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATASETS = ROOT.parent / "shared" / "datasets"


@dataclass
class Worker:
    """One Celery worker subprocess and its log."""

    process: subprocess.Popen[bytes]
    log: Path
    name: str

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "ready." in self.log.read_text(errors="replace"):
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"worker {self.name} did not start:\n{self.log.read_text(errors='replace')[-4000:]}")

    def kill(self) -> None:
        """SIGKILL: no warm shutdown, no ack, no cleanup (a lost machine)."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class WorkerPool:
    """Starts workers for one test module and stops them all at its end."""

    env: dict[str, str]
    folder: Path
    workers: list[Worker] = field(default_factory=list)

    def start(self, **extra_env: str) -> Worker:
        name = f"it{len(self.workers)}-{uuid.uuid4().hex[:6]}"
        log = self.folder / f"{name}.log"
        handle = log.open("wb")
        celery = ["-m", "celery", "-A", "worker.celery_app", "worker", "--pool=solo", "--concurrency=1"]
        options = ["--loglevel=INFO", "--without-gossip", "--without-mingle", "-n", f"{name}@%h"]
        cmd = [sys.executable, *celery, *options]
        process = subprocess.Popen(cmd, cwd=ROOT, env={**self.env, **extra_env}, stdout=handle, stderr=handle)
        worker = Worker(process, log, name)
        self.workers.append(worker)
        worker.wait_ready()
        return worker

    def stop_all(self) -> None:
        for worker in self.workers:
            worker.stop()

    def wait_log(self, text: str, timeout: float = 60.0) -> None:
        """Wait until some worker's log contains ``text``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.logs(tail=10**9):
                return
            time.sleep(0.2)
        raise AssertionError(f"no worker logged {text!r} within {timeout}s:\n{self.logs()}")

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(f"--- {w.name}\n{w.log.read_text(errors='replace')[-tail:]}" for w in self.workers)


def synthetic_npz(num_nodes: int = 300, seed: int = 3) -> bytes:
    from bind_core.data.datasets import save_npz, synthetic

    buffer = io.BytesIO()
    save_npz(synthetic(num_nodes, seed=seed), buffer)
    return buffer.getvalue()


def make_audit_body(graph_id: str, *, epochs: int = 50, **overrides: Any) -> dict[str, Any]:
    """A cheap audit: few epochs, one debiasing budget of one node, no validation retraining.

    Each retraining (debiasing budget, validated node) ends with bind_core's float64 L-BFGS polish, which
    costs seconds on a 2-core machine, so the tests keep their number small.
    """
    body: dict[str, Any] = {
        "graph_id": graph_id,
        "training": {"epochs": epochs, "lr": 0.01},
        "budgets": [1],
        "validation_sample": 0,
    }
    body.update(overrides)
    return body


def wait_for_audit(
    client: TestClient, audit_id: str, states: set[str], *, timeout: float = 90.0,
    until: Callable[[dict[str, Any]], bool] | None = None, pool: WorkerPool | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Poll ``GET /v1/audits/{id}`` until its state is in ``states`` (and ``until`` holds)."""
    deadline = time.monotonic() + timeout
    audit: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = client.get(f"/v1/audits/{audit_id}")
        assert response.status_code == 200, response.text
        audit = response.json()
        if audit["state"] in states and (until is None or until(audit)):
            return audit
        time.sleep(0.2)
    logs = pool.logs() if pool is not None else ""
    raise AssertionError(f"audit {audit_id} not in {states} after {timeout}s: {audit}\n{logs}")
