"""A batch normalisation between layers (PyG's ``norm="batch_norm"``, or ``BatchNorm1d`` in a module of one's own, as
the OGB examples write it): read as the deployed model runs it (evaluation mode, its running statistics), every
path of the estimate reading it, its scale and shift held as given by the attribution; retrained as its owner trains
it and handed back under the user's names; what cannot be reproduced refused with what to do."""

from __future__ import annotations

import copy
import itertools
import json
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from pyg_models import early_stopped
from safetensors.torch import load, save
from torch import Tensor, nn
from torch_geometric.nn import GCNConv

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.validation import validate
from bind_core.errors import ConfigError
from bind_core.influence.deletion import _subgraph_batches
from bind_core.influence.estimate import estimate
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.incremental import incremental_batches
from bind_core.models.gnn import GNN, ModelConfig, flat_parameters
from bind_core.models.pyg import UnsupportedModelError, pyg_module, read_source
from bind_core.pipeline import codes_of, export_model, prepare_for_audit, weight_names
from bind_core.pipeline.audit import run_audit
from bind_core.pipeline.caveats import model_warnings
from bind_core.pipeline.config import AuditConfig
from bind_core.reporting.report import render_report
from bind_core.reporting.text import render as render_text
from bind_core.training.document import read_document
from bind_core.training.fit import TrainConfig, TrainedModel, train
from bind_core.training.supplied import prepare_supplied
from tests.core.training.test_export import _kept


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(160, seed=4, train_per_class=25)


def _args(graph: Graph, **extra: Any) -> dict[str, Any]:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    return {**args, "norm": "batch_norm", **extra}


