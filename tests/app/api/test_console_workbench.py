"""The console's workbench: upload a graph from the browser (the API's validation and messages, on the form), read
its page in the user's terms, estimate an audit's cost and queue it; CSRF, roles and tenants as everywhere."""

from __future__ import annotations

import io
import json
import re
import uuid
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from test_console import Tenant

from app.core.db.tables import Audit, Graph, Schedule
from bind_core.data.datasets import load_npz
from bind_core.training.fit import TrainConfig, train


@pytest.fixture
def tenant(client: TestClient, sessions: sessionmaker[Session]) -> Callable[..., Tenant]:
    return lambda **kw: Tenant(client, sessions, **kw)


def _csv(rows: int = 160) -> tuple[bytes, bytes]:
    rng = np.random.default_rng(0)
    gender = rng.choice(["F", "M"], rows)
    table = pd.DataFrame({"uid": [f"u{i}" for i in range(rows)], "gender": gender, "income": rng.normal(size=rows)})
    table["approved"] = (rng.random(rows) < np.where(gender == "M", 0.7, 0.3)).astype(int)
    pairs = rng.integers(0, rows, size=(500, 2))
    edges = "\n".join(f"u{a},u{b}" for a, b in pairs)
    return table.to_csv(index=False).encode(), edges.encode()


def _upload(user: Tenant, **fields: str) -> object:
    nodes, edges = _csv()
    files = {"nodes": ("people.csv", nodes), "edges": ("links.csv", edges), "npz": ("", b"")}  # an empty input too
    data = {"csrf": user.form_token("/console/graphs/new"), "node_id": "uid", "features": ""} | fields
    return user.browser.post("/console/graphs/new", data=data, files=files)


