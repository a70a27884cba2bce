"""The scheduler as a process of its own (``bind-audit scheduler``) beside a worker's scheduler thread: three
schedulers ticking at once against Postgres start every slot of every schedule exactly once."""

from __future__ import annotations

import itertools
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest
from bind_it import ROOT, WorkerPool, synthetic_npz
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.db.session import engine_for, session_factory
from app.core.db.tables import Audit

pytestmark = pytest.mark.integration

TICK = "0.05"  # far more often than the slots come, so the schedulers contend for every slot
CLAIM = re.compile(r"schedule ([0-9a-f-]{36}): slot (\S+) -> audit ([0-9a-f-]{36})")


def start_scheduler(env: dict[str, str], folder: Path, name: str) -> tuple[subprocess.Popen[bytes], Path]:
    """``bind-audit scheduler`` (through the CLI module) in a process of its own; waits until it ticks."""
    log = folder / f"{name}.log"
    with log.open("wb") as handle:
        cmd = [sys.executable, "-m", "app.cli", "scheduler", f"--interval={TICK}"]
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=handle, stderr=handle)
    deadline = time.monotonic() + 90
    while "scheduler started" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"scheduler {name} did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    return process, log


def claims(log: Path) -> list[tuple[str, str, str]]:
    """``(schedule id, slot, audit id)`` of every slot this scheduler started, from its log."""
    return CLAIM.findall(log.read_text(errors="replace"))


def test_standalone_schedulers_and_a_worker_thread_start_each_slot_once(
    client: TestClient, workers: WorkerPool, database_url: str
) -> None:
    # Graphs deleted once their schedules were made (a name that never existed is refused at creation): each
    # slot's audit is recorded failed at once, so no audit runs and the test measures only how slots are claimed.
    # All of it before any scheduler starts, so that none takes a slot while its graph still exists.
    ids = []
    for _ in range(3):
        name = f"absent-{uuid.uuid4().hex[:8]}"
        graph = client.post("/v1/graphs", files={"npz": ("a.npz", synthetic_npz(60, seed=1))}, data={"name": name})
        assert graph.status_code == 201, graph.text
        body = {"graph_name": name, "interval_seconds": 1, "audit": {"budgets": [1]}}
        response = client.post("/v1/schedules", json=body)
        assert response.status_code == 201, response.text
        assert client.delete(f"/v1/graphs/{graph.json()['id']}").status_code == 204
        ids.append(response.json()["id"])
    env = {**workers.env, "BIND_SCHEDULER_INTERVAL": TICK, "BIND_LOG_FORMAT": "text"}
    standalone = [start_scheduler(env, workers.folder, f"scheduler{i}-{uuid.uuid4().hex[:6]}") for i in range(2)]
    worker = workers.start(BIND_SCHEDULER_INTERVAL=TICK)
    time.sleep(6)
    for schedule_id in ids:
        assert client.post(f"/v1/schedules/{schedule_id}/pause").json()["state"] == "paused"
    time.sleep(0.5)  # a tick that took a slot just before the pause commits it
    for process, _ in standalone:
        process.send_signal(signal.SIGTERM)
    codes = [process.wait(timeout=30) for process, _ in standalone]
    logs = {log.name: claims(log) for _, log in standalone}
    logs[worker.name] = claims(worker.log)
    worker.stop()
    assert codes == [0, 0], [log.read_text(errors="replace")[-2000:] for _, log in standalone]

    with session_factory(engine_for(database_url))() as session:
        rows = session.execute(
            select(Audit.schedule_id, Audit.slot_time, Audit.id, Audit.state).where(
                Audit.schedule_id.in_([uuid.UUID(i) for i in ids])
            )
        ).all()
    per_slot = Counter((str(r.schedule_id), r.slot_time) for r in rows)
    assert per_slot and max(per_slot.values()) == 1, per_slot  # one audit per slot in the database
    logged = [(s, datetime.fromisoformat(slot), a) for found in logs.values() for s, slot, a in found if s in ids]
    assert Counter((s, slot) for s, slot, _ in logged) == per_slot  # each slot claimed by exactly one scheduler
    assert {a for _, _, a in logged} == {str(r.id) for r in rows} and {r.state for r in rows} == {"failed"}
    claimers = {name for name, found in logs.items() if any(s in ids for s, _, _ in found)}
    print("slots claimed per scheduler:", {name: len(found) for name, found in logs.items()}, "audits:", len(rows))
    assert len(claimers) >= 2, {name: len(found) for name, found in logs.items()}  # they really competed
    all_logs = "".join(log.read_text(errors="replace") for _, log in standalone) + worker.log.read_text()
    assert "already ran; skipped" not in all_logs  # the row lock decided, not the unique constraint
    for schedule_id in ids:
        slots = sorted(slot for (s, slot) in per_slot if s == schedule_id)
        assert len(slots) >= 4, slots  # a slot every second for ~6 s, with some slack for a loaded machine
        assert all((b - a).total_seconds() % 1 == 0 for a, b in itertools.pairwise(slots))
        client.delete(f"/v1/schedules/{schedule_id}")
