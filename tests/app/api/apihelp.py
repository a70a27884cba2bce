"""Helpers shared by the API tests."""

from __future__ import annotations

import base64
import io
import json
import uuid
from typing import Any

import httpx
from fastapi.testclient import TestClient
from hostile_files import zeros_npz  # noqa: F401  (re-exported for the API and security tests)
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.audits import run as runner
from app.core.db.tables import Audit
from app.core.settings import Settings
from bind_core.data.datasets import save_npz, synthetic

PROBLEM_BASE = "https://bind-audit.dev/problems/"


def npz_bytes(num_nodes: int = 120, seed: int = 0) -> bytes:
    """A small synthetic graph as ``.npz`` bytes."""
    buffer = io.BytesIO()
    save_npz(synthetic(num_nodes, seed=seed, train_per_class=20), buffer)
    return buffer.getvalue()


def assert_problem(response: httpx.Response, status: int, slug: str | None = None) -> dict[str, Any]:
    """Check an RFC 9457 answer (status, media type, members, no stack trace) and return its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["title"]
    assert str(body["type"]).startswith(PROBLEM_BASE)
    if slug is not None:
        assert body["type"] == PROBLEM_BASE + slug, body
    assert "Traceback" not in response.text
    return body


def forge_token(kind: str, key: list[Any]) -> str:
    """A page token as the server encodes one, holding whatever ``key`` a client chose (``json`` keeps big ints)."""
    raw = json.dumps({"k": kind, "v": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def fields(problem: dict[str, Any]) -> set[str]:
    """The field names in a problem's ``errors``."""
    return {str(e["field"]) for e in problem.get("errors") or []}


def run_alone(
    client: TestClient, auth: dict[str, str], audit_id: str, sessions: sessionmaker[Session], settings: Settings
) -> tuple[str, dict[str, Any]]:
    """Run the queued audit ``audit_id`` on the CPU as a worker would, after setting aside what other tests in this
    database left queued (a worker takes the audit whose turn it is, of any tenant); its outcome's status and the
    audit read back."""
    with sessions.begin() as session:
        session.execute(
            update(Audit).where(Audit.state == "queued", Audit.id != uuid.UUID(audit_id)).values(state="cancelled")
        )
    outcome = runner.execute(audit_id, sessions=sessions, settings=settings, device="cpu")
    return outcome.status, dict(client.get(f"/v1/audits/{audit_id}", headers=auth).json())


def register_model(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    weights: bytes,
    config: dict[str, Any],
    name: str = "m.safetensors",
    **files: tuple[str, bytes],
) -> httpx.Response:
    """``POST /v1/models``: ``weights`` (as file ``name``) and ``config`` for the graph ``graph_id``, and any other
    ``files`` (``outputs``)."""
    return client.post(
        "/v1/models",
        headers=auth,
        files={"weights": (name, weights), **files},
        data={"config": json.dumps(config), "graph_id": graph_id},
    )
