"""A model of the user's own class, built of PyG's convolutions as the PyG tutorials build it (``self.conv1 =
GCNConv(...)``, ``self.conv2 = ...``, a ReLU and dropout between them, ``log_softmax`` at the end): registered with
``layer_names``, read weight for weight; without them, or with parameters no convolution has, refused with what to
do; a retrained model handed back under the user's own names."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any, TypeVar, cast

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load, save
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GCNConv, SAGEConv

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.errors import ConfigError
from bind_core.models.gnn import ModelConfig
from bind_core.models.pyg import UnsupportedModelError
from bind_core.pipeline import export_model, prepare_for_audit, weight_names
from bind_core.pipeline.audit import run_audit
from bind_core.pipeline.config import AuditConfig
from bind_core.training.document import read_document
from bind_core.training.fit import TrainedModel
from bind_core.training.supplied import prepare_supplied
from tests.core.training.test_export import _kept

CONVS = {"GCN": GCNConv, "GraphSAGE": SAGEConv}
M = TypeVar("M", bound=nn.Module)


class Own(nn.Module):
    """The tutorial's model: named convolutions, ReLU and dropout between them, log-probabilities out."""

    def __init__(self, conv: type[nn.Module], sizes: list[int], names: list[str], head: bool = False) -> None:
        super().__init__()
        self.names = names
        for name, (a, b) in zip(names, itertools.pairwise(sizes), strict=True):
            setattr(self, name, conv(a, b))
        self.lin = nn.Linear(sizes[-1], sizes[-1]) if head else None

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for i, name in enumerate(self.names):
            x = getattr(self, name)(x, edge_index)
            if i < len(self.names) - 1:
                x = F.dropout(x.relu(), p=0.5, training=self.training)
        if self.lin is not None:
            x = self.lin(x)
        return F.log_softmax(x, dim=1)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(120, seed=2, train_per_class=20)


def _trained(cls: str, graph: Graph, names: list[str], hidden: int = 8, head: bool = False) -> Own:
    torch.manual_seed(0)
    sizes = [graph.num_features, *[hidden] * (len(names) - 1), graph.num_classes]
    return _fitted(Own(CONVS[cls], sizes, names, head), graph, 30, F.nll_loss)  # its log_softmax: nll_loss


