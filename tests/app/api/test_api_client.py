"""``bind-audit submit|status|results|report``: the command-line client against the API."""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app import gates
from app.cli import build_parser
from app.client import AUDIT_FAILED, HTTP_ERROR, OK, THRESHOLD, crossed, edges_summary, run
from app.core.db.tables import Audit
from app.gates import Rule, WarningRule, judge, parse_rule
from bind_core.data.datasets import synthetic
from bind_core.pipeline import WARNING_CODES
from bind_core.pipeline.audit import AuditConfig, run_audit


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def _succeed(
    sessions: sessionmaker[Session],
    audit_id: str,
    delta_sp: float,
    delay: float = 0.0,
    warnings: list[str] | None = None,
    codes: list[str] | None = None,
) -> None:
    time.sleep(delay)
    results = {
        "metrics": {"test": {"delta_sp": delta_sp, "delta_eo": 0.05, "gamma": 0.2}},
        "summary": {"verdict": f"Biased: a gap of {100 * delta_sp:.1f} points", "text": ""},
    }
    with sessions.begin() as session:
        session.execute(
            update(Audit)
            .where(Audit.id == uuid.UUID(audit_id))
            .values(state="succeeded", results=results, warnings=warnings, warning_codes=codes)
        )


def test_rules() -> None:
    assert parse_rule("delta_sp>0.1") == Rule("delta_sp", None, ">", 0.1)
    assert parse_rule(" gamma >= 1e-2 ") == Rule("gamma", None, ">=", 0.01)
    with pytest.raises(argparse.ArgumentTypeError):
        parse_rule("delta_sp=0.1")
    results = {"metrics": {"test": {"delta_sp": 0.3}}}
    assert crossed(results, [parse_rule("delta_sp>0.1")]) and not crossed(results, [parse_rule("delta_sp<0.1")])
    assert crossed(results, [parse_rule("auc<0.5")])  # missing metric: fail closed


def test_warning_rules_read_the_audits_codes() -> None:
    """``warning:CODE`` fails a gate on a warning's stable code; a misspelled code is refused before anything is
    queued, and an audit without codes (from before them) fails it closed."""
    assert parse_rule("warning:training_fit") == WarningRule("training_fit")
    assert parse_rule(" warning : self_check_low ") == WarningRule("self_check_low")
    with pytest.raises(argparse.ArgumentTypeError, match="unknown warning code 'traning_fit'; valid codes: "):
        parse_rule("warning:traning_fit")
    warned = {"warnings": ["…", "…"], "warning_codes": ["few_positives", "training_fit"]}
    (verdict,) = judge(warned, [WarningRule("training_fit")])
    assert verdict.crossed and verdict.reason == "the audit warns training_fit" and verdict.value == 1.0
    (quiet,) = judge(warned, [WarningRule("self_check_low")])
    assert not quiet.crossed and quiet.reason == "no self_check_low warning"
    (older,) = judge({"warnings": ["…"]}, [WarningRule("training_fit")])
    assert older.crossed and "failing closed" in older.reason
    assert set(gates.WARNING_CODES) == set(WARNING_CODES)  # the torch-free list, kept equal to the library's


