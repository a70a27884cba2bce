"""A supplied model (``run_audit(model=TrainedModel.from_bytes(...))``) against the graph it is audited on: its
outputs in another order than the label's classes (reordered by the config's ``classes``, else warned about), a model
of other outputs or other features (refused with a bind_core error, never torch's), and the record of what was done
to it (``supplied_model``, with the PyG reproduction check) on the library's path as on the command line's."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest
import torch
from pyg_models import early_stopped
from safetensors.torch import save

from bind_core import ModelDoesNotFitError, TrainedModel, UnsupportedModelError, estimate_influence
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.reference import prepare_for_audit
from bind_core.training.export import export_model, retrained_form
from bind_core.training.output_order import reorder_outputs

METRICS = AuditConfig(stages=("training", "metrics"), bootstrap=0)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(160, seed=4, train_per_class=25)


def _config(args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    training = {"loss": "cross_entropy", "weight_decay": 5e-4, "lr": 0.01, "epochs": 60}
    return {"format": "torch_geometric", "class": "GCN", "args": args, "training": training, **extra}


def _args(graph: Graph, out: int = 2) -> dict[str, Any]:
    return {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": out}


def _weights(module: torch.nn.Module) -> bytes:
    return save({k: v.contiguous() for k, v in module.state_dict().items()})


def _own_proba(module: torch.nn.Module, graph: Graph) -> torch.Tensor:
    with torch.no_grad():
        return torch.softmax(copy.deepcopy(module).double()(graph.x.double(), graph.edge_index), dim=1)


@pytest.fixture(scope="module")
def coded_the_other_way(graph: Graph) -> torch.nn.Module:
    """A PyG GCN trained the user's way: the label's class 1 coded as 0 and class 0 as 1 (``approved`` = 1 where
    the audit numbers the sorted values, ``approved`` 0 and ``denied`` 1)."""
    return early_stopped("GCN", _args(graph), dataclasses.replace(graph, y=1 - graph.y))


def test_a_model_coded_the_other_way_is_warned_about_and_its_verdict_withheld(
    graph: Graph, coded_the_other_way: torch.nn.Module
) -> None:
    model = TrainedModel.from_bytes(_weights(coded_the_other_way), _config(_args(graph)))
    typed = run_audit(graph, METRICS, model=model).typed()
    record = typed.supplied_model
    assert record is not None and record.classes is None
    order = record.output_order
    assert order is not None and order.below_chance and order.statistic == "auc"
    assert order.value is not None and order.value < 0.5 and order.p_value is not None and order.p_value < 1e-3
    assert order.read_as == ["0", "1"] and order.likely == ["1", "0"]
    (warning,) = [w for w in typed.warnings if "another order" in w]
    assert "output 1 read as y=1" in warning and 'give the model config "classes": ["1", "0"]' in warning
    assert typed.summary is not None
    assert typed.summary.verdict.startswith("No verdict: the model's outputs may be in another order")
    assert "As measured: " in typed.summary.verdict
    withheld = typed.summary.withheld  # the reason, apart, for a reader that shows a badge (the console)
    assert withheld is not None and withheld.startswith("the model's outputs may be in another order")


@pytest.mark.parametrize(
    "where", [{"classes": ["1", "0"]}, {"classes": [1, 0]}, {"training": {"classes": ["1", "0"]}}], ids=str
)
def test_classes_put_the_outputs_in_the_label_order_exactly(
    graph: Graph, coded_the_other_way: torch.nn.Module, where: dict[str, Any]
) -> None:
    config = _config(_args(graph))
    if "training" in where:
        config["training"] = {**config["training"], **where["training"]}
    else:
        config.update(where)
    result = run_audit(graph, METRICS, model=TrainedModel.from_bytes(_weights(coded_the_other_way), config))
    expected = _own_proba(coded_the_other_way, graph)[:, [1, 0]]
    assert torch.allclose(result.model.predict_proba(graph).double(), expected, rtol=0.0, atol=1e-12)
    typed = result.typed()
    assert typed.supplied_model is not None and typed.supplied_model.classes == ["1", "0"]
    assert typed.supplied_model.output_order is not None and not typed.supplied_model.output_order.below_chance
    assert not [w for w in typed.warnings if "another order" in w]
    assert typed.summary is not None and typed.summary.withheld is None  # read in its order, it has a verdict
    assert not typed.summary.verdict.startswith("No verdict")
    own = float((expected[graph.test_idx].argmax(1) == graph.y[graph.test_idx]).double().mean())
    assert typed.metrics.test.accuracy == pytest.approx(own, abs=1e-12) and own > 0.6


def test_a_class_that_is_not_the_label_s_is_refused(graph: Graph, coded_the_other_way: torch.nn.Module) -> None:
    weights = _weights(coded_the_other_way)
    model = TrainedModel.from_bytes(weights, _config(_args(graph), classes=["approved", "1"]))
    with pytest.raises(ModelDoesNotFitError, match=r"'approved' is not a value of the label y \(0, 1\)"):
        run_audit(graph, METRICS, model=model)
    with pytest.raises(UnsupportedModelError, match="names 3 values but the model's outputs stand for 2"):
        TrainedModel.from_bytes(weights, _config(_args(graph), classes=["0", "1", "2"]))
    with pytest.raises(UnsupportedModelError, match="names a value twice"):
        TrainedModel.from_bytes(weights, _config(_args(graph), classes=["0", "0"]))
    twice = _config(_args(graph), classes=["0", "1"])
    twice["training"] = {**twice["training"], "classes": ["0", "1"]}
    with pytest.raises(UnsupportedModelError, match="given twice"):
        TrainedModel.from_bytes(weights, twice)


def test_three_classes_in_another_order_are_warned_about_with_the_order_that_fits() -> None:
    graph = synthetic(240, seed=5, num_classes=3, train_per_class=30)
    permutation = torch.tensor([2, 0, 1])  # the user's output for each of the graph's classes
    module = early_stopped("GCN", _args(graph, 3), dataclasses.replace(graph, y=permutation[graph.y]), epochs=80)
    typed = run_audit(graph, METRICS, model=TrainedModel.from_bytes(_weights(module), _config(_args(graph, 3)))).typed()
    order = typed.supplied_model.output_order if typed.supplied_model else None
    assert order is not None and order.below_chance and order.statistic == "accuracy"
    assert order.likely == ["1", "2", "0"]  # output j stands for the class the permutation sends to j
    fixed = _config(_args(graph, 3), classes=order.likely)
    typed = run_audit(graph, METRICS, model=TrainedModel.from_bytes(_weights(module), fixed)).typed()
    assert typed.supplied_model is not None and typed.supplied_model.output_order is not None
    assert not typed.supplied_model.output_order.below_chance


@pytest.mark.parametrize(
    ("arch", "head", "gat"),
    [
        ("gcn", False, {}),
        ("sage", False, {}),
        ("gin", False, {}),
        ("gat", False, {}),
        ("gat", True, {}),
        ("gcn", True, {}),
        ("gat", False, {"residual": True}),
        ("gat", False, {"v2": True, "residual": True}),
        ("gat", False, {"v2": True, "share_weights": True}),
        ("gat", True, {"v2": True}),
    ],
)
def test_reordering_outputs_is_the_same_model_with_its_columns_reordered(
    arch: str, head: bool, gat: dict[str, bool]
) -> None:
    graph = synthetic(80, seed=2, num_classes=3)
    torch.manual_seed(1)
    config = ModelConfig(arch=arch, layers=2, hidden=8, heads=2, head=head, **gat)
    module = GNN(config, graph.num_features, 3).double().eval()
    before = module(module.prepare(graph))
    reorder_outputs(module, [2, 0, 1], graph)
    assert torch.allclose(module(module.prepare(graph)), before[:, [2, 0, 1]], rtol=0.0, atol=1e-12)
    binary = synthetic(80, seed=2)
    one_logit = GNN(config, binary.num_features, 2).double().eval()
    before = one_logit(one_logit.prepare(binary))
    assert before.shape[1] == 1
    if config.v2 and not head:  # no weights negate a GATv2's own logit: refused, the model left as it was
        with pytest.raises(ConfigError, match="GATv2 whose last layer outputs one logit"):
            reorder_outputs(one_logit, [1, 0], binary)
        assert torch.equal(one_logit(one_logit.prepare(binary)), before)
        return
    reorder_outputs(one_logit, [1, 0], binary)
    assert torch.allclose(one_logit(one_logit.prepare(binary)), -before, rtol=0.0, atol=1e-12)


def test_a_model_of_two_outputs_on_a_label_of_three_classes_is_refused(
    graph: Graph, coded_the_other_way: torch.nn.Module
) -> None:
    three = synthetic(160, seed=4, num_classes=3, num_features=graph.num_features)
    model = TrainedModel.from_bytes(_weights(coded_the_other_way), _config(_args(graph)))
    message = r"the model has 2 outputs but the label y has 3 classes \(0, 1, 2\)"
    with pytest.raises(ModelDoesNotFitError, match=message):
        run_audit(three, METRICS, model=model)
    with pytest.raises(ModelDoesNotFitError, match=message):
        estimate_influence(model, three)


def test_a_model_of_other_features_is_refused_naming_both_and_the_likely_cause(
    graph: Graph, coded_the_other_way: torch.nn.Module
) -> None:
    """As ``from_files`` makes it by default: the sensitive column kept as a feature, one more than the model's."""
    wider = dataclasses.replace(graph, x=torch.cat([graph.x, graph.sens[:, None].to(graph.x.dtype)], dim=1))
    model = TrainedModel.from_bytes(_weights(coded_the_other_way), _config(_args(graph)))
    message = f"the model takes {graph.num_features} input features but the graph has {graph.num_features + 1}"
    with pytest.raises(ModelDoesNotFitError, match=message) as raised:
        run_audit(wider, METRICS, model=model)
    assert "sensitive column" in str(raised.value) and "features=" in str(raised.value)
    with pytest.raises(ModelDoesNotFitError, match=message):
        model.predict_proba(wider)


