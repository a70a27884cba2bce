"""A Python client generated from ``/openapi.json`` (``openapi-python-client``) runs the README's "service in five
requests" against a live ``bind-audit serve`` (API and a real worker): upload a graph, start an audit, poll it, read
its results through the generated typed models, and page the influence estimates (issue 17)."""

from __future__ import annotations

import importlib
import io
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
from bind_it import make_audit_body, synthetic_npz
from test_serve_embedded import Served, cli, served

pytestmark = pytest.mark.integration

__all__ = ["served"]  # the live server fixture, shared with test_serve_embedded
PACKAGE = "bind_generated_client"


def generate(base: str, folder: Path) -> ModuleType:
    """Generate the client from the live server's OpenAPI document into ``folder`` and import it."""
    spec = folder / "openapi.json"
    spec.write_bytes(httpx.get(f"{base}/openapi.json", timeout=30).content)
    out = folder / PACKAGE
    done = subprocess.run(
        [sys.executable, "-m", "openapi_python_client", "generate", "--path", str(spec), "--output-path", str(out),
         "--meta", "none"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and (out / "client.py").is_file(), done.stdout + done.stderr
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(folder))


def test_the_five_requests_through_a_generated_client(served: Served, tmp_path: Path) -> None:
    _, base, env, cwd = served
    package = generate(base, tmp_path)
    api = f"{PACKAGE}.api"
    upload = importlib.import_module(f"{api}.graphs.upload_graph_v1_graphs_post")
    create = importlib.import_module(f"{api}.audits.create_audit_v1_audits_post")
    read = importlib.import_module(f"{api}.audits.read_audit_v1_audits_audit_id_get")
    influence = importlib.import_module(f"{api}.audits.read_influence_v1_audits_audit_id_influence_get")
    models: Any = importlib.import_module(f"{PACKAGE}.models")
    types: Any = importlib.import_module(f"{PACKAGE}.types")

    key = subprocess.run(cli("keys", "create", "--tenant", "demo"), cwd=cwd, env=env, check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    client = package.AuthenticatedClient(base_url=base, token=key, timeout=httpx.Timeout(60))

    # 1. upload a graph
    npz = types.File(payload=io.BytesIO(synthetic_npz(200)), file_name="demo.npz", mime_type="application/octet-stream")
    # The generated form sends the table options' declared defaults; the server takes those as "not given".
    form = models.UploadGraphV1GraphsPostBody(npz=npz, name="demo")
    uploaded = upload.sync_detailed(client=client, body=form)
    assert uploaded.status_code == 201, uploaded.content
    graph = uploaded.parsed
    assert isinstance(graph, models.GraphRead)

    # 2. start an audit (cheap: few epochs, one budget of one node, two validated nodes, a small bootstrap)
    body = models.AuditCreate.from_dict(make_audit_body(str(graph.id), epochs=30, validation_sample=2, bootstrap=50))
    started = create.sync_detailed(client=client, body=body)
    assert started.status_code == 202, started.content
    audit_id = started.parsed.id

    # 3. poll it
    deadline = time.monotonic() + 180
    audit = read.sync(audit_id, client=client)
    while audit.state in ("queued", "running"):
        assert time.monotonic() < deadline, audit
        time.sleep(0.5)
        audit = read.sync(audit_id, client=client)
    assert isinstance(audit, models.AuditRead) and audit.state == "succeeded", audit

    # 4. read the results, typed all the way down
    results = audit.results
    assert isinstance(results, models.AuditResults)
    assert isinstance(results.metrics, models.AuditMetrics)
    assert isinstance(results.metrics.test, models.AuditTestMetrics)
    assert 0.0 <= results.metrics.test.accuracy <= 1.0
    assert isinstance(results.metrics.intervals, models.AuditIntervals) and results.metrics.intervals.resamples == 50
    assert all(isinstance(g, models.AuditGroupMetrics) for g in results.metrics.groups)
    summary = results.influence_summary
    assert isinstance(summary, models.AuditInfluenceSummary) and summary.count == results.graph.train
    assert isinstance(results.debiasing[0], models.AuditDebiasingRow) and results.debiasing[0].deleted == 1
    assert isinstance(results.validation, models.AuditValidation) and results.validation.count == 2
    assert isinstance(results.top_harmful[0], models.AuditInfluenceRow)
    assert isinstance(results.timings.additional_properties["training"], float)

    # 5. page the influence estimates, most harmful first
    first = influence.sync(audit_id, client=client, order=models.InfluenceOrder.HARMFUL, limit=20)
    assert isinstance(first, models.InfluencePage) and len(first.items) == 20
    assert first.items[0].delta == results.top_harmful[0].delta
    second = influence.sync(
        audit_id, client=client, order=models.InfluenceOrder.HARMFUL, limit=20, page_token=first.next_page_token
    )
    assert second.items and second.items[0].delta >= first.items[-1].delta
