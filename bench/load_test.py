"""Load test on loopback: a queue of small audits on two real workers while clients read results.

Starts a private stack (a fresh Postgres database, a Redis DB number, one uvicorn API process, ``--workers``
Celery worker processes), uploads one synthetic graph, queues ``--audits`` audits (``--nodes`` nodes,
``--epochs`` epochs, budgets [1], no validation, no bootstrap) and, while they run, ``--readers`` client
threads read audits, listings and influence pages. Bounded: at most ``--timeout`` seconds; everything is
stopped and dropped at the end. Then it checks that every audit succeeded exactly once (``attempts == 1``,
one set of influence rows) and reports throughput and latencies.

    python bench/load_test.py                       # 50 audits, 2 workers, 4 readers; bench/out/load.json
    python bench/load_test.py --audits 10 --out -   # the CI-sized run (tests/integration/test_load.py)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import func, select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_service import _ready, database, free_port, percentiles, wait_until  # noqa: E402

TERMINAL = {"succeeded", "failed", "cancelled"}


@contextmanager
def stack(env: dict[str, str], port: int, workers: int, logs: Path) -> Iterator[str]:
    """One uvicorn API process and ``workers`` worker processes; yields the API's base URL."""
    logs.mkdir(parents=True, exist_ok=True)
    api = [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    worker = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "--pool=solo",
              "--concurrency=1", "--loglevel=INFO", "--without-gossip", "--without-mingle"]  # fmt: skip
    commands = [(api, logs / "api.log")] + [
        ([*worker, "-n", f"load{i}-{uuid.uuid4().hex[:4]}@%h"], logs / f"worker{i}.log") for i in range(workers)
    ]
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        for cmd, log in commands
    ]
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        return _ready(base) and all("ready." in log.read_text(errors="replace") for _, log in commands[1:])

    try:
        wait_until(up, 180, "stack start")
        yield base
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _graph_npz(nodes: int) -> bytes:
    from bind_core.data.datasets import save_npz, synthetic

    buffer = io.BytesIO()
    save_npz(synthetic(nodes, seed=7), buffer)
    return buffer.getvalue()


def _read_while_running(base: str, key: str, ids: list[str], stop: threading.Event, out: list[float],
                        errors: list[str], seed: int) -> None:  # fmt: skip
    """One client: GET an audit, the listing, or an influence page, over and over, until ``stop``."""
    rng = random.Random(seed)
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        while not stop.is_set():
            audit_id = rng.choice(ids)
            choices: list[tuple[str, dict[str, str | int]]] = [
                (f"/v1/audits/{audit_id}", {}), ("/v1/audits", {"limit": 20}),
                (f"/v1/audits/{audit_id}/influence", {"order": "harmful", "limit": 50}),
            ]  # fmt: skip
            path, params = rng.choice(choices)
            start = time.perf_counter()
            response = http.get(path, params=params)
            out.append(time.perf_counter() - start)
            if response.status_code not in (200, 409):  # 409: influence of an audit not finished yet
                errors.append(f"{response.status_code} {path}")


