"""A supplied model read on its graph when it is registered: its fit to its own training nodes and the order of its
outputs in the answer (``fit``), with the warning an audit would give where it fits them no better than a constant or
ranks them below chance; a model every audit of which would fail is refused; a graph too large is not read, and the
answer says so. The model keeps what its registration found, read back as it was said."""

from __future__ import annotations

import io
import uuid

import pytest
import torch
from apihelp import assert_problem, register_model
from fastapi.testclient import TestClient
from safetensors.torch import load, save
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.core.db.tables import SuppliedModel
from app.supplied import fit as registration
from app.supplied.schemas import NOT_KEPT
from bind_core.data.datasets import load_npz
from bind_core.training.fit import TrainConfig, train


def _register(client: TestClient, auth: dict[str, str], graph_id: str, weights: bytes, config: dict[str, object]):  # type: ignore[no-untyped-def]
    return register_model(client, auth, graph_id, weights, dict(config))


def test_a_fitting_model_and_one_with_its_outputs_reversed(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes
) -> None:
    graph = load_npz(io.BytesIO(graph_npz))
    model = train(graph, TrainConfig(epochs=200))
    fits = _register(client, auth, graph_id, model.to_bytes(), model.config_dict())
    assert fits.status_code == 201, fits.text
    said = fits.json()
    assert said["fit_not_checked"] is None and said["warnings"] == []
    fit = said["fit"]["training_fit"]
    assert fit["no_better"] is False and fit["accuracy"] > fit["majority"] and fit["loss"] < fit["constant"]
    assert said["fit"]["output_order"]["below_chance"] is False
    # the same model with its one binary logit negated (its classes read the other way round): its scores rank the
    # training labels below chance
    weights = load(model.to_bytes())
    assert weights["head.weight"].shape[0] == 1
    weights["head.weight"], weights["head.bias"] = -weights["head.weight"], -weights["head.bias"]
    reversed_ = _register(client, auth, graph_id, save(weights), model.config_dict())
    assert reversed_.status_code == 201, reversed_.text
    said = reversed_.json()
    assert said["fit"]["output_order"]["below_chance"] is True
    assert any("another order" in w for w in said["warnings"]), said["warnings"]
    assert said["warning_codes"] == ["output_order"]
    # read back, one at a time or in the list, a model says what its registration found
    again = client.get(f"/v1/models/{said['id']}", headers=auth).json()
    assert again == said
    listed = client.get("/v1/models", headers=auth, params={"graph_id": graph_id}).json()["items"]
    assert {m["id"]: m["warning_codes"] for m in listed} == {said["id"]: ["output_order"], fits.json()["id"]: []}
    assert {m["id"]: m["fit"] for m in listed}[fits.json()["id"]] == fits.json()["fit"]


def test_a_model_registered_before_the_reading_was_kept_says_so(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes, sessions: sessionmaker[Session]
) -> None:
    model = train(load_npz(io.BytesIO(graph_npz)), TrainConfig(epochs=5, polish=False))
    said = _register(client, auth, graph_id, model.to_bytes(), model.config_dict()).json()
    with sessions.begin() as session:  # as migration 0020 leaves an older model's row
        session.execute(update(SuppliedModel).where(SuppliedModel.id == said["id"]).values(registration=None))
    again = client.get(f"/v1/models/{said['id']}", headers=auth).json()
    assert again["fit"] is None and again["warnings"] == [] and again["warning_codes"] == []
    assert again["fit_not_checked"] == NOT_KEPT
    # read again, it keeps what the reading finds, as its registration would have
    checked = client.post(f"/v1/models/{said['id']}/check", headers=auth)
    assert checked.status_code == 200, checked.text
    assert {k: checked.json()[k] for k in ("warnings", "warning_codes", "fit", "fit_not_checked")} == {
        k: said[k] for k in ("warnings", "warning_codes", "fit", "fit_not_checked")
    }
    assert client.get(f"/v1/models/{said['id']}", headers=auth).json() == checked.json()
    assert_problem(client.post(f"/v1/models/{uuid.uuid4()}/check", headers=auth), 404)


def test_a_model_that_cannot_be_audited_is_refused(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes
) -> None:
    graph = load_npz(io.BytesIO(graph_npz))
    model = train(graph, TrainConfig(epochs=5, polish=False))
    weights = load(model.to_bytes())
    first = min(k for k in weights if k.endswith("weight"))
    weights[first] = torch.full_like(weights[first], float("inf"))
    refused = _register(client, auth, graph_id, save(weights), model.config_dict())
    problem = assert_problem(refused, 422)
    assert problem["type"].rsplit("/", 1)[-1] in ("invalid-model", "model-does-not-fit"), problem


def test_a_graph_too_large_is_not_read(
    client: TestClient, auth: dict[str, str], graph_id: str, graph_npz: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registration, "CHECK_MAX_NODES", 10)
    model = train(load_npz(io.BytesIO(graph_npz)), TrainConfig(epochs=5, polish=False))
    said = _register(client, auth, graph_id, model.to_bytes(), model.config_dict()).json()
    assert said["fit"] is None and said["fit_not_checked"].startswith("the graph has ")
    assert "an audit checks the model's fit in its first seconds" in said["fit_not_checked"]
    assert client.get(f"/v1/models/{said['id']}", headers=auth).json()["fit_not_checked"] == said["fit_not_checked"]
