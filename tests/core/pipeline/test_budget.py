"""The audit cost estimate (`bind_core.pipeline.budget`): exact parameter counts, when a dense Hessian is counted,
and the sizes that make the issue's requests too large."""

from __future__ import annotations

import json

import pytest
import torch

from bind_core.codec import decode, encode
from bind_core.data.datasets import synthetic
from bind_core.models.gnn import GNN, ModelConfig
from bind_core.pipeline.audit import AuditConfig
from bind_core.pipeline.budget import AuditCost, GraphSize, audit_cost, forward_flops, parameter_count, sampled_size
from bind_core.training.fit import TrainConfig

TOY = GraphSize(nodes=300, edges=1500, features=8, classes=2, train=80)


@pytest.mark.parametrize(
    "model",
    [ModelConfig(), ModelConfig(arch="gin", layers=2, hidden=12), ModelConfig(arch="sage", layers=3, hidden=5),
     ModelConfig(arch="gat", layers=2, hidden=6, heads=3)],
    ids=["gcn", "gin", "sage", "gat"],
)  # fmt: skip
@pytest.mark.parametrize("classes", [2, 4])
def test_parameter_count_matches_the_model(model: ModelConfig, classes: int) -> None:
    real = sum(p.numel() for p in GNN(model, 7, classes).parameters())
    assert parameter_count(model, 7, classes) == real


def test_graph_size_from_a_summary() -> None:
    graph = synthetic(200, seed=1)
    size = GraphSize.of_summary(graph.summary())
    assert GraphSize.of_summary(json.loads(json.dumps(encode(graph.summary())))) == size  # the stored JSON too
    assert (size.nodes, size.edges, size.features, size.classes, size.train) == (
        graph.num_nodes, graph.num_edges, graph.num_features, graph.num_classes, int(graph.train_idx.numel()),
    )  # fmt: skip


def test_the_estimate_json_has_its_keys_and_the_sums() -> None:
    cost = audit_cost(AuditConfig.from_dict({"model": {"layers": 2}}), TOY)
    body = encode(cost)
    assert list(body) == ["parameters", "dense_hessian", "peak_memory_bytes", "memory_bytes", "work_flops", "work"]
    assert body["peak_memory_bytes"] == sum(body["memory_bytes"].values()) == cost.peak_memory_bytes
    assert body["work_flops"] == pytest.approx(sum(body["work"].values())) and isinstance(body["work_flops"], float)
    assert json.loads(json.dumps(body)) == body and decode(AuditCost, body) == cost


@pytest.mark.parametrize(
    ("settings", "dense"),
    [
        ({}, True),  # auto: exact up to 5000 parameters
        ({"solver": "cg", "estimator": "linear", "training": {"polish": False}}, False),
        ({"solver": "cg", "training": {"polish": False}}, True),  # not stationary: the step estimate (dense)
        ({"solver": "cg"}, True),  # the polish's Newton finish may form one
        ({"solver": "exact", "model": {"hidden": 4096}, "training": {"polish": False}}, True),
        ({"solver": "auto", "model": {"hidden": 4096}}, False),  # cg above 5000 parameters, no Newton
        ({"model": {"layers": 2}, "estimator": "step", "solver": "cg", "training": {"polish": False}}, True),
        ({"stages": ["training", "metrics"], "training": {"polish": False}}, False),
    ],
)
def test_dense_hessian_is_counted_when_one_is_formed(settings: dict[str, object], dense: bool) -> None:
    cost = audit_cost(AuditConfig.from_dict(settings), TOY)
    assert cost.dense_hessian is dense
    p = cost.parameters
    assert cost.memory_bytes["hessian"] == (5 * 8 * p * p if dense else 0)


def test_the_issue_requests_are_far_over_8_gib() -> None:
    exact = audit_cost(AuditConfig.from_dict({"solver": "exact", "model": {"hidden": 4096}}), TOY)
    assert exact.parameters == 8 * 4096 + 4096 + 4096 + 1
    assert exact.memory_bytes["hessian"] == 5 * 8 * exact.parameters**2 > 8 * 2**30
    gat = audit_cost(AuditConfig.from_dict({"model": {"arch": "gat", "layers": 8, "hidden": 4096, "heads": 16}}), TOY)
    assert gat.parameters > 10**9 and gat.peak_memory_bytes > 8 * 2**30
    default = audit_cost(AuditConfig(), TOY)
    assert default.peak_memory_bytes < 2**25 and default.work_flops < 1e12


