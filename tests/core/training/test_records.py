"""The training records are typed from where they are made to the storage edge (issue 35)."""

from __future__ import annotations

import copy
import json
import math

import pytest

from bind_core.codec import ResultFormatError
from bind_core.data.graph import Graph
from bind_core.models.gnn import ModelConfig
from bind_core.training.fit import TrainConfig, TrainedModel, train
from bind_core.training.objective import message_passing_finish
from bind_core.training.records import NewtonRecord, Stationarity, TrainingHistory

NEWTON = {
    "iterations": 4,
    "hessians": 2,
    "accepted": 4,
    "converged": True,
    "reason": "converged",
    "max_abs_grad": 3e-9,
    "grad_norm": 5e-9,
    "negative_eigenvalues": 0,
    "min_eigenvalue": 1e-4,
    "seconds": 0.5,
    "rounds": 1,
}
STORED = {  # a model's config.json as config_dict() wrote it before the records were typed
    "history": {
        "epochs": 3,
        "best_epoch": 2,
        "best_val_loss": None,
        "seconds": 0.25,
        "batch_size": 8,
        "fan_out": [3, -1],
        "batches": 5,
        "validation_nodes": 40,
    },
    "stationarity": {
        "adam_grad_norm": 0.03,
        "grad_norm": 4e-9,
        "polished": True,
        "iterations": 17,
        "converged": True,
        "seconds": 1.5,
        "newton": NEWTON,
        "damping": 0.01,
    },
}


def _stored(model: TrainedModel) -> dict[str, object]:
    return {**json.loads(json.dumps(model.config_dict())), **copy.deepcopy(STORED)}


def test_a_model_stored_before_loads_with_typed_records(small_model: TrainedModel) -> None:
    loaded = TrainedModel.from_bytes(small_model.to_bytes(), _stored(small_model))
    history, station = loaded.history, loaded.stationarity
    assert isinstance(history, TrainingHistory) and isinstance(station, Stationarity)
    assert history.batch_size == 8 and history.fan_out == [3, -1] and history.best_val_loss is None
    assert station.newton == NewtonRecord(**NEWTON) and station.iterations == 17 and station.extra == {"damping": 0.01}
    stored = loaded.config_dict()  # written back with the same figures (a null best_val_loss is left out)
    assert stored["stationarity"] == STORED["stationarity"]
    assert stored["history"] == {k: v for k, v in STORED["history"].items() if v is not None}


def test_a_stored_record_of_another_shape_is_refused(small_model: TrainedModel) -> None:
    config = _stored(small_model)
    config["stationarity"] = {"newton": {**NEWTON, "converged": "yes"}}
    with pytest.raises(ResultFormatError, match="converged"):
        TrainedModel.from_bytes(small_model.to_bytes(), config)


def test_a_newton_finish_whose_time_ran_out_first_records_no_round(small_graph: Graph) -> None:
    model = train(small_graph, TrainConfig(epochs=5, polish=False), ModelConfig(layers=2, hidden=4))
    module = model.module.double().eval()
    before = [p.detach().clone() for p in module.parameters()]
    record = message_passing_finish(
        module,
        model.prepare(small_graph),
        small_graph,
        model.train_config.weight_decay,
        tol=1e-7,
        lbfgs_iter=10,
        max_steps=10,
        max_seconds=-1.0,
        progress=None,
    )
    assert record.reason == "max_seconds" and not record.converged and record.rounds is None
    assert (record.iterations, record.accepted, record.hessians) == (0, 0, 0) and math.isnan(record.min_eigenvalue)
    assert record.max_abs_grad > 1e-7 and record.grad_norm >= record.max_abs_grad
    assert all(bool((p == q).all()) for p, q in zip(module.parameters(), before, strict=True))  # weights untouched
