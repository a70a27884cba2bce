"""``/v1/models``: registering a supplied GNN (safetensors + JSON config), checked against its graph."""

from __future__ import annotations

import io
import json

from apihelp import assert_problem, fields
from fastapi.testclient import TestClient

from bind_core.datasets import load_npz
from bind_core.training import TrainConfig, train


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
