"""The backbones of the BIND reference code (those of NIFTY, which it copies), as a user of that code writes them:
the paper's GCN (``body.gc1`` then ``fc``, no activation between: PyG's ``act=None``), its SAGE (``SAGEConv(...,
normalize=True)``, then ReLU, a batch normalisation and dropout, then ``fc``) and its GAT (``GATConv`` then the same
transition: a GAT with ``jk="last"``). Each is read weight for weight as it runs and audited; the options each needs
(``act: null``, SAGE's ``normalize``, a GAT's ``jk``) also on PyG's own classes, with more layers and heads."""

from __future__ import annotations

import json
from typing import Any, cast

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pyg_models import early_stopped
from safetensors.torch import load
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.validation import validate
from bind_core.errors import ConfigError
from bind_core.influence.arguments import InfluenceArguments
from bind_core.influence.estimate import estimate
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.twolayer import layout, linear_first
from bind_core.models.gnn import ModelConfig
from bind_core.models.pyg import UnsupportedModelError
from bind_core.pipeline import export_model, prepare_for_audit, weight_names
from bind_core.pipeline.audit import run_audit
from bind_core.pipeline.config import AuditConfig
from bind_core.reporting.report import render_report
from bind_core.reporting.text import render as render_text
from bind_core.training.document import read_document
from bind_core.training.fit import TrainConfig, train
from bind_core.training.kinks import has_kinks
from bind_core.training.supplied import prepare_supplied
from tests.core.models.norm_checks import (
    assert_incremental_rows_match,
    pyg_config,
    retrained_in_pyg_class,
    safetensors_of,
    their_proba,
)
from tests.core.training.test_export import _kept

HIDDEN = 8


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(160, seed=4, train_per_class=25)


def _init(module: nn.Module) -> None:
    """The reference code's initialisation: Xavier-uniform linear weights, zero biases."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class Body(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.gc1 = GCNConv(features, HIDDEN)


class PaperGCN(nn.Module):
    """The paper's GCN: one GCN layer, then a linear classifier, no activation between."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.body, self.fc = Body(features), nn.Linear(HIDDEN, 1)
        _init(self)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return cast(Tensor, self.fc(self.body.gc1(x, edge_index)))


class Transitioned(nn.Module):
    """The reference SAGE and GAT: a convolution, then ReLU, a batch normalisation and dropout, then ``fc``
    (``act``: another activation than ReLU)."""

    def __init__(self, conv: nn.Module, act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.conv1 = conv
        self.transition = nn.Sequential(act(), nn.BatchNorm1d(HIDDEN), nn.Dropout(0.5))
        self.fc = nn.Linear(HIDDEN, 1)
        _init(self)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return cast(Tensor, self.fc(self.transition(self.conv1(x, edge_index).flatten(1))))


def _trained(module: nn.Module, graph: Graph, weight_decay: float, epochs: int = 100) -> nn.Module:
    """As the reference code trains: Adam (lr 0.01 here, for a small graph's few epochs), the binary cross-entropy
    of the one logit."""
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01, weight_decay=weight_decay)
    y = graph.y.double()[graph.train_idx].float()
    for _ in range(epochs):
        module.train()
        optimizer.zero_grad()
        out = module(graph.x, graph.edge_index)[graph.train_idx, 0]
        F.binary_cross_entropy_with_logits(out, y).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    return module.eval()


def _reference(
    name: str, graph: Graph, *, smooth: bool = False, weight_decay: float = 1e-5
) -> tuple[nn.Module, dict[str, Any]]:
    """The reference backbone ``name``, trained (with the reference code's weight decay unless said), and the config
    that describes it (``smooth``: GELU for its ReLU)."""
    torch.manual_seed(0)
    d = graph.num_features
    base = {"in_channels": d, "hidden_channels": HIDDEN, "num_layers": 1, "out_channels": 1, "dropout": 0.5}
    act: type[nn.Module] = nn.GELU if smooth else nn.ReLU
    transition: dict[str, Any] = {"jk": "last", "norm": "batch_norm", "act_first": True}
    transition["act"] = "gelu" if smooth else "relu"
    layout_keys = {"layer_names": ["conv1"], "norm_names": ["transition.1"], "head_name": "fc"}
    module: nn.Module
    if name == "gcn":
        module, cls, args = PaperGCN(d), "GCN", {**base, "jk": "last", "act": None}
        keys: dict[str, Any] = {"layer_names": ["body.gc1"], "head_name": "fc"}
    elif name == "sage":
        conv = SAGEConv(d, HIDDEN, normalize=True)
        module, cls, args = Transitioned(conv, act), "GraphSAGE", {**base, **transition, "normalize": True}
        keys = layout_keys
    else:
        conv = GATConv(d, HIDDEN, heads=1, dropout=0.5)
        module, cls, args, keys = Transitioned(conv, act), "GAT", {**base, **transition, "heads": 1}, layout_keys
    config = pyg_config(cls, args, **keys)
    config["training"] |= {"loss": "binary_cross_entropy", "weight_decay": weight_decay}
    return _trained(module, graph, weight_decay), config


