"""The console's retrained models (issue 34 item 7): on a finished audit's page each debiasing budget's weights and
config download, and a plain form registers them as a supplied model, then the graph's page has it chosen; CSRF,
roles and tenant isolation as everywhere in the console."""

from __future__ import annotations

import io
import re
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.audits.model_artifacts import store_model_artifact
from app.core.db.tables import Audit, Graph
from app.tenants.keys import create_api_key
from bind_core.data.datasets import load_npz
from bind_core.training.fit import TrainConfig, TrainedModel, train

ROW = {"budget": 2, "deleted": 2, "before": {"delta_sp": 0.2, "accuracy": 0.8}, "after": {"delta_sp": 0.1,
       "accuracy": 0.79}, "backfired": []}  # fmt: skip
RESULTS = {"metrics": {"test": {"accuracy": 0.8}}, "summary": {"verdict": "v", "text": "v"},
           "warnings": ["3 of 80 nodes' deletions carry the weights <far>"],
           "debiasing": [ROW, ROW | {"budget": 4, "deleted": 4, "backfired": ["delta_sp", "delta_eo"],
                                     "within_noise": ["delta_eo"]}]}  # fmt: skip


class Browser:
    """A tenant's API key and a browser signed in to the console with it."""

    def __init__(
        self, client: TestClient, sessions: sessionmaker[Session], role: str = "admin", name: str | None = None
    ) -> None:
        self.name = name or f"console-models-{uuid.uuid4().hex[:10]}"
        with sessions.begin() as session:
            self.key = create_api_key(session, self.name, role)
        self.auth = {"Authorization": f"Bearer {self.key}"}
        self.browser = TestClient(client.app, follow_redirects=False)
        token = self.csrf_on("/console/sign-in")
        assert self.browser.post("/console/sign-in", data={"api_key": self.key, "csrf": token}).status_code == 303

    def csrf_on(self, path: str) -> str:
        found = re.search(r'name="csrf" value="([^"]+)"', self.browser.get(path).text)
        assert found
        return found.group(1)


@pytest.fixture
def arranged(
    client: TestClient, sessions: sessionmaker[Session], graph_npz: bytes
) -> tuple[Browser, str, str, list[str], TrainedModel]:
    """A tenant with a graph and a succeeded audit of it that kept two budgets' models, the second over the cap."""
    user = Browser(client, sessions)
    graph_id = client.post("/v1/graphs", headers=user.auth, files={"npz": ("g.npz", graph_npz)}).json()["id"]
    model = train(load_npz(io.BytesIO(graph_npz)), TrainConfig(epochs=2, polish=False))
    with sessions.begin() as session:
        graph = session.get(Graph, uuid.UUID(graph_id))
        assert graph is not None
        audit = Audit(tenant_id=graph.tenant_id, graph_id=graph.id, graph_version=1, config={}, request_hash="0" * 64,
                      state="succeeded", results=RESULTS)  # fmt: skip
        session.add(audit)
        session.flush()
        ids = [
            str(store_model_artifact(session, tenant_id=graph.tenant_id, audit_id=audit.id, source="debias",
                                     index_or_id=i, model=model, max_bytes=cap).id)
            for i, cap in enumerate((10**7, 10))
        ]  # fmt: skip
        return user, str(audit.id), graph_id, ids, model


def test_the_audit_page_offers_each_budgets_model(arranged: tuple, client: TestClient, sessions: sessionmaker) -> None:
    user, audit_id, _, ids, model = arranged
    page = user.browser.get(f"/console/audits/{audit_id}").text
    base = f"/console/audits/{audit_id}/models"
    assert f'href="{base}/{ids[0]}/weights"' in page and f'href="{base}/{ids[0]}/config"' in page
    assert f'action="{base}/{ids[0]}/register"' in page
    assert f'href="{base}/{ids[1]}/config"' in page  # over the cap: the config only, and why
    assert f"{base}/{ids[1]}/weights" not in page and f"{base}/{ids[1]}/register" not in page
    assert "BIND_MODEL_ARTIFACT_MAX_BYTES" in page
    assert "ΔSP, ΔEO (within noise)" in page  # a rise inside the test nodes' noise is marked so, by the names
    assert "4 nodes" in page and "delta_sp" not in page
    assert 'id="warnings"' in page and "carry the weights &lt;far&gt;" in page  # the audit's warnings, escaped
    weights = user.browser.get(f"{base}/{ids[0]}/weights")
    assert weights.status_code == 200 and weights.content == model.to_bytes()
    assert ".safetensors" in weights.headers["content-disposition"]
    config = user.browser.get(f"{base}/{ids[0]}/config")
    assert config.json()["format"] == "bind-audit/model@1" and "attachment" in config.headers["content-disposition"]
    stranger = Browser(client, sessions)
    assert stranger.browser.get(f"{base}/{ids[0]}/weights").status_code == 404
    assert stranger.browser.get(f"{base}/{ids[0]}/config").status_code == 404
    viewer = Browser(client, sessions, role="viewer", name=user.name)  # the same tenant
    seen = viewer.browser.get(f"/console/audits/{audit_id}").text
    assert f'href="{base}/{ids[0]}/weights"' in seen and f"{base}/{ids[0]}/register" not in seen
    assert (
        viewer.browser.post(f"{base}/{ids[0]}/register", data={"csrf": viewer.csrf_on("/console/audits")}).status_code
        == 403
    )


def test_register_redirects_to_the_graph_with_the_model_chosen(arranged: tuple) -> None:
    user, audit_id, graph_id, ids, model = arranged
    path = f"/console/audits/{audit_id}/models/{ids[0]}/register"
    assert user.browser.post(path, data={"csrf": "forged"}).status_code == 403
    registered = user.browser.post(path, data={"csrf": user.csrf_on(f"/console/audits/{audit_id}")})
    assert registered.status_code == 303, registered.text
    location = registered.headers["location"]
    assert location.startswith(f"/console/graphs/{graph_id}?registered=")
    new_id = location.split("registered=")[1].split("#")[0]
    assert user.browser.get(f"/v1/models/{new_id}", headers=user.auth).json()["size_bytes"] == len(model.to_bytes())
    graph_page = user.browser.get(location).text
    assert 'id="registered"' in graph_page and "budget 2 (2 nodes deleted)" in graph_page
    assert f'<option value="{new_id}" selected>' in graph_page

    capped = user.browser.post(f"/console/audits/{audit_id}/models/{ids[1]}/register",
                               data={"csrf": user.csrf_on(f"/console/audits/{audit_id}")})  # fmt: skip
    assert capped.status_code == 303 and "model_error=weights-not-kept" in capped.headers["location"]
    assert "The weights were not kept" in user.browser.get(capped.headers["location"]).text