def test_the_library_records_what_was_done_to_a_supplied_model_as_the_command_line_does(
    graph: Graph, coded_the_other_way: torch.nn.Module
) -> None:
    weights, config = _weights(coded_the_other_way), _config(_args(graph), classes=["1", "0"])
    model = TrainedModel.from_bytes(weights, config)
    result = run_audit(graph, METRICS, model=model)
    record = result.typed().supplied_model
    assert record is not None and record.reference == "as_given" and record.grad_norm is not None
    assert record.pyg is not None and record.pyg.cls == "GCN" and record.pyg.max_logit_difference is not None
    assert record.pyg.max_logit_difference <= 1e-6
    assert result.to_dict()["supplied_model"]["pyg"]["class"] == "GCN"
    assert model.dtype == torch.float32 and model.supplied is not None and model.supplied.record is None  # a copy
    prepared, given = prepare_for_audit(weights, config, graph, METRICS)  # as the command line and service do
    again = run_audit(graph, METRICS, model=prepared).typed().supplied_model
    assert again is not None and again.pyg == given.pyg and again.classes == ["1", "0"]
    assert torch.equal(prepared.predict_proba(graph), result.model.predict_proba(graph))


def test_a_retrained_model_of_a_config_with_classes_is_exported_with_the_graph_s(graph: Graph) -> None:
    """A model the audit retrains has its outputs in the graph's class order, so its PyG config says so."""
    form = _config(_args(graph), classes=["1", "0"])
    module = early_stopped("GCN", _args(graph), graph, epochs=3)
    model = TrainedModel.from_bytes(_weights(module), form)
    exported = export_model(model, retrained_form(form, ["0", "1"]))
    assert exported.config["classes"] == ["0", "1"]
    assert retrained_form(_config(_args(graph)), ["0", "1"]) == _config(_args(graph))
