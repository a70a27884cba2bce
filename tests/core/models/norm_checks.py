"""What the tests of normalised models (batch, ``test_pyg_norms.py``; layer, ``test_pyg_layer_norm.py``) share: a PyG
config and weights as a user saves them, the PyG module's own probabilities, and the checks that hold for either
normalisation (the incremental rows, a retrained model handed back)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from safetensors.torch import load, save
from torch import Tensor, nn

from bind_core.codec import encode
from bind_core.data.graph import Graph
from bind_core.influence.deletion import _subgraph_batches
from bind_core.influence.functional import FunctionalModel
from bind_core.influence.incremental import incremental_batches
from bind_core.models.pyg import pyg_module, read_source
from bind_core.pipeline import export_model, weight_names
from bind_core.training.document import read_document
from bind_core.training.fit import TrainedModel
from bind_core.training.supplied import prepare_supplied
from tests.core.training.test_export import _kept

M = TypeVar("M", bound=nn.Module)


def pyg_config(cls: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A ``torch_geometric`` config of ``cls(**args)`` trained with cross-entropy (``extra``: its layout keys)."""
    training = {"loss": "cross_entropy", "weight_decay": 5e-4, "lr": 0.01, "epochs": 30}
    return {"format": "torch_geometric", "class": cls, "args": args, "training": training, **extra}


def safetensors_of(module: nn.Module) -> bytes:
    """``module``'s state dict as a safetensors file's bytes."""
    return save({k: v.contiguous() for k, v in module.state_dict().items()})


def their_proba(module: nn.Module, graph: Graph) -> Tensor:
    """The PyG module's own class probabilities on ``graph`` (float64, evaluation mode)."""
    with torch.no_grad():
        return torch.softmax(copy.deepcopy(module).double().eval()(graph.x.double(), graph.edge_index), dim=1)


def assert_incremental_rows_match(model: TrainedModel, graph: Graph) -> None:
    """The incremental path (each layer's changed rows, through the normalisation and the activation) gives the
    logits of running the whole normalised model on each subgraph, and their derivatives along random directions."""
    fm = FunctionalModel.from_trained(model, graph)
    s = torch.randn(fm.num_parameters, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    m = int(graph.train_idx.numel())

    def collect(batches: Iterable[Any]) -> dict[tuple[int, int], tuple[Tensor, Tensor]]:
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


def retrained_in_pyg_class(
    audited: TrainedModel, canonical: dict[str, Any], weights: bytes, graph: Graph
) -> TrainedModel:
    """``audited`` retrained without node 3, handed back under the user's names (the same as ``weights``'), loaded
    into the PyG class ``canonical`` describes and predicting as the retrained model does; returned."""
    retrained = _kept(audited, graph, (3,))[0]
    exported = export_model(retrained, canonical, weight_names(weights))
    assert sorted(load(exported.weights)) == sorted(load(weights))
    pyg = pyg_module(read_source(canonical["source"])).double().eval()
    pyg.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)
    with torch.no_grad():
        theirs = torch.softmax(pyg(graph.x.double(), graph.edge_index), dim=1)
    assert torch.allclose(theirs, retrained.predict_proba(graph).double(), rtol=0.0, atol=1e-6)
    return retrained


def trained_own(module: M, graph: Graph) -> M:
    """A module of one's own (its forward ending in a log-softmax) trained as its tutorial trains it: 30 epochs of
    Adam (lr 0.01, weight decay 5e-4, seed 0 before ``module`` was built), in evaluation mode after."""
    optimizer = torch.optim.Adam(module.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(30):
        module.train()
        optimizer.zero_grad()
        F.nll_loss(module(graph.x, graph.edge_index)[graph.train_idx], graph.y[graph.train_idx]).backward()  # type: ignore[no-untyped-call]
        optimizer.step()
    return module.eval()


def assert_own_module_round_trip(
    own: nn.Module, config: dict[str, Any], graph: Graph, again: Callable[[], nn.Module]
) -> None:
    """A module of one's own (its forward ending in a log-softmax) read through ``config`` as it runs, then retrained
    and handed back under its own names into a fresh copy of its class (``again()``), predicting the same."""
    canonical = json.loads(json.dumps(encode(read_document(config))))
    supplied = prepare_supplied(safetensors_of(own), canonical, graph)
    assert supplied.record["pyg"]["max_logit_difference"] < 1e-12
    with torch.no_grad():
        theirs = own.double()(graph.x.double(), graph.edge_index).exp()
    assert torch.allclose(supplied.model.predict_proba(graph), theirs, rtol=0.0, atol=1e-12)
    retrained = _kept(supplied.model, graph, (3,))[0]
    exported = export_model(retrained, canonical, weight_names(safetensors_of(own)))
    assert exported.config["norm_names"] == config["norm_names"]
    assert sorted(load(exported.weights)) == sorted(own.state_dict())
    module = again().double().eval()
    module.load_state_dict({k: v.double() for k, v in load(exported.weights).items()}, strict=True)
    with torch.no_grad():
        assert torch.allclose(module(graph.x.double(), graph.edge_index).exp(), retrained.predict_proba(graph).double())