def _fitted(module: M, graph: Graph, epochs: int, loss: Callable[[Tensor, Tensor], Tensor] = F.cross_entropy) -> M:
    """``module`` trained as its owner trains it (Adam, lr 0.01, weight decay 5e-4), in evaluation mode."""
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(epochs):
        module.train()
        optimizer.zero_grad()
        loss(module(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()
        optimizer.step()
    return module.eval()


def _config(cls: str, graph: Graph, layers: int, names: list[str] | None, hidden: int = 8) -> dict[str, Any]:
    args = {"in_channels": graph.num_features, "hidden_channels": hidden, "num_layers": layers, "out_channels": 2}
    config: dict[str, Any] = {
        "format": "torch_geometric",
        "class": cls,
        "args": {**args, "dropout": 0.5},
        "training": {"loss": "cross_entropy", "weight_decay": 5e-4, "lr": 0.01, "epochs": 30},
    }
    if names is not None:
        config["layer_names"] = names
    return config


def _weights(module: nn.Module) -> bytes:
    return save({k: v.contiguous() for k, v in module.state_dict().items()})


@pytest.mark.parametrize(
    ("cls", "names"), [("GCN", ["conv1", "conv2"]), ("GraphSAGE", ["first", "second", "out"]), ("GCN", ["only"])]
)
def test_a_module_of_ones_own_is_read_weight_for_weight(graph: Graph, cls: str, names: list[str]) -> None:
    own = _trained(cls, graph, names)
    config = _config(cls, graph, len(names), names)
    canonical = encode(read_document(config))  # what registering stores
    assert canonical["source"]["layer_names"] == names
    supplied = prepare_supplied(_weights(own), json.loads(json.dumps(canonical)), graph)
    assert supplied.record["pyg"]["max_logit_difference"] < 1e-12
    with torch.no_grad():
        theirs = own.double()(graph.x.double(), graph.edge_index).exp()
    assert torch.allclose(supplied.model.predict_proba(graph), theirs, rtol=0.0, atol=1e-12)


def test_without_layer_names_the_refusal_says_which_to_give(graph: Graph) -> None:
    own = _trained("GCN", graph, ["conv2", "conv10"])  # named so that only a natural order reads them right
    with pytest.raises(ConfigError) as info:
        TrainedModel.from_bytes(_weights(own), _config("GCN", graph, 2, None))
    message = str(info.value)
    assert '"layer_names": ["conv2", "conv10"]' in message
    assert "conv2.*, conv10.* where GCN(num_layers=2) names them convs.0.*, convs.1.*" in message


def test_parameters_no_convolution_has_are_named(graph: Graph) -> None:
    own = _trained("GCN", graph, ["conv1", "conv2"], head=True)
    with pytest.raises(ConfigError, match=r"lin\.bias, lin\.weight are no convolution's parameters in GCN"):
        TrainedModel.from_bytes(_weights(own), _config("GCN", graph, 2, ["conv1", "conv2"]))


def test_the_weights_of_another_class_are_named_with_the_convolutions_parameters(graph: Graph) -> None:
    own = _trained("GCN", graph, ["conv1", "conv2"])
    with pytest.raises(ConfigError) as info:
        TrainedModel.from_bytes(_weights(own), _config("GraphSAGE", graph, 2, ["conv1", "conv2"]))
    assert str(info.value).startswith("weights do not fit GraphSAGE(num_layers=2): conv1.bias, conv1.lin.weight")
    assert "lin_l.bias, lin_l.weight, lin_r.weight" in str(info.value)


@pytest.mark.parametrize(
    ("names", "says"),
    [
        (["conv1"], "1 names for 2 layers"),
        (["conv1", "conv1"], "names a layer twice"),
        (["gnn", "gnn.conv2"], '"gnn.conv2" is inside "gnn"'),
        ("conv1", "must be a list"),
        (["conv1", ""], "must be a list"),
    ],
)
def test_layer_names_are_checked(graph: Graph, names: Any, says: str) -> None:
    with pytest.raises(UnsupportedModelError) as info:
        read_document(_config("GCN", graph, 2, names))
    assert [f for f, m in info.value.problems if says in m] == ["config.layer_names"]


def test_a_retrained_model_comes_back_under_the_users_names_and_loads_into_their_class(graph: Graph) -> None:
    names = ["conv1", "conv2"]
    own = _trained("GCN", graph, names)
    weights, canonical = _weights(own), encode(read_document(_config("GCN", graph, 2, names)))
    audited, _ = prepare_for_audit(weights, canonical, graph, AuditConfig())
    retrained = _kept(audited, graph, (3,))[0]
    exported = export_model(retrained, canonical, weight_names(weights))
    assert exported.config["layer_names"] == names
    assert sorted(load(exported.weights)) == sorted(load(weights))
    again = Own(GCNConv, [graph.num_features, 8, 2], names).double().eval()
    again.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)
    with torch.no_grad():
        theirs = again(graph.x.double(), graph.edge_index).exp()
    assert torch.allclose(theirs, retrained.predict_proba(graph).double(), rtol=0.0, atol=1e-6)


class TutorialGAT(nn.Module):
    """PyG's examples/gat.py: eight concatenated heads, ELU, and a last layer of one head."""

    def __init__(self, graph: Graph) -> None:
        super().__init__()
        self.conv1 = GATConv(graph.num_features, 4, heads=8, dropout=0.6)
        self.conv2 = GATConv(4 * 8, 2, heads=1, concat=False, dropout=0.6)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = F.dropout(x, p=0.6, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.6, training=self.training)
        return cast(Tensor, self.conv2(x, edge_index))


def _gat_config(graph: Graph, **extra: Any) -> dict[str, Any]:
    args = {"in_channels": graph.num_features, "hidden_channels": 32, "num_layers": 2, "out_channels": 2,
            "heads": 8, "act": "elu", "dropout": 0.6}  # fmt: skip
    return {"format": "torch_geometric", "class": "GAT", "args": args, "layer_names": ["conv1", "conv2"],
            "training": {"loss": "cross_entropy", "weight_decay": 5e-4, "epochs": 30}, **extra}  # fmt: skip


def _tutorial_gat(graph: Graph) -> TutorialGAT:
    torch.manual_seed(0)
    return _fitted(TutorialGAT(graph), graph, 200)


@pytest.mark.heavy  # about 30 s: the step estimate of 40 deletions and 10 re-optimisations of a two-layer GAT
def test_a_gat_whose_last_layer_has_one_head_is_read_with_last_heads_and_audited(graph: Graph) -> None:
    own = _tutorial_gat(graph)
    with pytest.raises(ConfigError) as info:
        TrainedModel.from_bytes(_weights(own), _gat_config(graph))
    assert str(info.value) == (
        "weights: the last layer (conv2) has 1 head where the config gives it 8 (heads): a GAT whose last layer has "
        'its own number of heads, averaged (GATConv(..., heads=1, concat=False)), is described with "last_heads": 1'
    )
    canonical = encode(read_document(_gat_config(graph, last_heads=1)))
    assert canonical["source"]["last_heads"] == 1 and canonical["model"]["last_heads"] == 1
    supplied = prepare_supplied(_weights(own), json.loads(json.dumps(canonical)), graph)
    with torch.no_grad():
        theirs = own.double()(graph.x.double(), graph.edge_index).softmax(1)
    assert torch.allclose(supplied.model.predict_proba(graph), theirs, rtol=0.0, atol=1e-12)
    # audited: the step estimate's self-check against re-optimisation
    config = AuditConfig(stages=("influence", "validation"), validation_sample=10, bootstrap=0)
    result = run_audit(graph, config, model=TrainedModel.from_bytes(_weights(own), canonical)).typed()
    assert result.validation is not None and result.validation.pearson is not None
    assert result.validation.pearson > 0.95, result.validation.pearson  # 0.9987 when written
    # handed back in its own form, it loads into the user's class
    retrained = _kept(supplied.model, graph, (3,))[0]
    exported = export_model(retrained, canonical, weight_names(_weights(own)))
    assert exported.config["last_heads"] == 1 and exported.config["layer_names"] == ["conv1", "conv2"]
    again = TutorialGAT(graph).double().eval()
    again.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)