def test_work_grows_with_each_stage() -> None:
    base = {"validation_sample": 0, "budgets": []}
    lone = audit_cost(AuditConfig.from_dict(base), TOY)
    more = audit_cost(AuditConfig.from_dict({**base, "validation_sample": 10, "budgets": [1, 2]}), TOY)
    assert set(lone.work) == {"training", "influence"}
    assert more.work["debiasing"] == pytest.approx(2 * more.work["training"])
    assert more.work_flops > lone.work_flops


def test_edges_add_work_and_a_deeper_model_pays_more_per_edge() -> None:
    base = {"validation_sample": 0, "budgets": []}
    lone = audit_cost(AuditConfig.from_dict(base), TOY)
    edges = audit_cost(AuditConfig.from_dict({**base, "edges": True}), TOY)
    assert edges.work["edges"] > 0 and edges.work_flops > lone.work_flops
    two = audit_cost(AuditConfig.from_dict({**base, "edges": True, "model": {"layers": 2}}), TOY)
    three = audit_cost(AuditConfig.from_dict({**base, "edges": True, "model": {"layers": 3}}), TOY)
    # the damped estimate: passes over the rows each edge changes (more hops, more rows) and the settled steps
    assert 0 < edges.work["edges"] < two.work["edges"] < three.work["edges"]


def test_forward_flops_of_a_one_layer_gcn() -> None:
    model = ModelConfig(hidden=4)
    size = GraphSize(nodes=10, edges=20, features=3, classes=2, train=5)
    # 2·(n·F·h + (E + n)·h) for the layer, 2·n·h·C for the head.
    assert forward_flops(model, size) == 2 * (10 * 3 * 4 + 30 * 4) + 2 * 10 * 4 * 2
    assert torch.get_default_dtype() == torch.float32  # the meta-device count leaves torch's defaults alone


def test_mini_batches_cost_the_sampled_graph_not_the_whole_graph() -> None:
    big = GraphSize(nodes=1_000_000, edges=10_000_000, features=16, classes=2, train=10_000)
    model = ModelConfig(arch="sage", layers=2, hidden=128)
    settings = {"model": {"arch": "sage", "layers": 2, "hidden": 128}, "validation_sample": 0, "budgets": []}
    full = audit_cost(AuditConfig.from_dict(settings), big)
    mini = audit_cost(AuditConfig.from_dict({**settings, "training": {"batch_size": 1024, "fan_out": [10, 10]}}), big)
    # one batch: 1024 seeds, 10 neighbours each, 10 of each of those: 1024·(1 + 10 + 100) nodes at most
    batch = sampled_size(model, TrainConfig(batch_size=1024, fan_out=(10, 10)), big)
    assert batch is not None and batch.nodes == 1024 * 111 and batch.train == 1024
    f, polish = forward_flops(model, big), 1.5 * 1000 * 3 * forward_flops(model, big)
    assert full.work["training"] == pytest.approx(1000 * 3 * f + polish)
    # 10 batches an epoch, each one forward and backward on its sampled graph, and the exact validation pass over
    # at most 10,000 validation nodes and their neighbours (mean degree 20)
    validation = GraphSize(nodes=10_000 * 21, edges=10_000 * 21 * 20, features=16, classes=2, train=10_000)
    per_epoch = 10 * 3 * forward_flops(model, batch) + forward_flops(model, validation)
    assert mini.work["training"] == pytest.approx(1000 * per_epoch + polish)
    # an upper bound (draws shared between seeds counted twice): 10 batches of 113,664 nodes cost more than one
    # full pass here, fewer sampled neighbours less
    small = {**settings, "training": {"batch_size": 1024, "fan_out": [5, 5]}}
    assert audit_cost(AuditConfig.from_dict(small), big).work["training"] < full.work["training"]
    # the first layer's "all neighbours" hop reads the aggregated features: it is not expanded
    first_all = sampled_size(ModelConfig(layers=2), TrainConfig(batch_size=100, fan_out=(5, -1)), big)
    assert first_all is not None and first_all.nodes == 100 * 6
    assert sampled_size(ModelConfig(layers=2), TrainConfig(), big) is None
