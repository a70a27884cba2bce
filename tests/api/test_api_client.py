"""``bind-audit submit|status|results|report``: the command-line client against the API."""

from __future__ import annotations

import argparse
import threading
import time
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.cli import build_parser
from app.client import AUDIT_FAILED, HTTP_ERROR, OK, THRESHOLD, crossed, parse_rule, run
from app.core.db.tables import Audit


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def _succeed(sessions: sessionmaker[Session], audit_id: str, delta_sp: float, delay: float = 0.0) -> None:
    time.sleep(delay)
    results = {"metrics": {"test": {"delta_sp": delta_sp, "delta_eo": 0.05, "gamma": 0.2}}}
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="succeeded", results=results))


def test_rules() -> None:
    assert parse_rule("delta_sp>0.1") == ("delta_sp", ">", 0.1)
    assert parse_rule(" gamma >= 1e-2 ") == ("gamma", ">=", 0.01)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_rule("delta_sp=0.1")
    results = {"metrics": {"test": {"delta_sp": 0.3}}}
    assert crossed(results, [("delta_sp", ">", 0.1)]) and not crossed(results, [("delta_sp", "<", 0.1)])
    assert crossed(results, [("auc", "<", 0.5)])  # missing metric: fail closed


def test_submit_wait_fail_on_status_results(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    http = TestClient(client.app, headers=auth)
    lines: list[str] = []
    settings = '{"training": {"epochs": 1}, "budgets": [1]}'
    argv = ["submit", "--graph-id", graph_id, "--settings", settings, "--wait", "--poll", "0.05"]

    def submit_and_succeed(delta_sp: float, *extra: str) -> int:
        before = {a.id for a in sessions().query(Audit.id).all()}

        def finish() -> None:
            for _ in range(100):
                new = {a.id for a in sessions().query(Audit.id).all()} - before
                if new:
                    _succeed(sessions, str(new.pop()), delta_sp, delay=0.1)
                    return
                time.sleep(0.02)

        thread = threading.Thread(target=finish)
        thread.start()
        code = run(_args(*argv, *extra), http, lines.append)
        thread.join()
        return code

    assert submit_and_succeed(0.3, "--fail-on", "delta_sp>0.1") == THRESHOLD
    assert "delta_sp=0.3 > 0.1" in lines[-1]
    assert submit_and_succeed(0.05, "--fail-on", "delta_sp>0.1", "--fail-on", "gamma>0.5") == OK
    audit_id = __import__("json").loads(lines[-1])["id"]
    assert run(_args("status", audit_id), http, lines.append) == OK and '"succeeded"' in lines[-1]
    assert run(_args("results", audit_id, "--fail-on", "delta_eo>0.01"), http, lines.append) == THRESHOLD
    assert run(_args("submit", "--graph-id", graph_id), http, lines.append) == OK and '"queued"' in lines[-1]
    queued = __import__("json").loads(lines[-1])["id"]
    assert run(_args("results", queued), http, lines.append) == AUDIT_FAILED
    assert run(_args("status", str(uuid.uuid4())), http, lines.append) == HTTP_ERROR