def test_last_heads_is_a_gats_only() -> None:
    graph = synthetic(60, seed=1)
    with pytest.raises(UnsupportedModelError, match="only a GAT's last layer has heads"):
        read_document({**_config("GCN", graph, 2, None), "last_heads": 1})
    with pytest.raises(ConfigError, match="last_heads: only for a GAT"):
        ModelConfig(arch="gcn", layers=2, head=False, last_heads=1)


class Classified(nn.Module):
    """An encoder of convolutions, each followed by GELU and dropout, then a linear classifier."""

    def __init__(self, graph: Graph, hidden: int = 8) -> None:
        super().__init__()
        self.conv1 = GCNConv(graph.num_features, hidden)
        self.conv2 = GCNConv(hidden, hidden)
        self.classifier = nn.Linear(hidden, 2)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for conv in (self.conv1, self.conv2):
            x = F.dropout(F.gelu(conv(x, edge_index)), p=0.5, training=self.training)
        return cast(Tensor, self.classifier(x))


def test_a_linear_classifier_after_the_convolutions_is_read_with_jk_last(graph: Graph) -> None:
    torch.manual_seed(0)
    own = _fitted(Classified(graph), graph, 100)
    config = _config("GCN", graph, 2, ["conv1", "conv2"])
    with pytest.raises(ConfigError) as info:
        TrainedModel.from_bytes(_weights(own), config)
    assert str(info.value).endswith(
        "if classifier is a linear classifier applied after the last convolution's relu and dropout, add "
        '"jk": "last" to args and "head_name": "classifier"'
    )
    config["args"] |= {"jk": "last", "act": "gelu"}
    config["head_name"] = "classifier"
    canonical = encode(read_document(config))
    assert canonical["model"]["head"] is True and canonical["model"]["head_activation"] is True
    supplied = prepare_supplied(_weights(own), json.loads(json.dumps(canonical)), graph)
    assert supplied.record["pyg"]["max_logit_difference"] < 1e-12  # against PyG's GCN(jk="last") itself
    with torch.no_grad():
        theirs = own.double()(graph.x.double(), graph.edge_index).softmax(1)
    assert torch.allclose(supplied.model.predict_proba(graph), theirs, rtol=0.0, atol=1e-12)
    settings = AuditConfig(stages=("influence", "validation"), validation_sample=10, bootstrap=0)
    result = run_audit(graph, settings, model=TrainedModel.from_bytes(_weights(own), canonical)).typed()
    assert result.validation is not None and result.validation.pearson is not None
    assert result.validation.pearson > 0.9999, result.validation.pearson  # smooth: the estimate is exact (1.0000)
    retrained = _kept(supplied.model, graph, (3,))[0]
    exported = export_model(retrained, canonical, weight_names(_weights(own)))
    assert exported.config["head_name"] == "classifier" and exported.config["args"]["jk"] == "last"
    assert sorted(load(exported.weights)) == sorted(own.state_dict())
    again = Classified(graph).double().eval()
    again.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)


