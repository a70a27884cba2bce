"""Service benchmark: API latency under concurrent load, and the service's overhead on a real audit.

Starts a private stack on this machine: a fresh Postgres database, a Redis DB number, one uvicorn API process
and one Celery worker process (loopback only). Then:

1. ``POST /v1/audits`` for a built-in dataset (Income by default) and polls ``GET /v1/audits/{id}`` every
   0.1 s until ``succeeded``; the same audit is then run directly with ``bind_core.pipeline.audit.run_audit`` in a
   fresh process (dataset load included, as the worker loads it too). ``--repeat`` pairs, alternated;
   overhead = median service time − median direct time, and the time outside the worker's run.
2. ``--threads`` threads × ``--requests`` requests each of ``GET /v1/audits/{id}`` and of one influence page
   (``order=harmful&limit=50``) against the finished audit: p50, p99 and throughput.

    python bench/bench_service.py                      # Income, the paper's default audit settings
    python bench/bench_service.py --config '{"training": {"epochs": 200}, "validation_sample": 10}'
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50, p99 and mean in milliseconds."""
    ordered = sorted(samples)
    cuts = statistics.quantiles(ordered, n=100, method="inclusive")
    return {"p50_ms": cuts[49] * 1e3, "p99_ms": cuts[98] * 1e3, "mean_ms": statistics.fmean(ordered) * 1e3}