def test_submit_wait_fail_on_status_results(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    http = TestClient(client.app, headers=auth)
    lines: list[str] = []
    settings = '{"training": {"epochs": 1}, "budgets": [1]}'
    argv = ["submit", "--graph-id", graph_id, "--settings", settings, "--poll", "0.05"]  # --fail-on implies --wait

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
    assert json.loads(lines[-1])["verdict"] == "Biased: a gap of 30.0 points"  # the verdict first, in the JSON line
    assert submit_and_succeed(0.05, "--fail-on", "delta_sp>0.1", "--fail-on", "gamma>0.5") == OK
    audit_id = __import__("json").loads(lines[-1])["id"]
    assert run(_args("status", audit_id), http, lines.append) == OK and '"succeeded"' in lines[-1]
    assert json.loads(lines[-1])["time_left"] is None  # said while it runs; none once it ended
    junit = tmp_path / "gates.xml"
    argv_results = ["results", audit_id, "--fail-on", "delta_eo>0.01", "--fail-on", "gamma>0.5", "--junit", str(junit)]
    assert run(_args(*argv_results), http, lines.append) == THRESHOLD
    suite = ET.fromstring(junit.read_text(encoding="utf-8"))
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    assert json.loads(lines[-1])["thresholds"][0] == {
        "rule": "delta_eo>0.01", "value": 0.05, "crossed": True, "reason": "delta_eo=0.05 > 0.01",
    }  # fmt: skip
    assert run(_args("submit", "--graph-id", graph_id), http, lines.append) == OK and '"queued"' in lines[-1]
    queued = __import__("json").loads(lines[-1])["id"]
    assert run(_args("results", queued), http, lines.append) == AUDIT_FAILED
    assert run(_args("status", str(uuid.uuid4())), http, lines.append) == HTTP_ERROR


def test_waiting_prints_the_warnings_as_the_worker_stores_them(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    sessions: sessionmaker[Session],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The warnings known once the model and metrics are in reach stderr while the audit runs, each once; the
    summary line carries the finished audit's."""
    http = TestClient(client.app, headers=auth)
    lines: list[str] = []
    early = "on its own training nodes the model does no better than a constant"
    before = {a.id for a in sessions().query(Audit.id).all()}

    def work() -> None:
        for _ in range(100):
            new = {a.id for a in sessions().query(Audit.id).all()} - before
            if new:
                break
            time.sleep(0.02)
        audit_id = new.pop()
        with sessions.begin() as session:  # the worker: running, its early warnings stored
            session.execute(update(Audit).where(Audit.id == audit_id).values(state="running", warnings=[early]))
        time.sleep(0.3)  # several polls see the same warning
        said = [early, "a low self-check"]
        _succeed(sessions, str(audit_id), 0.05, warnings=said, codes=["training_fit", "self_check_low"])

    thread = threading.Thread(target=work)
    thread.start()
    argv = ["submit", "--graph-id", graph_id, "--wait", "--poll", "0.05", "--quiet"]
    code = run(_args(*argv), http, lines.append)
    thread.join()
    assert code == OK
    err = capsys.readouterr().err
    assert err.count(f"warning: {early}") == 1 and "a low self-check" not in err  # once, and only while it ran
    said = json.loads(lines[-1])
    assert said["warnings"] == [early, "a low self-check"]
    assert said["warning_codes"] == ["training_fit", "self_check_low"]  # for a script to act on


def test_the_summary_has_the_edges_and_their_debiasing_verdicts(
    client: TestClient, auth: dict[str, str], graph_id: str, sessions: sessionmaker[Session]
) -> None:
    graph = synthetic(80, seed=0, train_per_class=15)
    settings = {"training": {"epochs": 30}, "bootstrap": 0, "validation_sample": 0, "budgets": [], "edges": True}
    debiased = {**settings, "debias_seeds": [1, 2, 3], "edge_budgets": [0.05, 0.2]}
    results = json.loads(json.dumps(run_audit(graph, AuditConfig.from_dict(debiased)).to_dict()))
    http = TestClient(client.app, headers=auth)
    audit_id = http.post("/v1/audits", json={"graph_id": graph_id, **debiased}).json()["id"]
    with sessions.begin() as session:
        session.execute(update(Audit).where(Audit.id == uuid.UUID(audit_id)).values(state="succeeded", results=results))
    lines: list[str] = []
    assert run(_args("results", audit_id, "--fail-on", "gamma>10"), http, lines.append) == OK
    shown, edges = json.loads(lines[-1])["edges"], results["edges"]
    top = edges["top_harmful"][0]
    assert shown["edges"] == edges["edges"] > 0 and shown["top_harmful"]["delta"] == top["delta"] < 0
    names = results["graph"]["group_labels"]  # the endpoints' groups by name
    pair = f"{names[top['u_group']]}–{names[top['v_group']]}"
    assert shown["top_harmful"]["edge"] == f"{top['u_id']}–{top['v_id']} ({pair})"
    assert shown["cross_group_harm_ratio"] == edges["cross_group"]["harm_ratio"]
    rows = edges["debiasing"]["budgets"]
    assert shown["debiasing"] == [
        {"budget": r["budget"], "deleted": r["deleted"], "verdict": r["verdict"]} for r in rows
    ]
    plain = {**results, "edges": {k: v for k, v in edges.items() if k != "debiasing"} | {"debiasing_reason": "why"}}
    brief = edges_summary(plain)
    assert brief is not None and brief["debiasing_reason"] == "why" and "debiasing" not in brief
    assert edges_summary({"edges": {"computed": False, "reason": "two layers"}}) == {
        "computed": False,
        "reason": "two layers",
    }
    assert edges_summary({"metrics": {}}) is None
    _succeed(sessions, audit_id, 0.05)
    assert run(_args("results", audit_id, "--fail-on", "gamma>10"), http, lines.append) == OK
    assert "edges" not in json.loads(lines[-1])


def test_submit_takes_a_model_with_a_graph_name_and_needs_a_source(
    client: TestClient, auth: dict[str, str], graph_npz: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    http = TestClient(client.app, headers=auth)
    named = http.post("/v1/graphs", files={"npz": ("g.npz", graph_npz)}, data={"name": "people"})
    assert named.status_code == 201, named.text
    lines: list[str] = []
    assert run(_args("submit"), http, lines.append) == AUDIT_FAILED
    assert "give --dataset, --graph-id, --graph-name or --model-id" in capsys.readouterr().err
    unknown = str(uuid.uuid4())
    args = _args("submit", "--model-id", unknown, "--graph-name", "people")  # a model on its graph's latest version
    assert (args.model_id, args.graph_name) == (unknown, "people")
    assert run(args, http, lines.append) == HTTP_ERROR  # both in one request: the graph is found, the model is not
    assert f"No model with id {unknown}" in capsys.readouterr().err
