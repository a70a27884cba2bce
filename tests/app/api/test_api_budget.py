"""Per-audit budgets: oversized audits are refused with 422 ``resource-limit`` before anything is queued."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis
from apihelp import assert_problem
from fastapi.testclient import TestClient

from app.core.settings import Settings
from app.main import create_app

OVERSIZED: list[tuple[dict[str, Any], str]] = [
    # The two requests of issue 16: a dense Hessian of ~50,000 parameters; an 8-layer, 16-head GAT of width 4096.
    ({"solver": "exact", "model": {"hidden": 4096}, "training": {"epochs": 1}}, "hessian"),
    ({"model": {"arch": "gat", "layers": 8, "hidden": 4096, "heads": 16}}, "lanczos"),  # its Krylov basis
]


def _queue_length(redis_client: redis.Redis) -> int:
    return int(redis_client.llen("celery"))  # type: ignore[arg-type]  # sync client


@pytest.mark.parametrize(("overrides", "largest"), OVERSIZED, ids=["exact-4096", "gat-8x4096x16"])
def test_oversized_audit_is_refused_before_queueing(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    redis_client: redis.Redis,
    overrides: dict[str, Any],
    largest: str,
) -> None:
    queued = _queue_length(redis_client)
    start = time.perf_counter()
    response = client.post("/v1/audits", headers=auth, json={"graph_id": graph_id, **overrides})
    seconds = time.perf_counter() - start
    problem = assert_problem(response, 422, "resource-limit")
    (memory,) = [limit for limit in problem["limits"] if limit["limit"] == "BIND_AUDIT_MAX_MEMORY"]
    assert memory["allowed"] == 8 * 1024**3
    assert memory["estimated"] > memory["allowed"] and memory["excess"] == memory["estimated"] - memory["allowed"]
    assert "BIND_AUDIT_MAX_MEMORY" in problem["detail"] and f"the largest part is {largest}" in problem["detail"]
    assert problem["estimate"]["peak_memory_bytes"] == memory["estimated"]
    assert seconds < 2.0, seconds  # refused from sizes alone: nothing is built or allocated
    print(json.dumps({"request": overrides, "refused_in_s": round(seconds, 4), "estimated": memory["estimated"]}))
    assert client.get("/v1/audits", headers=auth).json()["items"] == []
    assert _queue_length(redis_client) == queued


def test_work_limit_names_itself(settings: Settings, auth: dict[str, str], graph_id: str) -> None:
    app = create_app(settings.model_copy(update={"audit_max_work": 1e10, "audit_max_memory": 0}))
    with TestClient(app) as limited:
        response = limited.post("/v1/audits", headers=auth, json={"graph_id": graph_id})
        problem = assert_problem(response, 422, "resource-limit")
        assert [limit["limit"] for limit in problem["limits"]] == ["BIND_AUDIT_MAX_WORK"]
        (work,) = problem["limits"]
        assert work["allowed"] == 1e10 and work["excess"] == pytest.approx(work["estimated"] - 1e10)
        # The paper's default audit of a 120-node graph: its validation retrains are the largest part.
        assert "the largest part is validation" in problem["detail"]
        cheap = {"graph_id": graph_id, "training": {"epochs": 5}, "validation_sample": 0, "budgets": [1]}
        accepted = limited.post("/v1/audits", headers=auth, json=cheap)
        assert accepted.status_code == 202, accepted.text


def test_limits_of_zero_turn_the_budget_off(settings: Settings, auth: dict[str, str], graph_id: str) -> None:
    app = create_app(settings.model_copy(update={"audit_max_work": 0, "audit_max_memory": 0}))
    with TestClient(app) as unlimited:
        body = {"graph_id": graph_id, **OVERSIZED[0][0]}
        assert unlimited.post("/v1/audits", headers=auth, json=body).status_code == 202