def test_upload_read_estimate_and_queue(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    user = tenant()
    user.sign_in()
    bad = _upload(user, label="aproved", sensitive="gender")  # misspelled: the API's message, on the form
    assert bad.status_code == 422 and 'id="upload-error"' in bad.text and "aproved" in bad.text
    done = _upload(user, label="approved", sensitive="gender", name="people")
    assert done.status_code == 303, done.text
    graph_path = done.headers["location"]
    page = user.browser.get(graph_path).text
    assert "<b>gender</b>" in page and "gender=F" in page and "gender=M" in page and "<b>approved</b>" in page
    assert "&#39;uid&#39;" in page or "'uid'" in page  # what node ids are
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    form = {"csrf": token.group(1), "arch": "gcn", "layers": "1", "epochs": "20", "budgets": "0.1"}
    estimate = user.browser.post(f"{graph_path}/audit", data=form | {"action": "estimate"})
    assert estimate.status_code == 200 and 'id="estimate"' in estimate.text and "MiB" in estimate.text
    with sessions() as session:
        assert session.query(Audit).filter(Audit.tenant_id == user.id).count() == 0  # nothing queued by estimating
    queued = user.browser.post(f"{graph_path}/audit", data=form | {"action": "queue"})
    assert queued.status_code == 303 and queued.headers["location"].startswith("/console/audits/")
    with sessions() as session:
        audit = session.query(Audit).filter(Audit.tenant_id == user.id).one()
        assert audit.state == "queued" and audit.config["budgets"] == [0.1] and audit.config["training"]["epochs"] == 20
    invalid = user.browser.post(f"{graph_path}/audit", data=form | {"action": "estimate", "layers": "nine"})
    assert invalid.status_code == 422 and 'id="audit-error"' in invalid.text
    assert "<code>Layers</code>: must be a whole number" in invalid.text and "model.layers" not in invalid.text
    too_deep = user.browser.post(f"{graph_path}/audit", data=form | {"action": "estimate", "layers": "9"})
    assert "<code>Layers</code>: must be at most 8" in too_deep.text
    forged = user.browser.post(f"{graph_path}/audit", data=form | {"action": "queue", "csrf": "x"})
    assert forged.status_code == 403


def test_the_upload_form_can_keep_the_tables_own_feature_values(tenant: Callable[..., Tenant]) -> None:
    """Unticked, the features are min-max scaled and the graph's page says so; ticked, the table's values are kept
    (a model trained on them is audited on them)."""
    user = tenant()
    user.sign_in()
    assert 'name="scale" value="false"' in user.browser.get("/console/graphs/new").text
    scaled = _upload(user, label="approved", sensitive="gender", name="scaled")
    assert scaled.status_code == 303, scaled.text
    assert "min-max scaled to [-1, 1]" in user.browser.get(scaled.headers["location"]).text
    kept = _upload(user, label="approved", sensitive="gender", name="kept", scale="false")
    assert kept.status_code == 303, kept.text
    assert "min-max scaled" not in user.browser.get(kept.headers["location"]).text


def test_another_tenants_graph_is_not_found_and_a_viewer_cannot_upload(
    tenant: Callable[..., Tenant], client: TestClient
) -> None:
    owner, other = tenant(), tenant()
    owner.sign_in()
    other.sign_in()
    graph_path = _upload(owner, label="approved", sensitive="gender").headers["location"]
    assert other.browser.get(graph_path).status_code == 404
    assert other.browser.get(f"/console/graphs/{uuid.uuid4()}").status_code == 404
    token = other.form_token("/console/audits")
    assert other.browser.post(f"{graph_path}/audit", data={"csrf": token, "action": "estimate"}).status_code == 404


def test_two_audits_side_by_side(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:

    user = tenant()
    user.sign_in()
    metrics = {"test": {"accuracy": 0.8, "delta_sp": 0.3}, "intervals": {"delta_sp": {"low": 0.25, "high": 0.35}}}
    later = {"test": {"accuracy": 0.78, "delta_sp": 0.1}}
    first = user.audit("succeeded", results={"metrics": metrics})
    second = user.audit("succeeded", results={"metrics": later})
    # three nodes in both; "u3" only in the second (text ids compare as written)
    _store_rows(sessions, first, {"u0": -0.3, "u1": -0.1, "u2": 0.2})
    _store_rows(sessions, second, {"u0": -0.2, "u1": 0.4, "u2": 0.2, "u3": -0.5})
    page = user.browser.get(f"/console/compare?a={first}&b={second}")
    assert page.status_code == 200
    assert "30.00 [25.00, 35.00]" in page.text and "<td>-20.00</td>" in page.text  # ΔSP and B − A in points
    assert "<b>1</b> are in both" in page.text and "Jaccard 0.33" in page.text  # {u0,u1} ∩ {u0,u3}
    moved = page.text[page.text.index("moved most") :]
    assert moved.index("<td class=l>u1</td>") < moved.index("<td class=l>u0</td>")  # u1 moved by 0.5, u0 by 0.1
    other = tenant()
    other.sign_in()
    assert other.browser.get(f"/console/compare?a={first}&b={second}").status_code == 404


def test_two_audits_side_by_side_with_nodes_without_a_value(
    tenant: Callable[..., Tenant], sessions: sessionmaker[Session]
) -> None:
    """A node whose ΔΓ is null in either audit (its deletion has no minimum near that model's weights) is not a
    number to compare: the page says so and lists it, and it is neither among the moved nor the most harmful."""

    user = tenant()
    user.sign_in()
    first = user.audit("succeeded", results={"metrics": {"test": {"accuracy": 0.8}}})
    second = user.audit("succeeded", results={"metrics": {"test": {"accuracy": 0.7}}})
    _store_rows(sessions, first, {"u0": -0.3, "u1": None, "u2": 0.2, "u3": None})
    _store_rows(sessions, second, {"u0": -0.2, "u1": -0.9, "u2": None, "u3": None})
    page = user.browser.get(f"/console/compare?a={first}&b={second}")
    assert page.status_code == 200, page.text
    assert "<b>1</b> are in both" in page.text and "Jaccard 0.50" in page.text  # {u0} ∩ {u0,u1}: u1 null in A
    nodes = page.text[page.text.index('id="nodes"') :]
    moved = nodes[nodes.index("moved most") : nodes.index('id="undefined-nodes"')]
    assert "<td class=l>u0</td>" in moved and "u1" not in moved and "u2" not in moved and "u3" not in moved
    undefined = nodes[nodes.index('id="undefined-nodes"') :]
    assert "3 of the training nodes in both audits have no ΔΓ" in undefined
    assert "<td class=l>u1</td><td>no value</td><td>-0.9000</td>" in undefined
    assert "<td class=l>u2</td><td>+0.2000</td><td>no value</td>" in undefined
    assert "<td class=l>u3</td><td>no value</td><td>no value</td>" in undefined
    plain = user.browser.get(f"/console/compare?a={first}&b={first}").text
    assert "3 of the training nodes" not in plain and "2 of the training nodes in both audits have no ΔΓ" in plain


def test_what_if_with_a_node_without_a_value(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    """The console's what-if of a set with a member without a value: the estimate shows no value, never a 500."""
    from app.core.db.tables import InfluenceRow

    user = tenant()
    user.sign_in()
    done = user.audit("succeeded", results={"metrics": {}})
    with sessions.begin() as session:
        for i, (key, delta) in enumerate({"u0": -0.3, "u1": None}.items()):
            session.add(InfluenceRow(audit_id=uuid.UUID(done), position=i, node_index=i, node_id=i, node_key=key,
                                     grp=0, label=1, delta=delta, delta_sp=delta, delta_eo=delta,
                                     no_minimum=None if delta is not None else True))  # fmt: skip
    page = user.browser.get(f"/console/audits/{done}").text
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    answer = user.browser.post(f"/console/audits/{done}/what-if", data={"csrf": token.group(1), "nodes": "u0 u1"})
    assert answer.status_code == 200, answer.text
    estimate = answer.text[answer.text.index('id="what-if-estimate"') :]
    assert estimate.count("no value (see below)") == 3 and "no ΔΓ" in estimate
    alone = user.browser.post(f"/console/audits/{done}/what-if", data={"csrf": token.group(1), "nodes": "u0"})
    assert alone.status_code == 200 and "-0.3000" in alone.text and "no value (see below)" not in alone.text


def test_the_audits_list_filters_by_graph(tenant: Callable[..., Tenant]) -> None:
    user = tenant()
    user.sign_in()
    graph_path = _upload(user, label="approved", sensitive="gender").headers["location"]
    graph_id = graph_path.rsplit("/", 1)[-1]
    elsewhere = user.audit("succeeded")  # a dataset audit: not of the graph
    listing = user.browser.get(f"/console/audits?graph={graph_id}").text
    assert f'id="audit-{elsewhere}"' not in listing and "of one graph" in listing
    assert f'id="audit-{elsewhere}"' in user.browser.get("/console/audits").text
    assert user.browser.get("/console/audits?graph=not-a-uuid").status_code == 422


def test_what_if_on_an_audits_page(tenant: Callable[..., Tenant], sessions: sessionmaker[Session]) -> None:
    from app.core.db.tables import InfluenceRow

    user = tenant()
    user.sign_in()
    results = {"top_harmful": [{"node_id": "u0", "group": 0, "label": 1, "delta": -0.3}], "metrics": {}}
    done = user.audit("succeeded", results=results)
    with sessions.begin() as session:
        for i, (key, delta) in enumerate({"u0": -0.3, "u1": -0.1, "u2": 0.2}.items()):
            session.add(InfluenceRow(audit_id=uuid.UUID(done), position=i, node_index=i, node_id=i, node_key=key,
                                     grp=0, label=1, delta=delta, delta_sp=delta, delta_eo=delta))  # fmt: skip
    page = user.browser.get(f"/console/audits/{done}").text
    assert 'id="what-if-form"' in page
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    url = f"/console/audits/{done}/what-if"
    answer = user.browser.post(url, data={"csrf": token.group(1), "nodes": "u0, u2"})
    assert answer.status_code == 200 and 'id="what-if-estimate"' in answer.text and "-0.1000" in answer.text
    bad = user.browser.post(url, data={"csrf": token.group(1), "nodes": "u0 nobody"})
    assert bad.status_code == 422 and "&#39;nobody&#39;" in bad.text
    assert user.browser.post(url, data={"csrf": "forged", "top": "1"}).status_code == 403


def _store_rows(sessions: sessionmaker[Session], audit_id: str, deltas: dict[str, float | None]) -> None:
    """Influence rows of ``audit_id`` by text id; a ``None`` delta is a node without a value (``no_minimum``)."""
    from app.core.db.tables import InfluenceRow

    with sessions.begin() as session:
        for i, (key, delta) in enumerate(deltas.items()):
            session.add(
                InfluenceRow(
                    audit_id=uuid.UUID(audit_id),
                    position=i,
                    node_index=i,
                    node_id=i,
                    node_key=key,
                    grp=0,
                    label=1,
                    delta=delta,
                    delta_sp=delta,
                    delta_eo=delta,
                    settled=None if delta is not None else False,
                    no_minimum=None if delta is not None else True,
                )
            )


def test_the_graph_page_schedules_audits_of_a_model_registered_on_an_earlier_version(
    tenant: Callable[..., Tenant], client: TestClient, sessions: sessionmaker[Session]
) -> None:
    """A model registered for version 1 is offered on version 2's page (to audit, and to schedule); the schedule
    form's refusals are said on the form, in its own labels."""
    user = tenant()
    user.sign_in()
    first = _upload(user, label="approved", sensitive="gender", name="people")
    v1 = first.headers["location"].rsplit("/", 1)[-1]  # type: ignore[attr-defined]
    graph = load_npz(io.BytesIO(_graph_bytes(sessions, uuid.UUID(v1))))
    model = train(graph, TrainConfig(epochs=5, polish=False))
    api = {"Authorization": f"Bearer {user.key}"}
    registered = client.post(
        "/v1/models",
        headers=api,
        files={"weights": ("m.safetensors", model.to_bytes())},
        data={"config": json.dumps(model.config_dict()), "graph_id": v1, "name": "credit"},
    )
    assert registered.status_code == 201, registered.text
    model_id = registered.json()["id"]
    lenient = client.post(
        "/v1/models",
        headers=api,
        files={"weights": ("m.safetensors", model.to_bytes())},
        data={
            "config": json.dumps(model.config_dict()),
            "graph_id": v1,
            "name": "prod",
            "unknown_categories": "ignore",
        },
    )
    assert lenient.status_code == 201, lenient.text
    second = _upload(user, label="approved", sensitive="gender", name="people")
    v2_path = second.headers["location"]  # type: ignore[attr-defined]
    page = user.browser.get(v2_path).text
    # the audit form's choice, and the schedule form's; the model (5 epochs) is no better than a constant on its
    # training nodes, and its registration said so
    poor = "fit its training nodes poorly when registered"
    assert (
        page.count(f"credit (registered on version 1; {poor})") == 3
    )  # the audit's, the schedule's, the outputs' forms
    assert page.count(f"prod (registered on version 1; reads unseen categories as none; {poor})") == 3
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    form = {"csrf": token.group(1), "model_id": model_id, "every": "week", "delta_sp": "high"}
    refused = user.browser.post(f"{v2_path}/schedule", data=form)
    assert refused.status_code == 422 and 'id="schedule-error"' in refused.text
    assert "<code>Alert when ΔSP is above</code>" in refused.text
    with sessions() as session:
        assert session.query(Schedule).filter(Schedule.tenant_id == user.id).count() == 0
    made = user.browser.post(f"{v2_path}/schedule", data=form | {"delta_sp": "0.1"})
    assert made.status_code == 303 and made.headers["location"] == "/console/schedules"
    with sessions() as session:
        row = session.query(Schedule).filter(Schedule.tenant_id == user.id).one()
        assert (row.graph_name, str(row.model_id), row.interval_seconds) == ("people", model_id, 7 * 86400)
        assert row.thresholds == {"delta_sp": 0.1}
        row.state = "paused"  # leave nothing active for a worker that might share this database
        session.commit()
    listed = user.browser.get("/console/schedules").text
    assert "model &#39;credit&#39; on graph people" in listed
    forged = user.browser.post(f"{v2_path}/schedule", data=form | {"csrf": "x"})
    assert forged.status_code == 403


def _graph_bytes(sessions: sessionmaker[Session], graph_id: uuid.UUID) -> bytes:
    with sessions() as session:
        data = session.scalar(select(Graph.data).where(Graph.id == graph_id))
    assert data is not None
    return bytes(data)


def test_the_graph_page_registers_a_model_with_its_outputs(
    tenant: Callable[..., Tenant], sessions: sessionmaker[Session]
) -> None:
    """An auditor handed a model's files registers it from the graph's page: a model that does not give the outputs
    given is refused on the form, saying why; one that does is registered, chosen to audit, and the page says its
    outputs were reproduced; another tenant's graph is not found, and a form without its token is refused."""
    user = tenant()
    user.sign_in()
    uploaded = _upload(user, label="approved", sensitive="gender", name="people")
    path = uploaded.headers["location"]  # type: ignore[attr-defined]
    graph = load_npz(io.BytesIO(_graph_bytes(sessions, uuid.UUID(path.rsplit("/", 1)[-1]))))
    model = train(graph, TrainConfig(epochs=50, polish=False))
    proba = model.predict_proba(graph).numpy()

    def register(outputs: np.ndarray, token: str | None = None) -> object:
        buffer = io.BytesIO()
        np.save(buffer, outputs)
        files = {
            "weights": ("m.safetensors", model.to_bytes()),
            "config": ("m.json", json.dumps(model.config_dict()).encode()),
            "outputs": ("out.npy", buffer.getvalue()),
        }
        data = {"csrf": token or user.form_token(path), "name": "credit", "unknown_categories": "refuse"}
        return user.browser.post(f"{path}/models", data=data, files=files)

    refused = register(proba[::-1].copy())  # rows in another order than the graph's
    assert refused.status_code == 422  # type: ignore[attr-defined]
    text = refused.text  # type: ignore[attr-defined]
    assert 'id="register-error"' in text and "but for other nodes" in text
    assert 'value="credit"' in text  # the form keeps what was typed
    registered = register(proba)
    assert registered.status_code == 303, registered.text  # type: ignore[attr-defined]
    page = user.browser.get(registered.headers["location"]).text  # type: ignore[attr-defined]
    assert 'id="registered"' in page and "its own outputs were reproduced" in page
    assert page.count("credit (its own outputs reproduced when registered)") == 3  # the audit's, schedule's, outputs'

    assert register(proba, token="forged").status_code == 403  # type: ignore[attr-defined]
    other = tenant()  # another tenant's browser: the graph is not found
    other.sign_in()
    files = {"weights": ("m.safetensors", model.to_bytes()), "config": ("m.json", b"{}")}
    token = other.form_token("/console/audits")
    assert other.browser.post(f"{path}/models", data={"csrf": token}, files=files).status_code == 404


def test_the_graph_page_takes_a_models_outputs_on_a_later_version(
    tenant: Callable[..., Tenant], sessions: sessionmaker[Session]
) -> None:
    """On a later version's page, an auditor gives a model's own outputs there (the API's ``PUT
    /v1/models/{id}/outputs/{graph_id}``): outputs the model does not give are refused on the form, saying why; ones
    it gives are kept and the page says they were reproduced."""
    user = tenant()
    user.sign_in()
    first = _upload(user, label="approved", sensitive="gender", name="people")
    first_path = first.headers["location"]  # type: ignore[attr-defined]
    graph = load_npz(io.BytesIO(_graph_bytes(sessions, uuid.UUID(first_path.rsplit("/", 1)[-1]))))
    model = train(graph, TrainConfig(epochs=50, polish=False))
    files = {
        "weights": ("m.safetensors", model.to_bytes()),
        "config": ("m.json", json.dumps(model.config_dict()).encode()),
    }
    data = {"csrf": user.form_token(first_path), "name": "credit"}
    registered = user.browser.post(f"{first_path}/models", data=data, files=files)
    assert registered.status_code == 303, registered.text  # type: ignore[attr-defined]
    model_id = registered.headers["location"].split("registered=")[1]  # type: ignore[attr-defined]
    later = _upload(user, label="approved", sensitive="gender", name="people")  # the next snapshot (version 2)
    path = later.headers["location"]  # type: ignore[attr-defined]
    proba = model.predict_proba(graph).numpy()

    def give(outputs: np.ndarray) -> object:
        buffer = io.BytesIO()
        np.save(buffer, outputs)
        form = {"csrf": user.form_token(path), "model_id": model_id}
        return user.browser.post(f"{path}/outputs", data=form, files={"outputs": ("out.npy", buffer.getvalue())})

    refused = give(1.0 - proba)  # another model's
    assert refused.status_code == 422  # type: ignore[attr-defined]
    assert 'id="outputs-error"' in refused.text and "does not give your outputs" in refused.text  # type: ignore[attr-defined]
    given = give(proba)
    assert given.status_code == 303, given.text  # type: ignore[attr-defined]
    page = user.browser.get(given.headers["location"]).text  # type: ignore[attr-defined]
    assert 'id="outputs-given"' in page and "The outputs of credit on this version were reproduced on 160 nodes" in page
    assert page.count("its outputs on this version reproduced") == 3  # the model's choices on this version's forms
    first_page = user.browser.get(first_path).text
    assert "its outputs on this version reproduced" not in first_page  # given for version 2 only