@pytest.mark.parametrize("name", ["gcn", "sage", "gat"])
def test_the_reference_codes_backbones_are_read_as_they_run(graph: Graph, name: str) -> None:
    module, config = _reference(name, graph)
    canonical = json.loads(json.dumps(encode(read_document(config))))
    supplied = prepare_supplied(safetensors_of(module), canonical, graph)
    assert supplied.record["pyg"]["max_logit_difference"] < 1e-12  # against PyG's class built from args
    with torch.no_grad():
        theirs = torch.sigmoid(module.double()(graph.x.double(), graph.edge_index))[:, 0]
    assert torch.allclose(supplied.model.predict_proba(graph)[:, 1].double(), theirs, rtol=0.0, atol=1e-12)
    model = canonical["model"]
    assert model["head"] and model["head_activation"]
    if name == "gcn":  # no activation: nothing but dropout between the convolution and the classifier
        assert model["activation"] == "identity" and canonical["source"]["args"]["act"] is None
        assert not has_kinks(supplied.model.model_config)
    else:
        assert model["activation"] == "relu" and model["norm"] == "batch" and model["act_first"]
        assert has_kinks(supplied.model.model_config)  # ReLU before the head, one layer or not
    assert model["normalize"] is (name == "sage")
    # retrained (its debiasing), handed back under the reference code's names, it loads into that class and runs
    retrained = _kept(supplied.model, graph, (3,))[0]
    exported = export_model(retrained, canonical, weight_names(safetensors_of(module)))
    assert sorted(load(exported.weights)) == sorted(module.state_dict())
    again = _reference(name, graph)[0].double().eval()
    again.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)
    with torch.no_grad():
        theirs = torch.sigmoid(again(graph.x.double(), graph.edge_index))[:, 0]
    assert torch.allclose(retrained.predict_proba(graph)[:, 1].double(), theirs, rtol=0.0, atol=1e-6)


@pytest.mark.heavy  # about 45 s: two step estimates, one on 120 training nodes, and 16 re-optimisations
@pytest.mark.parametrize(("name", "nodes", "per_class"), [("gcn", 160, 25), ("sage", 600, 60)])
def test_the_reference_codes_backbones_estimates_are_their_proximal_responses(
    name: str, nodes: int, per_class: int
) -> None:
    """With GELU for the ReLU (smooth, so the step estimate's answer is the proximal response's to rounding): the
    estimate reads the model on every path a deletion takes. A normalising SAGE's first layer is scale-invariant, held
    only by the weight decay and the damping: on a graph of 50 training nodes most of its deletions carry the weights
    far, where the estimate's steps and the re-optimisation stop apart, so its check runs on 120."""
    graph = synthetic(nodes, seed=4, train_per_class=per_class)
    module, config = _reference(name, graph, smooth=True)
    model, _ = prepare_for_audit(safetensors_of(module), config, graph, AuditConfig())
    influence = estimate(model, graph, InfluenceArguments(method="step"))
    check = validate(model, graph, influence, sample=8, seed=1)
    estimated, actual = (np.asarray(a)[:, 0] for a in (check.estimated, check.actual))
    defined = np.isfinite(actual)
    assert int(defined.sum()) >= 6
    assert float(np.corrcoef(estimated[defined], actual[defined])[0, 1]) > 0.9999, (estimated, actual)


@pytest.mark.parametrize(
    ("cls", "extra"),
    [
        ("GCN", {"act": None}),  # two linear layers
        ("GIN", {"act": None}),  # its MLPs linear too
        ("GraphSAGE", {"normalize": True}),
        ("GraphSAGE", {"normalize": True, "num_layers": 3, "jk": "last", "act": "gelu"}),
        ("GAT", {"jk": "last", "heads": 2}),  # every layer concatenates its heads, the last too
        ("GAT", {"jk": "last", "heads": 2, "num_layers": 1, "concat": False}),
        ("GAT", {"jk": "last", "v2": True, "heads": 2, "norm": "batch_norm"}),
    ],
)
def test_pygs_classes_with_those_options_are_read_as_they_run(graph: Graph, cls: str, extra: dict[str, Any]) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": HIDDEN, "num_layers": 2, "out_channels": 2, **extra}
    module = early_stopped(cls, args, graph)
    weights = safetensors_of(module)
    model, _ = prepare_for_audit(weights, pyg_config(cls, args), graph, AuditConfig(bootstrap=0))
    assert torch.allclose(model.predict_proba(graph).double(), their_proba(module, graph), rtol=0.0, atol=1e-12)
    canonical = json.loads(json.dumps(encode(read_document(pyg_config(cls, args)))))
    retrained_in_pyg_class(model, canonical, weights, graph)  # handed back, it loads into the class and predicts


def test_reports_name_a_normalising_sage(graph: Graph) -> None:
    module, config = _reference("sage", graph)
    model, _ = prepare_for_audit(safetensors_of(module), config, graph, AuditConfig(bootstrap=0))
    result = run_audit(graph, AuditConfig(stages=("training", "metrics"), bootstrap=0), model=model)
    assert "model sage (outputs L2-normalised, 1 layer(s), " in render_text(result)
    assert "sage, outputs L2-normalised, 1 layer(s)" in render_report(result.to_dict())