def _config(cls: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    training = {"loss": "cross_entropy", "weight_decay": 5e-4, "lr": 0.01, "epochs": 30}
    return {"format": "torch_geometric", "class": cls, "args": args, "training": training, **extra}


def _weights(module: nn.Module) -> bytes:
    return save({k: v.contiguous() for k, v in module.state_dict().items()})


def _theirs(module: nn.Module, graph: Graph) -> Tensor:
    with torch.no_grad():
        return torch.softmax(copy.deepcopy(module).double().eval()(graph.x.double(), graph.edge_index), dim=1)


@pytest.mark.parametrize(
    ("cls", "extra"),
    [
        ("GCN", {}),
        ("GCN", {"act_first": True}),
        ("GCN", {"jk": "last"}),
        ("GCN", {"num_layers": 3, "norm": "BatchNorm", "norm_kwargs": {"eps": 1e-3, "momentum": None}}),
        ("GraphSAGE", {"act": "gelu"}),
        ("GraphSAGE", {"jk": "last", "act_first": True}),
        ("GAT", {"heads": 2}),
    ],
)
def test_a_batch_normalised_pyg_model_is_read_as_it_runs_deployed(
    graph: Graph, cls: str, extra: dict[str, Any]
) -> None:
    args = _args(graph, **extra)
    module = early_stopped(cls, args, graph)
    model, record = prepare_for_audit(_weights(module), _config(cls, args), graph, AuditConfig(bootstrap=0))
    assert record.reference == "as_given"
    assert torch.allclose(model.predict_proba(graph).double(), _theirs(module, graph), rtol=0.0, atol=1e-12)
    # the normalisations are read, not dropped: the same model without them predicts otherwise
    assert model.model_config.norm == "batch" and model.model_config.normalised_layers == args["num_layers"] - 1 + int(
        "jk" in extra
    )
    bare = copy.deepcopy(model.module)
    for norm in [*bare.norms, getattr(bare.head, "norm", None)]:
        if norm is not None:
            norm.reset_parameters()  # mean 0, variance 1, scale 1, shift 0: nearly the identity
    with torch.no_grad():
        assert not torch.allclose(bare(bare.prepare(graph)), model.module(model.module.prepare(graph)), atol=1e-3)


def test_the_attribution_holds_a_normalisation_as_given(graph: Graph) -> None:
    args = _args(graph, jk="last")
    model, _ = prepare_for_audit(
        _weights(early_stopped("GCN", args, graph)), _config("GCN", args), graph, AuditConfig()
    )
    names, _, theta = flat_parameters(model.module)
    assert not [n for n in names if "norm" in n]
    assert {n for n, _ in model.module.named_parameters() if "norm" in n} == {
        "norms.0.weight",
        "norms.0.bias",
        "head.norm.weight",
        "head.norm.bias",
    }
    fm = FunctionalModel.from_trained(model, graph)
    assert fm.num_parameters == theta.numel()
    assert not fm.objective(fm.theta).requires_grad  # the normalisations are constants of θ's functions
    assert "held_normalisation" in codes_of(model_warnings(model.model_config))  # and the audit says so
    result = run_audit(graph, AuditConfig(stages=("training", "metrics"), bootstrap=0), model=model)
    assert result.to_dict()["model"]["norm"] == "batch"  # the results describe the model as built
    assert "gcn (2 layer(s), batch-normalised, " in render_text(result)
    assert "batch-normalised between layers" in render_report(result.to_dict())


@pytest.mark.parametrize(("arch", "extra"), [("gcn", {}), ("sage", {"act_first": True}), ("gat", {"layers": 3})])
def test_recomputing_only_the_changed_rows_reads_the_normalisations(
    graph: Graph, arch: str, extra: dict[str, Any]
) -> None:
    """The incremental path (each layer's changed rows, through the normalisation and the activation) gives the
    logits of running the whole normalised model on each subgraph, and their derivatives."""
    config = ModelConfig(arch=arch, **{"layers": 2, "hidden": 8, "norm": "batch", **extra})
    model = train(graph, TrainConfig(epochs=20, polish=False), config)
    means = [cast(Tensor, n.running_mean) for n in model.module.norms]
    assert any(float(mean.abs().max()) > 0.01 for mean in means)  # trained statistics
    fm = FunctionalModel.from_trained(model, graph)
    s = torch.randn(fm.num_parameters, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    m = int(graph.train_idx.numel())

    def collect(batches) -> dict[tuple[int, int], tuple[Tensor, Tensor]]:  # type: ignore[no-untyped-def]
        out = {}
        for b in batches:
            z, dz = b.jvp(fm.theta, s, 1)
            for v, j, zz, dd in zip(b.v_pos.tolist(), b.node.tolist(), z, dz, strict=True):
                out[(v, j)] = (zz, dd)
        return out

    ref = collect(_subgraph_batches(fm, 10_000, 0, m))
    inc = collect(incremental_batches(fm, 3_000, 0, m))
    assert ref.keys() == inc.keys() and len(ref) > 0
    for key, (z, dz) in ref.items():
        assert torch.allclose(inc[key][0], z, atol=1e-10) and torch.allclose(inc[key][1], dz, atol=1e-10)


@pytest.mark.heavy  # about 25 s: two step estimates and 24 re-optimisations
@pytest.mark.parametrize(("cls", "extra"), [("GraphSAGE", {"act": "gelu"}), ("GCN", {"act": "gelu", "jk": "last"})])
def test_a_normalised_models_estimate_agrees_with_its_proximal_response(
    graph: Graph, cls: str, extra: dict[str, Any]
) -> None:
    args = _args(graph, **extra)
    model, _ = prepare_for_audit(_weights(early_stopped(cls, args, graph)), _config(cls, args), graph, AuditConfig())
    influence = estimate(model, graph)
    assert influence.solve.details["method"] == "step"
    check = validate(model, graph, influence, sample=12, seed=1)
    assert check.mode == "proximal" and check.noise_floor is not None and check.noise_floor < 1e-6
    pearson = check.correlations()["gamma"]["pearson"]
    assert pearson is not None and pearson >= 0.95, pearson


def test_a_retrained_normalised_model_loads_into_the_pyg_class(graph: Graph) -> None:
    args = _args(graph, jk="last")
    weights = _weights(early_stopped("GCN", args, graph))
    canonical = encode(read_document(_config("GCN", args)))
    audited, _ = prepare_for_audit(weights, canonical, graph, AuditConfig())
    retrained = _kept(audited, graph, (3,))[0]
    # retrained as its owner trains it: the statistics move with the new weights
    before, after = (cast(Tensor, m.module.norms[0].running_mean) for m in (audited, retrained))
    assert not torch.allclose(before.double(), after.double())
    exported = export_model(retrained, canonical, weight_names(weights))
    assert sorted(load(exported.weights)) == sorted(load(weights))
    pyg = pyg_module(read_source(canonical["source"])).double().eval()
    pyg.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)
    with torch.no_grad():
        theirs = torch.softmax(pyg(graph.x.double(), graph.edge_index), dim=1)
    assert torch.allclose(theirs, retrained.predict_proba(graph).double(), rtol=0.0, atol=1e-6)


class OgbGCN(nn.Module):
    """The OGB examples' GCN: ``convs`` and ``bns`` lists, batch normalisation, ReLU and dropout between layers."""

    def __init__(self, sizes: list[int]) -> None:
        super().__init__()
        self.convs = nn.ModuleList(GCNConv(a, b) for a, b in itertools.pairwise(sizes))
        self.bns = nn.ModuleList(nn.BatchNorm1d(b) for b in sizes[1:-1])

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        for conv, bn in zip(self.convs[:-1], self.bns, strict=True):
            x = F.dropout(F.relu(bn(conv(x, edge_index))), p=0.5, training=self.training)
        return F.log_softmax(self.convs[-1](x, edge_index), dim=-1)


def _ogb(graph: Graph) -> OgbGCN:
    torch.manual_seed(0)
    module = OgbGCN([graph.num_features, 8, 8, 2])
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(30):
        module.train()
        optimizer.zero_grad()
        F.nll_loss(module(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    return module.eval()


def test_a_module_of_ones_own_with_batch_norms_is_told_what_to_give_and_then_read(graph: Graph) -> None:
    own = _ogb(graph)
    args = {**_args(graph, num_layers=3, dropout=0.5)}
    bare = {k: v for k, v in args.items() if k != "norm"}
    with pytest.raises(ConfigError) as info:
        TrainedModel.from_bytes(_weights(own), _config("GCN", bare))
    assert str(info.value) == (
        "weights: bns.0.*, bns.1.* are batch normalisations (running_mean, running_var) the config does not describe:"
        ' add "norm": "batch_norm" to args and "norm_names": ["bns.0", "bns.1"] to the config, the attribute names of'
        " its normalisations in the order its forward applies them (one after each convolution but the last)"
    )
    with pytest.raises(ConfigError, match=r'add "norm_names": \["bns.0", "bns.1"\]'):
        TrainedModel.from_bytes(_weights(own), _config("GCN", args))
    config = _config("GCN", args, norm_names=["bns.0", "bns.1"])
    canonical = json.loads(json.dumps(encode(read_document(config))))
    supplied = prepare_supplied(_weights(own), canonical, graph)
    assert supplied.record["pyg"]["max_logit_difference"] < 1e-12
    with torch.no_grad():
        theirs = own.double()(graph.x.double(), graph.edge_index).exp()
    assert torch.allclose(supplied.model.predict_proba(graph), theirs, rtol=0.0, atol=1e-12)
    # retrained, it comes back under the user's names and loads into their class
    retrained = _kept(supplied.model, graph, (3,))[0]
    exported = export_model(retrained, canonical, weight_names(_weights(own)))
    assert exported.config["norm_names"] == ["bns.0", "bns.1"]
    assert sorted(load(exported.weights)) == sorted(own.state_dict())
    again = OgbGCN([graph.num_features, 8, 8, 2]).double().eval()
    again.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)
    with torch.no_grad():
        assert torch.allclose(again(graph.x.double(), graph.edge_index).exp(), retrained.predict_proba(graph).double())


def test_a_pyg_models_normalisations_left_out_of_its_config_are_named(graph: Graph) -> None:
    args = _args(graph)
    weights = _weights(early_stopped("GCN", args, graph, epochs=5))
    bare = {k: v for k, v in args.items() if k != "norm"}
    with pytest.raises(ConfigError) as info:
        TrainedModel.from_bytes(weights, _config("GCN", bare))
    assert str(info.value).startswith("weights: norms.0.* is a batch normalisation (running_mean, running_var)")
    assert str(info.value).endswith('add "norm": "batch_norm" to args')


@pytest.mark.parametrize(
    ("names", "extra", "says"),
    [
        (["bn1"], {"num_layers": 3}, "1 names for 2 normalisations (one after every convolution but the last)"),
        (["bn1"], {"jk": "last"}, "1 names for 2 normalisations (one after every convolution)"),
        (["bn1", "bn1"], {"num_layers": 3}, "names a layer twice"),
        (["bn1", "bn2"], {"norm": None, "num_layers": 3}, 'names the normalisations of a module with "norm"'),
        ("bn1", {"num_layers": 2}, "must be a list"),
    ],
)
def test_norm_names_are_checked(graph: Graph, names: Any, extra: dict[str, Any], says: str) -> None:
    args = {**_args(graph), **extra}
    with pytest.raises(UnsupportedModelError) as info:
        read_document(_config("GCN", args, norm_names=names))
    assert [f for f, m in info.value.problems if says in m] == ["config.norm_names"]


def test_a_model_the_service_trains_may_be_batch_normalised(graph: Graph) -> None:
    config = ModelConfig(arch="sage", layers=2, hidden=8, norm="batch")
    model = train(graph, TrainConfig(epochs=30, polish=False), config)
    reloaded = TrainedModel.from_bytes(model.to_bytes(), model.config_dict())
    assert torch.equal(reloaded.predict_proba(graph), model.predict_proba(graph))
    assert isinstance(model.module, GNN) and len(model.module.norms) == 1
    with pytest.raises(ConfigError, match="norm"):
        ModelConfig(norm="group")
