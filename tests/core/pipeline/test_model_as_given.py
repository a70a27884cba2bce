"""The model as given (issue 32): a supplied model is audited with its own weights (metrics equal to its own forward
pass), weights that are not a minimum are attributed rather than refused, and their estimates answer the proximal
Bregman response that the self-check measures."""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import replace
from typing import Any

import pytest
import torch
from pyg_models import early_stopped
from safetensors.torch import save

from bind_core.codec import decode, encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.validation import validate
from bind_core.fairness.metrics import evaluate
from bind_core.fairness.records import MetricValues
from bind_core.influence.estimate import estimate
from bind_core.models.gnn import ModelConfig
from bind_core.pipeline.audit import AuditConfig, run_audit
from bind_core.pipeline.reference import prepare_for_audit
from bind_core.pipeline.results import SuppliedModel
from bind_core.reporting.page import fmt
from bind_core.reporting.report import render_report
from bind_core.training.fit import TrainConfig, train
from bind_core.training.stationarity import describe_stationarity


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(160, seed=4, train_per_class=25)


def _config(cls: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "format": "torch_geometric",
        "class": cls,
        "args": args,
        "training": {"loss": "cross_entropy", "weight_decay": 5e-4, "lr": 0.01, "epochs": 60},
    }


def _own_metrics(module: torch.nn.Module, graph: Graph) -> MetricValues:
    """The PyG module's own forward pass (float64), measured with the audit's metric functions."""
    reference = copy.deepcopy(module).double().eval()
    with torch.no_grad():
        proba = torch.softmax(reference(graph.x.double(), graph.edge_index), dim=1)[graph.test_idx]
    test = graph.test_idx
    return evaluate(proba, graph.y[test], graph.sens[test], lam=0.5, num_groups=graph.num_groups).values()


CLASSES = ("GCN", "GraphSAGE", "GIN", "GAT")


