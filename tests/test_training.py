"""Models and training: architectures, the one-layer-GCN shortcut, determinism, polish, serialisation."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import GCNConv

from bind_core.errors import ConfigError
from bind_core.fairness import accuracy
from bind_core.graph import Graph
from bind_core.models import ARCHS, GNN, GraphInputs, ModelConfig
from bind_core.training import TrainConfig, TrainedModel, fine_tune, gradient_norm, train


def test_one_layer_gcn_shortcut_equals_pyg_gcnconv(small_graph: Graph) -> None:
    torch.manual_seed(0)
    model = GNN(ModelConfig(), small_graph.num_features, 2).double().eval()
    inputs = model.prepare(small_graph)
    assert inputs.x_prop is not None  # the shortcut is taken
    reference = GCNConv(small_graph.num_features, 16).double()  # PyG's own normalisation
    reference.lin.weight.data = model.convs[0].lin.weight.data.clone()
    reference.bias.data = model.convs[0].bias.data.clone()
    expected = model.head(reference(small_graph.x.double(), small_graph.edge_index))
    assert torch.allclose(model(inputs), expected, atol=1e-10)


@pytest.mark.parametrize("arch", ["gin", "sage"])
def test_one_layer_gin_and_sage_shortcuts_equal_pyg(small_graph: Graph, arch: str) -> None:
    torch.manual_seed(0)
    model = GNN(ModelConfig(arch=arch), small_graph.num_features, 2).double().eval()
    inputs = model.prepare(small_graph)
    assert inputs.x_prop is not None and model.row_separable
    through_pyg = model(GraphInputs(inputs.x, inputs.edge_index, None, None))  # PyG's message passing
    assert torch.allclose(model(inputs), through_pyg, atol=1e-10)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("layers", [1, 2])
def test_every_architecture_trains_and_predicts(small_graph: Graph, arch: str, layers: int) -> None:
    trained = train(small_graph, TrainConfig(epochs=20, polish=False), ModelConfig(arch=arch, layers=layers, heads=2))
    proba = trained.predict_proba(small_graph)
    assert proba.shape == (small_graph.num_nodes, 2)
    assert torch.allclose(proba.sum(1), torch.ones(small_graph.num_nodes, dtype=proba.dtype))


def test_training_is_deterministic_for_a_seed(small_graph: Graph) -> None:
    cfg = TrainConfig(epochs=50, seed=4)
    a, b = train(small_graph, cfg), train(small_graph, cfg)
    c = train(small_graph, TrainConfig(epochs=50, seed=5))
    for (name, pa), pb, _pc in zip(
        a.module.state_dict().items(), b.module.state_dict().values(), c.module.state_dict().values(), strict=True
    ):
        assert torch.equal(pa, pb), name
    assert any(
        not torch.equal(pa, pc)
        for pa, pc in zip(a.module.state_dict().values(), c.module.state_dict().values(), strict=True)
    )


def test_polish_reaches_a_stationary_point_and_learns(small_graph: Graph, small_model: TrainedModel) -> None:
    assert small_model.stationarity["polished"]
    assert small_model.stationarity["grad_norm"] < 1e-5 < small_model.stationarity["adam_grad_norm"]
    assert gradient_norm(small_model, small_graph) < 1e-5
    test = small_graph.test_idx
    pred = small_model.predict_proba(small_graph, test).argmax(1)
    assert accuracy(small_graph.y[test], pred) > 0.75


def test_progress_is_reported_up_to_one(small_graph: Graph) -> None:
    seen: list[tuple[str, float]] = []
    train(small_graph, TrainConfig(epochs=30, polish=False), progress=lambda s, f: seen.append((s, f)))
    fracs = [f for _, f in seen]
    assert {s for s, _ in seen} == {"training"} and fracs == sorted(fracs) and fracs[-1] == 1.0
    seen.clear()
    train(small_graph, TrainConfig(epochs=30), progress=lambda s, f: seen.append((s, f)))  # with the polish
    fracs = [f for _, f in seen]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and any(0.8 < f < 1.0 for f in fracs)


def test_keep_best_val_vs_last(small_graph: Graph) -> None:
    best = train(small_graph, TrainConfig(epochs=60, polish=False, keep="best_val"))
    last = train(small_graph, TrainConfig(epochs=60, polish=False, keep="last"))
    assert 0 <= best.history["best_epoch"] <= 59 and last.history["best_epoch"] == 59


def test_safetensors_roundtrip(tmp_path, small_graph: Graph, small_model: TrainedModel) -> None:  # type: ignore[no-untyped-def]
    small_model.save(tmp_path / "m")
    loaded = TrainedModel.load(tmp_path / "m")
    assert torch.equal(loaded.predict_proba(small_graph), small_model.predict_proba(small_graph))
    again = TrainedModel.from_bytes(small_model.to_bytes(), small_model.config_dict())
    assert again.stationarity == small_model.stationarity


def test_weights_that_do_not_fit_are_refused(small_model: TrainedModel) -> None:
    config = small_model.config_dict() | {"in_dim": small_model.module.in_dim + 1}
    with pytest.raises(ConfigError, match="do not fit"):
        TrainedModel.from_bytes(small_model.to_bytes(), config)
    with pytest.raises(ConfigError, match="safetensors"):
        TrainedModel.from_bytes(b"\x80\x04not a safetensors file", small_model.config_dict())
    with pytest.raises(ConfigError):
        TrainedModel.from_bytes(small_model.to_bytes(), {"model": {"arch": "mlp"}})


def test_fine_tune_moves_a_copy(small_graph: Graph, small_model: TrainedModel) -> None:
    before = {k: v.clone() for k, v in small_model.module.state_dict().items()}
    tuned = fine_tune(small_model, small_graph, epochs=5, lr=0.01)
    assert all(torch.equal(v, small_model.module.state_dict()[k]) for k, v in before.items())
    assert any(not torch.allclose(v.double(), tuned.module.state_dict()[k].double()) for k, v in before.items())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"arch": "mlp"}, "arch"), ({"layers": 0}, "layers"), ({"dropout": 1.0}, "dropout"), ({"hidden": 0}, "hidden")],
)
def test_model_config_errors_quote_the_value(kwargs: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ConfigError, match=match):
        ModelConfig(**kwargs)


def test_train_config_errors() -> None:
    with pytest.raises(ConfigError, match="lr"):
        TrainConfig(lr=0)
    with pytest.raises(ConfigError, match="keep"):
        TrainConfig(keep="best")
    with pytest.raises(ConfigError, match="unknown"):
        TrainConfig.from_dict({"epochz": 3})
