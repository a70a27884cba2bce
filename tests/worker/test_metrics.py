"""The worker's own metrics: attempts by outcome, and the stage timings of a succeeded audit's results."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Callable

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from worker import metrics


def _value(name: str, labels: dict[str, str]) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_observe_records_outcomes_and_stage_timings(
    sessions: sessionmaker[Session], new_audit: Callable[..., uuid.UUID], monkeypatch: pytest.MonkeyPatch
) -> None:
    timings = {"training": 1.5, "influence": 0.25}
    audit_id = new_audit(state="succeeded", results={"timings": timings})
    monkeypatch.setattr(metrics, "_serving", True)
    before = _value("bind_audit_attempts_total", {"outcome": "succeeded"})
    training = _value("bind_audit_stage_seconds_sum", {"stage": "training"})
    metrics.observe(str(audit_id), "succeeded", 2.0, sessions)
    metrics.observe(str(uuid.uuid4()), "failed", 0.5, sessions)
    assert _value("bind_audit_attempts_total", {"outcome": "succeeded"}) == before + 1
    assert _value("bind_audit_stage_seconds_sum", {"stage": "training"}) == pytest.approx(training + 1.5)
    assert _value("bind_audit_attempts_total", {"outcome": "failed"}) >= 1
    metrics.observe("not-a-uuid", "succeeded", 1.0, sessions)  # never raises


def test_serve_exposes_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(metrics, "_serving", False)
    metrics.serve(port)
    assert "bind_audit_stage_seconds" in httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
