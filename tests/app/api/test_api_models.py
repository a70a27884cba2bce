"""``/v1/models``: registering a supplied GNN (safetensors + JSON config), checked against its graph."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path

import torch
import torch.nn.functional as F
from apihelp import assert_problem, fields, register_model, run_alone
from fastapi.testclient import TestClient
from safetensors.torch import save
from sqlalchemy.orm import Session, sessionmaker
from torch_geometric.nn import GAT, GCN, GraphSAGE

from app.core.db.tables import SuppliedModel
from app.core.settings import Settings
from bind_core.data.datasets import ingest_files, load_npz
from bind_core.training.fit import TrainConfig, TrainedModel, train


def _model_parts(graph_npz: bytes) -> tuple[bytes, dict[str, object]]:
    graph = load_npz(io.BytesIO(graph_npz))
    model = train(graph, TrainConfig(epochs=2, polish=False))
    return model.to_bytes(), model.config_dict()


def test_register_read_list_delete(client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes) -> None:
    weights, config = _model_parts(graph_npz)
    response = client.post(
        "/v1/models",
        headers=auth,
        files={"weights": ("m.safetensors", weights)},
        data={"config": json.dumps(config), "graph_id": graph_id, "name": "mine"},
    )
    assert response.status_code == 201, response.text
    model = response.json()
    assert response.headers["Location"] == f"/v1/models/{model['id']}"
    assert (model["graph_id"], model["name"], model["size_bytes"]) == (graph_id, "mine", len(weights))
    assert model["config"]["in_dim"] == config["in_dim"]
    assert model["warnings"] == []  # an npz's features are as given
    assert client.get(f"/v1/models/{model['id']}", headers=auth).json()["id"] == model["id"]
    listed = client.get("/v1/models", headers=auth, params={"graph_id": graph_id}).json()["items"]
    assert [m["id"] for m in listed] == [model["id"]]
    # The config may also be a file part.
    again = client.post(
        "/v1/models",
        headers=auth,
        data={"graph_id": graph_id},
        files={"weights": ("m", weights), "config": ("c.json", json.dumps(config).encode())},
    )
    assert again.status_code == 201, again.text
    assert client.delete(f"/v1/models/{model['id']}", headers=auth).status_code == 204
    assert_problem(client.get(f"/v1/models/{model['id']}", headers=auth), 404, "model-not-found")


def test_a_model_registered_for_a_graph_with_scaled_features_is_warned(
    client: TestClient, auth: dict[str, str], tmp_path: Path
) -> None:
    """A node table's features are min-max scaled at upload by default: registering a model for such a graph says
    that a model trained on the table's own values would be audited on inputs it never saw, and reading it there
    finds it fits its training nodes no better than a constant; ``scale=false`` neither."""
    n = 40
    table = "id,age,score,gender,label\n" + "".join(
        f"{i},{20 + i},{(i * 7) % 11},{'fm'[i % 2]},{int(i % 4 < 2)}\n" for i in range(n)
    )
    edges = "".join(f"{i},{(i + 1) % n}\n" for i in range(n))
    (tmp_path / "t.csv").write_text(table)
    (tmp_path / "e.csv").write_text(edges)
    graph = ingest_files(tmp_path / "t.csv", tmp_path / "e.csv", label="label", sensitive="gender", scale=False).graph
    model = train(graph, TrainConfig(epochs=200))
    for scale, warned in (("true", True), ("false", False)):
        uploaded = client.post(
            "/v1/graphs",
            headers=auth,
            files={"nodes": ("t.csv", table.encode()), "edges": ("e.csv", edges.encode())},
            data={"label": "label", "sensitive": "gender", "scale": scale},
        )
        assert uploaded.status_code == 201, uploaded.text
        registered = client.post(
            "/v1/models",
            headers=auth,
            files={"weights": ("m.safetensors", model.to_bytes())},
            data={"config": json.dumps(model.config_dict()), "graph_id": uploaded.json()["id"]},
        )
        assert registered.status_code == 201, registered.text
        said = registered.json()["warnings"]
        assert bool(said) == warned and all("scale=false" in w or "scale off" in w for w in said), said
        # and reading it on its graph finds it so: on the scaled values it fits its training nodes no better than a
        # constant, which an audit's first seconds would say too
        fit = registered.json()["fit"]["training_fit"]
        assert fit["no_better"] or fit["worse_than_guess"] if warned else not fit["no_better"], fit


def test_wrong_shapes_and_non_safetensors_are_422(
    client: TestClient, auth: dict[str, str], other_auth: dict[str, str], graph_id: str, graph_npz: bytes
) -> None:
    weights, config = _model_parts(graph_npz)
    wrong = {**config, "in_dim": int(config["in_dim"]) + 3}  # type: ignore[call-overload]  # JSON value
    bad = client.post(
        "/v1/models",
        headers=auth,
        files={"weights": ("m", weights)},
        data={"config": json.dumps(wrong), "graph_id": graph_id},
    )
    assert_problem(bad, 422, "invalid-model")  # the weights' shapes do not fit in_dim
    pickle = client.post(
        "/v1/models",
        headers=auth,
        files={"weights": ("m.pt", b"\x80\x04K\x01.")},
        data={"config": json.dumps(config), "graph_id": graph_id},
    )
    assert fields(assert_problem(pickle, 422, "invalid-model")) == {"weights"}
    boolean = {**config, "training": {**config["training"], "epochs": True}}  # type: ignore[dict-item]
    mistyped = client.post(
        "/v1/models", headers=auth, files={"weights": ("m", weights)},
        data={"config": json.dumps(boolean), "graph_id": graph_id},
    )  # fmt: skip
    problem = assert_problem(mistyped, 422, "invalid-model")
    assert "epochs: expected an integer, got bool" in problem["detail"], problem
    not_json = client.post(
        "/v1/models", headers=auth, files={"weights": ("m", weights)}, data={"config": "{", "graph_id": graph_id}
    )
    assert fields(assert_problem(not_json, 422)) == {"config"}
    other = client.post(
        "/v1/models",
        headers=other_auth,
        files={"weights": ("m", weights)},
        data={"config": json.dumps(config), "graph_id": graph_id},
    )
    assert fields(assert_problem(other, 422)) == {"graph_id"}


def test_audit_of_unknown_model_is_422(client: TestClient, auth: dict[str, str]) -> None:
    body = {"model_id": "00000000-0000-0000-0000-000000000001"}
    assert fields(assert_problem(client.post("/v1/audits", headers=auth, json=body), 422)) == {"model_id"}


def _pyg_graphsage(
    graph_npz: bytes, cls: type[torch.nn.Module] = GraphSAGE, **extra: object
) -> tuple[torch.nn.Module, dict[str, object]]:
    """A two-layer ReLU GraphSAGE (or ``cls`` with ``extra`` arguments) trained with plain PyG code, and its config in
    the ``torch_geometric`` form."""
    graph = load_npz(io.BytesIO(graph_npz))
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2, **extra}
    torch.manual_seed(0)
    model = cls(**args)  # act="relu", PyG's default
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    train = graph.train_idx
    for _ in range(100):
        optimizer.zero_grad()
        F.cross_entropy(model(graph.x, graph.edge_index)[train], graph.y[train]).backward()
        optimizer.step()
    config = {
        "format": "torch_geometric",
        "class": cls.__name__,
        "args": args,
        "training": {"loss": "cross_entropy", "weight_decay": 5e-4, "epochs": 100, "lr": 0.01},
    }
    return model.eval(), config


def test_a_pyg_graphsage_is_registered_and_audited(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    graph_npz: bytes,
    sessions: sessionmaker[Session],
    settings: Settings,
) -> None:
    pyg, config = _pyg_graphsage(graph_npz)
    weights = save(pyg.state_dict())
    response = register_model(client, auth, graph_id, weights, config, "sage.safetensors")
    assert response.status_code == 201, response.text
    registered = response.json()
    assert registered["config"]["source"]["class"] == "GraphSAGE"
    assert registered["config"]["model"]["arch"] == "sage" and registered["config"]["model"]["head"] is False
    assert registered["name"] == "sage" and registered["size_bytes"] == len(weights)

    # The model the worker will audit, rebuilt from what the service stored, gives PyG's logits.
    with sessions() as session:
        row = session.get(SuppliedModel, uuid.UUID(registered["id"]))
        assert row is not None
        stored = TrainedModel.from_bytes(row.weights, row.config)
    graph = load_npz(io.BytesIO(graph_npz))
    with torch.no_grad():
        expected = pyg.double()(graph.x.double(), graph.edge_index)
    ours = TrainedModel(stored.module.double(), stored.model_config, stored.train_config).logits(graph)
    assert torch.allclose(ours, expected, rtol=0.0, atol=1e-6), float((ours - expected).abs().max())

    body = {
        "model_id": registered["id"],
        "budgets": [1],
        "validation_sample": 5,
        "bootstrap": 0,
        "training": {"seed": 3},  # the audit's sampling seed: the only training setting a supplied model takes
    }
    queued = client.post("/v1/audits", headers=auth, json=body)
    assert queued.status_code == 202, queued.text
    audit_id = queued.json()["id"]
    # The audit's settings describe the model audited, from the moment it is queued: its architecture and recipe,
    # not the defaults for a model the audit would train (a one-layer GCN, 1000 epochs).
    described = queued.json()["config"]
    assert (described["model"]["arch"], described["model"]["layers"], described["model"]["hidden"]) == ("sage", 2, 8)
    assert described["model"]["activation"] == "relu"
    assert (described["training"]["epochs"], described["training"]["lr"]) == (100, 0.01)
    assert (described["training"]["weight_decay"], described["training"]["seed"]) == (5e-4, 3)
    status, audit = run_alone(client, auth, audit_id, sessions, settings)
    assert status == "succeeded", audit.get("error")
    supplied = audit["results"]["supplied_model"]
    assert supplied["pyg"]["class"] == "GraphSAGE" and supplied["pyg"]["max_logit_difference"] <= 1e-6
    assert supplied["pyg"]["nodes"] == graph.num_nodes
    assert audit["results"]["model"]["activation"] == "relu"
    assert any("ReLU between layers" in w for w in audit["results"]["warnings"])
    assert audit["results"]["validation"]["pearson"] is not None
    assert audit["config"] == described


def test_a_pyg_gatv2_sharing_its_weights_saved_once_is_registered_audited_and_handed_back(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    graph_npz: bytes,
    sessions: sessionmaker[Session],
    settings: Settings,
) -> None:
    extra = {"v2": True, "share_weights": True, "residual": True, "heads": 2, "num_layers": 1}  # one layer: quicker
    pyg, config = _pyg_graphsage(graph_npz, GAT, **extra)
    # safetensors' save_model writes a tied tensor once: lin_r is lin_l
    weights = save({k: v for k, v in pyg.state_dict().items() if ".lin_r." not in k})
    response = register_model(client, auth, graph_id, weights, config, "gatv2.safetensors")
    assert response.status_code == 201, response.text
    model = response.json()["config"]["model"]
    assert (model["arch"], model["v2"], model["share_weights"], model["residual"]) == ("gat", True, True, True)
    body = {"model_id": response.json()["id"], "budgets": [1], "validation_sample": 5, "bootstrap": 0}
    queued = client.post("/v1/audits", headers=auth, json=body)
    assert queued.status_code == 202, queued.text
    status, audit = run_alone(client, auth, queued.json()["id"], sessions, settings)
    assert status == "succeeded", audit.get("error")
    assert audit["results"]["supplied_model"]["pyg"]["max_logit_difference"] <= 1e-6
    assert any("GATv2's leaky-ReLU attention scores" in w for w in audit["results"]["warnings"])
    assert audit["results"]["validation"]["pearson"] is not None
    assert audit["results"]["debiasing"][0]["after"] is not None


def test_a_module_of_ones_own_is_refused_with_its_layer_names_and_registered_with_them(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes, sessions: sessionmaker[Session]
) -> None:
    pyg, config = _pyg_graphsage(graph_npz)
    # the tutorial's own class: self.conv1 = SAGEConv(...), self.conv2 = SAGEConv(...), the same computation
    own = {k.replace("convs.0.", "conv1.").replace("convs.1.", "conv2."): v for k, v in pyg.state_dict().items()}
    weights = save(own)
    files = {"weights": ("own.safetensors", weights)}
    refused = client.post(
        "/v1/models", headers=auth, files=files, data={"config": json.dumps(config), "graph_id": graph_id}
    )
    assert_problem(refused, 422, "invalid-model")
    [error] = refused.json()["errors"]
    assert error["field"] == "weights" and '"layer_names": ["conv1", "conv2"]' in error["message"], error

    named = {**config, "layer_names": ["conv1", "conv2"]}
    response = client.post(
        "/v1/models", headers=auth, files=files, data={"config": json.dumps(named), "graph_id": graph_id}
    )
    assert response.status_code == 201, response.text
    registered = response.json()
    assert registered["config"]["source"]["layer_names"] == ["conv1", "conv2"]
    assert registered["fit"]["training_fit"]["no_better"] is False and registered["warnings"] == []
    with sessions() as session:
        row = session.get(SuppliedModel, uuid.UUID(registered["id"]))
        assert row is not None and row.weights == weights  # stored as uploaded, under the user's names
        stored = TrainedModel.from_bytes(row.weights, row.config)
    graph = load_npz(io.BytesIO(graph_npz))
    with torch.no_grad():
        expected = pyg.double()(graph.x.double(), graph.edge_index)
    ours = TrainedModel(stored.module.double(), stored.model_config, stored.train_config).logits(graph)
    assert torch.allclose(ours, expected, rtol=0.0, atol=1e-6)


def _registered(
    client: TestClient, auth: dict[str, str], graph_id: str, weights: bytes, config: dict[str, object]
) -> str:
    """Register ``weights`` with ``config`` for the graph; the model's id."""
    response = client.post(
        "/v1/models",
        headers=auth,
        files={"weights": ("m.safetensors", weights)},
        data={"config": json.dumps(config), "graph_id": graph_id},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_settings_for_a_trained_model_are_refused_with_a_supplied_one(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes
) -> None:
    """A supplied model's architecture and recipe are its config's: a request that also gives ``model`` or a
    training setting other than the seed is a 422 naming them, rather than stored as if it described the model."""
    weights, config = _model_parts(graph_npz)
    model_id = _registered(client, auth, graph_id, weights, config)
    for extra, named in (
        ({"model": {"arch": "gat"}}, "model"),
        ({"training": {"epochs": 50, "seed": 1}}, "training.epochs"),
        ({"model": {"layers": 2}, "training": {"lr": 0.1, "polish": True}}, "model, training.lr, training.polish"),
    ):
        refused = client.post("/v1/audits", headers=auth, json={"model_id": model_id, **extra})
        problem = assert_problem(refused, 422, "validation-error")
        assert problem["detail"].startswith(f"{named}: a supplied model (model_id) is audited with its own"), problem
        assert fields(problem) == set(named.split(", "))
    # settings the model's own recipe cannot take are refused as such (a 422, not a server error)
    untrained = {**config, "training": {**config["training"], "epochs": 0, "polish": True}}  # type: ignore[dict-item]
    again = _registered(client, auth, graph_id, weights, untrained)
    refused = client.post("/v1/audits", headers=auth, json={"model_id": again, "debias_retrain": "adam"})
    assert "training.epochs 0 runs no Adam epoch" in assert_problem(refused, 422, "invalid-config")["detail"]


def test_unsupported_pyg_options_are_422_naming_them(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes
) -> None:
    pyg, config = _pyg_graphsage(graph_npz)
    args = {**config["args"], "norm": "graph_norm", "jk": "max"}  # type: ignore[dict-item]  # JSON value
    response = client.post(
        "/v1/models",
        headers=auth,
        files={"weights": ("m", save(pyg.state_dict()))},
        data={"config": json.dumps({**config, "args": args}), "graph_id": graph_id},
    )
    problem = assert_problem(response, 422, "unsupported-model")
    assert fields(problem) == {"config.args.norm", "config.args.jk"}
    assert "graph_norm" in problem["detail"] and "max" in problem["detail"]


def test_a_pyg_model_that_does_not_fit_its_graph_is_422_naming_why(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes
) -> None:
    """The service's check is the library's (``bind_core.pipeline.fit_problems``): a model built for one feature
    fewer than the graph (its sensitive column kept as a feature) and a ``classes`` that names no value of the label
    are ``model-does-not-fit``, each naming its field; ``classes`` of the label's values is stored with the model."""
    pyg, config = _pyg_graphsage(graph_npz)
    graph = load_npz(io.BytesIO(graph_npz))
    narrow = GraphSAGE(**{**config["args"], "in_channels": graph.num_features - 1})  # type: ignore[dict-item]
    narrow_config = {**config, "args": {**config["args"], "in_channels": graph.num_features - 1}}  # type: ignore[dict-item]

    def post(weights: bytes, model_config: dict[str, object]) -> dict[str, object]:
        response = client.post(
            "/v1/models",
            headers=auth,
            files={"weights": ("m.safetensors", weights)},
            data={"config": json.dumps(model_config), "graph_id": graph_id},
        )
        return assert_problem(response, 422, "model-does-not-fit")

    problem = post(save(narrow.state_dict()), narrow_config)
    assert fields(problem) == {"config.in_dim"}
    assert f"takes {graph.num_features - 1} input features but the graph has {graph.num_features}" in str(problem)
    names = [str(c) for c in range(graph.num_classes)]
    problem = post(save(pyg.state_dict()), {**config, "classes": ["approved", names[0]]})
    assert fields(problem) == {"config.classes"} and "'approved' is not a value of the label" in str(problem)
    ok = client.post(
        "/v1/models",
        headers=auth,
        files={"weights": ("m.safetensors", save(pyg.state_dict()))},
        data={"config": json.dumps({**config, "classes": names[::-1]}), "graph_id": graph_id},
    )
    assert ok.status_code == 201, ok.text
    assert ok.json()["config"]["classes"] == names[::-1]


def test_the_papers_gcn_as_the_reference_code_names_it_is_registered_and_audited_with_steps(
    client: TestClient,
    auth: dict[str, str],
    graph_id: str,
    graph_npz: bytes,
    sessions: sessionmaker[Session],
    settings: Settings,
) -> None:
    """The BIND reference code's GCN (``self.body.gc1``, then ``self.fc``, no activation between): PyG's ``act=None``
    with ``jk="last"``. As Adam left it (not stationary), its one layer takes the step estimate."""
    extra = {"num_layers": 1, "jk": "last", "act": None, "dropout": 0.5}
    pyg, config = _pyg_graphsage(graph_npz, GCN, **extra)
    renamed = {"convs.0.": "body.gc1.", "lin.": "fc."}
    own = {next((k.replace(a, b, 1) for a, b in renamed.items() if k.startswith(a)), k): v
           for k, v in pyg.state_dict().items()}  # fmt: skip
    config |= {"layer_names": ["body.gc1"], "head_name": "fc"}
    response = register_model(client, auth, graph_id, save(own), config, "gcn.safetensors")
    assert response.status_code == 201, response.text
    model = response.json()["config"]["model"]
    assert (model["activation"], model["head"], model["head_activation"]) == ("identity", True, True)
    body = {"model_id": response.json()["id"], "stages": ["metrics", "influence", "validation"], "validation_sample": 5}
    queued = client.post("/v1/audits", headers=auth, json=body | {"bootstrap": 0})
    assert queued.status_code == 202, queued.text
    status, audit = run_alone(client, auth, queued.json()["id"], sessions, settings)
    assert status == "succeeded", audit.get("error")
    assert audit["results"]["supplied_model"]["pyg"]["max_logit_difference"] <= 1e-6
    assert audit["results"]["stationarity"]["stationary"] is False
    assert audit["results"]["influence_summary"]["solver_details"]["method"] == "step"
    assert audit["results"]["validation"]["pearson"] > 0.999
