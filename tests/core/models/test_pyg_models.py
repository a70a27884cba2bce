"""PyG's own ``torch_geometric.nn.models`` read as the project's GNN: same logits, refusals that name the option,
the kink caveats and the stationarity of a minimum on ReLU kinks."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load, save
from torch_geometric.nn import models

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.gnn import ModelConfig
from bind_core.models.pyg import UnsupportedModelError, read_source, reproduction
from bind_core.pipeline.caveats import model_warnings
from bind_core.training.document import read_document
from bind_core.training.fit import TrainConfig, TrainedModel, saved_state, train
from bind_core.training.kinks import kink_stall
from bind_core.training.records import KinkStall, StationarityCheck
from bind_core.training.stationarity import describe_stationarity
from bind_core.training.supplied import prepare_supplied


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(120, seed=2, train_per_class=20)


def _config(cls: str, args: dict[str, Any], **training: Any) -> dict[str, Any]:
    loss = "binary_cross_entropy" if args["out_channels"] == 1 else "cross_entropy"
    return {
        "format": "torch_geometric",
        "class": cls,
        "args": args,
        "training": {"loss": loss, "weight_decay": 5e-4, **training},
    }


def _pyg(cls: str, args: dict[str, Any]) -> torch.nn.Module:
    torch.manual_seed(3)
    module: torch.nn.Module = getattr(models, cls)(**args)
    return module.eval()


CASES = [
    ("GCN", {"num_layers": 2, "out_channels": 2}),
    ("GraphSAGE", {"num_layers": 2, "out_channels": 2}),
    ("GIN", {"num_layers": 2, "out_channels": 2}),
    ("GAT", {"num_layers": 2, "out_channels": 2, "heads": 2}),
    ("GAT", {"num_layers": 3, "out_channels": 2, "heads": 2, "concat": False, "act": "elu", "negative_slope": 0.1}),
    ("GAT", {"num_layers": 2, "out_channels": 2, "heads": 2, "v2": True}),
    ("GAT", {"num_layers": 2, "out_channels": 1, "heads": 2, "v2": True, "share_weights": True, "residual": True}),
    ("GAT", {"num_layers": 2, "out_channels": 2, "residual": True}),
    ("GCN", {"num_layers": 1, "out_channels": 2}),
    ("GraphSAGE", {"num_layers": 3, "out_channels": 1, "act": "gelu"}),
    ("GIN", {"num_layers": 1, "out_channels": 1, "act": "tanh"}),
]


@pytest.mark.parametrize(("cls", "extra"), CASES)
def test_logits_equal_the_pyg_modules(graph: Graph, cls: str, extra: dict[str, Any]) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, **extra}
    pyg = _pyg(cls, args)
    weights = save(saved_state(pyg))
    model = TrainedModel.from_bytes(weights, json.loads(json.dumps(_config(cls, args))))
    assert model.dtype == torch.float32  # the weights' own dtype
    assert not model.model_config.head and model.model_config.outputs == args["out_channels"]
    with torch.no_grad():
        expected = pyg.double()(graph.x.double(), graph.edge_index)
    got = TrainedModel(model.module.double(), model.model_config, model.train_config).logits(graph)
    assert got.shape == expected.shape
    assert torch.allclose(got, expected, rtol=0.0, atol=1e-6), float((got - expected).abs().max())
    assert expected.abs().max() > 1e-2  # not a degenerate comparison of zeros


@pytest.mark.parametrize("v2", [False, True])
def test_gat_scores_are_pygs_leaky_relu_whatever_the_activation(graph: Graph, v2: bool) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 1, "out_channels": 2, "heads": 2}
    args |= {"v2": True} if v2 else {}
    pyg = _pyg("GAT", args)
    scores = pyg.convs[0].lin_l.weight if v2 else pyg.convs[0].att_src
    scores.data.mul_(50.0)  # scores far on both sides of the kink: a smooth surrogate would differ
    weights = save({k: v.contiguous() for k, v in pyg.state_dict().items()})
    model = TrainedModel.from_bytes(weights, _config("GAT", {**args, "act": "gelu"}))
    assert model.model_config.attention == "leaky_relu"
    with torch.no_grad():
        expected = pyg.double()(graph.x.double(), graph.edge_index)
    got = TrainedModel(model.module.double(), model.model_config, model.train_config).logits(graph)
    assert torch.allclose(got, expected, rtol=0.0, atol=1e-6)


def test_a_gatv2_sharing_its_weights_saved_once_or_twice(graph: Graph) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    args |= {"v2": True, "share_weights": True, "heads": 2}
    pyg = _pyg("GAT", args)
    with torch.no_grad():
        expected = pyg.double()(graph.x.double(), graph.edge_index)
    state = saved_state(pyg)
    once = {k: v for k, v in state.items() if ".lin_r." not in k}  # as safetensors' save_model writes it
    for weights in (state, once):
        model = TrainedModel.from_bytes(save(weights), _config("GAT", args))
        assert model.model_config.v2 and model.model_config.share_weights
        got = TrainedModel(model.module.double(), model.model_config, model.train_config).logits(graph)
        assert torch.allclose(got, expected, rtol=0.0, atol=1e-6)
        names = [n for n, _ in model.module.named_parameters()]
        assert "convs.0.lin_l.weight" in names and "convs.0.lin_r.weight" not in names  # one map in θ
        assert set(load(model.to_bytes())) == set(state)  # handed back with both names, loadable strictly
    state["convs.0.lin_r.bias"] = state["convs.0.lin_r.bias"] + 1.0
    with pytest.raises(ConfigError, match=r"convs\.0\.lin_l\.bias and convs\.0\.lin_r\.bias differ"):
        TrainedModel.from_bytes(save(state), _config("GAT", args))


def test_the_converted_model_trains_and_reproduction_is_measured(graph: Graph) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    config = encode(read_document(_config("GraphSAGE", args, epochs=3)))
    retrained = train(graph, TrainConfig.from_dict(config["training"]), ModelConfig.from_dict(config["model"]))
    assert retrained.logits(graph).shape == (graph.num_nodes, 2)
    pyg = _pyg("GraphSAGE", args)
    weights = save({k: v.contiguous() for k, v in pyg.state_dict().items()})
    model = TrainedModel.from_bytes(weights, config)
    check = reproduction(model.module, load(weights), read_source(config["source"]), graph)
    assert check.cls == "GraphSAGE" and check.max_logit_difference is not None and check.max_logit_difference < 1e-12
    found = {"class": "GraphSAGE", "max_logit_difference": check.max_logit_difference, "nodes": graph.num_nodes}
    assert encode(check) == found
    perturbed = dict(load(weights))
    perturbed["convs.1.lin_l.bias"] = perturbed["convs.1.lin_l.bias"] + 1.0
    worse = reproduction(model.module, perturbed, read_source(config["source"]), graph).max_logit_difference
    assert worse is not None and worse > 0.1


@pytest.mark.parametrize(
    ("cls", "extra", "field"),
    [
        ("GCN", {"norm": "layer_norm"}, "config.args.norm_kwargs"),  # graph mode: refused, node mode asked for
        ("GCN", {"norm": "graph_norm"}, "config.args.norm"),
        ("GIN", {"norm": "batch_norm"}, "config.args.norm"),
        ("GCN", {"norm": "batch_norm", "norm_kwargs": {"track_running_stats": False}}, "config.args.norm_kwargs"),
        ("GCN", {"norm": "batch_norm", "norm_kwargs": {"eps": 0}}, "config.args.norm_kwargs"),
        ("GCN", {"norm": "batch_norm", "norm_kwargs": {"mode": "node"}}, "config.args.norm_kwargs"),
        ("GraphSAGE", {"jk": "cat"}, "config.args.jk"),
        ("GCN", {"improved": True}, "config.args.improved"),
        ("GraphSAGE", {"aggr": "max"}, "config.args.aggr"),
        ("GIN", {"train_eps": True}, "config.args.train_eps"),
        ("GAT", {"v2": 1}, "config.args.v2"),
        ("GAT", {"share_weights": True}, "config.args.share_weights"),
        ("GAT", {"edge_dim": 3}, "config.args.edge_dim"),
        ("GCN", {"act": "leaky_relu"}, "config.args.act"),
        ("GCN", {"in_channels": -1}, "config.args.in_channels"),
        ("GCN", {"out_channels": None}, "config.args.out_channels"),
        ("GCN", {"flavour": 1}, "config.args.flavour"),
        ("PNA", {}, "config.class"),
    ],
)
def test_unsupported_options_are_named(graph: Graph, cls: str, extra: dict[str, Any], field: str) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2, **extra}
    config = {"format": "torch_geometric", "class": cls, "args": args}
    config["training"] = {"loss": "cross_entropy", "weight_decay": 0.0}
    with pytest.raises(UnsupportedModelError) as info:
        read_document(config)
    assert [f for f, _ in info.value.problems] == [field]
    assert field.rsplit(".", 1)[-1] in str(info.value)


def test_the_objective_must_be_stated(graph: Graph) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    with pytest.raises(UnsupportedModelError) as info:
        read_document({"format": "torch_geometric", "class": "GCN", "args": args, "training": {"loss": "nll"}})
    assert {f for f, _ in info.value.problems} == {"config.training.loss", "config.training.weight_decay"}
    bce = {"loss": "binary_cross_entropy", "weight_decay": 0.0}
    with pytest.raises(UnsupportedModelError, match="must be 1"):
        read_document({"format": "torch_geometric", "class": "GCN", "args": args, "training": bce})


def test_weights_of_another_model_or_a_forged_source_are_refused(graph: Graph) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    weights = save({k: v.contiguous() for k, v in _pyg("GCN", args).state_dict().items()})
    with pytest.raises(ConfigError, match="do not fit"):
        TrainedModel.from_bytes(weights, _config("GraphSAGE", args))
    forged = encode(read_document(_config("GCN", args)))
    forged["source"]["args"]["norm"] = "layer_norm"
    with pytest.raises(UnsupportedModelError, match="norm"):
        TrainedModel.from_bytes(weights, forged)


def test_kink_caveats() -> None:
    assert model_warnings(ModelConfig(arch="gcn", layers=2)) == []  # GELU
    assert model_warnings(ModelConfig(arch="gcn", layers=1, activation="relu")) == []  # no activation is applied
    (relu,) = model_warnings(ModelConfig(arch="sage", layers=2, activation="relu"))
    assert "ReLU between layers" in relu and "almost everywhere" in relu
    (gat,) = model_warnings(ModelConfig(arch="gat", layers=1, attention="leaky_relu", head=False, outputs=2))
    assert "leaky-ReLU attention" in gat
    stall = KinkStall(no_descent=True, objective_decrease=0.0, pinned=3)
    stalled = StationarityCheck(max_abs_grad=1e-4, grad_norm=1e-4, tolerance=1e-5, stationary="kinks", kinks=stall)
    assert len(model_warnings(ModelConfig(arch="sage", layers=2, activation="relu"), stalled)) == 2


@pytest.mark.heavy  # 5 s here
def test_a_relu_minimum_on_kinks_is_accepted_and_a_smooth_model_is_not_examined() -> None:
    graph = synthetic(300, seed=1)
    args = {"in_channels": graph.num_features, "hidden_channels": 16, "num_layers": 2, "out_channels": 2}
    torch.manual_seed(0)
    pyg = models.GraphSAGE(**args)
    optimizer = torch.optim.Adam(pyg.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(200):
        optimizer.zero_grad()
        F.cross_entropy(pyg(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
    weights = save(pyg.state_dict())
    unpolished = TrainedModel.from_bytes(weights, _config("GraphSAGE", args))
    stall = kink_stall(unpolished, graph)
    assert stall is not None and not stall.no_descent  # Adam stopped short: L-BFGS still descends
    assert describe_stationarity(unpolished, graph).stationary is False  # reported, never refused
    model, record, given = prepare_supplied(weights, _config("GraphSAGE", args), graph, reference="polished")
    assert record["pyg"]["max_logit_difference"] < 1e-12 and record["polished_by_service"] and given is not None
    assert not model.stationarity.converged  # stalled on the kinks
    stall = kink_stall(model, graph)
    assert stall is not None and stall.no_descent and stall.pinned > 0
    check = describe_stationarity(model, graph)
    assert check.stationary == "kinks" and check.max_abs_grad > check.tolerance and check.kinks == stall
    smooth = TrainedModel(model.module, ModelConfig(arch="sage", layers=2, head=False, outputs=2), model.train_config)
    assert kink_stall(smooth, graph) is None
