"""MLflow logging (optional extra) against a local file-based tracking store, read back with MlflowClient."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

from mlflow.tracking import MlflowClient

from app.core.settings import Settings
from app.integrations.mlflow_log import log_succeeded_audit
from bind_core.cli import main
from bind_core.data.datasets import synthetic
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.reporting.mlflow_log import audit_metrics
from bind_core.training.fit import TrainConfig


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 wants an opt-in for file stores
    return (tmp_path / "mlruns").as_uri()


def _only_run(uri: str):  # type: ignore[no-untyped-def]
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("bind-audit")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    return client, runs[0]


def test_cli_logs_params_metrics_and_artifacts(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--synthetic", "--synthetic-nodes", "120", "--epochs", "20", "--skip", "debiasing,validation"]
    assert main([*args, "--bootstrap", "30", "--quiet", "--mlflow", store]) == 0
    assert "logged MLflow run" in capsys.readouterr().out
    client, run = _only_run(store)
    assert run.info.status == "FINISHED"
    assert run.data.params["training.epochs"] == "20" and run.data.params["model.arch"] == "gcn"
    m = run.data.metrics
    for name in ("accuracy", "delta_sp", "gamma_sp", "gamma_eo"):
        assert m[f"{name}_low"] <= m[name] <= m[f"{name}_high"]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert artifacts == {"report.html", "influence.csv"}
    local = Path(client.download_artifacts(run.info.run_id, "influence.csv"))
    assert local.read_text().splitlines()[0].startswith("position,")
    assert "<html" in Path(client.download_artifacts(run.info.run_id, "report.html")).read_text()


def test_service_hook_logs_and_never_raises(store: str, caplog: pytest.LogCaptureFixture) -> None:
    graph = synthetic(100, seed=2)
    config = AuditConfig(training=TrainConfig(epochs=10), stages=("training", "metrics"), bootstrap=20)
    result = run_audit(graph, config)
    assert log_succeeded_audit(Settings(), "a1", config.to_dict(), result.to_dict(), None) is None  # off
    run_id = log_succeeded_audit(
        Settings(mlflow_tracking_uri=store), "a1", config.to_dict(), result.to_dict(), result.influence_rows()
    )
    client, run = _only_run(store)
    assert run.info.run_id == run_id and run.data.tags["bind.audit_id"] == "a1"
    assert [a.path for a in client.list_artifacts(run_id)] == ["report.html"]  # no influence stage, no CSV
    with caplog.at_level(logging.WARNING):
        bad = Settings(mlflow_tracking_uri="unknown-scheme://nowhere")
        assert log_succeeded_audit(bad, "a2", config.to_dict(), result.to_dict(), None) is None
    assert "logging to MLflow" in caplog.text


def test_the_edges_metrics_are_logged(store: str) -> None:
    graph = synthetic(80, seed=0, train_per_class=15)
    settings = {"training": {"epochs": 30}, "bootstrap": 0, "validation_sample": 0, "budgets": [], "edges": True}
    config = AuditConfig.from_dict({**settings, "debias_seeds": [1, 2, 3], "edge_budgets": [0.05, 0.2]})
    results = json.loads(json.dumps(run_audit(graph, config).to_dict()))
    run_id = log_succeeded_audit(Settings(mlflow_tracking_uri=store), "e1", config.to_dict(), results, None)
    _, run = _only_run(store)
    assert run.info.run_id == run_id
    m, edges = run.data.metrics, results["edges"]
    cross, rows = edges["cross_group"], edges["debiasing"]["budgets"]
    assert m["edges_attributed"] == edges["edges"] > 0 and m["edges_affecting"] == edges["affecting"]
    assert m["edges_cross_group_edge_share"] == pytest.approx(cross["edge_share"])
    assert m["edges_cross_group_harm_share"] == pytest.approx(cross["harm_share"])
    assert m["edges_top_harmful_delta"] < 0 and m["edges_top_harmful_delta"] == pytest.approx(
        edges["top_harmful"][0]["delta"]
    )
    assert m["edges_seconds"] == pytest.approx(edges["seconds"])
    for name, row in (("edges_debiasing_0.05", rows[0]), ("edges_debiasing_0.2", rows[1])):
        assert m[f"{name}_selected_delta"] == pytest.approx(row["selected"]["mean"])
        assert m[f"{name}_advantage"] == pytest.approx(row["advantage"])
    plain = {**results, "edges": {k: v for k, v in edges.items() if k != "debiasing"}}
    assert not [k for k in audit_metrics(plain) if k.startswith("edges_debiasing_")]
    uncomputed = dict.fromkeys(edges) | {"computed": False, "reason": "r", "sign_convention": edges["sign_convention"]}
    assert not [k for k in audit_metrics({**results, "edges": uncomputed}) if "edges" in k]