def run_load(
    *, audits: int = 50, workers: int = 2, readers: int = 4, nodes: int = 200, epochs: int = 20,
    timeout: float = 900.0, admin_url: str | None = None, redis_url: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run the load test and return its figures (raises AssertionError if any audit is lost or duplicated)."""
    from app.core.db.migrate import upgrade
    from app.core.db.session import make_engine, session_factory
    from app.core.db.tables import Audit, InfluenceRow
    from app.tenants.keys import create_api_key

    admin_url = admin_url or os.environ.get(
        "BIND_TEST_ADMIN_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    )
    redis_url = redis_url or os.environ.get("BIND_LOAD_REDIS_URL", "redis://127.0.0.1:6379/12")
    broker = redis.Redis.from_url(redis_url)
    broker.flushdb()
    logs = ROOT / "var" / f"load-{uuid.uuid4().hex[:6]}"
    with database(admin_url) as db_url:
        upgrade(db_url)
        engine = make_engine(db_url)
        sessions = session_factory(engine)
        with sessions.begin() as session:
            key = create_api_key(session, "load")
        env = {k: v for k, v in os.environ.items() if not k.startswith("BIND_")}
        env.update({
            "BIND_DATABASE_URL": db_url, "BIND_BROKER_URL": redis_url, "BIND_DEVICE": "cpu",
            "BIND_RATE_LIMIT_PER_MINUTE": "100000", "BIND_HEARTBEAT_INTERVAL": "1", "BIND_HEARTBEAT_TIMEOUT": "30",
            "BIND_SWEEP_INTERVAL": "5", "BIND_QUEUED_TIMEOUT": "600", "BIND_LOG_FORMAT": "json",
            "BIND_TENANT_MAX_QUEUED": "0",  # one tenant queues every audit at once (--audits may exceed 50)
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        })  # fmt: skip
        try:
            with stack(env, free_port(), workers, logs) as base:
                figures = _drive(base, key, audits, readers, nodes, epochs, timeout)
        finally:
            broker.flushdb()
        ids = [uuid.UUID(i) for i in figures.pop("ids")]
        with sessions() as session:
            rows = session.execute(select(Audit.id, Audit.state, Audit.attempts, Audit.created_at, Audit.finished_at)
                                   .where(Audit.id.in_(ids))).all()  # fmt: skip
            influence = dict(session.execute(
                select(InfluenceRow.audit_id, func.count() - func.count(func.distinct(InfluenceRow.position)))
                .group_by(InfluenceRow.audit_id)).all())  # fmt: skip
            counts = dict(session.execute(select(InfluenceRow.audit_id, func.count()).group_by(InfluenceRow.audit_id))
                          .all())  # fmt: skip
        engine.dispose()
    states = {str(r.id): r.state for r in rows}
    assert len(rows) == audits and all(s == "succeeded" for s in states.values()), states
    assert all(r.attempts == 1 for r in rows), {str(r.id): r.attempts for r in rows}
    assert all(counts.get(i, 0) > 0 and influence.get(i, 1) == 0 for i in ids), "duplicate or missing influence"
    turnaround = [(r.finished_at - r.created_at).total_seconds() for r in rows]
    figures["audit_turnaround"] = {**{k: v / 1e3 for k, v in percentiles(turnaround).items()}}
    figures["audit_turnaround"] = {k.replace("_ms", "_s"): round(v, 2) for k, v in figures["audit_turnaround"].items()}
    figures["succeeded_exactly_once"] = audits
    figures["influence_rows_per_audit"] = statistics.median(counts.values())
    figures["logs"] = str(logs)
    return figures


def _drive(base: str, key: str, audits: int, readers: int, nodes: int, epochs: int, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
        graph = http.post("/v1/graphs", files={"npz": ("load.npz", _graph_npz(nodes))})
        assert graph.status_code == 201, graph.text
        body = {"graph_id": graph.json()["id"], "training": {"epochs": epochs}, "budgets": [1],
                "validation_sample": 0, "bootstrap": 0}  # fmt: skip
        submit: list[float] = []
        ids: list[str] = []
        start = time.perf_counter()
        for _ in range(audits):
            t = time.perf_counter()
            response = http.post("/v1/audits", json=body)
            submit.append(time.perf_counter() - t)
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])
        stop, reads, errors = threading.Event(), [[] for _ in range(readers)], []  # type: ignore[var-annotated]
        threads = [threading.Thread(target=_read_while_running, args=(base, key, ids, stop, reads[i], errors, i))
                   for i in range(readers)]  # fmt: skip
        for thread in threads:
            thread.start()
        try:
            pending = set(ids)
            while pending and time.monotonic() < deadline:
                page = http.get("/v1/audits", params={"limit": 100, "state": "succeeded"})
                done = {a["id"] for a in page.json()["items"]} if page.status_code == 200 else set()
                for audit_id in list(pending - done)[:20]:
                    if http.get(f"/v1/audits/{audit_id}").json()["state"] in TERMINAL:
                        done.add(audit_id)
                pending -= done
                time.sleep(0.5)
            elapsed = time.perf_counter() - start
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert not pending, f"{len(pending)} audits unfinished after {timeout}s"
    flat = [x for per in reads for x in per]
    return {
        "audits": audits, "nodes": nodes, "epochs": epochs, "readers": readers, "wall_s": round(elapsed, 1),
        "throughput_audits_per_min": round(60 * audits / elapsed, 2),
        "submit": {k: round(v, 1) for k, v in percentiles(submit).items()},
        "reads": {**{k: round(v, 1) for k, v in percentiles(flat).items()}, "requests": len(flat),
                  "errors": len(errors), "rps": round(len(flat) / elapsed, 1)},
        "ids": ids,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--audits", type=int, default=50)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds the audits may take in all")
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "load.json"), help="'-': print only")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    figures = run_load(audits=args.audits, workers=args.workers, readers=args.readers, nodes=args.nodes,
                       epochs=args.epochs, timeout=args.timeout)  # fmt: skip
    figures["load_average_before"] = round(load, 2)
    figures["load_average_after"] = round(os.getloadavg()[0], 2)
    figures["cpus"] = os.cpu_count()
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out != "-":
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
