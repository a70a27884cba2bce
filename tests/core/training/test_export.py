"""A debiasing budget's retrained model to take away (issue 34 item 7): ``debias(keep=...)`` hands each budget's
model out, and :func:`export_model` writes it in the form of the audited model; loaded back the way a supplied model
is loaded, it predicts exactly what the retrained model predicted."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import torch
from safetensors.torch import load, save
from torch_geometric.nn import models

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.debias import debias
from bind_core.models.pyg import pyg_module, read_source
from bind_core.models.pyg_names import bind_state_dict, pyg_state_dict
from bind_core.models.records import PygModel
from bind_core.pipeline import export_model, prepare_for_audit, weight_names
from bind_core.pipeline.config import AuditConfig
from bind_core.training.document import read_document
from bind_core.training.fit import TrainConfig, TrainedModel, train

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(120, seed=2, train_per_class=20)


def _float64(model: TrainedModel) -> TrainedModel:
    """``model`` in float64, as the audit computes a supplied model (its float32 weights are exact in float64)."""
    return TrainedModel(copy.deepcopy(model.module).double(), model.model_config, model.train_config)


def _kept(model: TrainedModel, graph: Graph, budgets: tuple[float, ...]) -> dict[int, TrainedModel]:
    kept: dict[int, TrainedModel] = {}
    influence = torch.linspace(-1.0, 1.0, graph.train_idx.numel(), dtype=torch.float64)
    rows = debias(model, graph, influence, budgets=budgets, keep=kept.__setitem__)
    assert [r.budget for r in rows] == list(budgets)
    return kept


def test_keep_hands_out_each_budgets_retrained_model_which_round_trips_in_bind_audits_form(graph: Graph) -> None:
    model = train(graph, TrainConfig(epochs=15, lr=0.05, polish=False))
    kept = _kept(model, graph, (2, 5))
    assert sorted(kept) == [0, 1]
    assert not torch.equal(kept[0].predict_proba(graph), kept[1].predict_proba(graph))  # two retrainings
    for retrained in kept.values():
        exported = export_model(retrained)
        assert exported.config["format"] == "bind-audit/model@1" and exported.size_bytes == len(exported.weights)
        config = json.loads(json.dumps(exported.config))  # as it travels: JSON
        assert torch.equal(TrainedModel.from_bytes(exported.weights, config).predict_proba(graph),
                           retrained.predict_proba(graph))  # fmt: skip
        loaded, _ = prepare_for_audit(exported.weights, config, graph, AuditConfig())  # as a supplied model
        assert torch.equal(loaded.predict_proba(graph), _float64(retrained).predict_proba(graph))
        assert loaded.train_config == retrained.train_config


def _pyg_config(cls: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "torch_geometric",
        "class": cls,
        "args": args,
        "training": {"loss": "cross_entropy", "weight_decay": 5e-4, "epochs": 15, "lr": 0.05},
    }


def _supplied(cls: str, args: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    torch.manual_seed(1)
    state = {k: v.contiguous() for k, v in getattr(models, cls)(**args).state_dict().items()}
    return save(state), _pyg_config(cls, args)


def test_an_older_gatconvs_names_come_back_as_both_halves() -> None:
    """A GAT supplied under an older PyG's ``lin_src``/``lin_dst`` (one matrix) gets both names again; read back,
    they are the one ``lin``."""
    source = PygModel(cls="GAT", args={}, loss="cross_entropy")
    state = {"convs.0.lin.weight": torch.randn(4, 3), "convs.0.att_src": torch.randn(1, 1, 4)}
    theirs = pyg_state_dict(state, source, ["convs.0.lin_src.weight", "convs.0.lin_dst.weight", "convs.0.att_src"])
    assert sorted(theirs) == ["convs.0.att_src", "convs.0.lin_dst.weight", "convs.0.lin_src.weight"]
    assert bind_state_dict(theirs, source).keys() == state.keys()
    assert torch.equal(bind_state_dict(theirs, source)["convs.0.lin.weight"], state["convs.0.lin.weight"])
    assert sorted(pyg_state_dict(state, source)) == sorted(state)  # names unknown: the installed PyG's


@pytest.mark.parametrize(("cls", "extra"), [("GCN", {}), ("GIN", {}), ("GAT", {"heads": 2})])
def test_a_supplied_pyg_models_retrained_weights_come_back_under_the_users_names(
    graph: Graph, cls: str, extra: dict[str, Any]
) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2, **extra}
    weights, config = _supplied(cls, args)
    canonical = encode(read_document(config))  # what registering stores (app.supplied.service.check_model)
    audited, _ = prepare_for_audit(weights, canonical, graph, AuditConfig())
    retrained = _kept(audited, graph, (3,))[0]

    exported = export_model(retrained, canonical, weight_names(weights))
    assert exported.config["format"] == "torch_geometric" and exported.config["class"] == cls
    assert exported.config["training"]["loss"] == "cross_entropy" and exported.config["training"]["epochs"] == 15
    assert sorted(load(exported.weights)) == sorted(load(weights))  # the user's own parameter names
    # PyG itself takes the weights as they are and computes the retrained model's logits
    pyg = pyg_module(read_source(canonical["source"])).double().eval()
    pyg.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)
    with torch.no_grad():
        theirs = pyg(graph.x.double(), graph.edge_index)
    assert torch.allclose(theirs, _float64(retrained).logits(graph), rtol=0.0, atol=1e-6)
    # registered again (the supplied-model path) it predicts what the retrained model predicts
    registered = encode(read_document(json.loads(json.dumps(exported.config))))
    again, _ = prepare_for_audit(exported.weights, registered, graph, AuditConfig())
    assert torch.equal(again.predict_proba(graph), _float64(retrained).predict_proba(graph))
    assert not torch.equal(again.predict_proba(graph), audited.predict_proba(graph))  # it is the retrained one