def test_a_normalising_sages_rows_are_not_read_as_a_linear_first_layer(graph: Graph) -> None:
    """Each row divided by its norm: the by-hand products of a linear first layer do not apply; the incremental path
    (each layer's changed rows) still gives the logits of the whole model on each subgraph."""
    args = {"in_channels": graph.num_features, "hidden_channels": HIDDEN, "num_layers": 2, "out_channels": 2,
            "normalize": True, "act": "gelu"}  # fmt: skip
    model, _ = prepare_for_audit(
        safetensors_of(early_stopped("GraphSAGE", args, graph)), pyg_config("GraphSAGE", args), graph, AuditConfig()
    )
    fm = FunctionalModel.from_trained(model, graph)
    assert linear_first(fm) is None and layout(fm) is None
    plain = {**args, "normalize": False}
    unnormalised, _ = prepare_for_audit(
        safetensors_of(early_stopped("GraphSAGE", plain, graph)), pyg_config("GraphSAGE", plain), graph, AuditConfig()
    )
    assert linear_first(FunctionalModel.from_trained(unnormalised, graph)) is not None
    assert_incremental_rows_match(model, graph)


def test_the_options_are_checked(graph: Graph) -> None:
    args = {"in_channels": graph.num_features, "hidden_channels": HIDDEN, "num_layers": 2, "out_channels": 2}
    with pytest.raises(UnsupportedModelError, match=r'"swish" is not supported \(one of gelu, relu, tanh, elu, or nul'):
        read_document(pyg_config("GCN", {**args, "act": "swish"}))
    with pytest.raises(UnsupportedModelError, match=r'config\.args\.normalize: "yes" must be true or false'):
        read_document(pyg_config("GraphSAGE", {**args, "normalize": "yes"}))
    with pytest.raises(UnsupportedModelError, match=r"config\.args\.normalize: false is not supported"):
        read_document(pyg_config("GCN", {**args, "normalize": False}))  # GCN's normalize is its own: refused off
    with pytest.raises(ConfigError, match="normalize: only for a SAGE"):
        ModelConfig(arch="gcn", normalize=True)
    with pytest.raises(UnsupportedModelError, match="jk"):
        read_document(pyg_config("GAT", {**args, "jk": "cat"}))


class ReferenceGIN(nn.Module):
    """The reference GIN: one linear map, ReLU and a batch normalisation inside the layer, then ``fc``."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.conv1 = GINConv(nn.Sequential(nn.Linear(features, HIDDEN), nn.ReLU(), nn.BatchNorm1d(HIDDEN)))
        self.fc = nn.Linear(HIDDEN, 1)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return cast(Tensor, self.fc(self.conv1(x, edge_index)))


def test_the_reference_gin_is_refused_without_advice_that_leads_to_another_refusal(graph: Graph) -> None:
    """Its layer's MLP is not PyG's GIN's: the refusal says so, not "add a norm" (a GIN's norm is refused too)."""
    args = {"in_channels": graph.num_features, "hidden_channels": HIDDEN, "num_layers": 1, "out_channels": 1,
            "jk": "last"}  # fmt: skip
    config = pyg_config("GIN", args, layer_names=["conv1"], head_name="fc")
    config["training"]["loss"] = "binary_cross_entropy"
    with pytest.raises(ConfigError) as info:
        prepare_supplied(safetensors_of(ReferenceGIN(graph.num_features).eval()), config, graph)
    message = str(info.value)
    assert "conv1.nn.2.* is a normalisation, which a GIN audited here does not have" in message
    assert '"norm": "batch_norm"' not in message


def test_a_normalising_sage_is_never_polished(graph: Graph) -> None:
    """Its predictions do not change when a layer's weights are scaled, and the weight decay falls as they shrink:
    its objective has no stationary point, so the polish, which would chase one, does not run (left to itself it
    drove a one-layer SAGE's curvature to 10¹⁰ and its largest gradient entry from 0.1 to 117)."""
    config = ModelConfig(arch="sage", normalize=True, hidden=HIDDEN)
    assert config.stationary_point is not None and ModelConfig(arch="sage").stationary_point is None
    model = train(graph, TrainConfig(epochs=20), config)  # a one-layer model: polished by default, but not this one
    assert model.train_config.polish is False and not model.stationarity.polished
    with pytest.raises(ConfigError, match=r"training\.polish: a SAGE that normalises"):
        train(graph, TrainConfig(epochs=20, polish=True), config)
    with pytest.raises(ConfigError, match=r"training\.polish: a SAGE that normalises"):
        AuditConfig.from_dict({"model": {"arch": "sage", "normalize": True}, "training": {"polish": True}})
    assert not AuditConfig.from_dict({"model": {"arch": "sage", "normalize": True}}).polishes(200)
    module, reference = _reference("sage", graph)
    with pytest.raises(ConfigError, match="reference: polished: a SAGE that normalises"):
        prepare_for_audit(safetensors_of(module), reference, graph, AuditConfig(reference="polished"))
