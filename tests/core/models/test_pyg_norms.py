"""A batch normalisation between layers (PyG's ``norm="batch_norm"``, or ``BatchNorm1d`` in a module of one's own, as
the OGB examples write it): read as the deployed model runs it (evaluation mode, its running statistics), every
path of the estimate reading it, its scale and shift held as given by the attribution; retrained as its owner trains
it and handed back under the user's names; what cannot be reproduced refused with what to do."""

from __future__ import annotations

import copy
import itertools
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from pyg_models import early_stopped
from torch import Tensor, nn
from torch_geometric.nn import GCNConv

from bind_core.codec import encode
from bind_core.data.datasets import synthetic
from bind_core.data.graph import Graph
from bind_core.debiasing.validation import validate
from bind_core.errors import ConfigError
from bind_core.influence.estimate import estimate
from bind_core.influence.functional import FunctionalModel
from bind_core.models.gnn import GNN, ModelConfig, flat_parameters
from bind_core.models.pyg import UnsupportedModelError
from bind_core.pipeline import codes_of, prepare_for_audit
from bind_core.pipeline.audit import run_audit
from bind_core.pipeline.caveats import model_warnings
from bind_core.pipeline.config import AuditConfig
from bind_core.reporting.report import render_report
from bind_core.reporting.text import render as render_text
from bind_core.training.document import read_document
from bind_core.training.fit import TrainConfig, TrainedModel, train
from tests.core.models.norm_checks import (
    assert_incremental_rows_match,
    assert_own_module_round_trip,
    pyg_config,
    retrained_in_pyg_class,
    safetensors_of,
    their_proba,
    trained_own,
)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return synthetic(160, seed=4, train_per_class=25)


def _args(graph: Graph, **extra: Any) -> dict[str, Any]:
    args = {"in_channels": graph.num_features, "hidden_channels": 8, "num_layers": 2, "out_channels": 2}
    return {**args, "norm": "batch_norm", **extra}


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
    model, record = prepare_for_audit(safetensors_of(module), pyg_config(cls, args), graph, AuditConfig(bootstrap=0))
    assert record.reference == "as_given"
    assert torch.allclose(model.predict_proba(graph).double(), their_proba(module, graph), rtol=0.0, atol=1e-12)
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
        safetensors_of(early_stopped("GCN", args, graph)), pyg_config("GCN", args), graph, AuditConfig()
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


@pytest.mark.parametrize("norm", ["batch", "layer"])
@pytest.mark.parametrize(("arch", "extra"), [("gcn", {}), ("sage", {"act_first": True}), ("gat", {"layers": 3})])
def test_recomputing_only_the_changed_rows_reads_the_normalisations(
    graph: Graph, arch: str, extra: dict[str, Any], norm: str
) -> None:
    """The incremental path (each layer's changed rows, through the normalisation and the activation) gives the
    logits of running the whole normalised model on each subgraph, and their derivatives: a layer normalisation's
    along its scale and shift too, which are part of ``θ`` (``GNN.activate`` reads them from it)."""
    config = ModelConfig(arch=arch, **{"layers": 2, "hidden": 8, "norm": norm, **extra})
    model = train(graph, TrainConfig(epochs=20, polish=False), config)
    if norm == "batch":
        means = [cast(Tensor, n.running_mean) for n in model.module.norms]
        assert any(float(mean.abs().max()) > 0.01 for mean in means)  # trained statistics
    assert_incremental_rows_match(model, graph)


@pytest.mark.heavy  # about 25 s: two step estimates and 24 re-optimisations
@pytest.mark.parametrize(("cls", "extra"), [("GraphSAGE", {"act": "gelu"}), ("GCN", {"act": "gelu", "jk": "last"})])
def test_a_normalised_models_estimate_agrees_with_its_proximal_response(
    graph: Graph, cls: str, extra: dict[str, Any]
) -> None:
    args = _args(graph, **extra)
    model, _ = prepare_for_audit(
        safetensors_of(early_stopped(cls, args, graph)), pyg_config(cls, args), graph, AuditConfig()
    )
    influence = estimate(model, graph)
    assert influence.solve.details["method"] == "step"
    check = validate(model, graph, influence, sample=12, seed=1)
    assert check.mode == "proximal" and check.noise_floor is not None and check.noise_floor < 1e-6
    pearson = check.correlations()["gamma"]["pearson"]
    assert pearson is not None and pearson >= 0.95, pearson


def test_a_retrained_normalised_model_loads_into_the_pyg_class(graph: Graph) -> None:
    args = _args(graph, jk="last")
    weights = safetensors_of(early_stopped("GCN", args, graph))
    canonical = encode(read_document(pyg_config("GCN", args)))
    audited, _ = prepare_for_audit(weights, canonical, graph, AuditConfig())
    retrained = retrained_in_pyg_class(audited, canonical, weights, graph)
    # retrained as its owner trains it: the statistics move with the new weights
    before, after = (cast(Tensor, m.module.norms[0].running_mean) for m in (audited, retrained))
    assert not torch.allclose(before.double(), after.double())


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


def test_a_module_of_ones_own_with_batch_norms_is_told_what_to_give_and_then_read(graph: Graph) -> None:
    torch.manual_seed(0)
    own = trained_own(OgbGCN([graph.num_features, 8, 8, 2]), graph)
    args = {**_args(graph, num_layers=3, dropout=0.5)}
    bare = {k: v for k, v in args.items() if k != "norm"}
    with pytest.raises(ConfigError) as info:
        TrainedModel.from_bytes(safetensors_of(own), pyg_config("GCN", bare))
    assert str(info.value) == (
        "weights: bns.0.*, bns.1.* are batch normalisations (running_mean, running_var) the config does not describe:"
        ' add "norm": "batch_norm" to args and "norm_names": ["bns.0", "bns.1"] to the config, the attribute names of'
        " its normalisations in the order its forward applies them (one after each convolution but the last)"
    )
    with pytest.raises(ConfigError, match=r'add "norm_names": \["bns.0", "bns.1"\]'):
        TrainedModel.from_bytes(safetensors_of(own), pyg_config("GCN", args))
    config = pyg_config("GCN", args, norm_names=["bns.0", "bns.1"])
    assert_own_module_round_trip(own, config, graph, lambda: OgbGCN([graph.num_features, 8, 8, 2]))


def test_a_pyg_models_normalisations_left_out_of_its_config_are_named(graph: Graph) -> None:
    args = _args(graph)
    weights = safetensors_of(early_stopped("GCN", args, graph, epochs=5))
    bare = {k: v for k, v in args.items() if k != "norm"}
    with pytest.raises(ConfigError) as info:
        TrainedModel.from_bytes(weights, pyg_config("GCN", bare))
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
        read_document(pyg_config("GCN", args, norm_names=names))
    assert [f for f, m in info.value.problems if says in m] == ["config.norm_names"]


def test_a_model_the_service_trains_may_be_batch_normalised(graph: Graph) -> None:
    config = ModelConfig(arch="sage", layers=2, hidden=8, norm="batch")
    model = train(graph, TrainConfig(epochs=30, polish=False), config)
    reloaded = TrainedModel.from_bytes(model.to_bytes(), model.config_dict())
    assert torch.equal(reloaded.predict_proba(graph), model.predict_proba(graph))
    assert isinstance(model.module, GNN) and len(model.module.norms) == 1
    with pytest.raises(ConfigError, match="norm"):
        ModelConfig(norm="group")