@pytest.mark.heavy  # 5 s here
@pytest.mark.parametrize("act", ["relu", "gelu"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("cls", CLASSES)
def test_a_supplied_pyg_model_is_audited_with_its_own_predictions(
    graph: Graph, cls: str, layers: int, act: str
) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": layers, "out_channels": 2}
    args["act"] = act
    module = early_stopped(cls, args, graph)
    weights = save({k: v.contiguous() for k, v in module.state_dict().items()})
    config = AuditConfig(stages=("training", "metrics"), bootstrap=0)
    model, record = prepare_for_audit(weights, _config(cls, args), graph, config)
    assert record.reference == "as_given" and not record.polished_by_service
    result = run_audit(graph, replace(config, training=TrainConfig(seed=3)), model=model)
    # the result's config describes the model audited: its architecture and recipe, the audit's seed kept
    assert result.config.model == model.model_config and result.config.model.layers == layers
    assert result.config.training == replace(model.train_config, seed=3) and result.config.training.epochs == 60
    assert "<b>as given</b>" in render_report({**result.to_dict(), "supplied_model": encode(record)})
    got, own = result.metrics.test, _own_metrics(module, graph)
    for key in ("accuracy", "delta_sp", "delta_eo", "gamma_sp", "gamma_eo", "gamma"):
        assert getattr(got, key) == pytest.approx(getattr(own, key), abs=1e-12), key
    with torch.no_grad():  # the probabilities themselves, every node
        expected = torch.softmax(copy.deepcopy(module).double()(graph.x.double(), graph.edge_index), dim=1)
    assert torch.allclose(model.predict_proba(graph).double(), expected, rtol=0.0, atol=1e-12)


def test_polishing_first_is_possible_and_reports_both_models_side_by_side(graph: Graph) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    module = early_stopped("GCN", {**args, "act": "gelu"}, graph, epochs=30)
    weights = save({k: v.contiguous() for k, v in module.state_dict().items()})
    config = AuditConfig(stages=("training", "metrics"), bootstrap=0, reference="polished")
    model, record = prepare_for_audit(weights, _config("GCN", {**args, "act": "gelu"}), graph, config)
    assert record.reference == "polished" and record.polished_by_service
    assert record.grad_norm is not None and record.grad_norm_supplied is not None
    assert record.grad_norm < record.grad_norm_supplied
    comparison = record.comparison
    assert comparison is not None
    own = _own_metrics(module, graph)
    assert comparison.as_given.accuracy == pytest.approx(own.accuracy, abs=1e-12)
    assert comparison.as_given.gamma == pytest.approx(own.gamma, abs=1e-12)
    result = run_audit(graph, config, model=model)
    assert comparison.polished.gamma == pytest.approx(result.metrics.test.gamma, abs=1e-12)
    assert comparison.polished.gamma != pytest.approx(own.gamma, abs=1e-6)  # two models, both shown
    test = graph.test_idx
    with torch.no_grad():
        before = copy.deepcopy(module).double()(graph.x.double(), graph.edge_index)[test].argmax(1)
    after = model.predict_proba(graph, test).argmax(1)
    assert comparison.predictions_differ == pytest.approx(float((before != after).double().mean()))
    assert comparison.test_nodes == int(test.numel())
    html = render_report({**result.to_dict(), "supplied_model": encode(record)})
    assert "reference: polished" in html and "Test predictions that differ between the two" in html
    row = f"<td class=l>accuracy</td><td>{fmt(comparison.as_given.accuracy)}</td>"
    assert row in html.replace("\n", "")  # the supplied model's own accuracy beside the polished one's
    stored = json.loads(json.dumps(encode(record)))
    typed = decode(SuppliedModel, stored)  # the typed result reads it back as it was
    assert typed == record and encode(typed) == stored


@pytest.mark.heavy  # 18 s here
def test_an_early_stopped_model_is_attributed_and_its_estimate_matches_the_proximal_bregman_response(
    graph: Graph,
) -> None:
    # a two-layer GCN stopped by early stopping: far from a stationary point, not refused; its step estimate answers
    # the proximal Bregman response, and per node it agrees with that objective re-optimised to convergence
    model = train(graph, TrainConfig(epochs=60, lr=0.01, polish=False), ModelConfig(arch="gcn", layers=2, hidden=8))
    record = describe_stationarity(model, graph)
    assert record.stationary is False and record.max_abs_grad > 100 * record.tolerance
    influence = estimate(model, graph)
    assert influence.solve.details["method"] == "step"
    check = validate(model, graph, influence, sample=15, seed=1)
    assert check.mode == "proximal"
    # nothing deleted: the given weights are the answer (effects ~1e-3)
    assert check.noise_floor is not None and check.noise_floor < 1e-6
    pearson = check.correlations()["gamma"]["pearson"]
    assert pearson is not None and pearson >= PER_NODE_AGREEMENT, pearson


PER_NODE_AGREEMENT = 0.95
"""The issue's goal for per-node Pearson against the defined ground truth; settled steps reach 0.999+ (the estimate
and its truth minimise the same objective), so falling below 0.95 on a small graph means the two have drifted
apart."""


def test_a_supplied_model_on_features_scaled_when_read_is_warned_about(graph: Graph) -> None:
    """The graph's features were min-max scaled when it was read (``feature_ranges``): a supplied model trained on
    the table's own values would be audited on inputs it never saw, and the audit says so; the same graph with its
    features as given, or a model the audit trains itself, carries no such warning."""
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 1, "out_channels": 2}
    module = early_stopped("GCN", args, graph, epochs=5)
    weights = save({k: v.contiguous() for k, v in module.state_dict().items()})
    config = AuditConfig(stages=("training", "metrics"), bootstrap=0)
    scaled = dataclasses.replace(graph, feature_ranges=tuple((0.0, 1.0) for _ in range(graph.num_features)))

    def scaling_warnings(audited: Graph, supplied: bool) -> list[str]:
        model = prepare_for_audit(weights, _config("GCN", args), audited, config)[0] if supplied else None
        return [w for w in run_audit(audited, config, model=model).warnings() if "min-max scaled" in w]

    (warning,) = scaling_warnings(scaled, supplied=True)
    assert "scale off" in warning and f"{graph.num_features} feature column(s)" in warning
    assert scaling_warnings(graph, supplied=True) == []
    assert scaling_warnings(scaled, supplied=False) == []