def test_a_pyg_basic_gnn_with_jk_last_and_the_head_names_checks() -> None:
    graph = synthetic(60, seed=1)
    from torch_geometric.nn import GraphSAGE

    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2, "jk": "last"}
    torch.manual_seed(1)
    pyg = GraphSAGE(**args).eval()
    config = {"format": "torch_geometric", "class": "GraphSAGE", "args": args,
              "training": {"loss": "cross_entropy", "weight_decay": 0.0}}  # fmt: skip
    supplied = prepare_supplied(_weights(pyg), config, graph)
    with torch.no_grad():
        theirs = pyg.double()(graph.x.double(), graph.edge_index).softmax(1)
    assert torch.allclose(supplied.model.predict_proba(graph), theirs, rtol=0.0, atol=1e-12)
    with pytest.raises(UnsupportedModelError, match="jk"):
        read_document({**config, "args": {**args, "jk": "cat"}})
    with pytest.raises(UnsupportedModelError, match='read with "jk": "last"'):
        read_document({**config, "args": {**args, "jk": None}, "head_name": "classifier"})
    with pytest.raises(ConfigError, match="head_activation: only with a head"):
        ModelConfig(arch="gcn", head=False, head_activation=True)


def test_an_older_gatconvs_shared_weights_under_the_users_names() -> None:
    """An older ``GATConv`` keeps ``lin_src`` and ``lin_dst`` (equal): under a module's own layer names they are read
    as one (their pair was looked up under the class's names and said to differ)."""
    graph = synthetic(60, seed=1)
    own = TutorialGAT(graph).eval()
    split: dict[str, Tensor] = {}
    for name, value in own.state_dict().items():
        if ".lin." in name:
            split[name.replace(".lin.", ".lin_src.")] = value.contiguous()
            split[name.replace(".lin.", ".lin_dst.")] = value.clone().contiguous()
        else:
            split[name] = value.contiguous()
    model = TrainedModel.from_bytes(save(split), _gat_config(graph, last_heads=1))
    with torch.no_grad():
        theirs = own(graph.x, graph.edge_index).softmax(1).double()
    assert torch.allclose(model.predict_proba(graph).double(), theirs, atol=1e-6)