def load_test(base: str, key: str, path: str, params: dict[str, Any], threads: int, requests: int) -> dict[str, Any]:
    """``threads`` clients, each sending ``requests`` sequential GETs over one keep-alive connection."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    errors: list[int] = [0] * threads
    barrier = threading.Barrier(threads + 1)

    def client(i: int) -> None:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            http.get(path, params=params)  # warm the connection
            barrier.wait()
            for _ in range(requests):
                t = time.perf_counter()
                response = http.get(path, params=params)
                latencies[i].append(time.perf_counter() - t)
                errors[i] += response.status_code != 200

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    start = time.perf_counter()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    flat = [x for per in latencies for x in per]
    return {**percentiles(flat), "requests": len(flat), "errors": sum(errors), "throughput_rps": len(flat) / elapsed}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def database(admin_url: str) -> Iterator[str]:
    name = f"bind_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def stack(env: dict[str, str], port: int, logs: Path) -> Iterator[str]:
    """One uvicorn API process and one Celery worker process; yields the API's base URL."""
    logs.mkdir(parents=True, exist_ok=True)
    api_cmd = [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory", "--host", "127.0.0.1",
               "--port", str(port), "--log-level", "warning", "--no-access-log"]  # fmt: skip
    worker_cmd = [sys.executable, "-m", "celery", "-A", "worker.celery_app", "worker", "--pool=solo",
                  "--concurrency=1", "--loglevel=INFO", "--without-gossip", "--without-mingle"]  # fmt: skip
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        for cmd, out in ((api_cmd, (logs / "api.log").open("wb")), (worker_cmd, (logs / "worker.log").open("wb")))
    ]
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ready(base) and "ready." in (logs / "worker.log").read_text(), 120, "stack start")
        yield base
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _ready(base: str) -> bool:
    try:
        return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def wait_until(predicate: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise TimeoutError(what)


def service_audit(base: str, key: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """POST the audit and poll it to a final state; the wall time seen by a client."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
        t0 = time.perf_counter()
        response = http.post("/v1/audits", json=body)
        response.raise_for_status()
        audit_id = response.json()["id"]
        deadline = time.monotonic() + timeout
        while True:
            audit = http.get(f"/v1/audits/{audit_id}").json()
            if audit["state"] not in ("queued", "running"):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"audit {audit_id} still {audit['state']}")
            time.sleep(0.1)
        wall = time.perf_counter() - t0
    if audit["state"] != "succeeded":
        raise RuntimeError(f"audit {audit_id} ended {audit['state']}: {audit['error']}")
    ts = {k: datetime.fromisoformat(audit[k]) for k in ("created_at", "started_at", "finished_at")}
    return {
        "audit_id": audit_id,
        "wall_s": wall,
        "queue_wait_s": (ts["started_at"] - ts["created_at"]).total_seconds(),
        "worker_run_s": (ts["finished_at"] - ts["started_at"]).total_seconds(),
        "stage_timings_s": audit["results"].get("timings", {}),
    }


DIRECT = """
import json, sys, time
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.data.datasets import load
dataset, root, config = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t0 = time.perf_counter()
graph = load(dataset, root)
result = run_audit(graph, AuditConfig.from_dict(config), device="cpu")
print(json.dumps({"wall_s": time.perf_counter() - t0, "stage_timings_s": result.to_dict().get("timings", {})}))
"""


def direct_audit(dataset: str, data_root: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The same audit through ``bind_core`` alone, in a fresh process like a worker's (dataset load
    included, interpreter and import time excluded)."""
    from app.audits.schemas import AuditCreate

    full = AuditCreate.model_validate({"dataset": dataset, **config}).config_dict()  # the API's defaults
    out = subprocess.run([sys.executable, "-c", DIRECT, dataset, str(data_root), json.dumps(full)], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return dict(json.loads(out.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="income")
    parser.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "datasets")
    parser.add_argument("--config", default="{}", help="audit settings as JSON (POST /v1/audits body fields)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--requests", type=int, default=200, help="requests per thread")
    parser.add_argument("--admin-url", default=os.environ.get("BIND_TEST_ADMIN_URL",
                        "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"))  # fmt: skip
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--repeat", type=int, default=3, help="service and direct runs, alternated")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "service.json")
    args = parser.parse_args(argv)

    from app.core.db.migrate import upgrade
    from app.core.db.session import make_engine, session_factory
    from app.tenants.keys import create_api_key

    config = json.loads(args.config)
    report: dict[str, Any] = {"dataset": args.dataset, "config": config, "threads": args.threads,
                              "requests_per_thread": args.requests, "cpus": os.cpu_count()}  # fmt: skip
    broker = redis.Redis.from_url(args.redis_url)
    broker.flushdb()
    with database(args.admin_url) as url:
        upgrade(url)
        engine = make_engine(url)
        with session_factory(engine).begin() as session:
            key = create_api_key(session, "bench")
        engine.dispose()
        env = {k: v for k, v in os.environ.items() if not k.startswith("BIND_")}
        env.update(BIND_DATABASE_URL=url, BIND_BROKER_URL=args.redis_url, BIND_DATA_ROOT=str(args.data_root),
                   BIND_DEVICE="cpu", PYTHONPATH=str(ROOT))  # fmt: skip
        with stack(env, free_port(), args.out.parent / "logs") as base:
            report["service"], report["direct"] = [], []
            for i in range(args.repeat):
                print(f"[{i + 1}/{args.repeat}] {args.dataset} audit through the service ...", flush=True)
                report["service"].append(service_audit(base, key, {"dataset": args.dataset, **config}, args.timeout))
                print(json.dumps(report["service"][-1]), flush=True)
                print(f"[{i + 1}/{args.repeat}] the same audit directly through bind_core ...", flush=True)
                report["direct"].append(direct_audit(args.dataset, args.data_root, config))
                print(json.dumps(report["direct"][-1]), flush=True)
            service = statistics.median(r["wall_s"] for r in report["service"])
            direct = statistics.median(r["wall_s"] for r in report["direct"])
            outside = statistics.median(r["wall_s"] - r["worker_run_s"] for r in report["service"])
            report["summary"] = {"service_median_s": service, "direct_median_s": direct,
                                 "overhead_median_s": service - direct, "outside_worker_median_s": outside}  # fmt: skip
            print(json.dumps(report["summary"]), flush=True)
            path = f"/v1/audits/{report['service'][-1]['audit_id']}"
            report["get_audit"] = load_test(base, key, path, {}, args.threads, args.requests)
            print("GET audit:", json.dumps(report["get_audit"]), flush=True)
            page = {"order": "harmful", "limit": 50}
            report["influence_page"] = load_test(base, key, f"{path}/influence", page, args.threads, args.requests)
            print("GET influence page:", json.dumps(report["influence_page"]), flush=True)
    broker.flushdb()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
